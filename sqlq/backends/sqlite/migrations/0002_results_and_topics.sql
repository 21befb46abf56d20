-- sqlq schema 2: job results and fan-out subscriptions.
--
-- A completed job leaves its row in sqlq_jobs (deleted in the same transaction)
-- and a row here, so a reader's snapshot sees either the job or its result,
-- never neither. A buried job needs no record of its own: its row stays in
-- sqlq_jobs with state 3 and bury_reason, which is what result() reports.
-- Rows expire at expires_at (ms) and are purged a few at a time by later
-- completes: no reaper process, and the claim path never touches this table.

CREATE TABLE sqlq_results (
    job_id     INTEGER PRIMARY KEY,   -- the job's id (ids are never reused)
    result     BLOB    NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX sqlq_results_expires ON sqlq_results (expires_at);

-- publish(topic) puts one copy of the job into every tube subscribed to the
-- topic. Subscriptions are rows, not connections: a subscriber that is down
-- still has its tube filled, and drains it when it comes back.
CREATE TABLE sqlq_subscriptions (
    topic TEXT NOT NULL,
    tube  TEXT NOT NULL,
    PRIMARY KEY (topic, tube)
) WITHOUT ROWID;
