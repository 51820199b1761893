//! Running a program under a deadline, from the plugin.
//!
//! The program gets its own process group, so that a deadline kills
//! everything it started (a hung `scontrol`, a stuck check), not only itself.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let mut command = Command::new(program);
    command
        .stdin(Stdio::null())
        .envs(env.iter().copied())
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return Outcome::NotStarted(e),
    };
    let deadline = Instant::now() + timeout;
    // Short polls first: a quick profile finishes in tens of milliseconds
    // and every millisecond here delays the job's start.
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                use std::os::unix::process::ExitStatusExt;
                return match (status.code(), status.signal()) {
                    (Some(code), _) => Outcome::Exited(code),
                    (None, Some(signal)) => Outcome::Signaled(signal),
                    (None, None) => Outcome::Exited(-1),
                };
            }
            Ok(None) => {}
            Err(e) => return Outcome::NotStarted(e),
        }
        let now = Instant::now();
        if now >= deadline {
            // SAFETY: signalling the process group we created above.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
            return Outcome::TimedOut;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
