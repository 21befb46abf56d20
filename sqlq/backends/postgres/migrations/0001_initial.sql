-- sqlq schema 1 on PostgreSQL: the same tables as the SQLite file's schemas 1-4.
--
-- States (sqlq_jobs.state): 0 ready, 1 delayed, 2 reserved, 3 buried. A delayed
-- job whose delay_until has passed, and a reserved job whose reserved_until has
-- passed, are ready "as of now": readers compute that, and a claim takes them as
-- it takes ready jobs, so no sweeper is needed. Times are wall-clock ms since
-- the epoch; ttr and delay are ms.

CREATE TABLE sqlq_jobs (
    id             bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- never reused
    tube           text     NOT NULL,
    priority       bigint   NOT NULL CHECK (priority BETWEEN 0 AND 4294967295),
    state          smallint NOT NULL CHECK (state BETWEEN 0 AND 3),
    delay_until    bigint   CHECK ((state = 1) = (delay_until IS NOT NULL)),
    reserved_until bigint   CHECK ((state = 2) = (reserved_until IS NOT NULL)),
    ttr            bigint   NOT NULL,
    body           bytea    NOT NULL,
    created_at     bigint   NOT NULL,
    reserves       integer  NOT NULL DEFAULT 0,
    timeouts       integer  NOT NULL DEFAULT 0,
    releases       integer  NOT NULL DEFAULT 0,
    buries         integer  NOT NULL DEFAULT 0,
    kicks          integer  NOT NULL DEFAULT 0,
    lease          bigint,                        -- token of the current reservation
    owner          text,                          -- process holding the reservation
    bury_reason    text,
    unique_key     text,
    delay          bigint   NOT NULL DEFAULT 0    -- as last set by put or release
) WITH (
    -- A queue is a delete-heavy table: leave room for HOT updates (claim, release)
    -- and vacuum early, so dead rows do not pile up at the head of the claim index.
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);

-- One partial index per state, each in the order its readers need.
CREATE INDEX sqlq_jobs_ready    ON sqlq_jobs (tube, priority, id)  WHERE state = 0;
CREATE INDEX sqlq_jobs_delayed  ON sqlq_jobs (tube, delay_until)   WHERE state = 1;
CREATE INDEX sqlq_jobs_reserved ON sqlq_jobs (reserved_until)      WHERE state = 2;
CREATE INDEX sqlq_jobs_buried   ON sqlq_jobs (tube, id)            WHERE state = 3;
CREATE UNIQUE INDEX sqlq_jobs_unique ON sqlq_jobs (tube, unique_key)
    WHERE unique_key IS NOT NULL;

-- A row here only records a pause.
CREATE TABLE sqlq_tubes (
    name         text   PRIMARY KEY,
    paused_until bigint NOT NULL,
    pause_ms     bigint NOT NULL
);

-- Results, kept apart from the hot table (see the SQLite schema 2).
CREATE TABLE sqlq_results (
    job_id     bigint PRIMARY KEY,
    result     bytea  NOT NULL,
    expires_at bigint NOT NULL
);
CREATE INDEX sqlq_results_expires ON sqlq_results (expires_at);

CREATE TABLE sqlq_subscriptions (
    topic text NOT NULL,
    tube  text NOT NULL,
    PRIMARY KEY (topic, tube)
);

-- The last slot enqueued for each periodic task (see the SQLite schema 3).
CREATE TABLE sqlq_periodic (
    name        text   PRIMARY KEY,
    last_slot   bigint NOT NULL,
    enqueued_at bigint NOT NULL
);
