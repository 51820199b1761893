//! `gpu-procs`: processes and memory a job left on its GPUs (epilog), or
//! that are already there when a job starts (prolog).

use super::session::{self, Failure, GpuData};
use crate::check::{Check, CheckContext, CheckError, CheckOutput, Profile, SettingsView};
use crate::finding::Finding;
use lemonade_config::{Action, Config, GpuProcsSettings, Severity};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

// Finding codes this check emits; `crate::codes` gives each its meaning,
// severity, repair and how to silence it.
pub const GPU_STRAY_PROCESSES: &str = "GPU_STRAY_PROCESSES";
pub const GPU_MEMORY_USED: &str = "GPU_MEMORY_USED";

pub const NAME: &str = "gpu-procs";
const MIB: u64 = 1 << 20;

/// The `gpu-procs` check.
pub struct GpuProcs;

/// One GPU's readings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcReadings {
    /// Compute processes: pid and the memory they hold (bytes), when NVML knows it.
    pub processes: Vec<(u32, Option<u64>)>,
    /// Memory in use on the GPU, bytes.
    pub memory_used: Option<u64>,
}

/// The job's GPU indices from its environment: `SLURM_JOB_GPUS` (physical
/// indices) first, then `CUDA_VISIBLE_DEVICES`. `None` means "all GPUs": the
/// variables are unset or empty, or name GPUs by UUID.
pub fn job_gpus_from_env(
    slurm_job_gpus: Option<&str>,
    cuda_visible: Option<&str>,
) -> Option<Vec<u32>> {
    [slurm_job_gpus, cuda_visible]
        .into_iter()
        .flatten()
        .find_map(parse_index_list)
}

/// `0,1,4-5` → [0, 1, 4, 5]; anything else (UUIDs, `NoDevFiles`, empty) → None.
fn parse_index_list(text: &str) -> Option<Vec<u32>> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?);
                if b < a || b - a > 1024 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// All NVML calls of the check.
pub fn gather(nvml: &Nvml) -> Result<Vec<GpuData<ProcReadings>>, Failure> {
    session::per_gpu(nvml, |d| {
        let processes = session::optional(d.running_compute_processes())?
            .unwrap_or_default()
            .into_iter()
            .map(|p| {
                let used = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Some(b),
                    UsedGpuMemory::Unavailable => None,
                };
                (p.pid, used)
            })
            .collect();
        Ok(ProcReadings {
            processes,
            memory_used: session::optional(d.memory_info())?.map(|m| m.used),
        })
    })
}

/// Pure: readings of the job's GPUs (`None`: all) to findings.
pub fn evaluate(
    gpus: &[GpuData<ProcReadings>],
    job_gpus: Option<&[u32]>,
    s: &GpuProcsSettings,
) -> Vec<Finding> {
    let mine: Vec<GpuData<ProcReadings>> = gpus
        .iter()
        .filter(|g| match job_gpus {
            Some(j) => j.contains(&g.id.index),
            None => true,
        })
        .cloned()
        .collect();
    let mut findings = Vec::new();
    for (id, r) in session::split(NAME, &mine, &mut findings) {
        let gpu = id.entity();
        let before = findings.len();
        if !r.processes.is_empty() {
            let pids: Vec<String> = r.processes.iter().map(|(p, _)| p.to_string()).collect();
            findings.push(
                id.finding(NAME, GPU_STRAY_PROCESSES, Severity::Drain)
                    .expected("no processes")
                    .actual(format!("pids {}", pids.join(", ")))
                    .action(Action::Investigate)
                    .message(format!(
                        "{gpu}: {} compute process(es) left: {}",
                        pids.len(),
                        pids.join(", ")
                    )),
            );
        }
        // Processes explain the memory they hold; memory held without one is a leak.
        let leaked = r.memory_used.filter(|_| r.processes.is_empty());
        if let Some(used) = leaked.filter(|u| *u > s.memory_used_max_mib * MIB) {
            findings.push(
                id.finding(NAME, GPU_MEMORY_USED, Severity::Drain)
                    .expected(format!("<= {} MiB", s.memory_used_max_mib))
                    .actual(format!("{} MiB", used / MIB))
                    .action(Action::ResetGpu)
                    .message(format!(
                        "{gpu}: {} MiB in use with no job on it",
                        used / MIB
                    )),
            );
        }
        if findings.len() == before {
            findings.push(id.ok(NAME));
        }
    }
    findings
}

impl Check for GpuProcs {
    fn name(&self) -> &'static str {
        NAME
    }
    fn summary(&self) -> &'static str {
        "processes and memory left on the job's GPUs (prolog/epilog; NVML)"
    }
    fn profiles(&self) -> &'static [Profile] {
        // Not periodic nor full: there, running jobs own their GPUs' processes.
        &[Profile::Quick, Profile::Epilog]
    }
    fn settings(&self, config: &Config) -> SettingsView {
        let s = &config.checks.gpu_procs;
        SettingsView::of(s.enabled, s.deadline_s, s)
    }
    fn run(&self, ctx: &CheckContext) -> Result<CheckOutput, CheckError> {
        let job_gpus = ctx.job.as_ref().and_then(|j| j.gpus.as_deref());
        Ok(session::run(NAME, ctx, gather, |gpus| {
            CheckOutput::findings(evaluate(&gpus, job_gpus, &ctx.config.checks.gpu_procs))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::gpu::session::GpuId;

    #[test]
    fn job_gpus_prefer_slurm_and_fall_back_to_cuda() {
        assert_eq!(
            job_gpus_from_env(Some("0,2"), Some("0,1")),
            Some(vec![0, 2])
        );
        assert_eq!(job_gpus_from_env(Some(""), Some("1, 3")), Some(vec![1, 3]));
        assert_eq!(job_gpus_from_env(None, Some("4-6")), Some(vec![4, 5, 6]));
        assert_eq!(job_gpus_from_env(None, Some("GPU-1a2b,GPU-3c4d")), None);
        assert_eq!(job_gpus_from_env(Some("NoDevFiles"), None), None);
        assert_eq!(job_gpus_from_env(None, None), None);
    }

    #[test]
    fn only_the_jobs_gpus_are_judged() {
        let gpus: Vec<_> = (0..2)
            .map(|index| GpuData {
                id: GpuId {
                    index,
                    ..Default::default()
                },
                reading: Ok(ProcReadings {
                    processes: if index == 1 {
                        vec![(4242, Some(MIB))]
                    } else {
                        vec![]
                    },
                    memory_used: Some(MIB),
                }),
            })
            .collect();
        let s = GpuProcsSettings::default();
        let mine = evaluate(&gpus, Some(&[0]), &s);
        assert_eq!(mine.len(), 1);
        assert!(mine[0].is_ok());
        let all = evaluate(&gpus, None, &s);
        assert_eq!(all[1].code, "GPU_STRAY_PROCESSES");
        assert_eq!(all[1].severity, Severity::Drain);
    }
}
