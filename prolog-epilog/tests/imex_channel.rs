//! The prolog recreates a missing IMEX channel device on a node of an
//! NVLink domain before the checks run, under `--root` (a fixture tree).

use std::path::Path;
use std::process::Command;

const CHANNEL: &str = "dev/nvidia-caps-imex-channels/channel0";

fn prolog(root: &Path, config: &Path, dry_run: bool) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lemonade-prolog"));
    cmd.arg("--root").arg(root).arg("--config").arg(config);
    if dry_run {
        cmd.arg("--dry-run");
    }
    let out = cmd
        .env_clear()
        .env("SLURMD_NODENAME", "gb01")
        .env("SLURM_JOB_ID", "77")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn node(enabled: bool) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("proc")).unwrap();
    std::fs::create_dir_all(root.join("dev")).unwrap();
    std::fs::write(
        root.join("proc/devices"),
        "Character devices:\n195 nvidia\n511 nvidia-caps-imex-channels\n",
    )
    .unwrap();
    let config = dir.path().join("lemonade.toml");
    let text = format!(
        "[store]\npath = \"{}\"\n[checks.imex]\nenabled = {enabled}\nctl = \"/nonexistent/nvidia-imex-ctl\"\n",
        dir.path().join("node.db").display()
    );
    std::fs::write(&config, text).unwrap();
    (dir, config)
}

#[test]
fn the_prolog_says_the_mknod_in_dry_run_and_makes_nothing() {
    let (dir, config) = node(true);
    let stderr = prolog(&dir.path().join("root"), &config, true);
    assert!(
        stderr.contains("dry-run: mknod /dev/nvidia-caps-imex-channels/channel0 c 511 0"),
        "{stderr}"
    );
    assert!(!dir.path().join("root").join(CHANNEL).exists());
}

#[test]
fn the_prolog_makes_the_missing_channel_only_on_a_node_in_a_domain() {
    let (dir, config) = node(false);
    let stderr = prolog(&dir.path().join("root"), &config, false);
    assert!(!stderr.contains("imex:"), "{stderr}");
    assert!(!dir
        .path()
        .join("root/dev/nvidia-caps-imex-channels")
        .exists());
    let (dir, config) = node(true);
    let stderr = prolog(&dir.path().join("root"), &config, false);
    if stderr.contains("imex: cannot make") {
        // No CAP_MKNOD in this test run: the directory is there, the
        // refusal said.
        assert!(dir
            .path()
            .join("root/dev/nvidia-caps-imex-channels")
            .is_dir());
        return;
    }
    assert!(
        stderr.contains("imex: made /dev/nvidia-caps-imex-channels/channel0 (c 511 0)"),
        "{stderr}"
    );
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::symlink_metadata(dir.path().join("root").join(CHANNEL)).unwrap();
    assert!(meta.file_type().is_char_device());
}
