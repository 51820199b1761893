-- The node sampler's metric samples (issue 33), as the nodes' spool exports
-- carry them: what `lemon watch` feeds the detector for running jobs.
-- Pruned by `lemon ingest` an hour after the job ended on the node, and
-- after two hours in any case: the table holds the running jobs' recent
-- samples only.
CREATE TABLE samples (
    job_id  TEXT    NOT NULL,
    node    INTEGER NOT NULL REFERENCES nodes(id),
    metric  TEXT    NOT NULL,
    at      INTEGER NOT NULL,              -- unix seconds, by the node's clock
    value   REAL    NOT NULL,
    PRIMARY KEY (job_id, node, metric, at)
) WITHOUT ROWID;
CREATE INDEX samples_at ON samples(at);
