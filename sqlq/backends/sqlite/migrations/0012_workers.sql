-- sqlq schema 12: the workers registry and the throughput history (issue 26).
--
-- sqlq_workers: a row for each running `sqlq work` process (sqlq/registry.py), idle or
-- not, so the dashboard's Workers page and /metrics' sqlq_workers count idle workers
-- too. Liveness is not this table's: `token` is the process's owner token, whose
-- flock'ed file the kernel unlocks when it dies (owners.py); a row whose owner is not
-- alive is not shown, and the next worker to start or beat deletes it. A worker writes
-- its row when it starts, at most once per heartbeat (seen_at, the job it runs, jobs
-- done: never once per job), and deletes it when it stops.
--
-- sqlq_throughput: the file's counters (puts, deletes, buries) sampled at most once a
-- minute by whichever worker beats first in that minute, so the dashboard's chart covers
-- the last day even when the page was just opened. Rates are differences of consecutive
-- samples. Bounded: samples older than a day (1440 minutes) are deleted as new ones come.

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

CREATE TABLE sqlq_throughput (
    minute  INTEGER PRIMARY KEY,  -- minutes since the epoch
    at      INTEGER NOT NULL,     -- ms: when the sample was taken
    puts    INTEGER NOT NULL,     -- jobs ever put, deleted, buried, as of `at`
    deletes INTEGER NOT NULL,
    buries  INTEGER NOT NULL
);
