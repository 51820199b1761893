//! The default catalog line by line: each signature family matches its real
//! lines and leaves alone a near miss (a line with the same words that is
//! not the error), and a site's file adds and replaces signatures.

use joblog::{Catalog, CatalogError, Class, Limits, LogTail};

/// (line, the signature that must claim it, or None for a near miss).
const EXAMPLES: &[(&str, Option<&str>)] = &[
    // NCCL start-up noise, claimed so that no network signature does.
    ("gpu01:1234:1234 [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file", Some("nccl-startup-warning")),
    ("gpu01:1234:1234 [0] NCCL WARN NET/IB : No device found.", Some("nccl-startup-warning")),
    ("gpu01:1234:1240 [0] NCCL WARN Could not find real path of /sys/class/net/eth0/device", Some("nccl-startup-warning")),
    // GPU and driver.
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", Some("cuda-ecc-uncorrectable")),
    ("[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered", Some("cuda-ecc-uncorrectable")),
    ("  Volatile uncorrectable ECC errors: 0", None),
    ("[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered", Some("cuda-illegal-address")),
    ("hint: if an illegal memory access was encountered, run compute-sanitizer", None),
    ("RuntimeError: CUDA error: unspecified launch failure", Some("cuda-launch-failure")),
    ("retrying the test kernel after unspecified launch failure", None),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", Some("gpu-lost")),
    ("Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost. Reboot the system to recover this GPU", Some("gpu-lost")),
    ("# when a GPU has fallen off the bus, see the runbook", None),
    ("RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution", Some("cuda-nvlink-uncorrectable")),
    ("nvlink check: 0 uncorrectable NVLink errors", None),
    ("gpu07:5512:5600 [5] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'", Some("nccl-cuda-failure")),
    // The job's own.
    ("gpu07:5512:5600 [5] NCCL WARN Cuda failure 'out of memory'", Some("cuda-out-of-memory")),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB", Some("cuda-out-of-memory")),
    ("set PYTORCH_CUDA_ALLOC_CONF to avoid CUDA out of memory errors", None),
    ("RuntimeError: CUDA error: device-side assert triggered", Some("cuda-device-assert")),
    ("note: the device-side assert triggered messages are above", None),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.", Some("slurm-oom-kill")),
    ("slurmstepd: error: Detected 2 oom-kill event(s) in step 77.batch cgroup.", Some("slurm-oom-kill")),
    ("dataset loader: oom_kill protection and memory limit set to 8GB", None),
    ("ModuleNotFoundError: No module named 'flash_attn'", Some("python-exception")),
    ("[rank0]: KeyError: 'labels'", Some("python-exception")),
    ("json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", Some("python-exception")),
    ("AssertionError", Some("python-exception")),
    ("    raise KeyError(name)", None),
    ("warning: caught ValueError: retrying", None),
    // Network.
    ("gpu042:81234:81290 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<54321> with status=12 opcode=0 len=0 vendor err 129 (Recv)", Some("nccl-ib-error")),
    ("gpu042:81234:81290 [3] NCCL WARN NET/IB : Got async event : port error", Some("nccl-ib-error")),
    ("NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with status=12", None),
    ("gpu01:100:200 [1] NCCL WARN Call to ibv_create_cq failed", Some("nccl-ibverbs-failure")),
    ("gpu01:100:200 [1] NCCL WARN Call to ibv_reg_mr retried", None),
    // Collateral.
    ("[rank5]:[E1124 10:00:00.123456 1234 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.", Some("nccl-watchdog-timeout")),
    ("docs: the Watchdog caught collective operation timeout message means a peer hung", None),
    ("[rank2]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.20.5", Some("nccl-peer-gone")),
    ("gpu02:77:90 [0] NCCL WARN NET/Socket : socket progress: Connection closed by remote peer gpu01<41234>", Some("nccl-peer-gone")),
    ("wandb: Connection closed by remote peer, retrying", None),
    // Slurm.
    ("srun: error: gpu042: task 17: Bus error", Some("srun-task-bus-error")),
    ("srun: error: gpu01: tasks 0-7: Bus error", Some("srun-task-bus-error")),
    ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.", None),
    ("srun: error: gpu03: task 4: Segmentation fault (core dumped)", Some("srun-task-crash")),
    ("Fatal Python error: Segmentation fault", None),
    ("srun: error: gpu03: tasks 0-3: Exited with exit code 1", Some("srun-task-exit-code")),
    ("worker 4 Exited with exit code 1", None),
    ("slurmstepd: error: *** STEP 4242.0 ON gpu01 CANCELLED AT 2026-11-24T10:00:00 DUE TO TIME LIMIT ***", Some("slurm-step-cancelled")),
    ("job was CANCELLED AT user request", None),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1", Some("nccl-system-error")),
];

fn claimed_by(catalog: &Catalog, line: &str) -> Option<String> {
    let tail = LogTail::from_bytes(line.as_bytes(), false, &Limits::default());
    let hits = catalog.scan(&tail);
    assert!(hits.len() <= 1, "{line}: one line, one hit");
    hits.first().map(|h| h.signature.id.clone())
}

#[test]
fn each_example_line_is_claimed_by_its_signature_and_each_near_miss_by_none() {
    let catalog = Catalog::defaults();
    for (line, expected) in EXAMPLES {
        assert_eq!(
            claimed_by(&catalog, line).as_deref(),
            *expected,
            "line: {line}"
        );
    }
}

#[test]
fn every_default_signature_has_an_example_line() {
    for sig in Catalog::defaults().signatures() {
        assert!(
            EXAMPLES.iter().any(|(_, id)| *id == Some(sig.id.as_str())),
            "{} has no example in EXAMPLES",
            sig.id
        );
    }
}

#[test]
fn the_defaults_cover_every_class_the_issue_names() {
    let catalog = Catalog::defaults();
    for class in [
        Class::Hardware,
        Class::User,
        Class::Collateral,
        Class::Unknown,
        Class::Ignore,
    ] {
        assert!(
            catalog.signatures().iter().any(|s| s.class == class),
            "{class:?}"
        );
    }
}

#[test]
fn a_hit_carries_the_host_and_the_ranks_its_line_names() {
    let catalog = Catalog::defaults();
    let text = "gpu042:81234:81290 [3] NCCL WARN NET/IB : Got async event : port error\n\
                srun: error: gpu01: tasks 0-2,5: Bus error\n\
                [rank9]: RuntimeError: CUDA error: unspecified launch failure\n\
                7: RuntimeError: CUDA error: unspecified launch failure\n";
    let tail = LogTail::from_bytes(text.as_bytes(), false, &Limits::default());
    let hits = catalog.scan(&tail);
    let got: Vec<_> = hits
        .iter()
        .map(|h| (h.host.as_deref(), h.ranks.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Some("gpu042"), vec![]),
            (Some("gpu01"), vec![0, 1, 2, 5]),
            (None, vec![9]),
            (None, vec![7]),
        ]
    );
}

#[test]
fn a_site_signature_is_tried_before_the_defaults() {
    let site = r#"
[[signature]]
id = "site-ecc-drill"
class = "ignore"
component = "gpu"
localize = "none"
triggers = ["ECC DRILL"]
regex = 'ECC DRILL'
description = "our monthly fault-injection drill"
"#;
    let catalog = Catalog::with_site_toml(site, "site.toml").unwrap();
    assert_eq!(
        claimed_by(
            &catalog,
            "ECC DRILL: CUDA error: uncorrectable ECC error encountered"
        )
        .as_deref(),
        Some("site-ecc-drill")
    );
    assert_eq!(
        catalog.signatures().len(),
        Catalog::defaults().signatures().len() + 1
    );
}

#[test]
fn a_site_signature_with_a_default_id_replaces_it_in_place() {
    let site = r#"
[[signature]]
id = "cuda-illegal-address"
class = "user"
component = "gpu"
localize = "none"
triggers = ["illegal memory access was encountered"]
regex = 'CUDA error: an illegal memory access was encountered'
description = "on our cluster always a user kernel bug"
"#;
    let catalog = Catalog::with_site_toml(site, "site.toml").unwrap();
    let defaults = Catalog::defaults();
    assert_eq!(catalog.signatures().len(), defaults.signatures().len());
    let place = |c: &Catalog| {
        c.signatures()
            .iter()
            .position(|s| s.id == "cuda-illegal-address")
    };
    assert_eq!(place(&catalog), place(&defaults));
    assert_eq!(
        catalog.get("cuda-illegal-address").unwrap().class,
        Class::User
    );
}

#[test]
fn a_site_file_is_read_from_disk_and_a_missing_one_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signatures.toml");
    std::fs::write(&path, "").unwrap();
    assert!(Catalog::with_site_file(&path).is_ok());
    let missing = dir.path().join("nope.toml");
    let err = Catalog::with_site_file(&missing).unwrap_err().to_string();
    assert!(err.contains("nope.toml"), "{err}");
}

fn site_error(toml: &str) -> String {
    let err: CatalogError =
        Catalog::with_site_toml(toml, "/etc/lemonade/signatures.toml").unwrap_err();
    err.to_string()
}

const GOOD: &str = r#"id = "site-x"
class = "hardware"
component = "gpu"
localize = "none"
triggers = ["XX"]
regex = 'XX'
description = "x""#;

#[test]
fn a_bad_catalog_is_an_error_naming_the_file_the_signature_and_the_field() {
    let with = |from: &str, to: &str| format!("[[signature]]\n{}\n", GOOD.replace(from, to));
    let cases = [
        (with("class = \"hardware\"", "class = \"hardwre\""), "signature site-x: field `class`: `hardwre` is not one of"),
        (with("regex = 'XX'", "regex = 'XX('"), "signature site-x: field `regex`"),
        (with("localize = \"none\"", "localize = \"host_in_line\""), "signature site-x: field `regex`: localize = \"host_in_line\" needs a (?P<host>...) group"),
        (with("description = \"x\"", "descripton = \"x\""), "signature site-x: field `descripton`: unknown field"),
        (with("triggers = [\"XX\"]", "triggers = []"), "signature site-x: field `triggers`"),
        (with("component = \"gpu\"\n", ""), "signature site-x: field `component`: missing"),
        (with("id = \"site-x\"\n", ""), "signature #1: field `id`: missing"),
        (with("id = \"site-x\"", "id = \"Site X\""), "signature Site X: field `id`"),
        (format!("[[signature]]\n{GOOD}\n[[signature]]\n{GOOD}\n"), "signature site-x: field `id`: used twice"),
        ("[[signature]\nid = 1".to_string(), "/etc/lemonade/signatures.toml: "),
        ("[general]\nx = 1\n".to_string(), "unknown top-level key `general`"),
    ];
    for (toml, expected) in cases {
        let err = site_error(&toml);
        assert!(err.starts_with("/etc/lemonade/signatures.toml: "), "{err}");
        assert!(err.contains(expected), "expected {expected:?} in {err:?}");
    }
}

#[test]
fn the_books_example_of_a_site_signature_loads_and_claims_its_line() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/src/job-evidence.md"
    ))
    .unwrap();
    let start = text.find("id = \"site-nccl-ofi-error\"").expect(
        "the example is in the book's signature catalog section (docs/src/job-evidence.md)",
    );
    let toml = &text[start..start + text[start..].find("```").unwrap()];
    let catalog =
        Catalog::with_site_toml(&format!("[[signature]]\n{toml}"), "the book's example").unwrap();
    let line = "p4d-17:4242:4300 [2] NCCL WARN NET/OFI Request 0x7f completed with error. RC: 21. Error: unknown error";
    assert_eq!(
        claimed_by(&catalog, line).as_deref(),
        Some("site-nccl-ofi-error")
    );
}
