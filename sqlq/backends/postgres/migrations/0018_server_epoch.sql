-- sqlq schema 18 on PostgreSQL: a holder's grace counts from when the server became
-- reachable, not from its postmaster's start (reliability.md F11; owners.py).
--
-- The reaper judged a holder whose lock is free dead once it was silent for GRACE_S,
-- counted from pg_postmaster_start_time() at the earliest. But a crashed server starts,
-- then recovers (fsync, WAL replay, a checkpoint) before it accepts anyone: 12-13 s
-- under load, far longer on a big server; a promoted standby's start time is that of
-- the standby; and a backend's crash makes the postmaster recover again without a new
-- start time. The first worker to reach the server then handed out every held job
-- before the holders' keepers could take their locks again.
--
-- sqlq_server_epoch holds one row: the postmaster's start time, and when the first
-- sqlq reaper looked at this incarnation of the server (a reaper that finds a free lock
-- and no row writes it, note_server_epoch; until then nobody is silent). UNLOGGED on purpose: PostgreSQL empties an
-- unlogged table at the end of every crash recovery (an immediate shutdown, a crashed
-- backend's reinitialisation), has it empty on a promoted standby and in a base
-- backup, so the row can only describe the server as it runs now; after a clean
-- restart it survives, but its start time no longer matches.
CREATE UNLOGGED TABLE sqlq_server_epoch (
    started timestamptz PRIMARY KEY,              -- pg_postmaster_start_time() it belongs to
    seen_at timestamptz NOT NULL DEFAULT now()    -- the first reaper's look after that
);

-- How many of a holder's reservations a reaper handed out (release_dead_owner) since
-- its keeper last registered: a keeper that takes its lock again says what it found
-- (all stand, or N of M handed out) instead of presuming they stand. The hand-over
-- keeps the row (it deleted it); rows silent for an hour go as before.
ALTER TABLE sqlq_owners ADD COLUMN handed_out integer NOT NULL DEFAULT 0;
