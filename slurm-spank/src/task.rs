//! What one task's end looks like in the task-exit file.

use lemonade_spool::TaskExit;

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

/// A task exit from `S_TASK_EXIT_STATUS`, a raw `wait(2)` status.
pub fn task_exit(job: u32, step: u32, task: u32, status: i32, at: i64) -> TaskExit {
    let (exit_code, signal) = if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (Some(libc::WEXITSTATUS(status)), None)
    };
    TaskExit {
        at,
        job_id: job.to_string(),
        step_id: step_name(step),
        task_id: task,
        exit_code,
        signal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_exit_codes_and_signals() {
        let exited = task_exit(7, 0, 3, 1 << 8, 100);
        assert_eq!((exited.exit_code, exited.signal), (Some(1), None));
        assert_eq!(exited.step_id, "0");
        let killed = task_exit(7, BATCH_STEP, 0, libc::SIGKILL, 100);
        assert_eq!((killed.exit_code, killed.signal), (None, Some(9)));
        assert_eq!(killed.step_id, "batch");
        assert_eq!(step_name(EXTERN_STEP), "extern");
    }
}
