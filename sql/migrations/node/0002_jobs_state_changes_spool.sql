-- Jobs seen on this node by the prolog (start) and the epilog (end).
CREATE TABLE jobs (
    job_id       TEXT PRIMARY KEY,
    user         TEXT,
    started_at   INTEGER,                    -- unix seconds, from the prolog
    ended_at     INTEGER,                    -- unix seconds, from the epilog
    exit_code    INTEGER,                    -- from SLURM_JOB_EXIT_CODE2 (`exit:signal`)
    signal       INTEGER
);
CREATE INDEX jobs_started_at ON jobs(started_at);

-- Every change of the node's Slurm state that the policy made or tried to make.
CREATE TABLE state_changes (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,              -- unix seconds
    run_id    INTEGER,                       -- the run that decided it (no FK: runs are pruned)
    action    TEXT NOT NULL,                 -- drain | down | resume
    reason    TEXT NOT NULL,
    causes    TEXT NOT NULL DEFAULT '[]',    -- JSON list of {check, code, entity}
    outcome   TEXT NOT NULL,                 -- applied | dry-run | failed | breaker | skipped
    detail    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX state_changes_at ON state_changes(at);

-- What the policy carries between runs (streaks, what we drained for), as JSON.
CREATE TABLE policy_state (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    state  TEXT NOT NULL
);

-- The spool export's numbering: `epoch` is fixed when this database is created,
-- `next_seq` only grows, `task_exits_offset` is how far the task-exits file was read.
CREATE TABLE spool_state (
    id                 INTEGER PRIMARY KEY CHECK (id = 1),
    epoch              TEXT NOT NULL,
    next_seq           INTEGER NOT NULL,
    exported_until     INTEGER NOT NULL DEFAULT 0,
    task_exits_offset  INTEGER NOT NULL DEFAULT 0
);
