-- sqlq schema 8 (SQLite): a job's steps are copied onto its record (migration 0004) by a
-- trigger on the delete of its steps, no longer by the job's own delete trigger.
--
-- SQLite runs a trigger in a frame of its own, allocated and zeroed at every firing,
-- sized for every register of the body, even when the WHEN skips it: sqlq_forget_steps
-- of 0004 (an UPDATE of sqlq_finished, whose columns it holds twice, and a JSON
-- subquery) cost every delete of a job about 4k instructions (bench_callgrind.py: of a
-- job without steps, nearly every job), for a body that runs only for a job with steps.
-- Now its body is the one small DELETE of the job's steps, and the copy is made by
-- sqlq_keep_steps, whose frame exists only while steps are deleted: before the first of
-- them goes, it writes the whole list (the later rows find the record's steps set), in
-- the order and the form 0004 wrote it. Only for a job already gone (its delete fired
-- the DELETE): a step deleted otherwise is not a finished job's. A job deleted before its
-- record (delete_linked_job, which returns the steps itself) still finds no record.
DROP TRIGGER sqlq_forget_steps;
CREATE TRIGGER sqlq_forget_steps AFTER DELETE ON sqlq_jobs
WHEN old.steps > 0
BEGIN
    DELETE FROM sqlq_steps WHERE job_id = old.id;
END;

CREATE TRIGGER sqlq_keep_steps BEFORE DELETE ON sqlq_steps
WHEN NOT EXISTS (SELECT 1 FROM sqlq_jobs WHERE id = old.job_id)
BEGIN
    UPDATE sqlq_finished
       SET steps = (SELECT json_group_array(json_object('kind', kind, 'name', name,
                                                        'value', json(value), 'at', done_at))
                      FROM sqlq_steps WHERE job_id = old.job_id)
     WHERE id = old.job_id AND steps IS NULL;
END;
