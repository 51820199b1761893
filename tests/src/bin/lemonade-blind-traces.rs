//! Writes one seed of the blind (held-out) metric traces of issue 45:
//! `lemonade-blind-traces SEED OUT.csv [JOBS]` writes the replay file and
//! `OUT.csv.truth.tsv` (job, nodes, fault kind, faulty node, onset, subtle, confounders).

use std::fs::File;
use std::io::{BufWriter, Write};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: lemonade-blind-traces SEED OUT.csv [JOBS]".into());
    }
    let mut spec = lemonade_tests::blind_traces::IndependentSpec::new(args[1].parse()?);
    if let Some(jobs) = args.get(3) {
        spec.jobs = jobs.parse()?;
    }
    let mut out = BufWriter::new(File::create(&args[2])?);
    let truth = lemonade_tests::blind_traces::generate(&spec, &mut out)?;
    out.flush()?;
    let mut t = BufWriter::new(File::create(format!("{}.truth.tsv", args[2]))?);
    writeln!(t, "job\tnodes\tkind\tnode\tonset\tsubtle\tconfounders")?;
    for j in &truth {
        let (kind, node, onset, subtle) = j
            .fault
            .as_ref()
            .map_or(("-".to_string(), "-".to_string(), 0, false), |f| {
                (f.kind.clone(), f.node.clone(), f.onset, f.subtle)
            });
        let c = j.confounders.join(",");
        writeln!(
            t,
            "{}\t{}\t{kind}\t{node}\t{onset}\t{subtle}\t{c}",
            j.job,
            j.nodes.len()
        )?;
    }
    t.flush()?;
    Ok(())
}
