//! The pure half of the remediation: from what took the node out and what
//! was tried before, the next step. No Slurm, no clock, no commands.

use crate::policy::memory::{Ours, Repairs};
use crate::state_change::Cause;
use lemonade_config::{Action, RemediationSettings};

/// One GPU to reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuReset {
    /// `gpu3`.
    pub entity: String,
    /// The index the reset command takes (`{gpu}`).
    pub index: u32,
    pub pci: Option<String>,
}

/// Why the remediation hands a node over to a human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandOver {
    /// `repair` or `investigate`: never automatic.
    NotAutomatic(Action),
    /// The ladder's top: this many remediations within the window.
    LadderEnd { tried: usize, window_days: u32 },
    /// The fault survived a reboot.
    RebootDidNotHelp,
}

impl HandOver {
    /// The remark added to our reason, after a space (`hc: ECC_... gpu3 human needed`).
    pub fn remark(&self) -> &'static str {
        match self {
            HandOver::NotAutomatic(_) | HandOver::LadderEnd { .. } => "human needed",
            HandOver::RebootDidNotHelp => "reboot did not help",
        }
    }

    pub fn explain(&self) -> String {
        match self {
            HandOver::NotAutomatic(action) => {
                format!("`{action}` is never done automatically: a human is needed")
            }
            HandOver::LadderEnd { tried, window_days } => format!(
                "{tried} automatic remediations within {window_days} days: a human is needed"
            ),
            HandOver::RebootDidNotHelp => {
                "the fault survived the reboot: a human is needed".to_string()
            }
        }
    }
}

/// What the remediation does next for a node we took out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing: no cause asks for a repair, or a human has it already.
    Nothing,
    Reset(Vec<GpuReset>),
    /// Recreate the IMEX channel, restart the IMEX daemon, check again.
    RestartImex,
    Reboot,
    HandOver(HandOver),
}

/// The next step for `ours`, given the remediations started within the
/// window (`repairs`, already pruned) and the settings. `reset_failed` says
/// that a reset of this very episode did not clear the fault: the ladder's
/// next rung is a reboot.
pub fn next_step(
    ours: &Ours,
    repairs: &Repairs,
    settings: &RemediationSettings,
    reset_failed: bool,
) -> Step {
    if repairs.handed_over.as_deref() == Some(ours.reason.as_str()) || repairs.reboot.is_some() {
        return Step::Nothing;
    }
    let actions: Vec<Action> = ours.causes.iter().map(|c| c.action).collect();
    if let Some(&a) = actions
        .iter()
        .find(|a| matches!(a, Action::Repair | Action::Investigate))
    {
        return Step::HandOver(HandOver::NotAutomatic(a));
    }
    let repairable: Vec<&Cause> = ours
        .causes
        .iter()
        .filter(|c| {
            matches!(
                c.action,
                Action::ResetGpu | Action::RestartImex | Action::Reboot
            )
        })
        .collect();
    if repairable.is_empty() {
        return Step::Nothing;
    }
    let tried = repairs.started_at.len();
    if tried >= settings.max_remediations as usize {
        return Step::HandOver(HandOver::LadderEnd {
            tried,
            window_days: settings.window_days,
        });
    }
    // IMEX alone: the light rung first. Beside a GPU or node fault, or
    // after a restart that did not help, the reboot restarts IMEX too.
    if repairable.iter().all(|c| c.action == Action::RestartImex) {
        return if reset_failed {
            Step::Reboot
        } else {
            Step::RestartImex
        };
    }
    let resets: Option<Vec<GpuReset>> = repairable
        .iter()
        .map(|c| {
            (c.action == Action::ResetGpu)
                .then(|| gpu_index(&c.entity))
                .flatten()
                .map(|index| GpuReset {
                    entity: c.entity.clone(),
                    index,
                    pci: c.pci.clone(),
                })
        })
        .collect();
    match resets {
        // A reboot cause, a GPU we cannot name, or a reset that did not help.
        None => Step::Reboot,
        Some(_) if reset_failed => Step::Reboot,
        Some(mut gpus) => {
            gpus.sort_by_key(|g| g.index);
            gpus.dedup_by_key(|g| g.index);
            Step::Reset(gpus)
        }
    }
}

/// `gpu3` → 3.
fn gpu_index(entity: &str) -> Option<u32> {
    entity.strip_prefix("gpu")?.parse().ok()
}

/// Drops the remediations older than the window.
pub fn prune(repairs: &mut Repairs, now: i64, window_days: u32) {
    let since = now - i64::from(window_days) * 86_400;
    repairs.started_at.retain(|&at| at > since);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::memory::PendingReboot;

    fn ours(causes: &[(&str, Action)]) -> Ours {
        Ours {
            action: "down".into(),
            reason: "hc: X".into(),
            causes: causes
                .iter()
                .map(|(entity, action)| Cause {
                    check: "ecc".into(),
                    code: "X".into(),
                    entity: (*entity).into(),
                    action: *action,
                    pci: None,
                })
                .collect(),
            at: 0,
            clean_runs: 0,
        }
    }

    fn settings() -> RemediationSettings {
        RemediationSettings::default()
    }

    #[test]
    fn reset_gpu_findings_reset_their_gpus_and_a_failed_reset_reboots() {
        let o = ours(&[("gpu3", Action::ResetGpu), ("gpu1", Action::ResetGpu)]);
        let step = next_step(&o, &Repairs::default(), &settings(), false);
        let Step::Reset(gpus) = step else {
            panic!("{step:?}")
        };
        assert_eq!(gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(
            next_step(&o, &Repairs::default(), &settings(), true),
            Step::Reboot
        );
    }

    #[test]
    fn a_reboot_cause_or_an_unnamed_gpu_reboots_the_node() {
        let o = ours(&[("gpu3", Action::ResetGpu), ("node", Action::Reboot)]);
        assert_eq!(
            next_step(&o, &Repairs::default(), &settings(), false),
            Step::Reboot
        );
        let o = ours(&[("node", Action::ResetGpu)]);
        assert_eq!(
            next_step(&o, &Repairs::default(), &settings(), false),
            Step::Reboot
        );
    }

    #[test]
    fn imex_causes_restart_imex_first_and_a_restart_that_did_not_help_reboots() {
        let o = ours(&[
            ("nvidia-imex", Action::RestartImex),
            ("imex-peer3", Action::RestartImex),
        ]);
        assert_eq!(
            next_step(&o, &Repairs::default(), &settings(), false),
            Step::RestartImex
        );
        assert_eq!(
            next_step(&o, &Repairs::default(), &settings(), true),
            Step::Reboot
        );
        // Beside a GPU that needs a reset, the reboot does both.
        let o = ours(&[
            ("nvidia-imex", Action::RestartImex),
            ("gpu1", Action::ResetGpu),
        ]);
        assert_eq!(
            next_step(&o, &Repairs::default(), &settings(), false),
            Step::Reboot
        );
    }

    #[test]
    fn repair_and_investigate_are_never_automatic() {
        let o = ours(&[("gpu3", Action::ResetGpu), ("mlx5_0", Action::Repair)]);
        assert_eq!(
            next_step(&o, &Repairs::default(), &settings(), false),
            Step::HandOver(HandOver::NotAutomatic(Action::Repair))
        );
    }

    #[test]
    fn causes_without_a_repair_action_are_left_to_the_policy() {
        let o = ours(&[("/scratch", Action::None)]);
        assert_eq!(
            next_step(&o, &Repairs::default(), &settings(), false),
            Step::Nothing
        );
    }

    #[test]
    fn the_ladder_stops_after_max_remediations_in_the_window() {
        let o = ours(&[("gpu0", Action::Reboot)]);
        let day = 86_400;
        let mut r = Repairs {
            started_at: vec![0, day, 2 * day],
            ..Repairs::default()
        };
        prune(&mut r, 3 * day, 7);
        assert_eq!(
            next_step(&o, &r, &settings(), false),
            Step::HandOver(HandOver::LadderEnd {
                tried: 3,
                window_days: 7
            })
        );
        // A week later the first has left the window.
        prune(&mut r, 7 * day + 1, 7);
        assert_eq!(next_step(&o, &r, &settings(), false), Step::Reboot);
    }

    #[test]
    fn nothing_is_tried_while_a_reboot_is_pending_or_after_a_hand_over() {
        let o = ours(&[("gpu0", Action::Reboot)]);
        let pending = Repairs {
            reboot: Some(PendingReboot {
                at: 1,
                reason: "hc: X".into(),
            }),
            ..Repairs::default()
        };
        assert_eq!(next_step(&o, &pending, &settings(), false), Step::Nothing);
        let handed = Repairs {
            handed_over: Some("hc: X".into()),
            ..Repairs::default()
        };
        assert_eq!(next_step(&o, &handed, &settings(), false), Step::Nothing);
        // A new reason is a new episode.
        let handed = Repairs {
            handed_over: Some("hc: Y".into()),
            ..Repairs::default()
        };
        assert_eq!(next_step(&o, &handed, &settings(), false), Step::Reboot);
    }
}
