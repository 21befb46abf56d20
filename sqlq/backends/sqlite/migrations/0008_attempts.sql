-- sqlq schema 8: every failed attempt of a job, with its error and traceback.
--
-- A worker whose run of a job fails writes one row here in the transaction that
-- releases the job for a retry or buries it (outcome 'retried' or 'buried'), or, when
-- the job's reservation was lost meanwhile, in a transaction of its own ('lost').
-- A run that succeeds writes nothing: the success path (claim, delete) never touches
-- this table.
--
-- Bounded: the store keeps the last 10 attempts of a job (sqlq/attempts.py: KEPT) and
-- a traceback of at most 8 KiB (TRACEBACK_LIMIT); the rows of a job go with it
-- (trigger below), so the table holds only failures of jobs still in the file.
--
-- sqlq_jobs.failures counts the attempts written (trimmed ones too): it grows in the
-- transaction that writes each row, so the trigger that deletes a job's rows with it
-- fires only for a job that has some. A job run once and deleted, the common case,
-- is excluded by that WHEN clause on the row being deleted: no probe of this table.
-- ADD COLUMN with a constant default rewrites no row.

ALTER TABLE sqlq_jobs ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;

CREATE TABLE sqlq_attempts (
    job_id     INTEGER NOT NULL,   -- the job (ids are never reused)
    attempt    INTEGER NOT NULL,   -- the run: the job's reserves when it ran (1 = first)
    started_at INTEGER NOT NULL,   -- ms since the epoch
    duration   INTEGER NOT NULL,   -- ms the run took
    host       TEXT    NOT NULL,   -- the worker's host name
    pid        INTEGER,            -- and process id
    outcome    TEXT    NOT NULL,   -- retried, buried, lost
    error      TEXT    NOT NULL,   -- exception type, exit status, 'timed out', or ''
    message    TEXT    NOT NULL,   -- one line: what a burial keeps as its reason
    traceback  TEXT    NOT NULL,   -- the traceback, or a command's stderr tail ('' if none)
    PRIMARY KEY (job_id, attempt)
);

CREATE TRIGGER sqlq_forget_attempts AFTER DELETE ON sqlq_jobs
WHEN old.failures > 0
BEGIN
    DELETE FROM sqlq_attempts WHERE job_id = old.id;
END;
