-- sqlq schema 5: per-tube counts of buries, kicks and timeouts, for /metrics.
--
-- A job's own counters (buries, kicks, timeouts) vanish with its row, so a
-- Prometheus counter summed from them would go down when a job is deleted. These
-- totals are kept by a trigger instead of by store.py: it fires only on the
-- statements that set one of those columns (bury, kick, the promotion of an
-- expired reservation, reserve-job), never on put, reserve or delete, so the
-- hot path pays nothing. Puts and deletes need no table: sqlite_sequence
-- already counts every id handed out, and deletes are puts minus live jobs.

CREATE TABLE sqlq_counters (
    tube     TEXT    PRIMARY KEY,
    buries   INTEGER NOT NULL DEFAULT 0,
    kicks    INTEGER NOT NULL DEFAULT 0,
    timeouts INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TRIGGER sqlq_count_events AFTER UPDATE OF buries, kicks, timeouts ON sqlq_jobs
WHEN new.buries > old.buries OR new.kicks > old.kicks OR new.timeouts > old.timeouts
BEGIN
    INSERT INTO sqlq_counters (tube, buries, kicks, timeouts)
    VALUES (new.tube, new.buries - old.buries, new.kicks - old.kicks,
            new.timeouts - old.timeouts)
    ON CONFLICT (tube) DO UPDATE SET buries = buries + excluded.buries,
                                     kicks = kicks + excluded.kicks,
                                     timeouts = timeouts + excluded.timeouts;
END;
