//! `lemonade-plant-dumps PREFIX RANKS HUNG FIRST COUNT`: writes the NCCL
//! flight-recorder dumps of ranks `FIRST..FIRST+COUNT` of a `RANKS`-rank
//! job whose rank `HUNG` never entered the last all-reduce, as PyTorch
//! names them (`<PREFIX><rank>`). The end-to-end tests run it inside a job,
//! as the job's user, in place of a training process that hangs.

use flight_recorder::generate::{job_dumps, JobSpec};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [prefix, ranks, hung, first, count] = &args[..] else {
        eprintln!("usage: lemonade-plant-dumps PREFIX RANKS HUNG FIRST COUNT");
        return ExitCode::from(2);
    };
    let number = |name: &str, text: &str| -> Result<u32, String> {
        text.parse().map_err(|e| format!("{name} `{text}`: {e}"))
    };
    let parsed = (|| {
        Ok::<_, String>((
            number("RANKS", ranks)?,
            number("HUNG", hung)?,
            number("FIRST", first)?,
            number("COUNT", count)?,
        ))
    })();
    let (ranks, hung, first, count) = match parsed {
        Ok(v) => v,
        Err(e) => {
            eprintln!("lemonade-plant-dumps: {e}");
            return ExitCode::from(2);
        }
    };
    let spec = JobSpec {
        ranks,
        hung_rank: Some(hung),
        ..Default::default()
    };
    for (rank, bytes) in job_dumps(&spec) {
        if rank < first || rank >= first.saturating_add(count) {
            continue;
        }
        let path = format!("{prefix}{rank}");
        if let Err(e) = std::fs::write(&path, bytes) {
            eprintln!("lemonade-plant-dumps: {path}: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
