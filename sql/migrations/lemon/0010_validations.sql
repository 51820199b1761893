-- Proactive validation results (issue 31): one row per `healthcheck
-- validate` run a node exported (spool kind "validation"), and its metrics.
-- `lemon run` learns each SKU's bands from the recent passed rows, picks
-- whom to validate next from each node's latest row, and `lemon report`
-- shows it.
CREATE TABLE validations (
    id        INTEGER PRIMARY KEY,
    node      INTEGER NOT NULL REFERENCES nodes(id),
    epoch     TEXT    NOT NULL,            -- the node's export, as in `health`
    seq       INTEGER NOT NULL,
    at        INTEGER NOT NULL,            -- unix seconds, by the node's clock
    job_id    TEXT    NOT NULL,            -- the Slurm validation job
    sku       TEXT    NOT NULL,
    passed    INTEGER NOT NULL,            -- 1: the node's verdict was a pass
    failing   TEXT    NOT NULL,            -- JSON array of the failing metrics' lines
    criteria  TEXT    NOT NULL,            -- which criteria the node judged by
    UNIQUE (node, epoch, seq)
);
CREATE INDEX validations_at ON validations(at);
CREATE INDEX validations_node_at ON validations(node, at);

CREATE TABLE validation_metrics (
    validation  INTEGER NOT NULL REFERENCES validations(id),
    metric      TEXT    NOT NULL,
    value       REAL    NOT NULL,
    PRIMARY KEY (validation, metric)
) WITHOUT ROWID;
