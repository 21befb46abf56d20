-- sqlq schema 3: the last slot enqueued for each periodic task.
--
-- A periodic job's unique_key ("periodic:<name>:<slot ms>") stops two workers
-- from enqueueing the same slot only while that job is live; once it ran and
-- was deleted the key is free again, and a late worker could enqueue the slot
-- a second time. So the enqueue also moves this row forward, in the same
-- transaction, and only forward: a slot at or before last_slot is never
-- enqueued again, however late, however many workers or supervisors share
-- the file.

CREATE TABLE sqlq_periodic (
    name        TEXT    PRIMARY KEY,  -- the task's name
    last_slot   INTEGER NOT NULL,     -- start of the last slot enqueued (ms)
    enqueued_at INTEGER NOT NULL      -- when it was enqueued (ms)
) WITHOUT ROWID;
