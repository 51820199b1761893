-- Proactive validation (issue 31): each `healthcheck validate` run on this
-- node, its verdict and the metrics its benchmarks printed.
CREATE TABLE validation_runs (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,              -- unix seconds, when the suite ended
    job_id    TEXT,                          -- the Slurm job it ran in, if any
    sku       TEXT NOT NULL,                 -- validate::sku, or [validate] sku
    verdict   TEXT NOT NULL,                 -- pass | fail | unknown
    criteria  TEXT NOT NULL,                 -- `learned <generated_at>` or `static floors`
    failing   TEXT NOT NULL DEFAULT '[]',    -- JSON list of lines, `avg_busbw 312<371 GB/s (learned)`
    notes     TEXT NOT NULL DEFAULT '[]'     -- JSON list: benchmarks not run, criteria ignored
);
CREATE INDEX validation_runs_at ON validation_runs(at);

CREATE TABLE validation_metrics (
    run_id     INTEGER NOT NULL REFERENCES validation_runs(id) ON DELETE CASCADE,
    benchmark  TEXT NOT NULL,                -- [[validate.benchmark]] name
    metric     TEXT NOT NULL,                -- as exported: `avg_busbw.all_gather`
    value      REAL NOT NULL,
    unit       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, metric)
);
