//! `lemonade-independent-traces SEED OUT.csv TRUTH.json [--jobs N]`: writes a
//! `lemon watch --replay` file of training jobs generated without reading the
//! detector (issue 45), and the truth of its planted faults as JSON.

use lemonade_tests::independent_traces::{generate, truth_json, IndependentSpec};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;

/// Never follow a symlink an attacker may have planted at the output path.
fn create(path: &str) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

fn run(args: &[String]) -> Result<(), String> {
    let (seed, out, truth, rest) = match args {
        [seed, out, truth, rest @ ..] => (seed, out, truth, rest),
        _ => {
            return Err(
                "usage: lemonade-independent-traces SEED OUT.csv TRUTH.json [--jobs N]".into(),
            )
        }
    };
    let seed: u64 = seed.parse().map_err(|e| format!("SEED `{seed}`: {e}"))?;
    let mut spec = IndependentSpec::new(seed);
    match rest {
        [] => {}
        [flag, n] if flag == "--jobs" => {
            spec.jobs = n.parse().map_err(|e| format!("--jobs `{n}`: {e}"))?;
            if spec.jobs > 10_000 {
                return Err(format!("--jobs {} is over the cap of 10000", spec.jobs));
            }
        }
        _ => return Err(format!("unexpected arguments {rest:?}")),
    }
    let file = create(out).map_err(|e| format!("{out}: {e}"))?;
    let mut w = BufWriter::new(file);
    let jobs = generate(&spec, &mut w).map_err(|e| format!("{out}: {e}"))?;
    w.flush().map_err(|e| format!("{out}: {e}"))?;
    let mut t = create(truth).map_err(|e| format!("{truth}: {e}"))?;
    t.write_all(truth_json(&jobs).as_bytes())
        .map_err(|e| format!("{truth}: {e}"))?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lemonade-independent-traces: {e}");
            ExitCode::from(2)
        }
    }
}
