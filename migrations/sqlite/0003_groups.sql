-- sqlq schema 3 (SQLite): groups (issue 38). A job may belong to a group of its tube
-- (sqlq_jobs.grp); a tube that has held a grouped job is claimed fairly, the groups in
-- turn, and may cap each group (concurrency, rate) beside its own limits.
--
-- Cheap on a big file: ADD COLUMN without a default rewrites no row (SQLite reads a
-- missing column as NULL), and the one new index is partial: its build reads the table
-- once and writes only the rows it holds (none on a store that never used groups).
--
-- A job's turn is its place in its tube's rounds (start-time fair queuing): one past the
-- later of its group's last turn and the tube's round (the turn before its next claim),
-- so each group has one job a turn and a group new or idle starts at the current round;
-- the jobs without a group in a grouped tube are one more group (its row in sqlq_groups
-- has the name ''). NULL: not in a grouped tube. Claims go by (priority, turn, id).
ALTER TABLE sqlq_jobs ADD COLUMN grp TEXT;
ALTER TABLE sqlq_jobs ADD COLUMN turn INTEGER;

-- On a tube's row (sqlq_tubes):
--   grouped            NULL: the tube never held a grouped job (claimed as before); 1:
--                      claimed fairly. The plain claims skip such a tube as
--                      they skip a limited one; claim_limited claims it fairly.
--   group_concurrency  jobs of one group reserved under live leases at most (NULL: no cap)
--   group_rate         claims of one group at most ... per group_rate_ms (NULL: no rate)
ALTER TABLE sqlq_tubes ADD COLUMN grouped INTEGER;
ALTER TABLE sqlq_tubes ADD COLUMN group_concurrency INTEGER;
ALTER TABLE sqlq_tubes ADD COLUMN group_rate INTEGER;
ALTER TABLE sqlq_tubes ADD COLUMN group_rate_ms INTEGER;

-- One row per group a tube has had ('': its jobs without a group): the last turn given
-- to one of its jobs, and its rate's next claim (as sqlq_tubes.rate_at; NULL: now).
CREATE TABLE sqlq_groups (
    tube    TEXT    NOT NULL,
    grp     TEXT    NOT NULL,
    turn    INTEGER NOT NULL,
    rate_at REAL,
    PRIMARY KEY (tube, grp)
) WITHOUT ROWID;
-- A tube's last turn given (max), for a put into a grouped tube with nothing ready.
CREATE INDEX sqlq_groups_turn ON sqlq_groups (tube, turn);

-- The fair claim's order: in a band of priority, by turn then id. Ready jobs of grouped
-- tubes only (a tube without groups adds nothing to it, and pays nothing for it).
CREATE INDEX sqlq_jobs_turns ON sqlq_jobs (tube, priority, turn, id)
    WHERE state = 0 AND turn IS NOT NULL;
