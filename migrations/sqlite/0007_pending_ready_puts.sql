-- sqlq schema 7 (SQLite): a put of a ready job writes no kept-count row (migration 0005)
-- while it extends a run of ready puts of one tube and urgency; the run's length is read
-- from the ids, as the puts total of 0001 (sqlq_tube_run) already is.
--
-- Each put used to rewrite its (tube, 0, urgent) row of sqlq_job_counts: a third page in
-- every commit of a put (the job's page, sqlq_jobs_ready's and that one), and a second
-- trigger program. Now one trigger on inserts does both counts, and its body runs only
-- when an insert does not extend the run (another tube or urgency, a job not ready, an
-- import): it adds the run's pending puts to their row, counts the inserted job itself
-- (which makes sure its row exists: claims and deletes of the run's jobs decrement it,
-- UPDATE OR IGNORE) and starts a new run after it. The jobs of the run are the ids from
-- ready_from to the highest issued: every insert takes the next id (insert_job; put_many
-- numbers its rows from there), except a copy's import_job, which suspends the runs
-- (urgent -1: every insert counted at once) while it writes.
--
-- The readers keep the name: sqlq_job_counts is now a view of the kept rows plus the
-- pending run, one row per (tube, state, urgent), exact as of the last commit. Writers
-- (the triggers, put_many with the triggers off) write sqlq_job_counts_kept.
ALTER TABLE sqlq_job_counts RENAME TO sqlq_job_counts_kept;

-- urgent: the urgency (0, 1) of the pending run of ready puts of tube; NULL none; -1 the
-- runs suspended (an import). ready_from: the run's first id not yet in the kept rows.
-- state, counted: the state of the insert that started the run and whether it counts
-- in (tube, state, counted) (its urgency; NULL: a state not counted), for
-- sqlq_count_run.
ALTER TABLE sqlq_tube_run ADD COLUMN urgent INTEGER;
ALTER TABLE sqlq_tube_run ADD COLUMN ready_from INTEGER;
ALTER TABLE sqlq_tube_run ADD COLUMN state INTEGER;
ALTER TABLE sqlq_tube_run ADD COLUMN counted INTEGER;

CREATE VIEW sqlq_job_counts (tube, state, urgent, n) AS
SELECT tube, state, urgent, sum(n) FROM (
    SELECT tube, state, urgent, n FROM sqlq_job_counts_kept
    UNION ALL
    SELECT tube, 0, urgent,
           max(coalesce((SELECT max(id) FROM sqlq_jobs), 0),
               coalesce((SELECT id FROM sqlq_last_id), 0)) + 1 - ready_from
      FROM sqlq_tube_run WHERE urgent >= 0)
 GROUP BY tube, state, urgent;

DROP TRIGGER sqlq_count_inserted;
DROP TRIGGER sqlq_count_puts;

-- Every insert runs this trigger's program, whose memory cells SQLite allocates and zeroes
-- each time, even when the WHEN skips the body: so its body is one small UPDATE of the run,
-- and the counting is sqlq_count_run's, which that UPDATE fires. The WHEN is the common
-- put's whole cost: one read of the single-row sqlq_tube_run.
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

-- A run ends (old) and another starts (new) at the id new.ready_from - 1: the puts total
-- of the tube's finished run (as sqlq_count_puts did), the finished run's pending ready
-- puts into their row, and the inserted job's own count (as sqlq_count_inserted did),
-- which also makes sure the new run's row exists (claims and deletes of its jobs
-- decrement it with UPDATE OR IGNORE).
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
