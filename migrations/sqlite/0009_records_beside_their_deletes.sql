-- sqlq schema 9 (SQLite): a job's record (migration 0004) no longer deletes its job; the
-- statements that write records delete the jobs themselves, in the same transaction
-- (queries.sql delete_ended_job, delete_ended_jobs), and a job's delete keeps no
-- statement journal.
--
-- SQLite runs an INSERT ... SELECT into a table with an INSERT trigger through a
-- temporary table (the trigger could change what the SELECT reads): sqlq_finish_job made
-- every record's insert open, fill and close one, about 18k instructions of the worker's
-- 214k delete-and-claim (bench_callgrind.py fast). Without it the insert writes straight
-- into sqlq_finished and the job's DELETE by id follows.
DROP TRIGGER sqlq_finish_job;

-- A job's DELETE inside a transaction (the worker's delete-and-claim, one commit a job)
-- copied every page it changed into a statement journal, because a trigger it fires could
-- fail half-way (migration 0006 says more): an UPDATE that may abort on a NULL, or any
-- call of a scalar function. OR IGNORE on the two UPDATEs below (neither sets a NULL or
-- changes a key, so it changes nothing else), and sqlq_keep_steps without scalar
-- functions, keep it from needing one: about 4k instructions a job.
DROP TRIGGER sqlq_forget_attempts;
CREATE TRIGGER sqlq_forget_attempts AFTER DELETE ON sqlq_jobs
WHEN old.failures > 0 OR old.state <> 2 AND old.state <> 4
BEGIN
    DELETE FROM sqlq_attempts WHERE old.failures > 0 AND job_id = old.id;
    UPDATE OR IGNORE "sqlq_job_counts_kept" SET n = n - 1
     WHERE old.state <> 2 AND old.state <> 4 AND tube = old.tube AND state = old.state
       AND urgent = (old.state = 0 AND old.priority < 1024);
END;

DROP TRIGGER sqlq_keep_last_id;
CREATE TRIGGER sqlq_keep_last_id AFTER DELETE ON sqlq_jobs
WHEN NOT EXISTS (SELECT 1 FROM sqlq_jobs WHERE id > old.id)
BEGIN
    UPDATE OR IGNORE sqlq_last_id SET id = old.id WHERE id < old.id;
END;

-- The steps and cursors of a finished job, copied onto its record as the job's delete
-- removes them (0008), now with aggregates and || only: a JSON array of four arrays in the
-- same row order, [kinds, names, values, times] (json_group_array quotes the names; the
-- values are JSON already). sqlq/steps.py recorded_as_dicts reads this form and the
-- array of {kind, name, value, at} objects that records written before (and PostgreSQL's)
-- hold.
DROP TRIGGER sqlq_keep_steps;
CREATE TRIGGER sqlq_keep_steps BEFORE DELETE ON sqlq_steps
WHEN NOT EXISTS (SELECT 1 FROM sqlq_jobs WHERE id = old.job_id)
BEGIN
    UPDATE sqlq_finished
       SET steps = (SELECT '[' || json_group_array(kind) || ',' || json_group_array(name)
                           || ',[' || group_concat(value, ',') || '],'
                           || json_group_array(done_at) || ']'
                      FROM sqlq_steps WHERE job_id = old.job_id)
     WHERE id = old.job_id AND steps IS NULL;
END;
