-- sqlq schema 7: job ids still never reused, without AUTOINCREMENT.
--
-- AUTOINCREMENT wrote sqlite_sequence on every put: one more page in the WAL per
-- commit (3.2 frames a put, 2.2 without). An id can only be handed out twice if the
-- job holding the highest id is deleted: SQLite's next rowid is max(id) + 1. So the
-- highest id ever issued is kept in sqlq_last_id, written only when the job deleted
-- is the highest one left (trigger sqlq_keep_last_id, in the deleting transaction:
-- a crash cannot split them), and a put takes max(max(id), sqlq_last_id.id) + 1
-- (queries.sql, insert_job). In a backlog drained oldest first that trigger fires
-- once, for the last job.
--
-- SQLite cannot drop AUTOINCREMENT in place: the table is rebuilt, in the migration's
-- one transaction. The old table is renamed away first, so that the new one is
-- created under its own name (sqlite_master keeps the CREATE text as written); its
-- indexes and trigger (migrations 0001 and 0005) go with it and are made again. The
-- sequence is carried over, whichever is higher: it can be ahead of max(id).

CREATE TABLE sqlq_last_id (
    one INTEGER PRIMARY KEY CHECK (one = 1),  -- a single row
    id  INTEGER NOT NULL                      -- the highest job id ever issued
);
INSERT INTO sqlq_last_id (one, id)
SELECT 1, max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'sqlq_jobs'), 0),
              coalesce((SELECT max(id) FROM sqlq_jobs), 0));

ALTER TABLE sqlq_jobs RENAME TO sqlq_jobs_autoincrement;

CREATE TABLE sqlq_jobs (
    id             INTEGER PRIMARY KEY,                -- never reused: see sqlq_last_id
    tube           TEXT    NOT NULL,
    priority       INTEGER NOT NULL,                   -- 0 .. 2**32-1, lower is more urgent
    state          INTEGER NOT NULL,
    delay_until    INTEGER,                            -- set while delayed
    reserved_until INTEGER,                            -- set while reserved
    ttr            INTEGER NOT NULL,
    body           BLOB    NOT NULL,
    created_at     INTEGER NOT NULL,
    reserves       INTEGER NOT NULL DEFAULT 0,
    timeouts       INTEGER NOT NULL DEFAULT 0,
    releases       INTEGER NOT NULL DEFAULT 0,
    buries         INTEGER NOT NULL DEFAULT 0,
    kicks          INTEGER NOT NULL DEFAULT 0,
    lease          INTEGER,                            -- token of the current reservation
    owner          TEXT,                               -- process holding the reservation
    bury_reason    TEXT,
    unique_key     TEXT,
    delay          INTEGER NOT NULL DEFAULT 0          -- ms, as last set by put or release
);

INSERT INTO sqlq_jobs (id, tube, priority, state, delay_until, reserved_until, ttr, body,
                       created_at, reserves, timeouts, releases, buries, kicks, lease, owner,
                       bury_reason, unique_key, delay)
SELECT id, tube, priority, state, delay_until, reserved_until, ttr, body, created_at,
       reserves, timeouts, releases, buries, kicks, lease, owner, bury_reason, unique_key,
       delay
  FROM sqlq_jobs_autoincrement;

DROP TABLE sqlq_jobs_autoincrement;

CREATE INDEX sqlq_jobs_ready    ON sqlq_jobs (tube, priority, id)  WHERE state = 0;
CREATE INDEX sqlq_jobs_delayed  ON sqlq_jobs (tube, delay_until)   WHERE state = 1;
CREATE INDEX sqlq_jobs_reserved ON sqlq_jobs (reserved_until)      WHERE state = 2;
CREATE INDEX sqlq_jobs_buried   ON sqlq_jobs (tube, id)            WHERE state = 3;
CREATE UNIQUE INDEX sqlq_jobs_unique ON sqlq_jobs (tube, unique_key)
    WHERE unique_key IS NOT NULL;

CREATE TRIGGER sqlq_count_events AFTER UPDATE OF buries, kicks, timeouts ON sqlq_jobs
WHEN new.buries > old.buries OR new.kicks > old.kicks OR new.timeouts > old.timeouts
BEGIN
    INSERT INTO sqlq_counters (tube, buries, kicks, timeouts)
    VALUES (new.tube, new.buries - old.buries, new.kicks - old.kicks,
            new.timeouts - old.timeouts)
    ON CONFLICT (tube) DO UPDATE SET buries = buries + excluded.buries,
                                     kicks = kicks + excluded.kicks,
                                     timeouts = timeouts + excluded.timeouts;
END;

-- The job deleted held the highest id left (none above it): remember its id. One
-- primary-key probe per deleted row; a write only when it was the top.
CREATE TRIGGER sqlq_keep_last_id AFTER DELETE ON sqlq_jobs
WHEN NOT EXISTS (SELECT 1 FROM sqlq_jobs WHERE id > old.id)
BEGIN
    UPDATE sqlq_last_id SET id = old.id WHERE id < old.id;
END;
