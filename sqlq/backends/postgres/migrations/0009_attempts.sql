-- sqlq schema 9 on PostgreSQL: every failed attempt of a job, with its error and
-- traceback (the SQLite file's schema 8 says what is written when, and the bounds).
-- The trigger's WHEN clause is evaluated on the row being deleted: a job that never
-- failed (the common case) queues no trigger event and never reads this table. ADD
-- COLUMN with a constant default rewrites no row.

ALTER TABLE sqlq_jobs ADD COLUMN failures integer NOT NULL DEFAULT 0;  -- attempts written

CREATE TABLE sqlq_attempts (
    job_id     bigint  NOT NULL,   -- the job (ids are never reused)
    attempt    integer NOT NULL,   -- the run: the job's reserves when it ran (1 = first)
    started_at bigint  NOT NULL,   -- ms since the epoch
    duration   bigint  NOT NULL,   -- ms the run took
    host       text    NOT NULL,   -- the worker's host name
    pid        integer,            -- and process id
    outcome    text    NOT NULL,   -- retried, buried, lost
    error      text    NOT NULL,   -- exception type, exit status, 'timed out', or ''
    message    text    NOT NULL,   -- one line: what a burial keeps as its reason
    traceback  text    NOT NULL,   -- the traceback, or a command's stderr tail ('' if none)
    PRIMARY KEY (job_id, attempt)
);

CREATE FUNCTION sqlq_forget_attempts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    DELETE FROM sqlq_attempts WHERE job_id = OLD.id;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_forget_attempts AFTER DELETE ON sqlq_jobs
FOR EACH ROW
WHEN (OLD.failures > 0)
EXECUTE FUNCTION sqlq_forget_attempts();
