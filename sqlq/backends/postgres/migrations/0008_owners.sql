-- sqlq schema 8 on PostgreSQL: a row for each process that reserves, with its last
-- sign of life, so that a holder whose session ended while the process lives (a
-- server restart, pg_terminate_backend, a dropped connection) keeps its jobs.
--
-- Liveness was only the session advisory lock "sqlq owner <token>": free lock, dead
-- holder, jobs given back. But a session can end while its process runs on, and the
-- next reserve anywhere then handed out jobs still being run. Now a holder whose lock
-- is free is dead only when its process is seen gone on the reaper's own machine
-- (same boot and pid namespace: `place`), or when its keeper has not written
-- `seen_at` for the grace period (liveness.py): the keeper re-takes the same token's
-- lock on a new session long before that.

CREATE TABLE sqlq_owners (
    token      text        PRIMARY KEY,
    host       text        NOT NULL,
    pid        integer     NOT NULL,
    place      text        NOT NULL,  -- boot id and pid namespace: where pid names this process
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now()
);
