-- sqlq schema 1 (SQLite): the whole schema of the first release, the pre-release
-- migrations 0001-0015 squashed into one (CHANGELOG 0.1.0).
--
-- Times are wall-clock milliseconds since the epoch; ttr and delays are milliseconds.
-- Job states (sqlq_jobs.state): 0 ready, 1 delayed, 2 reserved, 3 buried, 4 waiting
-- (on parents). A delayed job whose delay_until has passed, and a reserved job whose
-- reserved_until has passed, are ready "as of now": readers compute that and the next
-- claim in the tube writes it down, so no reaper process is needed. One partial index
-- per state, each in the order its readers need: a claim, a promotion or a peek costs
-- O(log n) whatever the other states hold. A waiting job is in no index, so no claim,
-- promotion, kick or peek reads it.

-- A tube exists while it holds jobs; a row here records a pause or limits (a row made
-- for limits alone has paused_until = 0). The limits sit on the row every claim probes
-- for a pause anyway: a tube without them costs a claim nothing (store.py claim_limited).
--   concurrency  jobs reserved under live leases at most (NULL: no cap)
--   rate         claims at most ... per rate_ms (NULL: no rate), spaced rate_ms/rate apart
--   rate_at      the earliest time of the next claim (a float; NULL: now)
CREATE TABLE sqlq_tubes (
    name         TEXT PRIMARY KEY,
    paused_until INTEGER NOT NULL,
    pause_ms     INTEGER NOT NULL,
    concurrency  INTEGER,
    rate         INTEGER,
    rate_ms      INTEGER,
    rate_at      REAL
) WITHOUT ROWID;

-- A completed job's row goes from sqlq_jobs and its result comes here in one transaction,
-- so a reader sees the job or its result, never neither. Rows expire at expires_at and
-- are purged a few at a time by later completes: the claim path never touches this table.
CREATE TABLE sqlq_results (
    job_id     INTEGER PRIMARY KEY,   -- the job's id (ids are never reused)
    result     BLOB    NOT NULL,
    expires_at INTEGER NOT NULL
);

-- publish(topic) puts a copy of the job into every tube subscribed to the topic: rows,
-- not connections, so a subscriber that is down still has its tube filled.
CREATE TABLE sqlq_subscriptions (
    topic TEXT NOT NULL,
    tube  TEXT NOT NULL,
    PRIMARY KEY (topic, tube)
) WITHOUT ROWID;

-- A periodic job's unique_key stops a slot being enqueued twice only while that job is
-- live; this row moves forward in the enqueue's transaction, and only forward, so a slot
-- at or before last_slot is never enqueued again, however late a worker is.
CREATE TABLE sqlq_periodic (
    name        TEXT    PRIMARY KEY,  -- the task's name
    last_slot   INTEGER NOT NULL,     -- start of the last slot enqueued (ms)
    enqueued_at INTEGER NOT NULL      -- when it was enqueued (ms)
) WITHOUT ROWID;

-- Per-tube totals for /metrics and stats-tube: a job's own counters vanish with its row,
-- and a Prometheus counter must never go down. buries, kicks and timeouts are kept by
-- sqlq_count_events (it fires only on the statements that set them: never on put,
-- reserve or delete); puts by runs of ids (sqlq_tube_run); pauses by a row per pause.
CREATE TABLE sqlq_counters (
    tube     TEXT    PRIMARY KEY,
    buries   INTEGER NOT NULL DEFAULT 0,
    kicks    INTEGER NOT NULL DEFAULT 0,
    timeouts INTEGER NOT NULL DEFAULT 0,
    puts     INTEGER NOT NULL DEFAULT 0,
    pauses   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Histograms of wait and run times (sqlq/histograms.py): each worker adds its buckets
-- at most every ten seconds in one short transaction, so put, reserve and delete write
-- nothing more. A row is one bucket, not cumulated; le as Prometheus writes it.
CREATE TABLE sqlq_durations (
    tube   TEXT    NOT NULL,
    metric TEXT    NOT NULL,  -- 'wait' or 'run'
    le     TEXT    NOT NULL,
    count  INTEGER NOT NULL,
    sum    REAL    NOT NULL,
    PRIMARY KEY (tube, metric, le)
) WITHOUT ROWID;

-- Ids are never reused, without AUTOINCREMENT (which wrote sqlite_sequence on every put:
-- a page more in the WAL per commit). An id could only be issued twice if the job holding
-- the highest id were deleted, so that id is kept here by sqlq_keep_last_id, in the
-- deleting transaction; a put takes max(max(id), sqlq_last_id.id) + 1 (queries.sql).
CREATE TABLE sqlq_last_id (
    one INTEGER PRIMARY KEY CHECK (one = 1),  -- a single row
    id  INTEGER NOT NULL                      -- the highest job id ever issued
);

CREATE TABLE sqlq_jobs (
    id               INTEGER PRIMARY KEY,      -- never reused: see sqlq_last_id
    tube             TEXT    NOT NULL,
    priority         INTEGER NOT NULL,         -- 0 .. 2**32-1, lower is more urgent
    state            INTEGER NOT NULL,
    delay_until      INTEGER,                  -- set while delayed
    reserved_until   INTEGER,                  -- set while reserved
    ttr              INTEGER NOT NULL,
    body             BLOB    NOT NULL,
    created_at       INTEGER NOT NULL,
    reserves         INTEGER NOT NULL DEFAULT 0,
    timeouts         INTEGER NOT NULL DEFAULT 0,
    releases         INTEGER NOT NULL DEFAULT 0,
    buries           INTEGER NOT NULL DEFAULT 0,
    kicks            INTEGER NOT NULL DEFAULT 0,
    lease            INTEGER,                  -- token of the current reservation
    owner            TEXT,                     -- process holding the reservation
    bury_reason      TEXT,
    unique_key       TEXT,
    delay            INTEGER NOT NULL DEFAULT 0,  -- ms, as last set by put or release
    failures         INTEGER NOT NULL DEFAULT 0,  -- attempts written to sqlq_attempts
    waiting_on       INTEGER NOT NULL DEFAULT 0,  -- parents not yet gone (state 4)
    dependents       INTEGER NOT NULL DEFAULT 0,  -- edges naming it as parent
    trace            TEXT,                     -- W3C traceparent (\n tracestate) of its put
    progress         TEXT,                     -- JSON: a float 0-1 or a count; NULL unset
    progress_message TEXT
);

-- Every failed attempt of a job, written in the transaction that retries or buries it
-- ('lost': in one of its own). A successful run writes nothing. Bounded: the last 10
-- attempts of a job (sqlq/attempts.py KEPT), a traceback of at most 8 KiB; a job's rows
-- go with it (sqlq_forget_attempts, only for a job whose failures > 0).
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
    trace      TEXT,               -- the worker span's traceparent, for the next run's link
    location   TEXT    NOT NULL DEFAULT '',  -- "myapp/tasks.py:41 in lookup"; '' unknown
    PRIMARY KEY (job_id, attempt)
);

-- A tube's puts are runs of consecutive ids (ids have no gaps): only the latest run is
-- held here, so a put into the same tube as the put before writes nothing (a trigger
-- adding 1 per put cost a put about 20%). A tube's puts are its total in sqlq_counters
-- plus, while the latest run is its own, the ids issued since the run began.
CREATE TABLE sqlq_tube_run (
    one   INTEGER PRIMARY KEY CHECK (one = 1),  -- a single row
    tube  TEXT,                                 -- the tube of the latest put; NULL: none
    start INTEGER NOT NULL                      -- the first id of the latest run
);

-- Job dependencies (put(..., after=IDS)). The release is no trigger (even one whose WHEN
-- is false costs every delete a trigger program): deletes skip a job with edges, and the
-- store deletes it in a savepoint with the release of its children (store.py).
CREATE TABLE sqlq_edges (
    parent INTEGER NOT NULL,   -- a job the child waits for (ids are never reused)
    child  INTEGER NOT NULL,   -- the waiting job
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;

-- A row per running `sqlq work` process (sqlq/registry.py), written at start, at most
-- once per heartbeat, deleted at stop. Liveness is the owner token's flock (owners.py),
-- not this table: a row whose owner is dead is hidden and deleted by the next worker.
CREATE TABLE sqlq_workers (
    token      TEXT    PRIMARY KEY,  -- the owner token (liveness: owners.py)
    host       TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    tubes      TEXT    NOT NULL,     -- the tubes it watches, comma-separated
    started_at INTEGER NOT NULL,     -- ms since the epoch
    seen_at    INTEGER NOT NULL,     -- ms: its last heartbeat
    job_id     INTEGER,              -- the job it ran at its last heartbeat; NULL: idle
    jobs_done  INTEGER NOT NULL      -- runs ended (whatever their outcome), as of seen_at
) WITHOUT ROWID;

-- The file's counters sampled at most once a minute by the first worker to beat in it,
-- for the dashboard's chart; samples older than a day are deleted as new ones come.
CREATE TABLE sqlq_throughput (
    minute  INTEGER PRIMARY KEY,  -- minutes since the epoch
    at      INTEGER NOT NULL,     -- ms: when the sample was taken
    puts    INTEGER NOT NULL,     -- jobs ever put, deleted, buried, as of `at`
    deletes INTEGER NOT NULL,
    buries  INTEGER NOT NULL
);

-- A cancelled reserved job is deleted at once; this remembers (id, lease) so its holder's
-- next lease-checked statement, which finds no row, raises JobCancelled, not JobLost.
-- Purged an hour after the lease would have ended (sqlq_cancelled_until).
CREATE TABLE sqlq_cancelled (
    id    INTEGER PRIMARY KEY,   -- the job's id (ids are never reused)
    lease INTEGER NOT NULL,      -- the lease it was reserved under when cancelled
    until INTEGER NOT NULL       -- ms: kept until then (the lease's end plus an hour)
);

INSERT INTO sqlq_last_id (one, id) VALUES (1, 0);
INSERT INTO sqlq_tube_run (one, tube, start) VALUES (1, NULL, 1);

CREATE INDEX sqlq_results_expires ON sqlq_results (expires_at);
CREATE INDEX sqlq_jobs_ready    ON sqlq_jobs (tube, priority, id)  WHERE state = 0;
CREATE INDEX sqlq_jobs_delayed  ON sqlq_jobs (tube, delay_until)   WHERE state = 1;
CREATE INDEX sqlq_jobs_reserved ON sqlq_jobs (reserved_until)      WHERE state = 2;
CREATE INDEX sqlq_jobs_buried   ON sqlq_jobs (tube, id)            WHERE state = 3;
CREATE UNIQUE INDEX sqlq_jobs_unique ON sqlq_jobs (tube, unique_key)
    WHERE unique_key IS NOT NULL;
CREATE INDEX sqlq_edges_child ON sqlq_edges (child);
CREATE INDEX sqlq_cancelled_until ON sqlq_cancelled (until);

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
-- primary-key probe per deleted row; a write only when it was the top (in a backlog
-- drained oldest first: once, for the last job).
CREATE TRIGGER sqlq_keep_last_id AFTER DELETE ON sqlq_jobs
WHEN NOT EXISTS (SELECT 1 FROM sqlq_jobs WHERE id > old.id)
BEGIN
    UPDATE sqlq_last_id SET id = old.id WHERE id < old.id;
END;

-- A job run once and deleted, the common case, is excluded by the WHEN: no probe.
CREATE TRIGGER sqlq_forget_attempts AFTER DELETE ON sqlq_jobs
WHEN old.failures > 0
BEGIN
    DELETE FROM sqlq_attempts WHERE job_id = old.id;
END;

-- A put into another tube than the put before adds the finished run to its tube's total
-- and starts a new run; a put into the same tube writes nothing (the WHEN reads one row).
CREATE TRIGGER sqlq_count_puts AFTER INSERT ON sqlq_jobs
WHEN new.tube IS NOT (SELECT tube FROM sqlq_tube_run)
BEGIN
    INSERT INTO sqlq_counters (tube, puts)
    SELECT tube, new.id - start FROM sqlq_tube_run WHERE tube IS NOT NULL
    ON CONFLICT (tube) DO UPDATE SET puts = puts + excluded.puts;
    UPDATE sqlq_tube_run SET tube = new.tube, start = new.id;
END;

-- Pauses are rare: a row per pause-tube (a pause of 0, which ends one, counts too).
CREATE TRIGGER sqlq_count_repauses AFTER UPDATE OF paused_until, pause_ms ON sqlq_tubes
BEGIN
    INSERT INTO sqlq_counters (tube, pauses) VALUES (new.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = pauses + 1;
END;

-- An insert counts only when it pauses (a row made for limits alone is no pause).
CREATE TRIGGER sqlq_count_pauses AFTER INSERT ON sqlq_tubes WHEN new.paused_until > 0
BEGIN
    INSERT INTO sqlq_counters (tube, pauses) VALUES (new.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = pauses + 1;
END;
