-- The nodes of a run on several nodes, packed with the run: their ids
-- (nodes.id) in ascending order, four bytes each, big-endian; an empty
-- blob for a run without nodes. NULL for one-node runs (jobs.node) and for
-- rows that a writer other than `lemon ingest` left without it (readers
-- then look in job_nodes).
--
-- Scoring and the reliability report read every run of their window with
-- its nodes: one job_nodes row per node slot (8.5 million in a month of a
-- large-job-heavy fleet) cost them most of their time; a blob per run is
-- read with the run. job_nodes stays, for SQL that joins on it.
ALTER TABLE jobs ADD COLUMN node_ids BLOB;
UPDATE jobs SET node_ids = coalesce(
    (SELECT unhex(group_concat(printf('%08X', node), '' ORDER BY node))
     FROM job_nodes WHERE job = jobs.id),
    x'')
WHERE node IS NULL;
