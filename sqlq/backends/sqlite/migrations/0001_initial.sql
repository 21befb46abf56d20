-- sqlq schema 1: jobs, tubes and the schema-version record.
--
-- States (sqlq_jobs.state): 0 ready, 1 delayed, 2 reserved, 3 buried.
-- A delayed job whose delay_until has passed, and a reserved job whose
-- reserved_until has passed, are ready "as of now": readers compute that, and
-- the next claim in the tube writes it down. No reaper process is needed.
-- Times are wall-clock milliseconds since the epoch; ttr is milliseconds.

CREATE TABLE sqlq_jobs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
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
    unique_key     TEXT
);

-- One partial index per state, each in the order its readers need, so that a
-- claim, a promotion or a peek costs O(log n) whatever the other states hold.
CREATE INDEX sqlq_jobs_ready    ON sqlq_jobs (tube, priority, id)  WHERE state = 0;
CREATE INDEX sqlq_jobs_delayed  ON sqlq_jobs (tube, delay_until)   WHERE state = 1;
CREATE INDEX sqlq_jobs_reserved ON sqlq_jobs (reserved_until)      WHERE state = 2;
CREATE INDEX sqlq_jobs_buried   ON sqlq_jobs (tube, id)            WHERE state = 3;
CREATE UNIQUE INDEX sqlq_jobs_unique ON sqlq_jobs (tube, unique_key)
    WHERE unique_key IS NOT NULL;

-- Tubes exist while they hold jobs; a row here only records a pause.
CREATE TABLE sqlq_tubes (
    name         TEXT PRIMARY KEY,
    paused_until INTEGER NOT NULL,
    pause_ms     INTEGER NOT NULL
) WITHOUT ROWID;
