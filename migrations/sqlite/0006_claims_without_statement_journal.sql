-- sqlq schema 6 (SQLite): the kept counts' trigger on state changes (migration 0005)
-- without an UPSERT, so that a claim inside a transaction (the worker's delete-and-claim,
-- one commit a job) keeps no statement journal.
--
-- SQLite copies every page a statement changes into a statement journal when the
-- statement runs inside a transaction and could fail halfway (a constraint that aborts, a
-- function that may raise) after more than one write (a trigger's): about 10k instructions
-- a claim (bench_callgrind.py fast). The claims (queries.sql claim_job, claim_job_in_tube)
-- are UPDATE OR IGNORE with a bound lease; a trigger's statements take the OR IGNORE of the
-- statement that fires it, but an UPSERT's DO UPDATE always aborts on a NULL, so the count
-- of the state a job moves into is an INSERT OR IGNORE of its row (n = 0) and an UPDATE.
-- Two triggers, one per side of the move: a claim (into state 2, not counted) runs only the
-- first one's body (1.8k instructions a claim less than one trigger with dead statements).
-- The counts are those of 0005: OR IGNORE changes nothing here (no column is set NULL, no
-- key changes).
DROP TRIGGER sqlq_count_moved;
CREATE TRIGGER sqlq_count_moved AFTER UPDATE OF state, priority ON sqlq_jobs
WHEN old.state <> 2 AND old.state <> 4
 AND (old.state <> new.state
      OR old.state = 0 AND (old.priority < 1024) <> (new.priority < 1024))
BEGIN
    UPDATE OR IGNORE sqlq_job_counts SET n = n - 1
     WHERE tube = old.tube AND state = old.state
       AND urgent = (old.state = 0 AND old.priority < 1024);
END;

CREATE TRIGGER sqlq_count_entered AFTER UPDATE OF state, priority ON sqlq_jobs
WHEN new.state <> 2 AND new.state <> 4
 AND (old.state <> new.state
      OR old.state = 0 AND (old.priority < 1024) <> (new.priority < 1024))
BEGIN
    INSERT OR IGNORE INTO sqlq_job_counts (tube, state, urgent, n)
    VALUES (new.tube, new.state, new.state = 0 AND new.priority < 1024, 0);
    UPDATE OR IGNORE sqlq_job_counts SET n = n + 1
     WHERE tube = new.tube AND state = new.state
       AND urgent = (new.state = 0 AND new.priority < 1024);
END;
