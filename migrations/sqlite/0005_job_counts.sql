-- sqlq schema 5 (SQLite): jobs counted per tube and stored state, kept by triggers, so
-- stats, stats-tube, the dashboard and /metrics read a few rows instead of walking every
-- job (issue 39: 268 ms at 500k ready jobs, seconds at 10M).
--
-- Counted: ready (0), delayed (1) and buried (3), the states a backlog piles up in; ready
-- jobs split by urgency (priority < 1024, stats' current-jobs-urgent). Not counted, read
-- from their index instead: reserved jobs (one per running worker; counting them would
-- cost every delete of a worked job a write) and waiting jobs (their edges). The
-- readers add what "as of now" changes without a write: a delayed job come due is
-- ready, an expired reservation is ready (index ranges as long as what is due).
--
-- One row per (tube, state, urgent), never deleted (n goes back to 0): SQLite has one
-- writer at a time, so a row is never a point of contention. A put_many with the
-- triggers off (drivers.triggers_off) adds its rows itself (queries.sql add_job_counts).
CREATE TABLE sqlq_job_counts (
    tube   TEXT    NOT NULL,
    state  INTEGER NOT NULL,   -- 0 ready, 1 delayed, 3 buried
    urgent INTEGER NOT NULL,   -- 1: ready with priority < 1024; 0 otherwise
    n      INTEGER NOT NULL,
    PRIMARY KEY (tube, state, urgent)
) WITHOUT ROWID;

-- The jobs already there, read from the partial indexes (each covers what it counts):
-- one pass over the backlog, once, under the migration's write lock (CONTRIBUTING.md
-- "Migrations on a big store": about 1.2 s per million jobs).
INSERT INTO sqlq_job_counts (tube, state, urgent, n)
SELECT tube, 0, priority < 1024, count(*) FROM sqlq_jobs WHERE state = 0
 GROUP BY tube, priority < 1024;
INSERT INTO sqlq_job_counts (tube, state, urgent, n)
SELECT tube, 1, 0, count(*) FROM sqlq_jobs WHERE state = 1 GROUP BY tube;
INSERT INTO sqlq_job_counts (tube, state, urgent, n)
SELECT tube, 3, 0, count(*) FROM sqlq_jobs WHERE state = 3 GROUP BY tube;

-- "state <> 2 AND state <> 4", never "state IN (0, 1, 3)": in a trigger, an IN list
-- costs the statement that fires it an ephemeral table (callgrind: a claim and its
-- delete took 93k instructions more with IN lists here, 14k more with these tests).
CREATE TRIGGER sqlq_count_inserted AFTER INSERT ON sqlq_jobs
WHEN new.state <> 2 AND new.state <> 4
BEGIN
    INSERT INTO sqlq_job_counts (tube, state, urgent, n)
    VALUES (new.tube, new.state, new.state = 0 AND new.priority < 1024, 1)
    ON CONFLICT (tube, state, urgent) DO UPDATE SET n = n + 1;
END;

-- A delete: the count goes in the trigger 0001 fires on deletes already (a delete fires
-- the triggers it did: tests/unit/test_dependencies.py); a worked job's delete (state 2,
-- never failed: the common case) is still excluded by the WHEN.
DROP TRIGGER sqlq_forget_attempts;
CREATE TRIGGER sqlq_forget_attempts AFTER DELETE ON sqlq_jobs
WHEN old.failures > 0 OR old.state <> 2 AND old.state <> 4
BEGIN
    DELETE FROM sqlq_attempts WHERE old.failures > 0 AND job_id = old.id;
    UPDATE sqlq_job_counts SET n = n - 1
     WHERE old.state <> 2 AND old.state <> 4 AND tube = old.tube AND state = old.state
       AND urgent = (old.state = 0 AND old.priority < 1024);
END;

-- A state change from or to a counted state, or a ready job's urgency changed. Nothing
-- updates a job's tube.
CREATE TRIGGER sqlq_count_moved AFTER UPDATE OF state, priority ON sqlq_jobs
WHEN (old.state <> 2 AND old.state <> 4 OR new.state <> 2 AND new.state <> 4)
 AND (old.state <> new.state
      OR old.state = 0 AND (old.priority < 1024) <> (new.priority < 1024))
BEGIN
    UPDATE sqlq_job_counts SET n = n - 1
     WHERE old.state <> 2 AND old.state <> 4 AND tube = old.tube AND state = old.state
       AND urgent = (old.state = 0 AND old.priority < 1024);
    INSERT INTO sqlq_job_counts (tube, state, urgent, n)
    SELECT new.tube, new.state, new.state = 0 AND new.priority < 1024, 1
     WHERE new.state <> 2 AND new.state <> 4
    ON CONFLICT (tube, state, urgent) DO UPDATE SET n = n + 1;
END;
