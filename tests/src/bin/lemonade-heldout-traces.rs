//! `lemonade-heldout-traces SEED OUT.csv TRUTH.json [--jobs N]`: writes one
//! seed of the held-out metric traces (issue 45) as a `lemon watch --replay`
//! file, and its truth (jobs, faulty node, onset, confounders) as JSON.

use lemonade_tests::heldout_traces::{generate, truth_json, IndependentSpec};
use std::process::ExitCode;

const USAGE: &str = "usage: lemonade-heldout-traces SEED OUT.csv TRUTH.json [--jobs N]";

fn run(args: &[String]) -> Result<(), String> {
    let (seed, csv, truth, rest) = match args {
        [seed, csv, truth, rest @ ..] => (seed, csv, truth, rest),
        _ => return Err(USAGE.to_string()),
    };
    let seed: u64 = seed.parse().map_err(|e| format!("SEED `{seed}`: {e}"))?;
    let mut spec = IndependentSpec::new(seed);
    match rest {
        [] => {}
        [flag, n] if flag == "--jobs" => {
            spec.jobs = n.parse().map_err(|e| format!("--jobs `{n}`: {e}"))?;
        }
        _ => return Err(USAGE.to_string()),
    }
    let file = std::fs::File::create(csv).map_err(|e| format!("{csv}: {e}"))?;
    let jobs =
        generate(&spec, &mut std::io::BufWriter::new(file)).map_err(|e| format!("{csv}: {e}"))?;
    std::fs::write(truth, truth_json(&jobs)).map_err(|e| format!("{truth}: {e}"))?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lemonade-heldout-traces: {e}");
            ExitCode::from(2)
        }
    }
}
