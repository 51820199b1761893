-- What `lemon watch --live` called (issue 33): the outlier node of a
-- running job, what was done about it, and the evidence. One row per job,
-- node and mode: a dry run does not stand in for a real drain later.
CREATE TABLE watch_detections (
    id           INTEGER PRIMARY KEY,
    at           INTEGER NOT NULL,   -- unix seconds lemon acted
    job          TEXT NOT NULL,      -- the Slurm job id, as squeue wrote it
    node         TEXT NOT NULL,      -- the Slurm node name
    detected_at  INTEGER NOT NULL,   -- the sample time that closed the call
    metrics      TEXT NOT NULL,      -- JSON array, most sensitive first
    score        REAL NOT NULL,
    action       TEXT NOT NULL,      -- drained | would_drain | drain_failed | skipped_... | held_by_breaker
    reason       TEXT NOT NULL,      -- `lemon: OUTLIER <metric> job <id>`
    evidence     TEXT NOT NULL,      -- JSON: per metric the node's value and its peers' median
    dry_run      INTEGER NOT NULL,
    UNIQUE (job, node, dry_run)
);
CREATE INDEX watch_detections_at ON watch_detections (at);
