-- sqlq schema 9: per-tube totals of puts and pauses (beanstalkd's total-jobs and
-- cmd-pause-tube of a tube; its cmd-delete is puts minus the tube's live jobs).
--
-- A trigger that adds 1 to a tube's row on every put cost a put about 20% (11 us of
-- 48 at durability normal, bench/bench_tube_totals.py): one more page written per
-- commit. Ids are handed out in order without gaps (migration 0007), so a tube's puts
-- are runs of consecutive ids. sqlq_tube_run holds only the latest run: its tube and
-- first id. A put into the same tube as the put before it writes nothing (the
-- trigger's WHEN reads one row); a put into another tube adds the finished run's
-- length to that tube's total and starts a new run. A tube's puts are its total plus,
-- while the latest run is its own, the ids issued since the run began.
--
-- Jobs live when this migration runs count as puts of their tube (their history
-- before it is unknown). A copied file (sqlq copy) counts the ids of its jobs' runs.

CREATE TABLE sqlq_tube_run (
    one   INTEGER PRIMARY KEY CHECK (one = 1),  -- a single row
    tube  TEXT,                                 -- the tube of the latest put; NULL: none
    start INTEGER NOT NULL                      -- the first id of the latest run
);
INSERT INTO sqlq_tube_run (one, tube, start)
SELECT 1, NULL, max(coalesce((SELECT id FROM sqlq_last_id), 0),
                    coalesce((SELECT max(id) FROM sqlq_jobs), 0)) + 1;

ALTER TABLE sqlq_counters ADD COLUMN puts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sqlq_counters ADD COLUMN pauses INTEGER NOT NULL DEFAULT 0;

INSERT INTO sqlq_counters (tube, puts)
SELECT tube, count(*) FROM sqlq_jobs WHERE true GROUP BY tube
ON CONFLICT (tube) DO UPDATE SET puts = excluded.puts;

CREATE TRIGGER sqlq_count_puts AFTER INSERT ON sqlq_jobs
WHEN new.tube IS NOT (SELECT tube FROM sqlq_tube_run)
BEGIN
    INSERT INTO sqlq_counters (tube, puts)
    SELECT tube, new.id - start FROM sqlq_tube_run WHERE tube IS NOT NULL
    ON CONFLICT (tube) DO UPDATE SET puts = puts + excluded.puts;
    UPDATE sqlq_tube_run SET tube = new.tube, start = new.id;
END;

-- Pauses are rare: a row per pause-tube (a pause of 0, which ends one, counts too).
CREATE TRIGGER sqlq_count_pauses AFTER INSERT ON sqlq_tubes
BEGIN
    INSERT INTO sqlq_counters (tube, pauses) VALUES (new.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = pauses + 1;
END;

CREATE TRIGGER sqlq_count_repauses AFTER UPDATE OF paused_until, pause_ms ON sqlq_tubes
BEGIN
    INSERT INTO sqlq_counters (tube, pauses) VALUES (new.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = pauses + 1;
END;
