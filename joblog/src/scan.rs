//! Running the catalog over a tail. The prefilter (every signature's
//! triggers in one Aho-Corasick automaton) runs over the whole tail at
//! memory speed; only a line holding a trigger is cut out and tried against
//! the signatures' regexes, so most lines of a 256 KiB tail never reach one.

use crate::catalog::{Catalog, Signature};
use crate::tail::LogTail;
use aho_corasick::Input;
use regex::bytes::Captures;

/// The most ranks one `tasks 0-4095` range may name.
const MAX_RANKS_PER_LINE: u32 = 65_536;

/// One line a signature matched, with where it came from.
#[derive(Debug, Clone)]
pub struct Hit<'c, 't> {
    pub signature: &'c Signature,
    /// The line as read: raw bytes, to be sanitised before it is shown.
    pub line: &'t [u8],
    /// The host the line names (the regex's `host` group).
    pub host: Option<String>,
    /// The ranks the line names: the regex's `rank` or `ranks` group, else
    /// a `[rankN]:` or `N: ` prefix; empty when it names none.
    pub ranks: Vec<u32>,
}

impl Catalog {
    /// Every line of `tail` that a signature matches, in order; each line
    /// takes the first signature that matches it.
    pub fn scan<'c, 't>(&'c self, tail: &'t LogTail) -> Vec<Hit<'c, 't>> {
        let hay = tail.bytes();
        let mut hits = Vec::new();
        let mut pos = 0;
        while pos < hay.len() {
            let Some(m) = self.prefilter().find(Input::new(hay).span(pos..hay.len())) else {
                break;
            };
            let start = memchr::memrchr(b'\n', &hay[..m.start()]).map_or(0, |i| i + 1);
            let end = memchr::memchr(b'\n', &hay[m.end()..]).map_or(hay.len(), |i| m.end() + i);
            let line = hay[start..end]
                .strip_suffix(b"\r")
                .unwrap_or(&hay[start..end]);
            if let Some(hit) = self.match_line(line) {
                hits.push(hit);
            }
            pos = end + 1;
        }
        hits
    }

    fn match_line<'c, 't>(&'c self, line: &'t [u8]) -> Option<Hit<'c, 't>> {
        self.signatures().iter().find_map(|signature| {
            if !signature.triggered_by(line) {
                return None;
            }
            let caps = signature.regex().captures(line)?;
            Some(Hit {
                signature,
                line,
                host: caps
                    .name("host")
                    .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned()),
                ranks: ranks_named(&caps, line),
            })
        })
    }
}

fn ranks_named(caps: &Captures, line: &[u8]) -> Vec<u32> {
    if let Some(list) = caps.name("ranks") {
        return task_list(list.as_bytes());
    }
    if let Some(rank) = caps.name("rank").and_then(|r| number(r.as_bytes())) {
        return vec![rank];
    }
    prefix_rank(line).into_iter().collect()
}

/// The rank of a torchrun `[rank12]:` prefix or an `srun --label` `12: `
/// prefix (which pads with spaces).
pub fn prefix_rank(line: &[u8]) -> Option<u32> {
    let line = line.trim_ascii_start();
    if let Some(rest) = line.strip_prefix(b"[rank") {
        let close = memchr::memchr(b']', rest)?;
        return (rest.get(close + 1) == Some(&b':'))
            .then(|| number(&rest[..close]))
            .flatten();
    }
    let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
    (line.get(digits..digits + 2) == Some(b": "))
        .then(|| number(&line[..digits]))
        .flatten()
}

/// Slurm's task list, `3` or `0-7,9`; an implausibly long one yields nothing.
fn task_list(list: &[u8]) -> Vec<u32> {
    let mut ranks = Vec::new();
    for part in list.split(|&b| b == b',') {
        let (first, last) = match part.iter().position(|&b| b == b'-') {
            Some(dash) => (number(&part[..dash]), number(&part[dash + 1..])),
            None => (number(part), number(part)),
        };
        let (Some(first), Some(last)) = (first, last) else {
            return Vec::new();
        };
        if last < first || ranks.len() as u32 + (last - first) > MAX_RANKS_PER_LINE {
            return Vec::new();
        }
        ranks.extend(first..=last);
    }
    ranks
}

fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchrun_and_srun_label_prefixes_name_the_rank() {
        assert_eq!(prefix_rank(b"[rank12]: Traceback"), Some(12));
        assert_eq!(prefix_rank(b" 3: KeyError: 'x'"), Some(3));
        assert_eq!(prefix_rank(b"12:30:01 step 5"), None);
        assert_eq!(prefix_rank(b"[rankx]: y"), None);
        assert_eq!(prefix_rank(b"loss 0.3"), None);
    }

    #[test]
    fn slurm_task_lists_expand_and_absurd_ones_are_dropped() {
        assert_eq!(task_list(b"3"), vec![3]);
        assert_eq!(task_list(b"0-2,5"), vec![0, 1, 2, 5]);
        assert!(task_list(b"0-4000000000").is_empty());
        assert!(task_list(b"5-2").is_empty());
    }
}
