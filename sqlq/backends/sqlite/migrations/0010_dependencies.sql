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
-- The release is no trigger: a trigger, even one whose WHEN is false, costs every delete
-- a trigger program (measured with callgrind: 30k instructions a delete by id, 38k with
-- one such trigger). The deletes skip a job with edges (dependents = 0 AND waiting_on =
-- 0 in their WHERE: a test of the row they read anyway); the store then deletes it in a
-- savepoint with the release of its children (store.py, queries.sql's "Dependencies").
-- Each child's counter goes down by one (an edge is unique); a child reaching zero
-- becomes ready, or delayed by its own delay counted from the Queue's clock at that
-- moment. A release costs one primary-key range of sqlq_edges and one primary-key
-- probe per child: never a scan of waiting jobs.
-- ADD COLUMN with a constant default rewrites no row.

ALTER TABLE sqlq_jobs ADD COLUMN waiting_on INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sqlq_jobs ADD COLUMN dependents INTEGER NOT NULL DEFAULT 0;

CREATE TABLE sqlq_edges (
    parent INTEGER NOT NULL,   -- a job the child waits for (ids are never reused)
    child  INTEGER NOT NULL,   -- the waiting job
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;
CREATE INDEX sqlq_edges_child ON sqlq_edges (child);
