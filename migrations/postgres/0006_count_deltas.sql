-- sqlq schema 6 on PostgreSQL: counts written by a long transaction stay linear.
--
-- The problem. The kept counts (sqlq_tube_puts, sqlq_job_counts: migrations 0001, 0005)
-- are upserted by triggers, once per statement (puts) or per row (moves, deletes). An
-- upsert of a row the same transaction already wrote makes one more version of it, and
-- no version written by a transaction still running can be pruned: each next upsert of
-- the row walks every version before it. N puts in one transaction cost O(N^2) (20,000
-- puts: 15 s); so did a kick or a delete of many jobs in one statement.
--
-- The fix. The first counting statement of a transaction upserts its slot's rows as
-- before (a plain put or claim is one transaction of one statement: the same work as
-- schema 4, plus a look at one setting). Every later one in the same transaction
-- inserts delta rows into sqlq_count_deltas instead: an insert never conflicts, so
-- nothing makes version chains. A deferred trigger folds them at commit: the first of
-- its firings deletes the transaction's deltas and adds their sums to the slot's rows,
-- one upsert per key (one more version of each); the others find nothing to do and
-- return at once. A setting local to the transaction (sqlq.counts: '' nothing counted
-- yet, 'c' counted, 'd' deltas pending) says which: it follows savepoints as the rows do
-- (a rolled-back savepoint takes back both its deltas and its setting).
--
-- Why this and not the alternatives:
-- - A slot private to the transaction: still one row upserted again and again by one
--   transaction, the same version chain.
-- - Deltas folded later (by the next writer, the workers' upkeep): the reads would sum
--   base rows and pending deltas, and be as slow as the folding is late; a producer with
--   no worker would leave them piling up. Folded at commit, no delta is ever visible to
--   another session (inserted and deleted by one transaction), so the reads stay as they
--   were, exact, a few rows; and folders never wait on each other: each deletes only its
--   own rows (the fold's DELETE sees no other transaction's delta: none ever commits).
-- - Every statement writing deltas: a plain put would pay an insert, a deferred event,
--   a delete and the upsert instead of the upsert alone.
-- Sessions still write their own slot (pg_backend_pid() % 64), as in 0005: no new wait.
-- The table is UNLOGGED: its rows never outlive their transaction, so they need no WAL.
CREATE UNLOGGED TABLE sqlq_count_deltas (
    tube   text     NOT NULL,
    state  smallint,            -- NULL: puts (sqlq_tube_puts); 0, 1, 3: sqlq_job_counts
    urgent boolean  NOT NULL,
    n      bigint   NOT NULL
);

-- Whether this statement's counts go to deltas (true) or to the slot's rows (false, and
-- the transaction is marked as counted). Called once per counting trigger firing.
CREATE FUNCTION sqlq_count_later() RETURNS boolean LANGUAGE plpgsql AS $body$
DECLARE
    v_mark text := current_setting('sqlq.counts', true);
BEGIN
    IF v_mark = 'd' THEN
        RETURN true;
    ELSIF v_mark = 'c' THEN
        PERFORM set_config('sqlq.counts', 'd', true);
        RETURN true;
    END IF;
    PERFORM set_config('sqlq.counts', 'c', true);
    RETURN false;
END
$body$;

-- The fold, at commit: puts first, then jobs, each in key order, as the puts' trigger
-- writes them (the lock order of two sessions that share a slot).
CREATE FUNCTION sqlq_fold_counts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF current_setting('sqlq.counts', true) IS DISTINCT FROM 'd' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('sqlq.counts', 'c', true);
    WITH d AS (DELETE FROM sqlq_count_deltas WHERE state IS NULL RETURNING tube, n)
    INSERT INTO sqlq_tube_puts AS p (tube, slot, puts)
    SELECT tube, pg_backend_pid() % 64, sum(n) FROM d GROUP BY tube ORDER BY tube
    ON CONFLICT (tube, slot) DO UPDATE SET puts = p.puts + excluded.puts;
    WITH d AS (DELETE FROM sqlq_count_deltas WHERE state IS NOT NULL
               RETURNING tube, state, urgent, n)
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n)
    SELECT tube, state, urgent, pg_backend_pid() % 64, sum(n)
      FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tube, state, urgent, slot) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$body$;

CREATE CONSTRAINT TRIGGER sqlq_fold_counts AFTER INSERT ON sqlq_count_deltas
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION sqlq_fold_counts();

-- The three counting triggers' functions of 0005, each with its delta branch.
CREATE OR REPLACE FUNCTION sqlq_count_puts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF sqlq_count_later() THEN
        INSERT INTO sqlq_count_deltas (tube, state, urgent, n)
        SELECT tube, NULL, false, count(*) FROM sqlq_new_jobs GROUP BY tube
        UNION ALL
        SELECT tube, state, state = 0 AND priority < 1024, count(*)
          FROM sqlq_new_jobs WHERE state IN (0, 1, 3) GROUP BY 1, 2, 3;
        RETURN NULL;
    END IF;
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

CREATE OR REPLACE FUNCTION sqlq_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF sqlq_count_later() THEN
        INSERT INTO sqlq_count_deltas (tube, state, urgent, n)
        VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024, -1);
        RETURN NULL;
    END IF;
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n)
    VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024,
            pg_backend_pid() % 64, -1)
    ON CONFLICT (tube, state, urgent, slot) DO UPDATE SET n = c.n - 1;
    RETURN NULL;
END
$body$;

CREATE OR REPLACE FUNCTION sqlq_count_moved() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF sqlq_count_later() THEN
        INSERT INTO sqlq_count_deltas (tube, state, urgent, n)
        SELECT k.tube, k.state, k.urgent, k.d
          FROM (VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024, -1),
                       (NEW.tube, NEW.state, NEW.state = 0 AND NEW.priority < 1024, 1))
               AS k (tube, state, urgent, d)
         WHERE k.state IN (0, 1, 3);
        RETURN NULL;
    END IF;
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
