//! Issue 36, "Security and bad input": the log paths come from users and
//! lemon reads them as root. Each test plants one trick and checks that the
//! file is skipped, for the right counted reason, quickly, and that nothing
//! of it comes back.
//!
//! Tests that give a file to another user need root (chown): without it
//! they say so on stderr and return, unless `LEMONADE_REQUIRE_CLUSTER` is
//! set (scripts/test, as root), where a missing privilege fails them.

use joblog::{
    classify, read_tail, read_tails, Catalog, JobLayout, Limits, LogTail, Skip, VerdictKind,
};
use std::io::Write;
use std::os::unix::fs::{symlink, FileExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
const SECRET: &str = "gpu666:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.9 with status=12 SECRET-ROOT-ONLY";

fn me() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn is_root() -> bool {
    me() == 0
}

/// True when this process may chown; else says on stderr that `test` is
/// skipped, or fails it under `LEMONADE_REQUIRE_CLUSTER`.
fn can_chown(test: &str) -> bool {
    if is_root() {
        return true;
    }
    if std::env::var_os("LEMONADE_REQUIRE_CLUSTER").is_some() {
        panic!("{test} needs root to give files to another user, and LEMONADE_REQUIRE_CLUSTER forbids skipping");
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: needs root to give files to another user; scripts/test runs it as root"
    );
    false
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
}

fn write(path: &Path, text: &[u8]) {
    std::fs::write(path, text).unwrap();
}

fn patient() -> Limits {
    Limits {
        timeout: Duration::from_secs(30),
        ..Limits::default()
    }
}

#[test]
fn a_plain_log_of_the_jobs_user_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("slurm-42.out");
    write(
        &log,
        b"epoch 1\nCUDA error: uncorrectable ECC error encountered\n",
    );
    let tail = read_tail(&log, me(), &Limits::default()).unwrap();
    assert_eq!(tail.lines().count(), 2);
}

#[test]
fn a_symlink_to_a_root_only_file_with_a_hardware_signature_is_skipped_and_its_text_never_returned()
{
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("root-only");
    write(&secret, SECRET.as_bytes());
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let jobs = dir.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    let link = jobs.join("slurm-7.out");
    symlink(&secret, &link).unwrap();
    // As root: the secret is root's, the directory and the link the job user's.
    // As a user: all is ours, and the link must be refused all the same.
    let job_uid = if is_root() {
        chown(dir.path(), NOBODY);
        chown(&jobs, NOBODY);
        chown(&link, NOBODY);
        NOBODY
    } else {
        me()
    };
    let result = read_tail(&link, job_uid, &Limits::default());
    assert_eq!(result, Err(Skip::Symlink));
    assert!(!format!("{result:?}").contains("SECRET"));
    // What ingest would store: the verdict from the tails that were read.
    let layout = JobLayout::new(vec!["gpu666".into()], 8);
    let catalog = Catalog::defaults();
    let tails: Vec<_> = result.into_iter().collect();
    let verdict = classify(&layout, &tails, &catalog);
    assert_eq!(verdict.kind, VerdictKind::Unknown);
    assert!(!format!("{verdict:?}").contains("SECRET"));
    // The control: the same text, read, would have been a hardware verdict with it.
    let read = LogTail::from_bytes(SECRET.as_bytes(), false, &Limits::default());
    let control = classify(&layout, &[read], &catalog);
    assert_eq!(control.kind, VerdictKind::HardwareOn("gpu666".into()));
    assert!(format!("{control:?}").contains("SECRET"));
}

#[test]
fn a_symlinked_parent_directory_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    write(&real.join("slurm-1.out"), b"hello\n");
    symlink(&real, dir.path().join("link")).unwrap();
    let via_link = dir.path().join("link/slurm-1.out");
    assert_eq!(
        read_tail(&via_link, me(), &Limits::default()),
        Err(Skip::Symlink)
    );
    assert!(read_tail(&real.join("slurm-1.out"), me(), &Limits::default()).is_ok());
}

#[test]
fn a_fifo_is_skipped_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("slurm-3.out");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let started = Instant::now();
    assert_eq!(read_tail(&fifo, me(), &patient()), Err(Skip::NotRegular));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_ten_gigabyte_sparse_file_is_read_by_its_tail_only_and_fast() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("slurm-10g.out");
    let size: u64 = 10 << 30;
    let last = b"\nsrun: error: gpu042: task 17: Bus error\n";
    let f = std::fs::File::create(&log).unwrap();
    f.set_len(size).unwrap();
    f.write_at(last, size - last.len() as u64).unwrap();
    drop(f);
    let started = Instant::now();
    let tail = read_tail(&log, me(), &patient()).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(tail.bytes_read(), Limits::default().effective_tail_bytes());
    assert!(tail
        .lines()
        .any(|l| l == b"srun: error: gpu042: task 17: Bus error"));
}

#[test]
fn a_file_deleted_and_recreated_while_being_read_never_breaks_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("slurm-9.out");
    let body = "training step\n".repeat(40_000);
    write(&log, body.as_bytes());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (log, stop, body) = (log.clone(), stop.clone(), body.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::remove_file(&log);
                let _ = std::fs::write(&log, body.as_bytes());
            }
        })
    };
    for _ in 0..200 {
        match read_tail(&log, me(), &patient()) {
            // Caught mid-write, the last line may be a part of one.
            Ok(tail) => assert!(tail.lines().all(|l| b"training step".starts_with(l))),
            Err(Skip::NoLog | Skip::Vanished) => {}
            Err(other) => panic!("unexpected skip {other:?}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
}

#[test]
fn a_world_or_group_writable_parent_without_the_sticky_bit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let log = shared.join("slurm-5.out");
    write(&log, b"x\n");
    for (mode, expected) in [
        (0o777, Err(Skip::UnsafeParent)),
        (0o775, Err(Skip::UnsafeParent)),
        (0o1777, Ok(())),
        (0o755, Ok(())),
    ] {
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).unwrap();
        let got = read_tail(&log, me(), &Limits::default()).map(|_| ());
        assert_eq!(got, expected, "directory mode {mode:o}");
    }
}

#[test]
fn a_file_of_another_user_is_refused() {
    if !can_chown("a_file_of_another_user_is_refused") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    chown(dir.path(), NOBODY);
    let log = dir.path().join("slurm-6.out");
    write(&log, b"CUDA error: uncorrectable ECC error encountered\n");
    // The file is root's; the job (and its directory) nobody's.
    assert_eq!(
        read_tail(&log, NOBODY, &Limits::default()),
        Err(Skip::WrongOwner)
    );
    chown(&log, NOBODY);
    assert!(read_tail(&log, NOBODY, &Limits::default()).is_ok());
}

#[test]
fn a_parent_directory_of_a_third_user_is_refused() {
    if !can_chown("a_parent_directory_of_a_third_user_is_refused") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let log = theirs.join("slurm-8.out");
    write(&log, b"x\n");
    chown(&theirs, NOBODY);
    chown(&log, 4242);
    assert_eq!(
        read_tail(&log, 4242, &Limits::default()),
        Err(Skip::UnsafeParent)
    );
}

#[test]
fn non_utf8_and_binary_junk_is_read_as_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("slurm-11.out");
    let mut junk: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    junk.extend_from_slice(
        b"\n\xff\xfe CUDA error: an illegal memory access was encountered \x1b[31m\n",
    );
    write(&log, &junk);
    let tail = read_tail(&log, me(), &Limits::default()).unwrap();
    assert!(tail
        .lines()
        .last()
        .unwrap()
        .starts_with(b"\xff\xfe CUDA error"));
}

#[test]
fn a_ten_megabyte_line_without_a_newline_is_cut_to_the_line_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("slurm-12.out");
    write(&log, &vec![b'x'; 10 << 20]);
    let limits = Limits::default();
    let tail = read_tail(&log, me(), &limits).unwrap();
    assert!(tail.bytes_read() <= Limits::MAX_TAIL_BYTES);
    assert_eq!(tail.lines().count(), 1);
    assert!(tail.bytes().len() <= limits.max_line_bytes);
}

#[test]
fn dev_null_missing_files_and_empty_paths_are_no_log() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        Path::new("/dev/null"),
        Path::new(""),
        &dir.path().join("never-written.out"),
        &dir.path().join("no-such-dir/slurm-1.out"),
    ] {
        assert_eq!(
            read_tail(path, me(), &Limits::default()),
            Err(Skip::NoLog),
            "{path:?}"
        );
    }
}

#[test]
fn relative_paths_dot_dot_directories_and_devices_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    write(&dir.path().join("slurm-1.out"), b"x\n");
    let l = Limits::default();
    assert_eq!(
        read_tail(Path::new("slurm-1.out"), me(), &l),
        Err(Skip::NotAbsolute)
    );
    assert_eq!(
        read_tail(&sub.join("../slurm-1.out"), me(), &l),
        Err(Skip::UnsafeParent)
    );
    assert_eq!(read_tail(&sub, me(), &l), Err(Skip::NotRegular));
    assert_eq!(
        read_tail(Path::new("/dev/zero"), 0, &l),
        Err(Skip::NotRegular)
    );
}

#[test]
fn many_logs_are_read_a_few_at_a_time_each_with_its_own_result_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs = Vec::new();
    for i in 0..10 {
        let path = dir.path().join(format!("slurm-{i}.out"));
        if i % 3 != 0 {
            write(&path, format!("job {i}\n").as_bytes());
        }
        logs.push((path, me()));
    }
    let mut seen = Vec::new();
    read_tails(&logs, &Limits::default(), |index, result| {
        let expected = if index % 3 == 0 {
            Err(Skip::NoLog)
        } else {
            Ok(format!("job {index}\n").into_bytes())
        };
        assert_eq!(result.map(|t| t.bytes().to_vec()), expected, "log {index}");
        seen.push(index);
    });
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
}
