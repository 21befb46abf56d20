-- The record of finished jobs (issue 39): every job that ends leaves one small row,
-- written by the statement sequence that deletes it (store/jobs.py), and kept for the
-- retention set per tube and overall (sqlq_retention; pruned in small batches by
-- whichever process gets to it first: sqlq/retention.py).
CREATE TABLE sqlq_finished (
    id         INTEGER PRIMARY KEY,   -- the job's id (ids are never reused)
    tube       TEXT    NOT NULL,
    grp        TEXT,                  -- its group (NULL: none)
    outcome    TEXT    NOT NULL,      -- done (by its holder, after a run), deleted, cancelled
    ended_at   INTEGER NOT NULL,      -- ms since the epoch
    worker     TEXT,                  -- owner token of its holder when it ended; NULL: none
    actor      TEXT,                  -- who deleted or cancelled it by id ('dashboard', 'cli')
    ran        INTEGER,               -- ms since its last reservation (or touch); NULL: none
    attempts   INTEGER NOT NULL,      -- its reserves
    created_at INTEGER NOT NULL,
    unique_key TEXT,
    body       BLOB    NOT NULL,      -- its first 256 bytes: what a search reads
    -- Its durable steps and cursors (issue 40, sqlq_steps) when it ended, copied by
    -- sqlq_forget_steps (below): a JSON array of {kind, name, value, at}. NULL for a
    -- job that had none.
    steps      TEXT
);

-- The Done, Cancelled and Deleted lists of a tube (newest first) and retention, which
-- works per (tube, outcome): one range each. The one index a record adds to a delete.
CREATE INDEX sqlq_finished_list ON sqlq_finished (tube, outcome, ended_at);

-- How long finished records are kept: tube '' is the setting of every tube without its
-- own row; NULL: the built-in default (sqlq/retention.py).
CREATE TABLE sqlq_retention (
    tube      TEXT PRIMARY KEY,
    max_age   INTEGER,                -- ms
    max_count INTEGER                 -- records kept per tube and outcome
) WITHOUT ROWID;

-- A job's record written is the job's end: the worker's and an operator's deletes are
-- one INSERT of the record (queries.sql delete_leased_job, delete_job), whose trigger
-- deletes the job, so each verb stays one autocommit statement. A record written after
-- its job's delete (delete_linked_job's) finds nothing here.
CREATE TRIGGER sqlq_finish_job AFTER INSERT ON sqlq_finished
BEGIN
    DELETE FROM sqlq_jobs WHERE id = new.id;
END;

-- A job's steps and cursors go onto its record (issue 40) before they go with the job:
-- sqlq_forget_steps (0002) again, copying them to the record first. The record is written
-- before its trigger deletes the job, so it is there; a job without steps skips the body
-- (the WHEN) and the delete statements are unchanged, but the bigger trigger program's
-- frame costs every delete ~3k instructions (about 1%: bench_callgrind.py fast; a CASE
-- in each delete statement cost ~4k, a BEFORE trigger ~5k). A job deleted before
-- its record (delete_linked_job) has none yet: its statement returns the steps itself.
DROP TRIGGER sqlq_forget_steps;
CREATE TRIGGER sqlq_forget_steps AFTER DELETE ON sqlq_jobs
WHEN old.steps > 0
BEGIN
    UPDATE sqlq_finished
       SET steps = (SELECT json_group_array(json_object('kind', kind, 'name', name,
                                                        'value', json(value), 'at', done_at))
                      FROM sqlq_steps WHERE job_id = old.id)
     WHERE id = old.id;
    DELETE FROM sqlq_steps WHERE job_id = old.id;
END;
