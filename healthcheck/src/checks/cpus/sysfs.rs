//! Reading the online CPUs: a kernel CPU list (`0-63,65-127`).

use crate::check::CheckError;
use crate::root::NodeRoot;

pub const ONLINE: &str = "/sys/devices/system/cpu/online";

/// What gather found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuData {
    /// The list as the kernel wrote it, for messages.
    pub online_list: String,
    pub online: usize,
}

/// Reads and counts the online CPUs.
pub fn gather(root: &NodeRoot) -> Result<CpuData, CheckError> {
    let text = root.read_value(ONLINE)?;
    let online = count_cpu_list(&text).map_err(|m| CheckError::malformed(ONLINE, m))?;
    Ok(CpuData {
        online_list: text.trim().to_string(),
        online,
    })
}

/// The number of CPUs in a kernel CPU list: comma-separated numbers and
/// inclusive ranges (`0-3,8,10-11` is 7). An empty list is no CPUs.
fn count_cpu_list(text: &str) -> Result<usize, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    let number = |s: &str| -> Result<u64, String> {
        s.parse()
            .map_err(|_| format!("expected a CPU number, found {s:?} in {text:?}"))
    };
    let mut count: u64 = 0;
    for part in text.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(part)?;
                (n, n)
            }
        };
        if last < first {
            return Err(format!("range {part:?} runs backwards in {text:?}"));
        }
        count = count.saturating_add(last - first + 1);
    }
    usize::try_from(count).map_err(|_| format!("{text:?} lists more CPUs than can be counted"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ranges_and_single_cpus_are_counted() {
        assert_eq!(count_cpu_list("0-223\n"), Ok(224));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Ok(7));
        assert_eq!(count_cpu_list("0"), Ok(1));
        assert_eq!(count_cpu_list(""), Ok(0));
    }

    #[test]
    fn malformed_lists_are_errors_that_quote_the_list() {
        for bad in ["0-", "a-3", "3-1", "0,,2", "0-3 4"] {
            let e = count_cpu_list(bad).unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn counting_never_panics(text in "[0-9,\\- a-z]{0,40}") {
            let _ = count_cpu_list(&text);
        }

        #[test]
        fn a_list_counts_the_cpus_it_was_made_of(
            ranges in proptest::collection::vec((0u64..100_000, 0u64..512), 1..20)
        ) {
            let text: Vec<String> = ranges
                .iter()
                .map(|&(first, len)| if len == 0 {
                    first.to_string()
                } else {
                    format!("{first}-{}", first + len)
                })
                .collect();
            let expected: u64 = ranges.iter().map(|&(_, len)| len + 1).sum();
            prop_assert_eq!(count_cpu_list(&text.join(",")), Ok(expected as usize));
        }
    }
}
