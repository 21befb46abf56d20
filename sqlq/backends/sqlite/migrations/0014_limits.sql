-- sqlq schema 14: flow control, a tube's concurrency and rate limits (issue 25).
--
-- The limits live on the tube's row of sqlq_tubes, which every claim already probes for
-- a pause: the claim's tube filter skips a tube with limits as it skips a paused one (a
-- test of columns of the row it reads anyway), so a tube without limits costs a claim
-- nothing more. A tube with limits is claimed from by a second path (store.py
-- claim_limited, in one write transaction: SQLite's one writer serialises it, PostgreSQL
-- locks the tube's row), which counts the tube's live reservations and spends its rate.
--   concurrency  at most this many jobs of the tube reserved under live leases (NULL: no cap)
--   rate         at most this many claims ...
--   rate_ms      ... per this many ms (NULL: no rate): claims spaced rate_ms/rate apart
--   rate_at      the earliest time (ms, a float: the spacing need not be whole ms) of
--                the next claim (NULL: now)
-- A row made for limits alone has paused_until = 0 (never paused): it is no pause, so
-- the pause counter (schema 9) counts an insert only when it pauses.

ALTER TABLE sqlq_tubes ADD COLUMN concurrency INTEGER;
ALTER TABLE sqlq_tubes ADD COLUMN rate INTEGER;
ALTER TABLE sqlq_tubes ADD COLUMN rate_ms INTEGER;
ALTER TABLE sqlq_tubes ADD COLUMN rate_at REAL;

DROP TRIGGER sqlq_count_pauses;
CREATE TRIGGER sqlq_count_pauses AFTER INSERT ON sqlq_tubes WHEN new.paused_until > 0
BEGIN
    INSERT INTO sqlq_counters (tube, pauses) VALUES (new.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = pauses + 1;
END;
