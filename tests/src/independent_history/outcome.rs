//! How one run ends: a fault on one of its nodes, the bad hour, the user's
//! own bug, or the ordinary endings.

use super::logs::{Cause, Ending, Launcher};
use super::sim::{node_name, user_failure, Request, Run, Sim};
use super::PlantedFailure;

pub struct Outcome {
    pub state: String,
    pub exit: &'static str,
    pub end: i64,
    pub ending: Ending,
    pub requeue: bool,
}

impl Sim {
    /// Runs a job until it ends for good (requeues included).
    pub fn run_job(&mut self, req: &Request, submit: i64, uid: u32) {
        let mut submit = submit;
        for attempt in 0..4 {
            let (start, nodes) = self.place(req.size, submit, req.pinned);
            if start + req.duration.min(600) >= self.end {
                return;
            }
            let out = self.outcome(req, start, &nodes, uid);
            if out.end >= self.end {
                return;
            }
            for &n in &nodes {
                self.nodes[n].free_at = out.end + 20;
            }
            let launcher = if req.job_id_raw % 3 == 0 {
                Launcher::SrunLabel
            } else {
                Launcher::Torchrun
            };
            let requeue = out.requeue && attempt < 3;
            self.runs.push(Run {
                job_id_raw: req.job_id_raw,
                job_id: req.job_id.clone(),
                nodes,
                state: if requeue && out.state == "PREEMPTED" {
                    "REQUEUED".into()
                } else {
                    out.state
                },
                exit: out.exit,
                submit,
                start,
                end: out.end,
                user: req.user,
                launcher,
                ending: out.ending,
                keeps_log: !requeue,
            });
            if !requeue {
                return;
            }
            // The next run truncates the job's log: this run's lines are gone.
            if let Some(f) = self.failures.last_mut() {
                if f.job_id_raw == req.job_id_raw {
                    f.log_names_node = false;
                }
            }
            submit = out.end + 30;
        }
    }

    fn outcome(&mut self, req: &Request, start: i64, nodes: &[usize], uid: u32) -> Outcome {
        let planned = start + req.duration;
        if let Some(out) = self.hardware(req, start, planned, nodes) {
            return out;
        }
        if let Some(after) = req.crash_after {
            let (state, exit, ending) = user_failure(&mut self.rng);
            return Outcome {
                state: state.into(),
                exit,
                end: (start + after).min(planned),
                ending,
                requeue: false,
            };
        }
        let (a, b) = self.bad_hour;
        if start < b && planned > a && self.rng.chance(0.6) {
            let end = (start.max(a) + self.rng.range(30, 1800)).min(planned);
            return Outcome {
                state: "FAILED".into(),
                exit: "1:0",
                end,
                ending: Ending::Filesystem,
                requeue: false,
            };
        }
        if self.rng.chance(self.users[req.user].fail) {
            let early = self.rng.chance(0.73);
            let after = if early {
                self.rng.range(20, 600)
            } else {
                self.rng.range(600, req.duration.max(601))
            };
            let (state, exit, ending) = user_failure(&mut self.rng);
            return Outcome {
                state: state.into(),
                exit,
                end: (start + after).min(planned),
                ending,
                requeue: false,
            };
        }
        self.ordinary(start, planned, uid)
    }

    fn ordinary(&mut self, start: i64, planned: i64, uid: u32) -> Outcome {
        let cut = self.rng.range(start + 60, planned.max(start + 61));
        let (state, end, ending, requeue) = match self.rng.weighted(&[91.0, 3.0, 4.5, 1.5]) {
            0 => ("COMPLETED".to_string(), planned, Ending::Completed, false),
            1 => ("TIMEOUT".to_string(), planned, Ending::Timeout, false),
            2 => (format!("CANCELLED by {uid}"), cut, Ending::Cancelled, false),
            _ => ("PREEMPTED".to_string(), cut, Ending::Preempted, true),
        };
        Outcome {
            state,
            exit: "0:0",
            end,
            ending,
            requeue,
        }
    }

    /// The earliest fault that meets the run: a caught one while it runs, or
    /// an uncaught one that struck the node before or during it.
    fn hardware(
        &mut self,
        req: &Request,
        start: i64,
        planned: i64,
        nodes: &[usize],
    ) -> Option<Outcome> {
        let mut best: Option<(i64, usize, bool, usize)> = None;
        for (k, &n) in nodes.iter().enumerate() {
            for (i, f) in self.nodes[n].caught.iter().enumerate() {
                if f.at >= start && f.at < planned && best.is_none_or(|b| f.at < b.0) {
                    best = Some((f.at, k, true, i));
                }
            }
            if let Some(f) = self.nodes[n].pending.first() {
                if f.at < planned {
                    let t = f.at.max(start + 60 + (f.at.rem_euclid(7) * 300));
                    if t < planned && best.is_none_or(|b| t < b.0) {
                        best = Some((t, k, false, 0));
                    }
                }
            }
        }
        let (at, k, caught, i) = best?;
        let node = nodes[k];
        let fault = if caught {
            self.nodes[node].caught[i].clone()
        } else {
            self.nodes[node].pending.remove(0)
        };
        Some(self.fail_on(req, node, k, at, caught, fault.cause))
    }

    fn fail_on(
        &mut self,
        req: &Request,
        node: usize,
        k: usize,
        at: i64,
        caught: bool,
        cause: Cause,
    ) -> Outcome {
        let died = matches!(cause, Cause::Psu) || (cause == Cause::Cpu && self.rng.chance(0.5));
        let witnessed = !died && self.rng.chance(cause.names_node_share());
        self.failures.push(PlantedFailure {
            node: node_name(node),
            job_id_raw: req.job_id_raw,
            end: at,
            caught_by_check: caught,
            log_names_node: witnessed,
        });
        if died && !caught {
            let back = at + self.rng.range(1200, 4 * 3600);
            self.events.push(format!(
                "{}|{at}|{back}|DOWN*|Not responding|slurm",
                node_name(node)
            ));
            self.nodes[node].blocks.push((at, back));
        }
        let ending = if died {
            Ending::NodeDied { node_index: k }
        } else {
            Ending::Hardware {
                cause,
                node_index: k,
                witnessed,
            }
        };
        let node_fail =
            died || (caught && !matches!(cause, Cause::Dimm | Cause::Cpu | Cause::Bios));
        let (state, exit) = match (node_fail, cause, witnessed) {
            (true, _, _) => ("NODE_FAIL", "0:0"),
            (false, Cause::Dimm, true) => ("FAILED", "0:7"),
            _ => ("FAILED", "1:0"),
        };
        Outcome {
            state: state.into(),
            exit,
            end: at,
            ending,
            requeue: node_fail,
        }
    }
}
