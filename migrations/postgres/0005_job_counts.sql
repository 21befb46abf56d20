-- sqlq schema 5 on PostgreSQL: jobs counted per tube and stored state, kept by triggers
-- (the SQLite file's 0005 says what is counted and why). What PostgreSQL does otherwise:
-- one counter row per (tube, state) would be a hot row, every put and claim of every
-- process waiting on its lock; as sqlq_tube_puts, each key has up to 64 rows, one per
-- slot, a session writing the slot of its backend pid (pg_backend_pid() % 64). A count is
-- the sum of its slots; a slot's n may go below 0 (a job put through one slot is claimed
-- through another). Rows are never deleted: at most tubes x 4 keys x 64 slots.
CREATE TABLE sqlq_job_counts (
    tube   text     NOT NULL,
    state  smallint NOT NULL,   -- 0 ready, 1 delayed, 3 buried
    urgent boolean  NOT NULL,   -- true: ready with priority < 1024
    slot   int      NOT NULL,   -- pg_backend_pid() % 64 of the sessions that wrote it
    n      bigint   NOT NULL,
    PRIMARY KEY (tube, state, urgent, slot)
);

-- The jobs already there, counted under a lock that keeps writers out until the
-- triggers below exist (SHARE ROW EXCLUSIVE, which CREATE TRIGGER takes anyway, taken
-- before the count so no write falls between the two): the count is the stall of this
-- migration on a big database (CONTRIBUTING.md "Migrations on a big store").
LOCK TABLE sqlq_jobs IN SHARE ROW EXCLUSIVE MODE;
-- One count per state, each from its partial index (an index-only scan where the
-- visibility map allows), not one pass over the table's rows and their bodies.
INSERT INTO sqlq_job_counts (tube, state, urgent, slot, n)
SELECT tube, 0, priority < 1024, 0, count(*) FROM sqlq_jobs WHERE state = 0 GROUP BY 1, 3;
INSERT INTO sqlq_job_counts (tube, state, urgent, slot, n)
SELECT tube, 1, false, 0, count(*) FROM sqlq_jobs WHERE state = 1 GROUP BY 1;
INSERT INTO sqlq_job_counts (tube, state, urgent, slot, n)
SELECT tube, 3, false, 0, count(*) FROM sqlq_jobs WHERE state = 3 GROUP BY 1;

-- Puts: counted once per statement from its inserted rows, in the trigger function that
-- already counts them per tube (one function call a put, not two).
CREATE OR REPLACE FUNCTION sqlq_count_puts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_tube_puts AS p (tube, slot, puts)
    SELECT tube, pg_backend_pid() % 64, count(*) FROM sqlq_new_jobs GROUP BY tube ORDER BY tube
    ON CONFLICT (tube, slot) DO UPDATE SET puts = p.puts + excluded.puts;
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n)
    SELECT tube, state, state = 0 AND priority < 1024, pg_backend_pid() % 64, count(*)
      FROM sqlq_new_jobs WHERE state IN (0, 1, 3)
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tube, state, urgent, slot) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$body$;

-- A worked job's delete (state 2, the common case) queues no event: the WHEN excludes it.
CREATE FUNCTION sqlq_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n)
    VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024,
            pg_backend_pid() % 64, -1)
    ON CONFLICT (tube, state, urgent, slot) DO UPDATE SET n = c.n - 1;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_count_deleted AFTER DELETE ON sqlq_jobs
FOR EACH ROW WHEN (OLD.state IN (0, 1, 3))
EXECUTE FUNCTION sqlq_count_deleted();

-- A state change from or to a counted state, or a ready job's urgency changed (nothing
-- updates a job's tube). The two keys are written in key order, as the puts' are.
CREATE FUNCTION sqlq_count_moved() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n)
    SELECT k.tube, k.state, k.urgent, pg_backend_pid() % 64, sum(k.d)
      FROM (VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024, -1),
                   (NEW.tube, NEW.state, NEW.state = 0 AND NEW.priority < 1024, 1))
           AS k (tube, state, urgent, d)
     WHERE k.state IN (0, 1, 3)
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tube, state, urgent, slot) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_count_moved AFTER UPDATE OF state, priority ON sqlq_jobs
FOR EACH ROW
WHEN ((OLD.state IN (0, 1, 3) OR NEW.state IN (0, 1, 3))
      AND (OLD.state <> NEW.state
           OR OLD.state = 0 AND (OLD.priority < 1024) <> (NEW.priority < 1024)))
EXECUTE FUNCTION sqlq_count_moved();

-- No JIT in the claim (issue 39). The claim's generic plan is costed from the table's
-- statistics: with a million delayed jobs its estimate passed jit_above_cost, and every
-- claim compiled its plan again (76 functions, 42 ms of a 45 ms claim, measured at 1M
-- ready and 1M delayed jobs: a claim 30x slower than at 10k). A queue's statements
-- each touch a few rows: JIT never pays for itself here.
ALTER FUNCTION sqlq_claim(text[], bigint, text, integer, boolean, text[], bigint[], bigint[],
                          bigint[], bigint) SET jit = off;
ALTER FUNCTION sqlq_delete_and_claim(bigint, bigint, bigint, text[], text, text[], bigint[],
                                     bigint[], bigint[], bigint) SET jit = off;
ALTER FUNCTION sqlq_delete_and_claim_many(bigint[], bigint[], bigint, text[], text, integer,
                                          text[], bigint[], bigint[], bigint[], bigint)
    SET jit = off;
ALTER FUNCTION sqlq_floors(text[], bigint, text[], bigint[], bigint[], bigint[], xid8[],
                           bigint, boolean) SET jit = off;
