-- sqlq schema 13 on PostgreSQL: the workers registry and the throughput history (the
-- SQLite file's schema 12 says what is written when, and the bounds). Liveness is the
-- owner token's (owners.py: the session advisory lock and the keeper's seen_at).

CREATE TABLE sqlq_workers (
    token      text    PRIMARY KEY,  -- the owner token (liveness: owners.py)
    host       text    NOT NULL,
    pid        integer NOT NULL,
    tubes      text    NOT NULL,     -- the tubes it watches, comma-separated
    started_at bigint  NOT NULL,     -- ms since the epoch
    seen_at    bigint  NOT NULL,     -- ms: its last heartbeat
    job_id     bigint,               -- the job it ran at its last heartbeat; NULL: idle
    jobs_done  bigint  NOT NULL      -- runs ended (whatever their outcome), as of seen_at
);

CREATE TABLE sqlq_throughput (
    minute  bigint PRIMARY KEY,  -- minutes since the epoch
    at      bigint NOT NULL,     -- ms: when the sample was taken
    puts    bigint NOT NULL,     -- jobs ever put, deleted, buried, as of `at`
    deletes bigint NOT NULL,
    buries  bigint NOT NULL
);
