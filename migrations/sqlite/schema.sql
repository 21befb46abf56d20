-- view sqlq_job_counts
CREATE VIEW sqlq_job_counts (tube, state, urgent, n) AS
SELECT tube, state, urgent, sum(n) FROM (
    SELECT tube, state, urgent, n FROM sqlq_job_counts_kept
    UNION ALL
    SELECT tube, 0, urgent,
           max(coalesce((SELECT max(id) FROM sqlq_jobs), 0),
               coalesce((SELECT id FROM sqlq_last_id), 0)) + 1 - ready_from
      FROM sqlq_tube_run WHERE urgent >= 0)
 GROUP BY tube, state, urgent;

-- trigger sqlq_count_entered
CREATE TRIGGER sqlq_count_entered
AFTER UPDATE OF priority, delay_until, releases, buries, kicks, timeouts, waiting_on ON sqlq_jobs
WHEN new.state <> 2 AND new.state <> 4
 AND (old.state <> new.state
      OR old.state = 0 AND (old.priority < 1024) <> (new.priority < 1024))
BEGIN
    INSERT OR IGNORE INTO "sqlq_job_counts_kept" (tube, state, urgent, n)
    VALUES (new.tube, new.state, new.state = 0 AND new.priority < 1024, 0);
    UPDATE OR IGNORE "sqlq_job_counts_kept" SET n = n + 1
     WHERE tube = new.tube AND state = new.state
       AND urgent = (new.state = 0 AND new.priority < 1024);
END;

-- trigger sqlq_count_events
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

-- trigger sqlq_count_moved
CREATE TRIGGER sqlq_count_moved AFTER UPDATE OF state, priority ON sqlq_jobs
WHEN old.state <> 2 AND old.state <> 4
 AND (old.state <> new.state
      OR old.state = 0 AND (old.priority < 1024) <> (new.priority < 1024))
BEGIN
    UPDATE OR IGNORE "sqlq_job_counts_kept" SET n = n - 1
     WHERE tube = old.tube AND state = old.state
       AND urgent = (old.state = 0 AND old.priority < 1024);
END;

-- trigger sqlq_count_pauses
CREATE TRIGGER sqlq_count_pauses AFTER INSERT ON sqlq_tubes WHEN new.paused_until > 0
BEGIN
    INSERT INTO sqlq_counters (tube, pauses) VALUES (new.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = pauses + 1;
END;

-- trigger sqlq_count_put
CREATE TRIGGER sqlq_count_put AFTER INSERT ON sqlq_jobs
WHEN new.state <> 0
  OR NOT coalesce((SELECT tube = new.tube AND urgent = (new.priority < 1024)
                     FROM sqlq_tube_run), 0)
BEGIN
    UPDATE sqlq_tube_run
       SET start = CASE WHEN tube IS new.tube THEN start ELSE new.id END, tube = new.tube,
           urgent = CASE WHEN urgent = -1 THEN -1
                         WHEN new.state = 0 THEN new.priority < 1024 END,
           state = new.state,
           counted = CASE WHEN new.state <> 2 AND new.state <> 4
                          THEN new.state = 0 AND new.priority < 1024 END,
           ready_from = new.id + 1;
END;

-- trigger sqlq_count_repauses
CREATE TRIGGER sqlq_count_repauses AFTER UPDATE OF paused_until, pause_ms ON sqlq_tubes
BEGIN
    INSERT INTO sqlq_counters (tube, pauses) VALUES (new.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = pauses + 1;
END;

-- trigger sqlq_count_run
CREATE TRIGGER sqlq_count_run AFTER UPDATE OF ready_from ON sqlq_tube_run
BEGIN
    INSERT INTO sqlq_counters (tube, puts)
    SELECT old.tube, new.ready_from - 1 - old.start
     WHERE old.tube IS NOT NULL AND old.tube IS NOT new.tube
    ON CONFLICT (tube) DO UPDATE SET puts = puts + excluded.puts;
    INSERT INTO sqlq_job_counts_kept (tube, state, urgent, n)
    SELECT old.tube, 0, old.urgent, new.ready_from - 1 - old.ready_from WHERE old.urgent >= 0
    ON CONFLICT (tube, state, urgent) DO UPDATE SET n = n + excluded.n;
    INSERT INTO sqlq_job_counts_kept (tube, state, urgent, n)
    SELECT new.tube, new.state, new.counted, 1 WHERE new.counted IS NOT NULL
    ON CONFLICT (tube, state, urgent) DO UPDATE SET n = n + 1;
END;

-- trigger sqlq_forget_attempts
CREATE TRIGGER sqlq_forget_attempts AFTER DELETE ON sqlq_jobs
WHEN old.failures > 0 OR old.state <> 2 AND old.state <> 4
BEGIN
    DELETE FROM sqlq_attempts WHERE old.failures > 0 AND job_id = old.id;
    UPDATE OR IGNORE "sqlq_job_counts_kept" SET n = n - 1
     WHERE old.state <> 2 AND old.state <> 4 AND tube = old.tube AND state = old.state
       AND urgent = (old.state = 0 AND old.priority < 1024);
END;

-- trigger sqlq_forget_steps
CREATE TRIGGER sqlq_forget_steps AFTER DELETE ON sqlq_jobs
WHEN old.steps > 0
BEGIN
    DELETE FROM sqlq_steps WHERE job_id = old.id;
END;

-- trigger sqlq_keep_last_id
CREATE TRIGGER sqlq_keep_last_id AFTER DELETE ON sqlq_jobs
WHEN NOT EXISTS (SELECT 1 FROM sqlq_jobs WHERE id > old.id)
BEGIN
    UPDATE OR IGNORE sqlq_last_id SET id = old.id WHERE id < old.id;
END;

-- trigger sqlq_keep_steps
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

-- table sqlq_attempts
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

-- table sqlq_cancelled
CREATE TABLE sqlq_cancelled (
    id    INTEGER PRIMARY KEY,   -- the job's id (ids are never reused)
    lease INTEGER NOT NULL,      -- the lease it was reserved under when cancelled
    until INTEGER NOT NULL       -- ms: kept until then (the lease's end plus an hour)
);

-- table sqlq_counters
CREATE TABLE sqlq_counters (
    tube     TEXT    PRIMARY KEY,
    buries   INTEGER NOT NULL DEFAULT 0,
    kicks    INTEGER NOT NULL DEFAULT 0,
    timeouts INTEGER NOT NULL DEFAULT 0,
    puts     INTEGER NOT NULL DEFAULT 0,
    pauses   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- table sqlq_durations
CREATE TABLE sqlq_durations (
    tube   TEXT    NOT NULL,
    metric TEXT    NOT NULL,  -- 'wait' or 'run'
    le     TEXT    NOT NULL,
    count  INTEGER NOT NULL,
    sum    REAL    NOT NULL,
    PRIMARY KEY (tube, metric, le)
) WITHOUT ROWID;

-- table sqlq_edges
CREATE TABLE sqlq_edges (
    parent INTEGER NOT NULL,   -- a job the child waits for (ids are never reused)
    child  INTEGER NOT NULL,   -- the waiting job
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;

-- table sqlq_finished
CREATE TABLE sqlq_finished (
    id         INTEGER PRIMARY KEY,   -- the job's id (ids are never reused)
    tube       TEXT    NOT NULL,
    grp        TEXT,                  -- its group (NULL: none)
    outcome    TEXT    NOT NULL,      -- done (by its holder, after a run), deleted, cancelled
    ended_at   INTEGER NOT NULL,      -- ms since the epoch
    worker     TEXT,                  -- owner token of its holder when it ended; NULL: none
    actor      TEXT,                  -- who deleted or cancelled it by id ('dashboard', 'cli')
    ran        INTEGER,               -- ms since its last reservation (or touch); NULL: none
    attempts   INTEGER NOT NULL,      -- its reserves
    created_at INTEGER NOT NULL,
    unique_key TEXT,
    body       BLOB    NOT NULL,      -- its first 256 bytes: what a search reads
    -- Its durable steps and cursors (issue 40, sqlq_steps) when it ended, copied by
    -- sqlq_forget_steps (below): a JSON array of {kind, name, value, at}. NULL for a
    -- job that had none.
    steps      TEXT
);

-- table sqlq_groups
CREATE TABLE sqlq_groups (
    tube    TEXT    NOT NULL,
    grp     TEXT    NOT NULL,
    turn    INTEGER NOT NULL,
    rate_at REAL,
    PRIMARY KEY (tube, grp)
) WITHOUT ROWID;

-- table sqlq_job_counts_kept
CREATE TABLE "sqlq_job_counts_kept" (
    tube   TEXT    NOT NULL,
    state  INTEGER NOT NULL,   -- 0 ready, 1 delayed, 3 buried
    urgent INTEGER NOT NULL,   -- 1: ready with priority < 1024; 0 otherwise
    n      INTEGER NOT NULL,
    PRIMARY KEY (tube, state, urgent)
) WITHOUT ROWID;

-- table sqlq_jobs
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
, steps INTEGER NOT NULL DEFAULT 0, grp TEXT, turn INTEGER);

-- table sqlq_last_id
CREATE TABLE sqlq_last_id (
    one INTEGER PRIMARY KEY CHECK (one = 1),  -- a single row
    id  INTEGER NOT NULL                      -- the highest job id ever issued
);

-- table sqlq_periodic
CREATE TABLE sqlq_periodic (
    name        TEXT    PRIMARY KEY,  -- the task's name
    last_slot   INTEGER NOT NULL,     -- start of the last slot enqueued (ms)
    enqueued_at INTEGER NOT NULL      -- when it was enqueued (ms)
) WITHOUT ROWID;

-- table sqlq_results
CREATE TABLE sqlq_results (
    job_id     INTEGER PRIMARY KEY,   -- the job's id (ids are never reused)
    result     BLOB    NOT NULL,
    expires_at INTEGER NOT NULL
);

-- table sqlq_retention
CREATE TABLE sqlq_retention (
    tube      TEXT PRIMARY KEY,
    max_age   INTEGER,                -- ms
    max_count INTEGER                 -- records kept per tube and outcome
) WITHOUT ROWID;

-- table sqlq_schema
CREATE TABLE sqlq_schema (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
);

-- table sqlq_steps
CREATE TABLE sqlq_steps (
    job_id  INTEGER NOT NULL,   -- the job (ids are never reused)
    kind    INTEGER NOT NULL,   -- 0 a step (written once), 1 a cursor (saved again)
    name    TEXT    NOT NULL,
    value   TEXT    NOT NULL,   -- JSON: a step's return value, a cursor's position
    done_at INTEGER NOT NULL,   -- ms since the epoch: the step's commit, a cursor's last save
    PRIMARY KEY (job_id, kind, name)
) WITHOUT ROWID;

-- table sqlq_subscriptions
CREATE TABLE sqlq_subscriptions (
    topic TEXT NOT NULL,
    tube  TEXT NOT NULL,
    PRIMARY KEY (topic, tube)
) WITHOUT ROWID;

-- table sqlq_throughput
CREATE TABLE sqlq_throughput (
    minute  INTEGER PRIMARY KEY,  -- minutes since the epoch
    at      INTEGER NOT NULL,     -- ms: when the sample was taken
    puts    INTEGER NOT NULL,     -- jobs ever put, deleted, buried, as of `at`
    deletes INTEGER NOT NULL,
    buries  INTEGER NOT NULL
);

-- table sqlq_tube_run
CREATE TABLE sqlq_tube_run (
    one   INTEGER PRIMARY KEY CHECK (one = 1),  -- a single row
    tube  TEXT,                                 -- the tube of the latest put; NULL: none
    start INTEGER NOT NULL                      -- the first id of the latest run
, urgent INTEGER, ready_from INTEGER, state INTEGER, counted INTEGER);

-- table sqlq_tubes
CREATE TABLE sqlq_tubes (
    name         TEXT PRIMARY KEY,
    paused_until INTEGER NOT NULL,
    pause_ms     INTEGER NOT NULL,
    concurrency  INTEGER,
    rate         INTEGER,
    rate_ms      INTEGER,
    rate_at      REAL
, grouped INTEGER, group_concurrency INTEGER, group_rate INTEGER, group_rate_ms INTEGER) WITHOUT ROWID;

-- table sqlq_workers
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

-- index sqlq_cancelled_until
CREATE INDEX sqlq_cancelled_until ON sqlq_cancelled (until);

-- index sqlq_edges_child
CREATE INDEX sqlq_edges_child ON sqlq_edges (child);

-- index sqlq_finished_list
CREATE INDEX sqlq_finished_list ON sqlq_finished (tube, outcome, ended_at);

-- index sqlq_groups_turn
CREATE INDEX sqlq_groups_turn ON sqlq_groups (tube, turn);

-- index sqlq_jobs_buried
CREATE INDEX sqlq_jobs_buried   ON sqlq_jobs (tube, id)            WHERE state = 3;

-- index sqlq_jobs_delayed
CREATE INDEX sqlq_jobs_delayed  ON sqlq_jobs (tube, delay_until)   WHERE state = 1;

-- index sqlq_jobs_ready
CREATE INDEX sqlq_jobs_ready    ON sqlq_jobs (tube, priority, id)  WHERE state = 0;

-- index sqlq_jobs_reserved
CREATE INDEX sqlq_jobs_reserved ON sqlq_jobs (reserved_until)      WHERE state = 2;

-- index sqlq_jobs_turns
CREATE INDEX sqlq_jobs_turns ON sqlq_jobs (tube, priority, turn, id)
    WHERE state = 0 AND turn IS NOT NULL;

-- index sqlq_jobs_unique
CREATE UNIQUE INDEX sqlq_jobs_unique ON sqlq_jobs (tube, unique_key)
    WHERE unique_key IS NOT NULL;

-- index sqlq_results_expires
CREATE INDEX sqlq_results_expires ON sqlq_results (expires_at);

-- column sqlq_attempts: (0, 'job_id', 'INTEGER', 1, None, 1, 0)
-- column sqlq_attempts: (1, 'attempt', 'INTEGER', 1, None, 2, 0)
-- column sqlq_attempts: (2, 'started_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_attempts: (3, 'duration', 'INTEGER', 1, None, 0, 0)
-- column sqlq_attempts: (4, 'host', 'TEXT', 1, None, 0, 0)
-- column sqlq_attempts: (5, 'pid', 'INTEGER', 0, None, 0, 0)
-- column sqlq_attempts: (6, 'outcome', 'TEXT', 1, None, 0, 0)
-- column sqlq_attempts: (7, 'error', 'TEXT', 1, None, 0, 0)
-- column sqlq_attempts: (8, 'message', 'TEXT', 1, None, 0, 0)
-- column sqlq_attempts: (9, 'traceback', 'TEXT', 1, None, 0, 0)
-- column sqlq_attempts: (10, 'trace', 'TEXT', 0, None, 0, 0)
-- column sqlq_attempts: (11, 'location', 'TEXT', 1, "''", 0, 0)
-- column sqlq_cancelled: (0, 'id', 'INTEGER', 0, None, 1, 0)
-- column sqlq_cancelled: (1, 'lease', 'INTEGER', 1, None, 0, 0)
-- column sqlq_cancelled: (2, 'until', 'INTEGER', 1, None, 0, 0)
-- column sqlq_counters: (0, 'tube', 'TEXT', 1, None, 1, 0)
-- column sqlq_counters: (1, 'buries', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_counters: (2, 'kicks', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_counters: (3, 'timeouts', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_counters: (4, 'puts', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_counters: (5, 'pauses', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_durations: (0, 'tube', 'TEXT', 1, None, 1, 0)
-- column sqlq_durations: (1, 'metric', 'TEXT', 1, None, 2, 0)
-- column sqlq_durations: (2, 'le', 'TEXT', 1, None, 3, 0)
-- column sqlq_durations: (3, 'count', 'INTEGER', 1, None, 0, 0)
-- column sqlq_durations: (4, 'sum', 'REAL', 1, None, 0, 0)
-- column sqlq_edges: (0, 'parent', 'INTEGER', 1, None, 1, 0)
-- column sqlq_edges: (1, 'child', 'INTEGER', 1, None, 2, 0)
-- column sqlq_finished: (0, 'id', 'INTEGER', 0, None, 1, 0)
-- column sqlq_finished: (1, 'tube', 'TEXT', 1, None, 0, 0)
-- column sqlq_finished: (2, 'grp', 'TEXT', 0, None, 0, 0)
-- column sqlq_finished: (3, 'outcome', 'TEXT', 1, None, 0, 0)
-- column sqlq_finished: (4, 'ended_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_finished: (5, 'worker', 'TEXT', 0, None, 0, 0)
-- column sqlq_finished: (6, 'actor', 'TEXT', 0, None, 0, 0)
-- column sqlq_finished: (7, 'ran', 'INTEGER', 0, None, 0, 0)
-- column sqlq_finished: (8, 'attempts', 'INTEGER', 1, None, 0, 0)
-- column sqlq_finished: (9, 'created_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_finished: (10, 'unique_key', 'TEXT', 0, None, 0, 0)
-- column sqlq_finished: (11, 'body', 'BLOB', 1, None, 0, 0)
-- column sqlq_finished: (12, 'steps', 'TEXT', 0, None, 0, 0)
-- column sqlq_groups: (0, 'tube', 'TEXT', 1, None, 1, 0)
-- column sqlq_groups: (1, 'grp', 'TEXT', 1, None, 2, 0)
-- column sqlq_groups: (2, 'turn', 'INTEGER', 1, None, 0, 0)
-- column sqlq_groups: (3, 'rate_at', 'REAL', 0, None, 0, 0)
-- column sqlq_job_counts_kept: (0, 'tube', 'TEXT', 1, None, 1, 0)
-- column sqlq_job_counts_kept: (1, 'state', 'INTEGER', 1, None, 2, 0)
-- column sqlq_job_counts_kept: (2, 'urgent', 'INTEGER', 1, None, 3, 0)
-- column sqlq_job_counts_kept: (3, 'n', 'INTEGER', 1, None, 0, 0)
-- column sqlq_jobs: (0, 'id', 'INTEGER', 0, None, 1, 0)
-- column sqlq_jobs: (1, 'tube', 'TEXT', 1, None, 0, 0)
-- column sqlq_jobs: (2, 'priority', 'INTEGER', 1, None, 0, 0)
-- column sqlq_jobs: (3, 'state', 'INTEGER', 1, None, 0, 0)
-- column sqlq_jobs: (4, 'delay_until', 'INTEGER', 0, None, 0, 0)
-- column sqlq_jobs: (5, 'reserved_until', 'INTEGER', 0, None, 0, 0)
-- column sqlq_jobs: (6, 'ttr', 'INTEGER', 1, None, 0, 0)
-- column sqlq_jobs: (7, 'body', 'BLOB', 1, None, 0, 0)
-- column sqlq_jobs: (8, 'created_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_jobs: (9, 'reserves', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (10, 'timeouts', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (11, 'releases', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (12, 'buries', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (13, 'kicks', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (14, 'lease', 'INTEGER', 0, None, 0, 0)
-- column sqlq_jobs: (15, 'owner', 'TEXT', 0, None, 0, 0)
-- column sqlq_jobs: (16, 'bury_reason', 'TEXT', 0, None, 0, 0)
-- column sqlq_jobs: (17, 'unique_key', 'TEXT', 0, None, 0, 0)
-- column sqlq_jobs: (18, 'delay', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (19, 'failures', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (20, 'waiting_on', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (21, 'dependents', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (22, 'trace', 'TEXT', 0, None, 0, 0)
-- column sqlq_jobs: (23, 'progress', 'TEXT', 0, None, 0, 0)
-- column sqlq_jobs: (24, 'progress_message', 'TEXT', 0, None, 0, 0)
-- column sqlq_jobs: (25, 'steps', 'INTEGER', 1, '0', 0, 0)
-- column sqlq_jobs: (26, 'grp', 'TEXT', 0, None, 0, 0)
-- column sqlq_jobs: (27, 'turn', 'INTEGER', 0, None, 0, 0)
-- column sqlq_last_id: (0, 'one', 'INTEGER', 0, None, 1, 0)
-- column sqlq_last_id: (1, 'id', 'INTEGER', 1, None, 0, 0)
-- row sqlq_last_id: (1, 0)
-- column sqlq_periodic: (0, 'name', 'TEXT', 1, None, 1, 0)
-- column sqlq_periodic: (1, 'last_slot', 'INTEGER', 1, None, 0, 0)
-- column sqlq_periodic: (2, 'enqueued_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_results: (0, 'job_id', 'INTEGER', 0, None, 1, 0)
-- column sqlq_results: (1, 'result', 'BLOB', 1, None, 0, 0)
-- column sqlq_results: (2, 'expires_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_retention: (0, 'tube', 'TEXT', 1, None, 1, 0)
-- column sqlq_retention: (1, 'max_age', 'INTEGER', 0, None, 0, 0)
-- column sqlq_retention: (2, 'max_count', 'INTEGER', 0, None, 0, 0)
-- column sqlq_steps: (0, 'job_id', 'INTEGER', 1, None, 1, 0)
-- column sqlq_steps: (1, 'kind', 'INTEGER', 1, None, 2, 0)
-- column sqlq_steps: (2, 'name', 'TEXT', 1, None, 3, 0)
-- column sqlq_steps: (3, 'value', 'TEXT', 1, None, 0, 0)
-- column sqlq_steps: (4, 'done_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_subscriptions: (0, 'topic', 'TEXT', 1, None, 1, 0)
-- column sqlq_subscriptions: (1, 'tube', 'TEXT', 1, None, 2, 0)
-- column sqlq_throughput: (0, 'minute', 'INTEGER', 0, None, 1, 0)
-- column sqlq_throughput: (1, 'at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_throughput: (2, 'puts', 'INTEGER', 1, None, 0, 0)
-- column sqlq_throughput: (3, 'deletes', 'INTEGER', 1, None, 0, 0)
-- column sqlq_throughput: (4, 'buries', 'INTEGER', 1, None, 0, 0)
-- column sqlq_tube_run: (0, 'one', 'INTEGER', 0, None, 1, 0)
-- column sqlq_tube_run: (1, 'tube', 'TEXT', 0, None, 0, 0)
-- column sqlq_tube_run: (2, 'start', 'INTEGER', 1, None, 0, 0)
-- column sqlq_tube_run: (3, 'urgent', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tube_run: (4, 'ready_from', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tube_run: (5, 'state', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tube_run: (6, 'counted', 'INTEGER', 0, None, 0, 0)
-- row sqlq_tube_run: (1, None, 1, None, None, None, None)
-- column sqlq_tubes: (0, 'name', 'TEXT', 1, None, 1, 0)
-- column sqlq_tubes: (1, 'paused_until', 'INTEGER', 1, None, 0, 0)
-- column sqlq_tubes: (2, 'pause_ms', 'INTEGER', 1, None, 0, 0)
-- column sqlq_tubes: (3, 'concurrency', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tubes: (4, 'rate', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tubes: (5, 'rate_ms', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tubes: (6, 'rate_at', 'REAL', 0, None, 0, 0)
-- column sqlq_tubes: (7, 'grouped', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tubes: (8, 'group_concurrency', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tubes: (9, 'group_rate', 'INTEGER', 0, None, 0, 0)
-- column sqlq_tubes: (10, 'group_rate_ms', 'INTEGER', 0, None, 0, 0)
-- column sqlq_workers: (0, 'token', 'TEXT', 1, None, 1, 0)
-- column sqlq_workers: (1, 'host', 'TEXT', 1, None, 0, 0)
-- column sqlq_workers: (2, 'pid', 'INTEGER', 1, None, 0, 0)
-- column sqlq_workers: (3, 'tubes', 'TEXT', 1, None, 0, 0)
-- column sqlq_workers: (4, 'started_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_workers: (5, 'seen_at', 'INTEGER', 1, None, 0, 0)
-- column sqlq_workers: (6, 'job_id', 'INTEGER', 0, None, 0, 0)
-- column sqlq_workers: (7, 'jobs_done', 'INTEGER', 1, None, 0, 0)
