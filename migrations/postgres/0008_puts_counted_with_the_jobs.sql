-- sqlq schema 8 on PostgreSQL: a put is counted by one upsert, not two.
--
-- A put's statement trigger (sqlq_count_puts) upserted its tube's puts into
-- sqlq_tube_puts and its jobs per state into sqlq_job_counts: two statements. The
-- trigger was 42% of a put's server CPU, the two upserts most of it (about 27 and 14 us
-- of 121 us; one upsert of both: 0.91x the put's server CPU, measured on variants of
-- this schema in one database). The puts are now a column of sqlq_job_counts' rows: each
-- (tube, state, urgent, slot) row counts the jobs put into that state (puts) beside the
-- jobs in that state now (n). n is kept for states 0, 1 and 3 only, as before: a row of
-- another state (a job put waiting on its parents, 4, or copied in reserved, 2) keeps n
-- at 0 and counts puts alone. A tube's puts are the sum of its rows' puts
-- (queries.sql tube_totals); the reads of n (stats, list_tubes, the count checks) sum
-- n by state and see nothing new.
ALTER TABLE sqlq_job_counts ADD COLUMN puts bigint NOT NULL DEFAULT 0;
ALTER TABLE sqlq_count_deltas ADD COLUMN puts bigint NOT NULL DEFAULT 0;

-- The puts counted so far, onto each tube's ready (non-urgent) row of the same slot.
INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n, puts)
SELECT tube, 0, false, slot, 0, puts FROM sqlq_tube_puts
ON CONFLICT (tube, state, urgent, slot) DO UPDATE SET puts = c.puts + excluded.puts;
DROP TABLE sqlq_tube_puts;

-- 0006's function, both counts in one statement (deltas as one row per key too).
CREATE OR REPLACE FUNCTION sqlq_count_puts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF sqlq_count_later() THEN
        INSERT INTO sqlq_count_deltas (tube, state, urgent, n, puts)
        SELECT tube, state, state = 0 AND priority < 1024,
               count(*) FILTER (WHERE state IN (0, 1, 3)), count(*)
          FROM sqlq_new_jobs GROUP BY 1, 2, 3;
        RETURN NULL;
    END IF;
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n, puts)
    SELECT tube, state, state = 0 AND priority < 1024, pg_backend_pid() % 64,
           count(*) FILTER (WHERE state IN (0, 1, 3)), count(*)
      FROM sqlq_new_jobs
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tube, state, urgent, slot)
    DO UPDATE SET n = c.n + excluded.n, puts = c.puts + excluded.puts;
    RETURN NULL;
END
$body$;

-- 0006's fold, one upsert in key order (the lock order of two sessions sharing a slot).
-- Every delta has a state now: a put's carries its jobs' state and its puts.
CREATE OR REPLACE FUNCTION sqlq_fold_counts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF current_setting('sqlq.counts', true) IS DISTINCT FROM 'd' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('sqlq.counts', 'c', true);
    WITH d AS (DELETE FROM sqlq_count_deltas RETURNING tube, state, urgent, n, puts)
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n, puts)
    SELECT tube, state, urgent, pg_backend_pid() % 64, sum(n), sum(puts)
      FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tube, state, urgent, slot)
    DO UPDATE SET n = c.n + excluded.n, puts = c.puts + excluded.puts;
    RETURN NULL;
END
$body$;
