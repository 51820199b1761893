-- The job's name (sacct's JobName), where the history has it: the blame
-- model compares a failure with the same user's or the same job name's
-- failures on other nodes. NULL for rows ingested without the column.
ALTER TABLE jobs ADD COLUMN job_name TEXT;
