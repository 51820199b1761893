//! Scanning `/proc` for processes by name.

use crate::check::CheckError;
use crate::root::NodeRoot;
use std::collections::BTreeMap;

pub const PROC: &str = "/proc";

/// The kernel keeps this many bytes of a process name in `comm`.
pub const COMM_LEN: usize = 15;

/// The first live process found for each wanted name (`comm`): its pid.
/// A name without a live process is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Running(pub BTreeMap<String, u32>);

/// A name as `comm` shows it: cut to [`COMM_LEN`] bytes (on a character boundary).
pub fn comm_name(name: &str) -> &str {
    let mut end = name.len().min(COMM_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Finds a live process for each of `wanted`. Processes that exit while we
/// scan are skipped; the scan stops once every name is found.
pub fn gather(root: &NodeRoot, wanted: &[String]) -> Result<Running, CheckError> {
    let mut running = Running::default();
    let wanted: Vec<&str> = wanted.iter().map(|w| comm_name(w)).collect();
    for entry in root.list_dir(PROC)? {
        let Ok(pid) = entry.parse::<u32>() else {
            continue;
        };
        let comm = match root.read_value(format!("{PROC}/{pid}/comm")) {
            Ok(c) => c,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        };
        if !wanted.contains(&comm.as_str()) || running.0.contains_key(&comm) {
            continue;
        }
        let stat_path = format!("{PROC}/{pid}/stat");
        let stat = match root.read_value(&stat_path) {
            Ok(s) => s,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e.into()),
        };
        let state = stat_state(&stat).map_err(|m| CheckError::malformed(&stat_path, m))?;
        // A zombie or a dead task does not serve anyone.
        if !matches!(state, 'Z' | 'X' | 'x') {
            running.0.insert(comm, pid);
            if running.0.len() == wanted.len() {
                break;
            }
        }
    }
    Ok(running)
}

/// The state letter of `/proc/<pid>/stat` (`1234 (munged) S 1 ...`). The
/// name may hold spaces and parentheses, so the state follows the last `)`.
fn stat_state(stat: &str) -> Result<char, String> {
    let after = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or("no `)` after the process name")?;
    after
        .split_whitespace()
        .next()
        .and_then(|w| w.chars().next())
        .ok_or_else(|| "no state after the process name".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_state_follows_the_last_parenthesis_of_the_name() {
        assert_eq!(stat_state("812 (munged) S 1 812 812 0 -1"), Ok('S'));
        assert_eq!(stat_state("77 (a) b (c)) Z 1 0"), Ok('Z'));
        assert!(stat_state("812 munged S").is_err());
        assert!(stat_state("812 (munged)").is_err());
    }

    #[test]
    fn long_names_are_cut_as_the_kernel_cuts_them() {
        assert_eq!(comm_name("munged"), "munged");
        assert_eq!(comm_name("nvidia-persistenced"), "nvidia-persiste");
        assert_eq!(comm_name("ééééééééé"), "ééééééé");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn parsing_never_panics(text in "\\PC{0,60}") {
            let _ = stat_state(&text);
            let _ = comm_name(&text);
        }

        #[test]
        fn any_name_and_state_round_trip(name in "[ -~]{0,15}", state in "[RSDZTtXxIKWP]") {
            let stat = format!("4242 ({name}) {state} 1 4242 4242 0 -1 4194560");
            prop_assert_eq!(stat_state(&stat), Ok(state.chars().next().unwrap()));
        }
    }
}
