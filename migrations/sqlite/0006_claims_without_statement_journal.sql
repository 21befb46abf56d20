-- sqlq schema 6 (SQLite): the kept counts' claim trigger (migration 0005) without an
-- UPSERT, so that a claim inside a transaction (the worker's delete-and-claim, one commit a
-- job) keeps no statement journal.
--
-- SQLite copies every page a statement changes into a statement journal, when the
-- statement runs inside a transaction and could fail halfway (a constraint that aborts,
-- a function that raises) after more than one write (a trigger): about 10k instructions a
-- claim (bench_callgrind.py fast). The claims (queries.sql claim_job, claim_job_in_tube)
-- are UPDATE OR IGNORE with a bound lease; a trigger's statements take the OR IGNORE of the
-- statement that fires it, but an UPSERT's DO UPDATE always aborts on a NULL, so the count
-- of the state a job moves into is an INSERT OR IGNORE of its row (n = 0) and an UPDATE
-- (the claim's own move, into state 2, skips both: their WHERE is false). Same counts:
-- the OR IGNORE changes nothing, no column here can be NULL and no key changes.
DROP TRIGGER sqlq_count_moved;
CREATE TRIGGER sqlq_count_moved AFTER UPDATE OF state, priority ON sqlq_jobs
WHEN (old.state <> 2 AND old.state <> 4 OR new.state <> 2 AND new.state <> 4)
 AND (old.state <> new.state
      OR old.state = 0 AND (old.priority < 1024) <> (new.priority < 1024))
BEGIN
    UPDATE OR IGNORE sqlq_job_counts SET n = n - 1
     WHERE old.state <> 2 AND old.state <> 4 AND tube = old.tube AND state = old.state
       AND urgent = (old.state = 0 AND old.priority < 1024);
    INSERT OR IGNORE INTO sqlq_job_counts (tube, state, urgent, n)
    SELECT new.tube, new.state, new.state = 0 AND new.priority < 1024, 0
     WHERE new.state <> 2 AND new.state <> 4;
    UPDATE OR IGNORE sqlq_job_counts SET n = n + 1
     WHERE new.state <> 2 AND new.state <> 4 AND tube = new.tube AND state = new.state
       AND urgent = (new.state = 0 AND new.priority < 1024);
END;
