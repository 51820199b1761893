-- Task exits in milliseconds. The failing task of a multi-node job and the
-- tasks Slurm kills right after it usually end within the same second; the
-- first failing task decides which node is blamed, so seconds are not enough.
-- Unix milliseconds of a `task_exit` record; NULL for other kinds and for
-- records of older nodes (readers take `at * 1000`).
ALTER TABLE health ADD COLUMN at_ms INTEGER;
