-- sqlq schema 13: control of running jobs (issue 25): cancel and progress.
--
-- Progress: two columns of the job, written by its holder under its lease (a small
-- UPDATE by primary key, Job.progress) and read by anyone (stats_job, sqlq peek, the
-- dashboard, result() waiters). progress is the value as JSON text (a float 0-1 or an
-- int count: a REAL column would turn the count 37 into 37.0); NULL until first set.
-- ADD COLUMN with a NULL default rewrites no row, and no claim or delete reads them.
--
-- Cancel: a reserved job that is cancelled is deleted at once (its row, its edges,
-- its children released, as Queue.delete does), so no claim, promotion, reaper or
-- dead-owner release can ever hand it out again; sqlq_cancelled remembers (id, lease)
-- for its holder: the holder's next touch, delete, release, bury, complete or
-- progress finds no row under its lease (the ordinary lease-checked statement fails,
-- costing nothing more on the hot path) and only then reads this table, to raise
-- JobCancelled rather than JobLost. A worker running the job reads it once a second
-- (sqlq/work/cancel.py). Rows go an hour after the lease would have ended, purged by
-- later cancels (sqlq_cancelled_until): the table holds only recent cancellations.

ALTER TABLE sqlq_jobs ADD COLUMN progress TEXT;
ALTER TABLE sqlq_jobs ADD COLUMN progress_message TEXT;

CREATE TABLE sqlq_cancelled (
    id    INTEGER PRIMARY KEY,   -- the job's id (ids are never reused)
    lease INTEGER NOT NULL,      -- the lease it was reserved under when cancelled
    until INTEGER NOT NULL       -- ms: kept until then (the lease's end plus an hour)
);
CREATE INDEX sqlq_cancelled_until ON sqlq_cancelled (until);
