//! Tasks in uninterruptible sleep, from `/proc/<pid>/stat` and, for those,
//! the context-switch counts of `/proc/<pid>/status`.

use crate::check::CheckError;
use crate::checks::services::procfs::PROC;
use crate::root::NodeRoot;

/// A task seen in `D`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub pid: u32,
    pub comm: String,
    /// Field 22 of `stat`: with the pid, who the task is (pids are reused).
    pub start_ticks: u64,
    /// Voluntary plus involuntary context switches: unchanged between two
    /// looks means the task never ran in between.
    pub switches: Option<u64>,
}

/// Every task in `D` now. Tasks that exit while we look are skipped.
pub fn blocked(root: &NodeRoot) -> Result<Vec<Blocked>, CheckError> {
    let mut out = Vec::new();
    for entry in root.list_dir(PROC)? {
        let Ok(pid) = entry.parse::<u32>() else {
            continue;
        };
        if let Some(task) = look(root, pid)? {
            out.push(task);
        }
    }
    Ok(out)
}

/// The task `pid` if it is in `D`.
pub fn look(root: &NodeRoot, pid: u32) -> Result<Option<Blocked>, CheckError> {
    let path = format!("{PROC}/{pid}/stat");
    let stat = match root.read_value(&path) {
        Ok(s) => s,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Some((comm, state, start_ticks)) = parse_stat(&stat) else {
        return Err(CheckError::malformed(
            path,
            "not in the kernel's stat format",
        ));
    };
    if state != 'D' {
        return Ok(None);
    }
    let switches = match root.read_to_string(format!("{PROC}/{pid}/status")) {
        Ok(status) => parse_switches(&status),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e.into()),
    };
    Ok(Some(Blocked {
        pid,
        comm,
        start_ticks,
        switches,
    }))
}

/// Pure: name, state and start time of `1234 (name) D 1 ... starttime ...`.
/// The name may hold spaces and parentheses: it ends at the last `)`.
pub fn parse_stat(stat: &str) -> Option<(String, char, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let state = rest.first()?.chars().next()?;
    // After the name: state is field 3, starttime field 22.
    let start = rest.get(19)?.parse().ok()?;
    Some((comm, state, start))
}

/// Pure: `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches`.
pub fn parse_switches(status: &str) -> Option<u64> {
    let field = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(field("voluntary_ctxt_switches:")? + field("nonvoluntary_ctxt_switches:")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_gives_name_state_and_start_even_with_parentheses_in_the_name() {
        let stat = "48213 (python3 (rank 3)) D 48190 48213 48190 0 -1 4194560 812 0 0 0 9123 411 0 0 20 0 12 0 8812345 41234567168 2113 18446744073709551615 1 1 0 0 0 0 0 16781312 17642 0 0 0 17 44 0 0 0 0 0";
        assert_eq!(
            parse_stat(stat),
            Some(("python3 (rank 3)".to_string(), 'D', 8812345))
        );
        assert_eq!(parse_stat("12 (x) S 1"), None);
    }

    #[test]
    fn switches_add_voluntary_and_involuntary() {
        let status = "Name:\tpython3\nState:\tD (disk sleep)\nvoluntary_ctxt_switches:\t1204\nnonvoluntary_ctxt_switches:\t37\n";
        assert_eq!(parse_switches(status), Some(1241));
        assert_eq!(parse_switches("Name:\tx\n"), None);
    }
}
