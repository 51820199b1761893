//! The verdict rules of issue 36 ("Interpretation details"), one test each.

use joblog::{classify, Catalog, JobLayout, Limits, LogTail, Verdict, VerdictKind};

fn layout(nodes: &[&str], gpus_per_node: u32) -> JobLayout {
    JobLayout::new(nodes.iter().map(|n| n.to_string()).collect(), gpus_per_node)
}

fn tail(lines: &[String]) -> LogTail {
    let mut text = lines.join("\n");
    text.push('\n');
    LogTail::from_bytes(text.as_bytes(), false, &Limits::default())
}

fn verdict_on(layout: &JobLayout, stderr: &[String]) -> Verdict {
    classify(layout, &[tail(stderr)], &Catalog::defaults())
}

fn timeout(rank: u32) -> String {
    format!("[rank{rank}]:[E1124 10:00:00.1 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600043 milliseconds before timing out.")
}

fn ordinary() -> Vec<String> {
    (0..50)
        .map(|i| format!("[rank0]: step {i} loss 2.{i:02} lr 3e-4 grad_norm 1.0"))
        .collect()
}

fn two_nodes() -> JobLayout {
    layout(&["gpu01", "gpu02"], 8)
}

#[test]
fn a_localizing_hardware_line_beats_a_user_exception() {
    let mut lines = ordinary();
    lines.push("[rank0]: KeyError: 'labels'".into());
    lines.push("[rank9]: RuntimeError: CUDA error: uncorrectable ECC error encountered".into());
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::HardwareOn("gpu02".into()));
    assert_eq!(
        v.evidence[0],
        "[rank9]: RuntimeError: CUDA error: uncorrectable ECC error encountered"
    );
}

#[test]
fn a_user_exception_beats_collateral_timeouts() {
    let mut lines: Vec<String> = (0..15).map(timeout).collect();
    lines.push("[rank3]: ModuleNotFoundError: No module named 'flash_attn'".into());
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::User);
    assert_eq!(
        v.evidence,
        vec!["[rank3]: ModuleNotFoundError: No module named 'flash_attn'".to_string()]
    );
}

#[test]
fn when_every_rank_but_one_prints_a_collateral_timeout_the_silent_ranks_node_is_the_suspect() {
    let mut lines = ordinary();
    lines.extend((0..16).filter(|&r| r != 11).map(timeout));
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::HardwareOn("gpu02".into()));
    assert!(v.evidence[0].contains("Watchdog caught collective operation timeout"));
}

#[test]
fn when_the_odd_one_out_printed_a_user_exception_the_verdict_is_user() {
    let mut lines: Vec<String> = (0..16).filter(|&r| r != 11).map(timeout).collect();
    lines.push("[rank11]: IndexError: index 7 is out of bounds for dimension 0 with size 4".into());
    assert_eq!(verdict_on(&two_nodes(), &lines).kind, VerdictKind::User);
}

#[test]
fn when_every_rank_of_one_node_is_silent_and_all_others_time_out_that_node_is_the_suspect() {
    let lines: Vec<String> = (0..8).map(timeout).collect();
    assert_eq!(
        verdict_on(&two_nodes(), &lines).kind,
        VerdictKind::HardwareOn("gpu02".into())
    );
}

#[test]
fn when_several_ranks_on_different_nodes_are_silent_no_node_is_suspected() {
    let lines: Vec<String> = (0..16)
        .filter(|&r| r != 3 && r != 12)
        .map(timeout)
        .collect();
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::Unknown);
    assert!(!v.evidence.is_empty(), "the timeouts are still shown");
}

#[test]
fn the_same_cuda_error_on_every_rank_of_every_node_is_the_jobs_own() {
    let lines: Vec<String> = (0..16)
        .map(|r| {
            format!("[rank{r}]: RuntimeError: CUDA error: an illegal memory access was encountered")
        })
        .collect();
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::User);
    assert!(v.evidence[0].ends_with("CUDA error: an illegal memory access was encountered"));
}

#[test]
fn the_same_cuda_error_on_every_rank_of_a_single_node_is_the_jobs_own_too() {
    let lines: Vec<String> = (0..4)
        .map(|r| format!("[rank{r}]: RuntimeError: CUDA error: unspecified launch failure"))
        .collect();
    assert_eq!(
        verdict_on(&layout(&["gpu07"], 4), &lines).kind,
        VerdictKind::User
    );
}

#[test]
fn a_cuda_error_on_some_ranks_of_a_single_node_job_blames_that_node() {
    let lines = vec![
        "[rank1]: RuntimeError: CUDA error: unspecified launch failure".to_string(),
        "[rank2]: RuntimeError: CUDA error: unspecified launch failure".to_string(),
    ];
    assert_eq!(
        verdict_on(&layout(&["gpu07"], 4), &lines).kind,
        VerdictKind::HardwareOn("gpu07".into())
    );
}

#[test]
fn a_hardware_line_without_rank_or_host_blames_the_only_node_of_a_one_node_job() {
    let lines = vec!["RuntimeError: CUDA error: uncorrectable ECC error encountered".to_string()];
    assert_eq!(
        verdict_on(&layout(&["gpu07"], 1), &lines).kind,
        VerdictKind::HardwareOn("gpu07".into())
    );
}

#[test]
fn a_hardware_line_naming_no_node_of_a_multi_node_job_is_hardware_not_localized() {
    let lines = vec!["RuntimeError: CUDA error: uncorrectable ECC error encountered".to_string()];
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::HardwareUnlocalized);
    assert_eq!(v.kind.to_string(), "hardware, not localized");
}

#[test]
fn a_hardware_line_naming_no_node_takes_the_node_of_the_silent_rank() {
    let mut lines: Vec<String> = (0..16).filter(|&r| r != 5).map(timeout).collect();
    lines.push("RuntimeError: CUDA error: uncorrectable ECC error encountered".to_string());
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::HardwareOn("gpu01".into()));
    assert_eq!(
        v.evidence[0],
        "RuntimeError: CUDA error: uncorrectable ECC error encountered"
    );
}

#[test]
fn an_nccl_network_error_blames_the_host_it_names() {
    let mut lines = ordinary();
    lines.push("gpu02.cluster:81234:81290 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.1<54321> with status=12 opcode=0".into());
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::HardwareOn("gpu02".into()));
    assert_eq!(v.kind.to_string(), "hardware on gpu02");
}

#[test]
fn a_gpu_error_on_one_node_beats_the_network_errors_its_peers_see() {
    let lines = vec![
        "gpu02:1:2 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.1<5> with status=12"
            .to_string(),
        "gpu02:1:2 [4] NCCL WARN NET/IB : Got completion from peer 10.0.0.1<5> with status=12"
            .to_string(),
        "[rank2]: RuntimeError: CUDA error: uncorrectable ECC error encountered".to_string(),
    ];
    assert_eq!(
        verdict_on(&two_nodes(), &lines).kind,
        VerdictKind::HardwareOn("gpu01".into())
    );
}

#[test]
fn equal_network_errors_on_two_nodes_are_hardware_not_localized() {
    let lines = vec![
        "gpu01:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5> with status=12"
            .to_string(),
        "gpu02:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.1<5> with status=12"
            .to_string(),
    ];
    assert_eq!(
        verdict_on(&two_nodes(), &lines).kind,
        VerdictKind::HardwareUnlocalized
    );
}

#[test]
fn a_bus_error_on_one_task_blames_its_host_and_on_every_task_is_the_jobs_own() {
    let one = vec!["srun: error: gpu02: task 9: Bus error".to_string()];
    assert_eq!(
        verdict_on(&two_nodes(), &one).kind,
        VerdictKind::HardwareOn("gpu02".into())
    );
    let all = vec![
        "srun: error: gpu01: tasks 0-7: Bus error".to_string(),
        "srun: error: gpu02: tasks 8-15: Bus error".to_string(),
    ];
    assert_eq!(verdict_on(&two_nodes(), &all).kind, VerdictKind::User);
}

#[test]
fn exited_with_exit_code_lines_are_not_hardware() {
    let lines = vec!["srun: error: gpu02: tasks 8-15: Exited with exit code 1".to_string()];
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.kind, VerdictKind::Unknown);
    assert_eq!(v.evidence, lines);
}

#[test]
fn an_out_of_memory_kill_is_the_jobs_own_not_hardware() {
    let lines = vec![
        "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.".to_string(),
        "srun: error: gpu01: task 0: Out Of Memory".to_string(),
    ];
    assert_eq!(verdict_on(&two_nodes(), &lines).kind, VerdictKind::User);
    let cuda = vec![
        "[rank4]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
            .to_string(),
    ];
    assert_eq!(verdict_on(&two_nodes(), &cuda).kind, VerdictKind::User);
}

#[test]
fn nccl_start_up_warnings_do_not_localize() {
    let lines = vec![
        "gpu02:1:1 [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : cannot open shared object file".to_string(),
        "gpu02:1:1 [0] NCCL WARN NET/IB : No device found.".to_string(),
    ];
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(
        v,
        Verdict {
            kind: VerdictKind::Unknown,
            evidence: vec![]
        }
    );
}

#[test]
fn stdout_and_stderr_are_read_together() {
    let stdout = tail(&[
        "[rank10]: RuntimeError: CUDA error: uncorrectable ECC error encountered".to_string(),
    ]);
    let stderr = tail(
        &(0..16)
            .filter(|&r| r != 10)
            .map(timeout)
            .collect::<Vec<_>>(),
    );
    let v = classify(&two_nodes(), &[stdout, stderr], &Catalog::defaults());
    assert_eq!(v.kind, VerdictKind::HardwareOn("gpu02".into()));
    assert_eq!(v.evidence.len(), 2);
    assert!(v.evidence[1].contains("Watchdog"), "{:?}", v.evidence);
}

#[test]
fn a_job_with_no_log_or_no_matching_line_is_unknown_without_evidence() {
    let none = classify(&two_nodes(), &[], &Catalog::defaults());
    assert_eq!(
        none,
        Verdict {
            kind: VerdictKind::Unknown,
            evidence: vec![]
        }
    );
    assert_eq!(verdict_on(&two_nodes(), &ordinary()), none);
}

#[test]
fn evidence_is_at_most_two_short_lines_without_control_characters() {
    let long = format!(
        "[rank9]: \x1b[31mRuntimeError\x1b[0m: CUDA error: uncorrectable ECC error encountered\x07 {}",
        "x".repeat(1000)
    );
    let lines = vec![
        long,
        "[rank9]: RuntimeError: CUDA error: unspecified launch failure".to_string(),
        "[rank10]: RuntimeError: CUDA error: unspecified launch failure".to_string(),
    ];
    let v = verdict_on(&two_nodes(), &lines);
    assert_eq!(v.evidence.len(), 2);
    assert!(v.evidence[0].starts_with("[rank9]: RuntimeError: CUDA error: uncorrectable ECC"));
    for line in &v.evidence {
        assert!(line.chars().count() <= joblog::EVIDENCE_CHARS);
        assert!(!line.chars().any(char::is_control), "{line:?}");
    }
}

#[test]
fn the_layout_from_alloc_tres_maps_ranks_to_nodes_for_the_verdict() {
    let nodes = vec!["a1".to_string(), "a2".to_string(), "a3".to_string()];
    let l = JobLayout::from_alloc_tres(nodes, "cpu=96,gres/gpu=12,mem=1T,node=3");
    let lines =
        vec!["[rank5]: RuntimeError: CUDA error: uncorrectable ECC error encountered".to_string()];
    assert_eq!(
        verdict_on(&l, &lines).kind,
        VerdictKind::HardwareOn("a2".into())
    );
}

#[test]
fn an_absurd_layout_from_a_wrong_alloc_tres_does_not_stall_the_verdict() {
    let l = JobLayout::from_alloc_tres(vec!["a1".into()], "gres/gpu=4000000000");
    let started = std::time::Instant::now();
    let timeouts: Vec<String> = (0..8).map(timeout).collect();
    assert_eq!(verdict_on(&l, &timeouts).kind, VerdictKind::Unknown);
    let cuda: Vec<String> = (0..4)
        .map(|r| {
            format!("[rank{r}]: RuntimeError: CUDA error: an illegal memory access was encountered")
        })
        .collect();
    assert_eq!(
        verdict_on(&l, &cuda).kind,
        VerdictKind::HardwareOn("a1".into())
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
