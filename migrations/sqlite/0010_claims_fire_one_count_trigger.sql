-- sqlq schema 10 (SQLite): a claim fires one kept-count trigger, not two.
--
-- sqlq_count_entered (migration 0006) counts a job into the state it moves to. A claim
-- moves a job into state 2, which is not counted, so the trigger's WHEN was always false
-- there. But SQLite evaluates a trigger's WHEN inside the trigger's own program. Every
-- claim therefore allocated, zeroed and freed that program's frame for nothing: 4.4k of
-- a reserve+delete's 214k instructions (bench_callgrind.py cycle).
--
-- A trigger named with UPDATE OF fires only for an UPDATE whose SET names one of those
-- columns. The trigger now names the columns that every move into a counted state sets
-- and that no claim sets:
-- * a release sets releases and delay_until;
-- * a bury sets buries;
-- * a kick sets kicks;
-- * promote_due sets delay_until and timeouts;
-- * a postpone and a debounce's replace set delay_until;
-- * a parent's end sets waiting_on;
-- * a dead holder's give-back sets delay_until (queries.sql release_owner);
-- * a change of priority sets priority.
-- tests/unit/test_queries.py reads queries.sql and holds every such statement to that
-- rule. The WHEN and the body are 0006's.
DROP TRIGGER sqlq_count_entered;
CREATE TRIGGER sqlq_count_entered
AFTER UPDATE OF priority, delay_until, releases, buries, kicks, timeouts, waiting_on ON sqlq_jobs
WHEN new.state <> 2 AND new.state <> 4
 AND (old.state <> new.state
      OR old.state = 0 AND (old.priority < 1024) <> (new.priority < 1024))
BEGIN
    INSERT OR IGNORE INTO "sqlq_job_counts_kept" (tube, state, urgent, n)
    VALUES (new.tube, new.state, new.state = 0 AND new.priority < 1024, 0);
    UPDATE OR IGNORE "sqlq_job_counts_kept" SET n = n + 1
     WHERE tube = new.tube AND state = new.state
       AND urgent = (new.state = 0 AND new.priority < 1024);
END;
