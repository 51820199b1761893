-- The head node's lemon database: scheduler and node history, and lemon decisions.
-- Times are unix seconds; NULL where Slurm said `Unknown`.

-- Every node name seen anywhere, so that the big tables hold integers.
CREATE TABLE nodes (
    id    INTEGER PRIMARY KEY,
    name  TEXT NOT NULL UNIQUE
);

-- One row per run of a job allocation (`sacct -X -D`): a requeued job has one
-- row per run. Only runs that have ended are stored; a run never changes
-- once ended, so re-ingesting a window inserts nothing new.
CREATE TABLE jobs (
    id                 INTEGER PRIMARY KEY,
    job_id_raw         INTEGER NOT NULL,   -- JobIDRaw: unique per array task / het component
    job_id             TEXT    NOT NULL,   -- JobID as users see it: 123_4, 123+1
    submit_time        INTEGER,
    start_time         INTEGER,            -- NULL: never started
    end_time           INTEGER NOT NULL,
    elapsed_s          INTEGER,
    state              TEXT    NOT NULL,   -- COMPLETED, FAILED, NODE_FAIL, CANCELLED, REQUEUED, ...
    cancelled_by       INTEGER,            -- uid from `CANCELLED by N`
    exit_code          INTEGER,
    exit_signal        INTEGER,
    derived_exit_code  INTEGER,
    derived_signal     INTEGER,
    partition          TEXT,
    user               TEXT,
    nnodes             INTEGER NOT NULL,
    nodelist           TEXT    NOT NULL,   -- hostlist as sacct wrote it
    node               INTEGER,            -- nodes.id of a one-node run; NULL: see job_nodes
    gpus               INTEGER,            -- gres/gpu=N of AllocTRES (whole job); NULL if absent
    alloc_tres         TEXT
);
-- A run is its job id and its end (two runs of one job do not end in the
-- same second). End first: the same index serves time ranges.
CREATE UNIQUE INDEX jobs_run ON jobs(end_time, job_id_raw);
-- Scoring reads the failed runs of the window often; they are a few percent of all.
CREATE INDEX jobs_failed ON jobs(end_time) WHERE state IN ('FAILED', 'NODE_FAIL');

-- The nodes of runs on several nodes, expanded from the hostlist (jobs.id,
-- nodes.id). One-node runs, most of them, keep their node in jobs.node:
-- a row here for each of them doubled the cost of a million-job ingest, as
-- did foreign keys (lemon writes both sides in one transaction).
CREATE TABLE job_nodes (
    job   INTEGER NOT NULL,
    node  INTEGER NOT NULL,
    PRIMARY KEY (job, node)
) WITHOUT ROWID;

-- Every (run, node) pair, whatever the number of nodes: what reports join on.
CREATE VIEW job_nodes_all AS
    SELECT id AS job, node FROM jobs WHERE node IS NOT NULL
    UNION ALL
    SELECT job, node FROM job_nodes;

-- Out-of-service periods (`sacctmgr show event`): DOWN/DRAIN with reason.
CREATE TABLE node_events (
    node        INTEGER NOT NULL REFERENCES nodes(id),
    start_time  INTEGER NOT NULL,
    end_time    INTEGER,                   -- NULL: still out
    state       TEXT NOT NULL,
    reason      TEXT NOT NULL,
    user        TEXT,
    owner       TEXT NOT NULL,             -- health_check | lemon | slurm | administrator | none
    PRIMARY KEY (node, start_time)
);
CREATE INDEX node_events_start ON node_events(start_time);

-- The compute nodes' spool records: findings, events (XIDs), task exits, ...
CREATE TABLE health (
    node        INTEGER NOT NULL REFERENCES nodes(id),
    epoch       TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    kind        TEXT    NOT NULL,          -- finding | event | job_start | job_end | task_exit | state_change
    check_name  TEXT,
    entity      TEXT,
    code        TEXT,
    severity    TEXT,
    job_id      TEXT,
    step_id     TEXT,
    task_id     INTEGER,
    exit_code   INTEGER,
    signal      INTEGER,
    detail      TEXT,
    PRIMARY KEY (node, epoch, seq)
);
CREATE INDEX health_at ON health(at);
CREATE INDEX health_job ON health(job_id) WHERE job_id IS NOT NULL;

-- How far each node's spool export has been read.
CREATE TABLE spool_progress (
    node      INTEGER PRIMARY KEY REFERENCES nodes(id),
    epoch     TEXT    NOT NULL,
    last_seq  INTEGER NOT NULL
);

-- Repair tickets.
CREATE TABLE tickets (
    id          INTEGER PRIMARY KEY,
    node        INTEGER NOT NULL REFERENCES nodes(id),
    opened_at   INTEGER NOT NULL,
    closed_at   INTEGER,
    note        TEXT NOT NULL DEFAULT '',
    close_note  TEXT,
    source      TEXT NOT NULL,             -- cli | csv:<file> | hand-over
    UNIQUE (node, opened_at)
);

-- Nodes that jobs excluded (`squeue -o %x`), as first seen.
CREATE TABLE exclusions (
    job_id      TEXT    NOT NULL,
    node        INTEGER NOT NULL REFERENCES nodes(id),
    first_seen  INTEGER NOT NULL,
    PRIMARY KEY (job_id, node)
) WITHOUT ROWID;

-- Where each incremental source stopped: `sacct` (end of the last window),
-- `jobs_until` (latest end time of the job history, whatever its source).
CREATE TABLE watermarks (
    source      TEXT PRIMARY KEY,
    value       INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- One row per ingest of a source, for the report and for staleness checks.
CREATE TABLE ingests (
    id           INTEGER PRIMARY KEY,
    started_at   INTEGER NOT NULL,
    source       TEXT    NOT NULL,
    rows_read    INTEGER NOT NULL,
    inserted     INTEGER NOT NULL,
    skipped      INTEGER NOT NULL,         -- malformed rows
    ok           INTEGER NOT NULL,
    error        TEXT
);

-- Who the scoring blamed for each failed run in the window (recomputed each score).
CREATE TABLE attributions (
    job          INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    node         INTEGER REFERENCES nodes(id),   -- NULL: unattributed
    rule         TEXT NOT NULL,            -- finding | node_event | first_task_exit | single_node | user_error | unattributed
    category     TEXT NOT NULL,            -- check name (xid, ecc, pcie, ib, mounts, ...), slurm_event, task_exit, unknown, user
    detail       TEXT,
    computed_at  INTEGER NOT NULL
);
CREATE INDEX attributions_node ON attributions(node);

-- Every lemon decision: drains, skips, breaker holds, releases.
CREATE TABLE decisions (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    node      INTEGER NOT NULL REFERENCES nodes(id),
    action    TEXT NOT NULL,               -- drained | would_drain | skipped_out_of_service | held_by_breaker | released | drain_failed
    reason    TEXT NOT NULL,
    signals   TEXT NOT NULL DEFAULT '{}',  -- JSON: signal values and rules tripped
    jobs      TEXT NOT NULL DEFAULT '[]',  -- JSON: job ids counted against the node
    dry_run   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX decisions_node ON decisions(node, at);
