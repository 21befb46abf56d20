-- Durable steps and cursors (issue 40, sqlq/steps.py): what a job's earlier runs finished,
-- so a run after a crash, a retry or a snooze skips it. A step is written once, under the
-- job's live lease, in its own commit or in the application's transaction (the write it
-- records commits with it); a cursor is saved again and again (one small commit each).
-- Bounded: sqlq/steps.py MAX_STEPS rows per job, MAX_VALUE bytes of JSON each.

-- Rows a job has in sqlq_steps: the cap's count, and what lets a job without steps be
-- deleted without a probe of sqlq_steps (sqlq_forget_steps' WHEN, as sqlq_forget_attempts').
ALTER TABLE sqlq_jobs ADD COLUMN steps INTEGER NOT NULL DEFAULT 0;

CREATE TABLE sqlq_steps (
    job_id  INTEGER NOT NULL,   -- the job (ids are never reused)
    kind    INTEGER NOT NULL,   -- 0 a step (written once), 1 a cursor (saved again)
    name    TEXT    NOT NULL,
    value   TEXT    NOT NULL,   -- JSON: a step's return value, a cursor's position
    done_at INTEGER NOT NULL,   -- ms since the epoch: the step's commit, a cursor's last save
    PRIMARY KEY (job_id, kind, name)
) WITHOUT ROWID;

-- A job's steps and cursors go with it, whatever deletes it.
CREATE TRIGGER sqlq_forget_steps AFTER DELETE ON sqlq_jobs
WHEN old.steps > 0
BEGIN
    DELETE FROM sqlq_steps WHERE job_id = old.id;
END;
