//! Running a program under a deadline, from the plugin, through the one
//! runner (`lemonade_slurm::bounded`): its own process group, so that a
//! deadline kills everything it started (a hung `scontrol`, a stuck check),
//! not only itself. Its output goes where slurmstepd's goes, and no thread is
//! started here.

use lemonade_slurm::bounded::{self, BoundedError, Streams};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How a program ended.
#[derive(Debug)]
pub enum Outcome {
    Exited(i32),
    Signaled(i32),
    /// Killed at the deadline.
    TimedOut,
    /// Could not be started (missing, not executable).
    NotStarted(std::io::Error),
}

/// Runs `program` with `env` added to the inherited environment and waits at
/// most `timeout`.
pub fn run(program: &Path, env: &[(&str, &str)], timeout: Duration) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    let mut command = Command::new(program);
    command.envs(env.iter().copied());
    match bounded::run(command, None, Streams::Inherit, timeout) {
        Ok(done) => match (done.status.code(), done.status.signal()) {
            (Some(code), _) => Outcome::Exited(code),
            (None, Some(signal)) => Outcome::Signaled(signal),
            (None, None) => Outcome::Exited(-1),
        },
        Err(BoundedError::Timeout { .. }) => Outcome::TimedOut,
        Err(BoundedError::Spawn { source, .. }) => Outcome::NotStarted(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        path
    }

    // One test: scripts written while another test thread forks can fail to
    // start with ETXTBSY (the child briefly holds the write descriptor).
    #[test]
    fn runs_programs_under_a_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let env = [("LEMONADE_PROFILE", "full")];

        let p = script(
            dir.path(),
            "p",
            "[ \"$LEMONADE_PROFILE\" = full ] && exit 7\nexit 1\n",
        );
        let out = run(&p, &env, Duration::from_secs(20));
        assert!(matches!(out, Outcome::Exited(7)), "{out:?}");

        let out = run(
            Path::new("/nonexistent/lemonade-prolog"),
            &env,
            Duration::from_secs(1),
        );
        assert!(matches!(out, Outcome::NotStarted(_)), "{out:?}");

        // At the deadline the whole process group goes, grandchildren too.
        let pidfile = dir.path().join("pid");
        let hang = script(
            dir.path(),
            "hang",
            &format!("sleep 60 &\necho $! > {}\nwait\n", pidfile.display()),
        );
        let started = Instant::now();
        let out = run(&hang, &[], Duration::from_secs(2));
        assert!(matches!(out, Outcome::TimedOut), "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .expect("the script wrote its child's pid within 2 s")
            .trim()
            .parse()
            .unwrap();
        let gone = || {
            // SAFETY: probing a pid with signal 0.
            let exists = unsafe { libc::kill(pid, 0) } == 0;
            !exists
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .map_or(true, |s| s.contains(") Z "))
        };
        let until = Instant::now() + Duration::from_secs(5);
        while !gone() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(), "the grandchild {pid} survived the deadline");
    }
}
