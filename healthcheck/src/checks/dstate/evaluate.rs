//! Pure: two looks at the blocked tasks to the stuck ones.

use super::procfs::Blocked;
use super::NAME;
use crate::finding::Finding;
use lemonade_config::{Action, DstateSettings};

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const PROCESS_STUCK_D_STATE: &str = "PROCESS_STUCK_D_STATE";

/// The tasks in `D` at both looks that did not run in between: the same task
/// (pid and start time), and the same context-switch count where the kernel
/// gives one.
pub fn stuck<'a>(first: &[Blocked], second: &'a [Blocked]) -> Vec<&'a Blocked> {
    second
        .iter()
        .filter(|b| {
            first.iter().any(|a| {
                a.pid == b.pid && a.start_ticks == b.start_ticks && a.switches == b.switches
            })
        })
        .collect()
}

/// One `PROCESS_STUCK_D_STATE` per stuck task; ok without one.
pub fn evaluate(stuck: &[&Blocked], waited_s: f64, s: &DstateSettings) -> Vec<Finding> {
    if stuck.is_empty() {
        return vec![Finding::ok(NAME, "processes")];
    }
    stuck
        .iter()
        .map(|b| {
            Finding::new(NAME, b.comm.as_str(), PROCESS_STUCK_D_STATE, s.severity)
                .expected("no process stuck in D")
                .actual(format!("pid {} in D for {waited_s:.0} s or more", b.pid))
                .action(Action::Investigate)
                .message(format!(
                    "{} (pid {}) has been in uninterruptible sleep (D) without running for {waited_s:.0} s or more: a hung device, mount or driver",
                    b.comm, b.pid
                ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lemonade_config::Severity;

    fn task(pid: u32, start: u64, switches: u64) -> Blocked {
        Blocked {
            pid,
            comm: format!("task{pid}"),
            start_ticks: start,
            switches: Some(switches),
        }
    }

    #[test]
    fn only_a_task_blocked_at_both_looks_without_running_is_stuck() {
        let first = [task(10, 5, 100), task(11, 5, 7), task(12, 5, 3)];
        // 10 ran in between, 11 is the same, 12's pid is another task now, 13 is new.
        let second = [
            task(10, 5, 101),
            task(11, 5, 7),
            task(12, 9, 3),
            task(13, 5, 1),
        ];
        let s: Vec<u32> = stuck(&first, &second).iter().map(|b| b.pid).collect();
        assert_eq!(s, [11]);
    }

    #[test]
    fn a_stuck_task_is_named_in_a_warning() {
        let t = task(11, 5, 7);
        let f = evaluate(&[&t], 5.0, &DstateSettings::default());
        assert_eq!(
            (f[0].entity.as_str(), f[0].code.as_str(), f[0].severity),
            ("task11", "PROCESS_STUCK_D_STATE", Severity::Warning)
        );
        assert!(f[0].message.contains("pid 11"));
        assert!(evaluate(&[], 5.0, &DstateSettings::default())[0].is_ok());
    }
}
