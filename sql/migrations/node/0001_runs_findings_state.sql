-- One row per healthcheck run (periodic, prolog, epilog, manual).
CREATE TABLE runs (
    id           INTEGER PRIMARY KEY,
    started_at   INTEGER NOT NULL,           -- unix seconds
    duration_ms  INTEGER NOT NULL,
    trigger      TEXT    NOT NULL,           -- periodic | prolog | epilog | manual | spank
    profile      TEXT    NOT NULL,           -- quick | periodic | full | epilog
    job_id       TEXT,
    worst        TEXT    NOT NULL,           -- ok | unknown | warning | drain | down
    exit_code    INTEGER NOT NULL
);
CREATE INDEX runs_started_at ON runs(started_at);

-- Every finding of every run, ok ones included (they make the history readable).
CREATE TABLE findings (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    check_name  TEXT NOT NULL,
    entity      TEXT NOT NULL,
    pci_bus_id  TEXT,
    uuid        TEXT,
    code        TEXT NOT NULL,
    severity    TEXT NOT NULL,
    expected    TEXT,
    actual      TEXT,
    action      TEXT NOT NULL,
    message     TEXT NOT NULL
);
CREATE INDEX findings_run ON findings(run_id);
CREATE INDEX findings_check_severity ON findings(check_name, severity);

-- What a check carries from one run to the next: counters for deltas, cursors.
CREATE TABLE check_state (
    check_name  TEXT PRIMARY KEY,
    state       TEXT NOT NULL,               -- JSON, owned by the check
    updated_at  INTEGER NOT NULL
);

-- Things that happen once, recorded once: an XID line, a job start or end.
CREATE TABLE events (
    id           INTEGER PRIMARY KEY,
    check_name   TEXT NOT NULL,
    entity       TEXT NOT NULL,
    code         TEXT NOT NULL,
    severity     TEXT NOT NULL,
    occurred_at  INTEGER NOT NULL,           -- unix seconds
    boot_id      TEXT NOT NULL DEFAULT '',
    seq          INTEGER NOT NULL DEFAULT 0, -- kmsg sequence number, or 0
    detail       TEXT NOT NULL DEFAULT '',
    recorded_at  INTEGER NOT NULL,
    UNIQUE (check_name, boot_id, seq, code, entity)
);
CREATE INDEX events_occurred_at ON events(occurred_at);
