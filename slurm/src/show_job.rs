//! The output files of jobs that slurmctld still holds (issue 36).
//!
//! Slurm before 23.02 has no `StdOut`/`StdErr` in sacct: the only record of
//! where a job wrote is slurmctld's, which keeps a finished job for
//! `MinJobAge` (300 s by default). [`held_job_ids`] lists the jobs it holds
//! (`squeue --states=all`: ids only, one per line) and [`job_files`] asks
//! `scontrol show job ID` for one of them.
//!
//! The multi-line form of `scontrol show job` is read, not `-o`: it prints
//! `StdErr=` and `StdOut=` each on a line of its own, so a path with blanks
//! stays whole. A user can put line breaks into their own job's name or
//! comment, and so fake lines in their own record only, never in another
//! job's (one job is asked for at a time); the last `StdOut=` line of the
//! record is taken, and scontrol prints the real one after the name. The
//! caller still reads a log only as the job's user.
//!
//! scontrol expands `%A %a %j %u %x` itself (22.05 and later) and leaves
//! the rest; [`expand_pattern`] does the remainder from sacct's facts and
//! refuses what it cannot know.

use crate::command::{CommandError, SlurmCommands};
use std::collections::BTreeSet;
use thiserror::Error;

/// Where one job's output went, as scontrol printed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFiles {
    pub std_out: Option<String>,
    pub std_err: Option<String>,
}

/// The ids of every job slurmctld holds, finished ones included.
pub fn held_job_ids(cmds: &SlurmCommands) -> Result<BTreeSet<i64>, CommandError> {
    let out = cmds.run("squeue", &["--noheader", "--states=all", "--format=%A"])?;
    Ok(parse_job_ids(&out.stdout))
}

/// One id per line; anything else is ignored.
pub fn parse_job_ids(text: &str) -> BTreeSet<i64> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// `scontrol show job ID`'s files; `None` when slurmctld no longer has it.
pub fn job_files(cmds: &SlurmCommands, job_id: i64) -> Result<Option<JobFiles>, CommandError> {
    let id = job_id.to_string();
    match cmds.run("scontrol", &["show", "job", &id]) {
        Ok(out) => Ok(parse_job_files(&out.stdout, job_id)),
        // Purged between squeue and now.
        Err(CommandError::Failed { stderr, .. }) if stderr.contains("Invalid job id") => Ok(None),
        Err(e) => Err(e),
    }
}

/// The files of the record of `job_id` in multi-line `scontrol show job`
/// output (an array's id prints every task's record); `None` when no record
/// is that job's. Where faked lines make two records claim it, the last
/// wins: every record of one answer is the same user's. An empty value or
/// `(null)` is no file.
pub fn parse_job_files(text: &str, job_id: i64) -> Option<JobFiles> {
    let mut found = None;
    let mut current: Option<JobFiles> = None;
    for line in text.lines() {
        // Records start at the left margin; their fields are indented.
        if let Some(rest) = line.strip_prefix("JobId=") {
            if let Some(done) = current.take() {
                found = Some(done);
            }
            let id = rest.split_whitespace().next().and_then(|s| s.parse().ok());
            current = (id == Some(job_id)).then(JobFiles::default);
            continue;
        }
        let Some(files) = current.as_mut() else {
            continue;
        };
        let field = line.trim_start();
        if let Some(v) = field.strip_prefix("StdOut=") {
            files.std_out = value(v);
        } else if let Some(v) = field.strip_prefix("StdErr=") {
            files.std_err = value(v);
        }
    }
    current.or(found)
}

fn value(v: &str) -> Option<String> {
    let v = v.trim_end_matches('\r');
    (!v.trim().is_empty() && v != "(null)").then(|| v.to_string())
}

/// What a filename pattern may stand for, from accounting: each `None`
/// refuses the patterns that need it.
#[derive(Debug, Clone, Default)]
pub struct PatternJob<'a> {
    /// `%j`: the job id.
    pub job_id: i64,
    /// `%A`, `%a`: an array job's id and task.
    pub array: Option<(i64, i64)>,
    /// `%u`: the user's name.
    pub user: Option<&'a str>,
    /// `%x`: the job's name.
    pub name: Option<&'a str>,
    /// `%N`: the node of the batch step, the allocation's first.
    pub first_node: Option<&'a str>,
}

/// Why a pattern was not expanded.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum PatternError {
    #[error("%{0} is not known for a finished job's batch output")]
    Unknown(char),
    #[error("a '%' ends the name")]
    Dangling,
    #[error("%{0} has no value for this job")]
    NoValue(char),
}

/// Expands Slurm's filename patterns (sbatch(1), "filename pattern") in a
/// batch job's output name: `%%`, `%A %a %j` (zero-padded to a width written
/// between `%` and the letter, as `%4j`), `%u %x %N`. The per-task and
/// per-step patterns (`%n %t %s %J %b`) and anything else are refused: a
/// guess would open some other file.
pub fn expand_pattern(name: &str, job: &PatternJob<'_>) -> Result<String, PatternError> {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
            // Slurm caps the width at 10 digits; so does this.
            width = (width * 10 + d as usize).min(10);
            chars.next();
        }
        let letter = chars.next().ok_or(PatternError::Dangling)?;
        let number = |n: i64| format!("{n:0width$}");
        let text = |v: Option<&str>| v.map(str::to_string).ok_or(PatternError::NoValue(letter));
        let expanded = match letter {
            '%' => "%".to_string(),
            'j' => number(job.job_id),
            'A' => number(job.array.ok_or(PatternError::NoValue(letter))?.0),
            'a' => number(job.array.ok_or(PatternError::NoValue(letter))?.1),
            'u' => text(job.user)?,
            'x' => text(job.name)?,
            'N' => text(job.first_node)?,
            other => return Err(PatternError::Unknown(other)),
        };
        out.push_str(&expanded);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Slurm 22.05's `scontrol show job 7` prints it (trimmed).
    const SHOW_JOB: &str = "JobId=7 JobName=two nodes
   UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A
   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)
   NodeList=node[1-2]
   BatchHost=node1
   Command=(null)
   WorkDir=/home/alice
   StdErr=/home/alice/run 7/err.txt
   StdIn=/dev/null
   StdOut=/home/alice/run 7/out.txt
   Power=

";

    #[test]
    fn a_held_jobs_files_are_read_whole_with_their_blanks() {
        assert_eq!(
            parse_job_files(SHOW_JOB, 7),
            Some(JobFiles {
                std_out: Some("/home/alice/run 7/out.txt".into()),
                std_err: Some("/home/alice/run 7/err.txt".into()),
            })
        );
    }

    #[test]
    fn another_jobs_record_or_no_record_gives_nothing() {
        assert_eq!(parse_job_files(SHOW_JOB, 8), None);
        assert_eq!(
            parse_job_files("slurm_load_jobs error: Invalid job id specified\n", 7),
            None
        );
        assert_eq!(parse_job_files("", 7), None);
    }

    #[test]
    fn a_fake_line_in_the_jobs_name_is_overridden_by_the_real_one_after_it() {
        let faked = SHOW_JOB.replace("JobName=two nodes", "JobName=x\n   StdOut=/etc/shadow");
        assert_eq!(
            parse_job_files(&faked, 7).unwrap().std_out.as_deref(),
            Some("/home/alice/run 7/out.txt")
        );
        // A faked record of another job is that other job's, never this one's.
        let faked = SHOW_JOB.replace(
            "JobName=two nodes",
            "x\nJobId=9 JobName=y\n   StdOut=/etc/shadow\nJobId=7 JobName=z",
        );
        assert_eq!(
            parse_job_files(&faked, 7).unwrap().std_out.as_deref(),
            Some("/home/alice/run 7/out.txt")
        );
    }

    #[test]
    fn an_array_answer_gives_the_asked_tasks_record() {
        let two = format!(
            "{}{}",
            SHOW_JOB
                .replace("run 7", "run 6")
                .replace("JobId=7", "JobId=6"),
            SHOW_JOB
        );
        assert_eq!(
            parse_job_files(&two, 6).unwrap().std_err.as_deref(),
            Some("/home/alice/run 6/err.txt")
        );
        assert_eq!(
            parse_job_files(&two, 7).unwrap().std_err.as_deref(),
            Some("/home/alice/run 7/err.txt")
        );
    }

    #[test]
    fn empty_and_null_values_are_no_file() {
        let text = "JobId=3 JobName=x\n   StdErr=\n   StdOut=(null)\n";
        assert_eq!(parse_job_files(text, 3), Some(JobFiles::default()));
    }

    #[test]
    fn held_ids_are_one_number_a_line() {
        let ids = parse_job_ids("12\n  13 \nnot a job\n\n14\n");
        assert_eq!(ids.into_iter().collect::<Vec<_>>(), vec![12, 13, 14]);
    }

    fn job() -> PatternJob<'static> {
        PatternJob {
            job_id: 42,
            array: Some((40, 2)),
            user: Some("alice"),
            name: Some("train"),
            first_node: Some("gpu001"),
        }
    }

    #[test]
    fn the_batch_patterns_expand_with_their_widths() {
        assert_eq!(
            expand_pattern("/s/%x-%j-%A_%a.%u.%N.out", &job()).unwrap(),
            "/s/train-42-40_2.alice.gpu001.out"
        );
        assert_eq!(
            expand_pattern("/s/%5j_%3a", &job()).unwrap(),
            "/s/00042_002"
        );
        assert_eq!(
            expand_pattern("/s/100%%.log", &job()).unwrap(),
            "/s/100%.log"
        );
        assert_eq!(expand_pattern("/s/plain", &job()).unwrap(), "/s/plain");
    }

    #[test]
    fn per_task_unknown_and_valueless_patterns_are_refused() {
        for (name, err) in [
            ("/s/%t.out", PatternError::Unknown('t')),
            ("/s/%n.out", PatternError::Unknown('n')),
            ("/s/%J.out", PatternError::Unknown('J')),
            ("/s/%q.out", PatternError::Unknown('q')),
            ("/s/out%", PatternError::Dangling),
            ("/s/out%12", PatternError::Dangling),
        ] {
            assert_eq!(expand_pattern(name, &job()), Err(err), "{name}");
        }
        let plain = PatternJob {
            job_id: 5,
            ..PatternJob::default()
        };
        assert_eq!(
            expand_pattern("/s/%A", &plain),
            Err(PatternError::NoValue('A'))
        );
        assert_eq!(
            expand_pattern("/s/%N", &plain),
            Err(PatternError::NoValue('N'))
        );
    }
}
