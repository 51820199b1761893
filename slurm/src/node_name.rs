//! Which Slurm node this process runs for: one answer for every binary.
//!
//! In order, the first that is set and not blank:
//!
//! 1. the name the caller was given (`--node`);
//! 2. `SLURMD_NODENAME`, which slurmd sets for prologs, epilogs,
//!    HealthCheckProgram and job steps. Several slurmd may share a host
//!    (`slurmd -N nodeN`), so this beats the host name;
//! 3. the short host name (up to the first dot), which is what slurmd itself
//!    takes as its node name when started without `-N`.
//!
//! With none of them there is no answer: a guess such as `localhost` could
//! drain the wrong node.

/// The first of the three sources that names a node (see the module docs).
pub fn resolve(
    given: Option<&str>,
    slurmd_nodename: Option<&str>,
    host_name: Option<&str>,
) -> Option<String> {
    set(given)
        .or(set(slurmd_nodename))
        .map(str::to_string)
        .or_else(|| set(host_name).and_then(short))
}

/// The source, trimmed, unless it is missing or blank.
fn set(source: Option<&str>) -> Option<&str> {
    source.map(str::trim).filter(|s| !s.is_empty())
}

/// `gpu001.cluster.example` is `gpu001`.
fn short(host: &str) -> Option<String> {
    host.split('.')
        .next()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The host name as the kernel has it, if it can be read.
pub fn host_name() -> Option<String> {
    nix::unistd::gethostname()
        .ok()
        .map(|h| h.to_string_lossy().into_owned())
}

/// This process's node: `given`, else `SLURMD_NODENAME`, else the short host name.
pub fn of_this_process(given: Option<&str>) -> Option<String> {
    let env = std::env::var("SLURMD_NODENAME").ok();
    resolve(given, env.as_deref(), host_name().as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_name_beats_slurmd_nodename_which_beats_the_host_name() {
        let host = Some("host7.cluster.example");
        assert_eq!(
            resolve(Some("gpu001"), Some("node2"), host).as_deref(),
            Some("gpu001")
        );
        assert_eq!(resolve(None, Some("node2"), host).as_deref(), Some("node2"));
        assert_eq!(resolve(None, None, host).as_deref(), Some("host7"));
    }

    #[test]
    fn blank_sources_are_skipped() {
        assert_eq!(
            resolve(Some(" "), Some(""), Some("host7")).as_deref(),
            Some("host7")
        );
        assert_eq!(
            resolve(Some(""), Some("node2"), None).as_deref(),
            Some("node2")
        );
    }

    #[test]
    fn without_any_source_there_is_no_name_rather_than_a_guess() {
        assert_eq!(resolve(None, None, None), None);
        assert_eq!(resolve(None, Some("  "), Some("")), None);
        assert_eq!(resolve(None, None, Some(".example")), None);
    }

    #[test]
    fn slurmd_nodename_is_taken_as_written() {
        // A node name may hold dots where slurm.conf says so; only the host
        // name is shortened.
        assert_eq!(
            resolve(None, Some("gpu001.rack2"), Some("h.x")).as_deref(),
            Some("gpu001.rack2")
        );
    }

    #[test]
    fn this_process_has_a_name_from_its_host_at_least() {
        // The test machine has a host name; what it is does not matter here.
        let name = of_this_process(None).expect("a host name");
        assert!(!name.is_empty() && !name.contains('.'), "{name}");
        assert_eq!(of_this_process(Some("given")).as_deref(), Some("given"));
    }
}
