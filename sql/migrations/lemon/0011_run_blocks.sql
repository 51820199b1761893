-- Packed copies of the rows of `jobs`, 1024 row ids to a block (block =
-- id >> 10), in the format of lemon/src/db/run_blocks.rs. Scoring and the
-- reliability report read every run of a month: a million rows of sixteen
-- columns cost them half a second in SQLite alone, a thousand blobs next
-- to nothing.
--
-- A block that exists always equals its rows: any write to a row of
-- `jobs` drops that row's block and marks it stale, and `lemon ingest`
-- packs the stale blocks again before each commit. So every block that
-- holds rows is either packed here or listed in run_blocks_stale. Readers
-- read a stale block's rows themselves, and skip a packed block whose
-- ends (min_end to max_end) fall outside their window without reading it.
CREATE TABLE run_blocks (
    block   INTEGER PRIMARY KEY,
    min_end INTEGER NOT NULL,
    max_end INTEGER NOT NULL,
    data    BLOB NOT NULL
);
CREATE TABLE run_blocks_stale (
    block INTEGER PRIMARY KEY
);
-- A stale block has no packed copy to drop: the check spares a big
-- ingest two writes per row.
CREATE TRIGGER jobs_insert_drops_block AFTER INSERT ON jobs
WHEN NOT EXISTS (SELECT 1 FROM run_blocks_stale WHERE block = NEW.id >> 10) BEGIN
    DELETE FROM run_blocks WHERE block = NEW.id >> 10;
    INSERT OR IGNORE INTO run_blocks_stale(block) VALUES (NEW.id >> 10);
END;
CREATE TRIGGER jobs_update_drops_block AFTER UPDATE ON jobs BEGIN
    DELETE FROM run_blocks WHERE block IN (OLD.id >> 10, NEW.id >> 10);
    INSERT OR IGNORE INTO run_blocks_stale(block) VALUES (OLD.id >> 10), (NEW.id >> 10);
END;
CREATE TRIGGER jobs_delete_drops_block AFTER DELETE ON jobs BEGIN
    DELETE FROM run_blocks WHERE block = OLD.id >> 10;
    INSERT OR IGNORE INTO run_blocks_stale(block) VALUES (OLD.id >> 10);
END;
-- The runs stored before this migration: packed at the next ingest.
INSERT OR IGNORE INTO run_blocks_stale(block) SELECT DISTINCT id >> 10 FROM jobs;
