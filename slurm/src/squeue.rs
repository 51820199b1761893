//! The running jobs and their nodes, as `squeue` lists them: what `lemon
//! watch --live` polls. One call for the whole cluster.

use crate::command::{CommandError, SlurmCommands};
use crate::hostlist;

/// `%i`: the job id as written (`4419021_7` for an array task); `%D` its
/// node count; `%N` its nodes as a hostlist expression.
pub const RUNNING_FORMAT: &str = "%i|%D|%N";

/// One running job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningJob {
    pub id: String,
    /// Node names, expanded from the hostlist, in Slurm's order.
    pub nodes: Vec<String>,
}

/// What `squeue` listed; lines that are not in [`RUNNING_FORMAT`] are kept
/// with their 1-based number, never guessed at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunningJobs {
    pub jobs: Vec<RunningJob>,
    pub unparsed: Vec<(usize, String)>,
}

/// The jobs running now (`squeue -h -t RUNNING -o %i|%D|%N`).
pub fn running_jobs(cmds: &SlurmCommands) -> Result<RunningJobs, CommandError> {
    let out = cmds.run("squeue", &["-h", "-t", "RUNNING", "-o", RUNNING_FORMAT])?;
    Ok(parse_running(&out.stdout))
}

/// Parses [`RUNNING_FORMAT`] lines. A line whose hostlist does not expand
/// to its node count is refused: a cut-off `%N` must not make a smaller job.
pub fn parse_running(text: &str) -> RunningJobs {
    let mut parsed = RunningJobs::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Some(job) => parsed.jobs.push(job),
            None => parsed.unparsed.push((index + 1, line.to_string())),
        }
    }
    parsed
}

fn parse_line(line: &str) -> Option<RunningJob> {
    let mut fields = line.trim().splitn(3, '|');
    let (id, count, list) = (fields.next()?, fields.next()?, fields.next()?);
    let count: usize = count.trim().parse().ok()?;
    let valid_id = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '_' | '+' | '[' | ']' | '-'));
    if !valid_id {
        return None;
    }
    let nodes = hostlist::expand(list.trim()).ok()?;
    (nodes.len() == count).then(|| RunningJob {
        id: id.to_string(),
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_jobs_expand_their_hostlists_and_odd_lines_are_kept_apart() {
        let text = "4419021_7|3|gpu[001-003]\n77|1|gpu009\n\n78|2|gpu010\n|x|y\n79|1|gpu[1-\n";
        let parsed = parse_running(text);
        assert_eq!(parsed.jobs.len(), 2);
        assert_eq!(parsed.jobs[0].id, "4419021_7");
        assert_eq!(parsed.jobs[0].nodes, ["gpu001", "gpu002", "gpu003"]);
        assert_eq!(parsed.jobs[1].nodes, ["gpu009"]);
        let lines: Vec<usize> = parsed.unparsed.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [4, 5, 6], "{:?}", parsed.unparsed);
    }
}
