-- Per-rank summaries of failed jobs' NCCL flight-recorder dumps (issue 32),
-- as the epilog of each node exported them (spool kind `flight_recorder`).
-- The raw dumps stay on the nodes; `lemon trace JOBID` and the attribution
-- analyse these. One row per (job, node, rank): a second collection of the
-- same dump (the plugin's and slurm.conf's epilog both ran) replaces it.
CREATE TABLE flight_recorder (
    id       INTEGER PRIMARY KEY,
    job_id   TEXT    NOT NULL,   -- SLURM_JOB_ID as the node saw it (jobs.job_id_raw)
    node     INTEGER NOT NULL,   -- nodes.id of the node that held the dump
    rank     INTEGER,            -- NULL: a problem with the job's directory
    at       INTEGER NOT NULL,   -- when the epilog collected it, Unix seconds
    summary  TEXT,               -- flight_recorder::RankSummary as JSON; NULL: not read
    error    TEXT                -- why the dump gave no summary
);
CREATE UNIQUE INDEX flight_recorder_rank ON flight_recorder(job_id, node, rank);
