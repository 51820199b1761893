//! What one task's end looks like in the task-exit file.

use lemonade_spool::TaskExit;
use std::time::{SystemTime, UNIX_EPOCH};

/// Step ids that Slurm gives special steps (`slurm.h`, stable since 20.11).
const INTERACTIVE_STEP: u32 = 0xffff_fffa;
const BATCH_STEP: u32 = 0xffff_fffb;
const EXTERN_STEP: u32 = 0xffff_fffc;

/// The step as `sacct` names it: `0`, `batch`, `extern`, `interactive`.
pub fn step_name(step: u32) -> String {
    match step {
        BATCH_STEP => "batch".to_string(),
        EXTERN_STEP => "extern".to_string(),
        INTERACTIVE_STEP => "interactive".to_string(),
        n => n.to_string(),
    }
}

/// A task exit from `S_TASK_EXIT_STATUS`, a raw `wait(2)` status, at `at`.
/// The time is kept in seconds (`at`) and milliseconds (`at_ms`): the tasks
/// of a failing job often end within one second, and the head node needs
/// to know whose failed first.
pub fn task_exit(job: u32, step: u32, task: u32, status: i32, at: SystemTime) -> TaskExit {
    let (exit_code, signal) = if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (Some(libc::WEXITSTATUS(status)), None)
    };
    // A clock before 1970 is broken: 0, as before.
    let since_epoch = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    TaskExit {
        at: since_epoch.as_secs() as i64,
        job_id: job.to_string(),
        step_id: step_name(step),
        task_id: task,
        exit_code,
        signal,
        at_ms: Some(since_epoch.as_millis() as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn decodes_exit_codes_and_signals() {
        let exited = task_exit(7, 0, 3, 1 << 8, at(100_000));
        assert_eq!((exited.exit_code, exited.signal), (Some(1), None));
        assert_eq!(exited.step_id, "0");
        let killed = task_exit(7, BATCH_STEP, 0, libc::SIGKILL, at(100_000));
        assert_eq!((killed.exit_code, killed.signal), (None, Some(9)));
        assert_eq!(killed.step_id, "batch");
        assert_eq!(step_name(EXTERN_STEP), "extern");
    }

    #[test]
    fn keeps_seconds_and_milliseconds() {
        let exit = task_exit(7, 0, 3, 0, at(1_700_000_000_987));
        assert_eq!(
            (exit.at, exit.at_ms),
            (1_700_000_000, Some(1_700_000_000_987))
        );
        let before_1970 = task_exit(7, 0, 3, 0, UNIX_EPOCH - Duration::from_secs(1));
        assert_eq!((before_1970.at, before_1970.at_ms), (0, Some(0)));
    }
}
