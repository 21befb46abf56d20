-- sqlq schema 10: job dependencies ("run this after those", issue 24).
--
-- A job put with parents (Queue.put(..., after=IDS)) that are still in the file is in
-- a fifth state, 4 waiting: no partial index holds it, so no claim, promotion, kick or
-- peek_* ever reads it. sqlq_jobs.waiting_on counts its parents not yet gone;
-- sqlq_jobs.dependents counts the edges naming a job as parent (it only grows: a
-- child deleted first leaves its edge, taken away with the parent). One row of
-- sqlq_edges per (parent, child), found by parent (the primary key) when the parent
-- goes, by child (sqlq_edges_child) when a waiting child is deleted.
--
-- The release is a trigger, so every way a job leaves the file (delete by id, the
-- holder's delete or complete, reserve(delete=), delete_many) releases its children
-- in the same statement, even one that runs alone outside a transaction. Its WHEN
-- reads the row being deleted: a job without dependents, the common case, queues no
-- trigger program and probes nothing (as sqlq_forget_attempts of schema 8). Each
-- child's counter goes down by one (an edge is unique); a child reaching zero becomes
-- ready, or delayed by its own delay counted from that moment: sqlq_now() is the
-- Queue's clock, a function each sqlq connection defines (db.py), never the
-- database's. A release costs one primary-key range of sqlq_edges and one
-- primary-key probe per child: never a scan of waiting jobs.
-- ADD COLUMN with a constant default rewrites no row.

ALTER TABLE sqlq_jobs ADD COLUMN waiting_on INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sqlq_jobs ADD COLUMN dependents INTEGER NOT NULL DEFAULT 0;

CREATE TABLE sqlq_edges (
    parent INTEGER NOT NULL,   -- a job the child waits for (ids are never reused)
    child  INTEGER NOT NULL,   -- the waiting job
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;
CREATE INDEX sqlq_edges_child ON sqlq_edges (child);

-- Waiting jobs per tube, for stats and the tube lists (no claim reads it).
CREATE INDEX sqlq_jobs_waiting ON sqlq_jobs (tube, id) WHERE state = 4;

CREATE TRIGGER sqlq_release_children AFTER DELETE ON sqlq_jobs
WHEN old.dependents > 0
BEGIN
    UPDATE sqlq_jobs
       SET waiting_on = waiting_on - 1,
           state = CASE WHEN waiting_on > 1 THEN 4 WHEN delay > 0 THEN 1 ELSE 0 END,
           delay_until = CASE WHEN waiting_on = 1 AND delay > 0 THEN sqlq_now() + delay END
     WHERE id IN (SELECT child FROM sqlq_edges WHERE parent = old.id) AND state = 4;
    DELETE FROM sqlq_edges WHERE parent = old.id;
END;

-- A waiting job deleted takes its edges with it (its parents' counters stay: a
-- release that finds no child does nothing).
CREATE TRIGGER sqlq_forget_edges AFTER DELETE ON sqlq_jobs
WHEN old.waiting_on > 0
BEGIN
    DELETE FROM sqlq_edges WHERE child = old.id;
END;
