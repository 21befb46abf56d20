-- sqlq schema 14 on PostgreSQL: control of running jobs (issue 25): cancel and progress
-- (the SQLite file's schema 13 says what the columns and sqlq_cancelled are for).

ALTER TABLE sqlq_jobs ADD COLUMN progress text;
ALTER TABLE sqlq_jobs ADD COLUMN progress_message text;

CREATE TABLE sqlq_cancelled (
    id    bigint PRIMARY KEY,   -- the job's id (ids are never reused)
    lease bigint NOT NULL,      -- the lease it was reserved under when cancelled
    until bigint NOT NULL       -- ms: kept until then (the lease's end plus an hour)
);
CREATE INDEX sqlq_cancelled_until ON sqlq_cancelled (until);
