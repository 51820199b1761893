-- What a failed job's own output said (issue 36): the verdict of its
-- stdout and stderr tails against the signature catalog, read once at
-- ingest. No row: no readable log, and blame uses the exit-code model.
CREATE TABLE job_evidence (
    job        INTEGER PRIMARY KEY,   -- jobs.id
    verdict    TEXT NOT NULL,         -- user | hardware | hardware_unlocalized | unknown
    node       TEXT,                  -- the node blamed (name), for `hardware`
    evidence1  TEXT,                  -- the deciding line, sanitised, at most 200 chars
    evidence2  TEXT
);
