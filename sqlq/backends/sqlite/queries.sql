-- Every statement sqlq runs against its own tables, by name.
--
-- Format: a block starts with "-- name: NAME", then comment lines that say why
-- the query is shaped as it is, then the SQL up to the next block. store.py is
-- the only reader of this file. Parameters are always bound, never formatted.
-- :now is the caller's clock in ms; :tubes is a JSON array of tube names.
-- States: 0 ready, 1 delayed, 2 reserved, 3 buried, 4 waiting (for parents: migration 0010).
-- (SELECT :x), not a bare :x, where the planner would read a bound value: a tube or a
-- time compared with an indexed column once the file has sqlite_stat4 (after ANALYZE or
-- PRAGMA optimize; apsw's SQLite has STAT4), or a LIMIT. SQLite then prepares the
-- statement again on every run (2-45 us); a subquery hides the value from the planner
-- and the plan stays the same. tests/unit/test_queries.py counts the re-prepares.

-- name: insert_job
-- The one INSERT of every put and publish (put_many: insert_job_at). The hottest
-- statement, so its parameters are positional (they bind faster) and the new id is
-- read from last_insert_rowid() instead of a RETURNING row. The id is past both the highest
-- job left and the highest ever issued (migration 0007: ids are never reused, and
-- only a delete of the highest job writes sqlq_last_id); two probes of the last
-- page of a b-tree, cheaper than the sqlite_sequence write of AUTOINCREMENT.
-- Parameters: tube, priority, state, delay, delay_until, ttr, body, created_at, unique_key.
INSERT INTO sqlq_jobs (id, tube, priority, state, delay, delay_until, ttr, body, created_at,
                       unique_key)
VALUES ((SELECT max(coalesce((SELECT max(id) FROM sqlq_jobs), 0), id) + 1 FROM sqlq_last_id),
        ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: insert_ready_job
-- insert_job for the common put (ready now, no unique key), the state, delay and key
-- written as constants: SQLite then leaves out at prepare time the partial indexes such
-- a row can never enter (delayed jobs, unique keys) and binds 5 values, not 9: about 14%
-- of the statement's instructions (callgrind, 36k against 42k).
-- Parameters: tube, priority, ttr, body, created_at.
INSERT INTO sqlq_jobs (id, tube, priority, state, delay, delay_until, ttr, body, created_at,
                       unique_key)
VALUES ((SELECT max(coalesce((SELECT max(id) FROM sqlq_jobs), 0), id) + 1 FROM sqlq_last_id),
        ?, ?, 0, 0, NULL, ?, ?, ?, NULL);

-- name: close_put_run
-- A put_many made with the triggers off (drivers.triggers_off) does once what
-- sqlq_count_put (migration 0007) does for a row: if the latest run of puts was
-- another tube's, add its length to that tube's total (this statement), and start a
-- run of this tube at the batch's first id (open_put_run).
INSERT INTO sqlq_counters (tube, puts)
SELECT tube, :first - start FROM sqlq_tube_run WHERE tube IS NOT NULL AND tube IS NOT :tube
ON CONFLICT (tube) DO UPDATE SET puts = puts + excluded.puts;

-- name: open_put_run
UPDATE sqlq_tube_run SET tube = :tube, start = :first WHERE tube IS NOT :tube;

-- name: add_job_counts
-- A put_many made with the triggers off does once what sqlq_count_put (migration 0007)
-- does for a row: :n more jobs in (:tube, :state), ready ones by urgency.
INSERT INTO sqlq_job_counts_kept (tube, state, urgent, n)
VALUES (:tube, :state, :state = 0 AND :priority < 1024, :n)
ON CONFLICT (tube, state, urgent) DO UPDATE SET n = n + excluded.n;

-- name: fold_ready_run
-- The pending run of ready puts (migration 0007) into its kept row, before a write the
-- run cannot follow: a put_many with the triggers off, an import, the copy's next id.
-- set_ready_run then ends the run (:urgent NULL) or suspends the runs (-1, an import).
INSERT INTO sqlq_job_counts_kept (tube, state, urgent, n)
SELECT tube, 0, urgent, max(coalesce((SELECT max(id) FROM sqlq_jobs), 0),
                            coalesce((SELECT id FROM sqlq_last_id), 0)) + 1 - ready_from
  FROM sqlq_tube_run WHERE urgent >= 0
ON CONFLICT (tube, state, urgent) DO UPDATE SET n = n + excluded.n;

-- name: set_ready_run
UPDATE sqlq_tube_run SET urgent = :urgent;

-- name: insert_job_at
-- insert_job with the id given: put_many, under the write lock, reads the highest id
-- issued once (total_jobs) and numbers its rows from there, which spares every row
-- insert_job's two probes (about 0.4 us a job of 2.6).
-- Parameters: id, tube, priority, state, delay, delay_until, ttr, body, created_at,
-- unique_key.
INSERT INTO sqlq_jobs (id, tube, priority, state, delay, delay_until, ttr, body, created_at,
                       unique_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: insert_jobs_at
-- insert_job_at for 16 rows in one statement: put_many inserts its rows 16 at a time, the
-- rest with insert_job_at. apsw's executemany looks its statement up again for every row
-- (hashing its text: ~3k instructions a row, bench_callgrind.py fill) and binds all ten
-- values of each; here once a 16 rows, the values they share bound once.
-- Parameters: ?1 tube, ?2 priority, ?3 state, ?4 delay, ?5 delay_until, ?6 ttr,
-- ?7 created_at, then each row's id and body (?8 and ?9 for the first, ?10 and ?11 ...).
INSERT INTO sqlq_jobs (id, tube, priority, state, delay, delay_until, ttr, body, created_at,
                       unique_key)
VALUES (?8, ?1, ?2, ?3, ?4, ?5, ?6, ?9, ?7, NULL),
       (?10, ?1, ?2, ?3, ?4, ?5, ?6, ?11, ?7, NULL),
       (?12, ?1, ?2, ?3, ?4, ?5, ?6, ?13, ?7, NULL),
       (?14, ?1, ?2, ?3, ?4, ?5, ?6, ?15, ?7, NULL),
       (?16, ?1, ?2, ?3, ?4, ?5, ?6, ?17, ?7, NULL),
       (?18, ?1, ?2, ?3, ?4, ?5, ?6, ?19, ?7, NULL),
       (?20, ?1, ?2, ?3, ?4, ?5, ?6, ?21, ?7, NULL),
       (?22, ?1, ?2, ?3, ?4, ?5, ?6, ?23, ?7, NULL),
       (?24, ?1, ?2, ?3, ?4, ?5, ?6, ?25, ?7, NULL),
       (?26, ?1, ?2, ?3, ?4, ?5, ?6, ?27, ?7, NULL),
       (?28, ?1, ?2, ?3, ?4, ?5, ?6, ?29, ?7, NULL),
       (?30, ?1, ?2, ?3, ?4, ?5, ?6, ?31, ?7, NULL),
       (?32, ?1, ?2, ?3, ?4, ?5, ?6, ?33, ?7, NULL),
       (?34, ?1, ?2, ?3, ?4, ?5, ?6, ?35, ?7, NULL),
       (?36, ?1, ?2, ?3, ?4, ?5, ?6, ?37, ?7, NULL),
       (?38, ?1, ?2, ?3, ?4, ?5, ?6, ?39, ?7, NULL);

-- name: find_unique_job
-- The live job holding a unique key in a tube (sqlq_jobs_unique makes it one at most).
SELECT id FROM sqlq_jobs WHERE tube = :tube AND unique_key = :unique_key;

-- name: promote_due
-- Before a claim looks, delayed jobs that came due in the watched tubes and
-- reservations whose TTR ran out (counted as timeouts) are written down as
-- ready, so priority order holds between them and jobs put ready. One
-- statement, two index range probes that find nothing in the common case.
UPDATE sqlq_jobs
   SET state = 0, delay_until = NULL, reserved_until = NULL, lease = NULL, owner = NULL,
       timeouts = timeouts + (state = 2)
 WHERE id IN (SELECT id FROM sqlq_jobs
               WHERE state = 1 AND tube IN (SELECT value FROM json_each(:tubes))
                 AND delay_until <= (SELECT :now)
              UNION ALL
              SELECT id FROM sqlq_jobs WHERE state = 2 AND reserved_until <= (SELECT :now));

-- name: claim_job
-- The most urgent ready job across the watched, unpaused tubes: one index probe
-- per tube (the correlated subquery), then the best of those, in one statement. A tube
-- with limits is skipped as a paused one, in the same probe of its sqlq_tubes row, unless
-- :capped (1: LimitStore.claim_limited, which passes only tubes that may give a job now;
-- migration 0014, sqlq/limits.py).
-- OR IGNORE and the lease bound (:lease, drawn by store.py), not abs(random()): nothing
-- in the statement or its triggers (sqlq_count_moved, migration 0006) can then abort
-- (the claim sets no column NULL and no unique key), so inside a transaction (the
-- worker's delete-and-claim) SQLite keeps no statement journal for it: a copy of every
-- page it changes, about 10k instructions a claim (bench_callgrind.py fast).
UPDATE OR IGNORE sqlq_jobs
   SET state = 2, reserved_until = :now + ttr, reserves = reserves + 1,
       lease = :lease, owner = :owner
 WHERE id = (
       SELECT j.id
         FROM json_each(:tubes) AS t
         JOIN sqlq_jobs AS j
           ON j.id = (SELECT r.id FROM sqlq_jobs AS r
                       WHERE r.state = 0 AND r.tube = t.value
                       ORDER BY r.priority, r.id LIMIT 1)
        WHERE NOT EXISTS (SELECT 1 FROM sqlq_tubes AS p
                           WHERE p.name = t.value
                             AND (p.paused_until > :now
                                  OR NOT :capped AND coalesce(p.concurrency, p.rate, p.grouped)
                                                     IS NOT NULL))
        ORDER BY j.priority, j.id
        LIMIT 1)
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: claim_job_in_tube
-- (Outside a transaction only: the engine's claims run inside BEGIN IMMEDIATE, where
-- pick_job_in_tube and claim_picked_job do this without RETURNING's temporary table.)
-- claim_job for the common reserve that watches one tube: the same job (the tube's best
-- ready job, unless the tube is paused) without json_each, the join and the sort of one
-- row: 5.5 us a statement against 6.8. (SELECT ?3), never a bare ?3: SQLite built
-- with STAT4 (apsw's is) prepares a statement again on every run when a bound value is
-- compared with an indexed column (25 us a claim); a subquery hides it from the planner.
-- Parameters by number, bound from a tuple (0.2 us a claim less than a dict's names):
-- ?1 now, ?2 owner, ?3 tube, ?4 the lease (OR IGNORE and a bound lease: claim_job's
-- reason).
UPDATE OR IGNORE sqlq_jobs
   SET state = 2, reserved_until = ?1 + ttr, reserves = reserves + 1,
       lease = ?4, owner = ?2
 WHERE id = (SELECT id FROM sqlq_jobs
              WHERE state = 0 AND tube = (SELECT ?3)
              ORDER BY priority, id LIMIT 1)
   AND NOT EXISTS (SELECT 1 FROM sqlq_tubes
                    WHERE name = (SELECT ?3)
                      AND (paused_until > ?1 OR coalesce(concurrency, rate, grouped) IS NOT NULL))
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: pick_job_in_tube
-- claim_job_in_tube inside a transaction that holds the write lock (the worker's
-- delete-and-claim): the job it would claim, read with the values its RETURNING gives,
-- then claimed by id (claim_picked_job). RETURNING keeps its rows in a temporary table
-- (opened, its first page zeroed, closed: about 9k instructions a claim), which a read
-- and an update by id spare; nothing can change the job in between. Parameters as
-- claim_job_in_tube's (?2 unused).
SELECT id, tube, priority, ttr, body, created_at, reserves + 1, timeouts, releases, buries,
       kicks, ?4, ?1 + ttr, unique_key, delay, trace, grp
  FROM sqlq_jobs
 WHERE id = (SELECT id FROM sqlq_jobs
              WHERE state = 0 AND tube = (SELECT ?3)
              ORDER BY priority, id LIMIT 1)
   AND NOT EXISTS (SELECT 1 FROM sqlq_tubes
                    WHERE name = (SELECT ?3)
                      AND (paused_until > ?1 OR coalesce(concurrency, rate, grouped) IS NOT NULL));

-- name: claim_picked_job
-- ?1 now, ?2 owner, ?3 the id pick_job_in_tube read, ?4 the lease.
UPDATE OR IGNORE sqlq_jobs
   SET state = 2, reserved_until = ?1 + ttr, reserves = reserves + 1, lease = ?4, owner = ?2
 WHERE id = ?3;

-- name: claim_job_by_id
-- beanstalkd's reserve-job: any job that is not reserved under a live lease, nor waiting.
UPDATE sqlq_jobs
   SET state = 2, reserved_until = :now + ttr, reserves = reserves + 1,
       lease = abs(random()), owner = :owner, delay_until = NULL,
       timeouts = timeouts + (state = 2)
 WHERE id = :id AND NOT (state = 2 AND reserved_until > :now) AND state <> 4
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: look_ready
-- A waiting worker's look, a read before it asks for the write lock: whether a claim
-- in these tubes would find a job (ready, or due: a delayed job that came due, an
-- expired reservation), and when promote_due can next find something there, for
-- store.py's DueCache. That time is the earliest delayed job of each tube (one probe
-- per tube) and the earliest reservation deadline of any tube (promote_due takes every
-- expired one; the first entry of sqlq_jobs_reserved), read after a PRAGMA data_version
-- that proves it current (store.py: the pragma as its own statement, not the
-- pragma_data_version() table, which prepares the pragma again at every run: 20 us of
-- a wake): a claim right after a wake then skips promote_due. Also read right after a
-- committed promote_due. (SELECT :now): see the header. A tube with limits counts only
-- while it may give a job (a free slot, the rate's next claim due: migration 0014): a
-- waiter on a full tube is not woken into a claim by every commit; the live
-- reservations are counted only for a tube with a cap (the test runs after the others).
SELECT EXISTS (SELECT 1
                 FROM json_each(:tubes) AS t
                WHERE NOT EXISTS (SELECT 1 FROM sqlq_tubes AS p
                                   WHERE p.name = t.value
                                     AND (p.paused_until > (SELECT :now)
                                          OR p.rate_at > (SELECT :now)
                                          OR CASE WHEN p.concurrency IS NOT NULL
                                             THEN p.concurrency <= (SELECT count(*)
                                                    FROM sqlq_jobs
                                                   WHERE state = 2 AND tube = t.value
                                                     AND reserved_until > (SELECT :now))
                                             END))
                  AND (EXISTS (SELECT 1 FROM sqlq_jobs WHERE state = 0 AND tube = t.value)
                       OR EXISTS (SELECT 1 FROM sqlq_jobs
                                   WHERE state = 1 AND tube = t.value AND delay_until <= (SELECT :now)))
                UNION ALL
               SELECT 1 FROM sqlq_jobs
                WHERE state = 2 AND reserved_until <= (SELECT :now)
                  AND tube IN (SELECT value FROM json_each(:tubes))),
       (SELECT min((SELECT delay_until FROM sqlq_jobs
                     WHERE state = 1 AND tube = t.value
                     ORDER BY delay_until LIMIT 1))
          FROM json_each(:tubes) AS t),
       (SELECT min(reserved_until) FROM sqlq_jobs WHERE state = 2);

-- name: next_due
-- When something in these tubes may next become ready: the earliest delayed job
-- (one probe per tube), the earliest reservation deadline, the earliest end of a pause,
-- the earliest next claim a rate allows (a float: store.py rounds it up).
-- Only times still to come, in these tubes: what is due already is ready (look_ready
-- sees it) or waits for a pause to end, and an expired reservation of another tube
-- makes nothing ready here (a past time would make a waiter look again at once, in a
-- loop, until somebody claimed in that tube).
SELECT (SELECT min((SELECT delay_until FROM sqlq_jobs
                     WHERE state = 1 AND tube = t.value AND delay_until > (SELECT :now)
                     ORDER BY delay_until LIMIT 1))
          FROM json_each(:tubes) AS t),
       (SELECT min(reserved_until) FROM sqlq_jobs
         WHERE state = 2 AND reserved_until > (SELECT :now)
           AND tube IN (SELECT value FROM json_each(:tubes))),
       (SELECT min(paused_until) FROM sqlq_tubes
         WHERE paused_until > (SELECT :now) AND name IN (SELECT value FROM json_each(:tubes))),
       (SELECT min(rate_at) FROM sqlq_tubes
         WHERE rate_at > (SELECT :now) AND name IN (SELECT value FROM json_each(:tubes))),
       (SELECT min(rate_at) FROM sqlq_groups
         WHERE rate_at > (SELECT :now) AND tube IN (SELECT value FROM json_each(:tubes)));

-- name: delete_job
-- Any job without dependency edges (migration 0010): a job that is a parent or waits
-- for one is left to delete_linked_job, which moves its edges in the same transaction.
-- Two more column tests on the row the delete reads anyway: a trigger would cost every
-- delete a trigger program (measured: a quarter more instructions a delete).
-- dialect: the job's record is inserted, then delete_ended_job deletes the job in the same
--   transaction (migration 0009: an INSERT ... SELECT into a table with a trigger goes
--   through a temporary table); PostgreSQL deletes and inserts the record in one statement
--   with a data-modifying CTE.
-- The job's record (issue 39): its outcome (deleted or cancelled) and who asked (:actor);
-- the holder and the run's time only if it was reserved. REPLACE: a stale record of the
-- same id (a copied job's) gives way, and the insert, so the delete, still happens.
-- coalesce: SQLite's substr of an empty blob is NULL, not X'' (here and below).
-- A job's steps and cursors (issue 40) are copied onto its record by sqlq_keep_steps
-- (migrations 0008, 0009), fired by the job's delete only for a job that has some:
-- nothing in these statements (the delete of a job without steps costs what it did).
INSERT OR REPLACE INTO sqlq_finished (id, tube, grp, outcome, ended_at, worker, actor, ran,
                                      attempts, created_at, unique_key, body)
SELECT id, tube, grp, :outcome, :now, CASE WHEN state = 2 THEN owner END, :actor,
       CASE WHEN state = 2 THEN :now - (reserved_until - ttr) END, reserves, created_at,
       unique_key, coalesce(substr(body, 1, 256), X'')
  FROM sqlq_jobs
 WHERE id = :id AND dependents = 0 AND waiting_on = 0
RETURNING tube;

-- name: delete_leased_job
-- The worker's delete, every job's last statement: parameters by number (a tuple binds
-- faster than a dict's names): ?1 id, ?2 lease, ?3 now. A job with dependents is left
-- to delete_linked_job (a reserved job waits for nothing: waiting_on is 0).
-- dialect: the INSERT of the job's record, then (if it found the job) delete_ended_job, in
--   one transaction, as delete_job: no data passes through Python; PostgreSQL's is one
--   DELETE with the INSERT in a CTE.
-- The record (issue 39): done, by its holder (owner), after the run timed from its
-- reservation's start (reserved_until - ttr: a touch restarts it). No RETURNING: SQLite
-- keeps returned rows in a temporary table, measured at 15k instructions a delete (a
-- quarter of the record's cost); conn.changes() says whether the job was there.
INSERT OR REPLACE INTO sqlq_finished (id, tube, grp, outcome, ended_at, worker, ran,
                                      attempts, created_at, unique_key, body)
SELECT id, tube, grp, 'done', ?3, owner, ?3 - (reserved_until - ttr), reserves, created_at,
       unique_key, coalesce(substr(body, 1, 256), X'')
  FROM sqlq_jobs
 WHERE id = ?1 AND state = 2 AND lease = ?2 AND reserved_until > ?3 AND dependents = 0;

-- name: delete_ended_job
-- The job whose record the statement before wrote (delete_job, delete_leased_job), in the
-- same transaction: ?1 its id.
DELETE FROM sqlq_jobs WHERE id = ?1;

-- name: delete_ended_jobs
-- delete_ended_job for the jobs delete_leased_jobs found: ?1 a JSON array of their ids.
DELETE FROM sqlq_jobs WHERE id IN (SELECT value FROM json_each(?1));

-- name: insert_finished
-- The record of a job delete_linked_job took (it returns what this needs): the job is gone
-- already.
INSERT OR REPLACE INTO sqlq_finished (id, tube, grp, outcome, ended_at, worker, actor, ran,
                                      attempts, created_at, unique_key, body, steps)
VALUES (:id, :tube, :grp, :outcome, :now, :worker, :actor, :ran, :attempts, :created_at,
        :unique_key, :body, :steps);

-- name: lease_state
-- Why a leased operation changed nothing: the job is gone, or the lease is.
SELECT state, lease, reserved_until FROM sqlq_jobs WHERE id = :id;

-- name: release_job
UPDATE sqlq_jobs
   SET state = CASE WHEN :delay_until IS NULL THEN 0 ELSE 1 END, delay = :delay,
       delay_until = :delay_until, reserved_until = NULL, lease = NULL, owner = NULL,
       priority = coalesce(:priority, priority), releases = releases + 1
 WHERE id = :id AND state = 2 AND reserved_until > :now
   AND (:lease IS NULL OR lease = :lease)
RETURNING id;

-- name: bury_job
UPDATE sqlq_jobs
   SET state = 3, reserved_until = NULL, lease = NULL, owner = NULL,
       priority = coalesce(:priority, priority), buries = buries + 1, bury_reason = :reason
 WHERE id = :id AND state = 2 AND reserved_until > :now
   AND (:lease IS NULL OR lease = :lease)
RETURNING id;

-- name: touch_job
UPDATE sqlq_jobs SET reserved_until = :now + ttr
 WHERE id = :id AND state = 2 AND reserved_until > :now
   AND (:lease IS NULL OR lease = :lease)
RETURNING reserved_until;

-- name: kick_buried
UPDATE sqlq_jobs SET state = 0, kicks = kicks + 1, bury_reason = NULL
 WHERE id IN (SELECT id FROM sqlq_jobs WHERE state = 3 AND tube = (SELECT :tube)
               ORDER BY id LIMIT (SELECT :bound))
RETURNING id;

-- name: kick_delayed
-- Only jobs still waiting: a due one is already ready as of now.
UPDATE sqlq_jobs SET state = 0, delay_until = NULL, kicks = kicks + 1
 WHERE id IN (SELECT id FROM sqlq_jobs
               WHERE state = 1 AND tube = (SELECT :tube) AND delay_until > (SELECT :now)
               ORDER BY delay_until, id LIMIT (SELECT :bound))
RETURNING id;

-- name: kick_job
UPDATE sqlq_jobs SET state = 0, delay_until = NULL, kicks = kicks + 1, bury_reason = NULL
 WHERE id = :id AND (state = 3 OR (state = 1 AND delay_until > :now))
RETURNING id;

-- name: postpone_job
-- A ready or delayed job made to wait until :delay_until (ready at once when NULL):
-- an operator's "not before". Reserved, buried and waiting jobs are left as they are.
UPDATE sqlq_jobs
   SET state = CASE WHEN :delay_until IS NULL THEN 0 ELSE 1 END, delay = :delay,
       delay_until = :delay_until
 WHERE id = :id AND state IN (0, 1)
RETURNING id;

-- name: replace_job
-- A put with on_conflict="replace": the ready, delayed or waiting job holding the key in
-- the tube takes the put's body, priority, ttr and delay (counted from :now; a waiting
-- job's delay_until stays NULL: its release writes it). It keeps its id, and so its place
-- among the jobs of its priority. A reserved or buried holder is left to pass_unique_key.
-- (A put option that a replace changes goes in this SET and in upsert_unique_job's.)
UPDATE sqlq_jobs
   SET body = :body, priority = :priority, ttr = :ttr, delay = :delay,
       state = CASE WHEN state = 4 THEN 4 WHEN :delay_until IS NULL THEN 0 ELSE 1 END,
       delay_until = CASE WHEN state = 4 THEN NULL ELSE :delay_until END
 WHERE tube = :tube AND unique_key = :unique_key AND state IN (0, 1, 4)
RETURNING id;

-- name: pass_unique_key
-- A replace that found the key held by a reserved or buried job: that job is never changed
-- but for its key, which passes to the job the replace puts to wait for it.
UPDATE sqlq_jobs SET unique_key = NULL
 WHERE tube = :tube AND unique_key = :unique_key AND state IN (2, 3)
RETURNING id;

-- name: upsert_unique_job
-- A replace that found no holder: insert the job, or (a holder put meanwhile by another
-- connection: PostgreSQL's race; SQLite's write lock rules it out) change it as
-- replace_job does. No row back: a reserved or buried job holds the key (pass_unique_key).
INSERT INTO sqlq_jobs (id, tube, priority, state, delay, delay_until, ttr, body, created_at,
                       unique_key)
VALUES ((SELECT max(coalesce((SELECT max(id) FROM sqlq_jobs), 0), id) + 1 FROM sqlq_last_id),
        :tube, :priority, CASE WHEN :delay_until IS NULL THEN 0 ELSE 1 END, :delay,
        :delay_until, :ttr, :body, :now, :unique_key)
ON CONFLICT (tube, unique_key) WHERE unique_key IS NOT NULL DO UPDATE
   SET body = excluded.body, priority = excluded.priority, ttr = excluded.ttr,
       delay = excluded.delay,
       state = CASE WHEN state = 4 THEN 4 ELSE excluded.state END,
       delay_until = CASE WHEN state = 4 THEN NULL ELSE excluded.delay_until END
 WHERE state IN (0, 1, 4)
RETURNING id;

-- name: select_job
-- A job as an observer sees it now: due delayed jobs and expired reservations
-- read as ready (an expired reservation already counted as a timeout).
SELECT id, tube, priority,
       CASE WHEN state = 1 AND delay_until <= :now THEN 0
            WHEN state = 2 AND reserved_until <= :now THEN 0
            ELSE state END,
       ttr, body, created_at, reserves,
       timeouts + (state = 2 AND reserved_until <= :now), releases, buries, kicks,
       CASE WHEN state = 1 AND delay_until > :now THEN delay_until END,
       CASE WHEN state = 2 AND reserved_until > :now THEN reserved_until END,
       bury_reason, unique_key, delay, grp
  FROM sqlq_jobs WHERE id = :id;

-- name: peek_ready_id
-- Ready as of now: the best ready job, or a due delayed job, or an expired
-- reservation, whichever is most urgent (peek ignores pauses, as in beanstalkd).
SELECT id FROM (
    SELECT * FROM (SELECT id, priority FROM sqlq_jobs
                    WHERE state = 0 AND tube = (SELECT :tube)
                    ORDER BY priority, id LIMIT 1)
    UNION ALL
    SELECT id, priority FROM sqlq_jobs
     WHERE state = 1 AND tube = (SELECT :tube) AND delay_until <= (SELECT :now)
    UNION ALL
    SELECT id, priority FROM sqlq_jobs
     WHERE state = 2 AND reserved_until <= (SELECT :now) AND tube = (SELECT :tube))
 ORDER BY priority, id LIMIT 1;

-- name: peek_delayed_id
SELECT id FROM sqlq_jobs
 WHERE state = 1 AND tube = (SELECT :tube) AND delay_until > (SELECT :now)
 ORDER BY delay_until, id LIMIT 1;

-- name: peek_buried_id
SELECT id FROM sqlq_jobs WHERE state = 3 AND tube = (SELECT :tube) ORDER BY id LIMIT 1;

-- name: count_jobs
-- Jobs per tube and state as of now, for stats, in time that grows with the tubes and what
-- is due, never with the backlog (issue 39): the kept counts (migration 0005) plus what
-- "as of now" changes without a write, each an index range: delayed jobs come due (a
-- range per tube of sqlq_jobs_delayed), reservations (sqlq_jobs_reserved: one per
-- running worker), waiting jobs (their edges, as count_waiting). A tube with no job is
-- left out, as before.
SELECT tube, sum(ready), sum(urgent), sum(held), sum(delayed), sum(buried), sum(waiting)
  FROM (SELECT tube, sum(n * (state = 0)) AS ready, sum(n * urgent) AS urgent, 0 AS held,
               sum(n * (state = 1)) AS delayed, sum(n * (state = 3)) AS buried, 0 AS waiting
          FROM sqlq_job_counts WHERE :tube IS NULL OR tube = :tube GROUP BY tube
        UNION ALL
        SELECT tube, count(*), sum(priority < 1024), 0, -count(*), 0, 0 FROM sqlq_jobs
         WHERE state = 1 AND delay_until <= (SELECT :now)
           AND tube IN (SELECT tube FROM sqlq_job_counts
                         WHERE state = 1 AND n > 0 AND (:tube IS NULL OR tube = :tube))
         GROUP BY tube
        UNION ALL
        SELECT tube, sum(reserved_until <= :now),
               sum(reserved_until <= :now AND priority < 1024), sum(reserved_until > :now),
               0, 0, 0
          FROM sqlq_jobs WHERE state = 2 AND (:tube IS NULL OR tube = :tube) GROUP BY tube
        UNION ALL
        SELECT tube, 0, 0, 0, 0, 0, count(*) FROM sqlq_jobs
         WHERE id IN (SELECT child FROM sqlq_edges) AND state = 4
           AND (:tube IS NULL OR tube = :tube)
         GROUP BY tube)
 GROUP BY tube
HAVING sum(ready) + sum(held) + sum(delayed) + sum(buried) + sum(waiting) > 0;

-- name: total_jobs
-- The highest id issued: ids count from 1 without gaps (a put that rolls back issues
-- none), so it is also how many (migration 0007).
SELECT max(coalesce((SELECT max(id) FROM sqlq_jobs), 0),
           coalesce((SELECT id FROM sqlq_last_id), 0));

-- name: change_token
-- A value that changes whenever what this connection reads may have changed:
-- data_version moves with every commit of another connection, total_changes() with
-- every row this connection wrote. Equal before and after a read, the read saw one
-- state of the file; equal again later, that state still holds (sqlq serve reuses
-- its stats while it does: server/stats.py).
SELECT data_version, total_changes() FROM pragma_data_version;

-- name: list_tubes
-- A tube subscribed to a topic is listed even while empty: publish fills it. Tubes with
-- jobs from the kept counts (migration 0005), the reserved index and the waiting jobs'
-- edges: no walk of every job.
SELECT tube FROM sqlq_job_counts WHERE n > 0
UNION
SELECT tube FROM sqlq_jobs WHERE state = 2
UNION
SELECT tube FROM sqlq_jobs WHERE id IN (SELECT child FROM sqlq_edges) AND state = 4
UNION
SELECT name FROM sqlq_tubes WHERE paused_until > :now
UNION
SELECT tube FROM sqlq_subscriptions;

-- name: pause_tube
INSERT INTO sqlq_tubes (name, paused_until, pause_ms) VALUES (:tube, :now + :pause_ms, :pause_ms)
ON CONFLICT (name) DO UPDATE SET paused_until = excluded.paused_until, pause_ms = excluded.pause_ms;

-- name: tube_totals
-- A tube's puts and pauses since the file was created (migration 0009): the total
-- its finished runs of puts left, plus, while the latest run is its own, the ids
-- issued since that run began.
SELECT coalesce((SELECT puts FROM sqlq_counters WHERE tube = :tube), 0)
       + coalesce((SELECT max(coalesce((SELECT max(id) FROM sqlq_jobs), 0),
                              coalesce((SELECT id FROM sqlq_last_id), 0)) + 1 - start
                     FROM sqlq_tube_run WHERE tube = :tube), 0),
       coalesce((SELECT pauses FROM sqlq_counters WHERE tube = :tube), 0);

-- name: tube_pause
SELECT paused_until, pause_ms FROM sqlq_tubes WHERE name = :tube;

-- name: reserving_owners
-- Processes that hold live reservations, for the dead-owner check.
SELECT DISTINCT owner FROM sqlq_jobs
 WHERE state = 2 AND reserved_until > :now AND owner IS NOT NULL AND owner <> :owner;

-- name: release_owner
-- A process that died (or closed its queue) gives its reservations back at once,
-- as beanstalkd does for a dropped connection. delay_until (NULL already: a held job is
-- not delayed) is set so that the kept count of ready jobs sees the move (migration 0010).
UPDATE sqlq_jobs SET state = 0, delay_until = NULL, reserved_until = NULL, lease = NULL,
       owner = NULL
 WHERE state = 2 AND owner = :owner
RETURNING id;

-- name: insert_result
-- complete(): the job's row was deleted in this same transaction, so a reader
-- sees the job or its result, never neither. Ids are never reused: no conflict.
INSERT INTO sqlq_results (job_id, result, expires_at) VALUES (:id, :result, :expires_at);

-- name: purge_results
-- Expired results go a few at a time, piggybacked on complete(): a bounded
-- range probe on sqlq_results_expires that finds nothing in the common case.
DELETE FROM sqlq_results
 WHERE job_id IN (SELECT job_id FROM sqlq_results WHERE expires_at <= (SELECT :now)
                   ORDER BY expires_at LIMIT (SELECT :limit))
RETURNING job_id;

-- name: result_outcome
-- What result() waits on, in one snapshot: the unexpired result, else the job's
-- state (pending, or buried with its reason), else nothing (gone).
SELECT (SELECT result FROM sqlq_results WHERE job_id = :id AND expires_at > :now),
       j.state, j.bury_reason
  FROM (SELECT 1) AS one LEFT JOIN sqlq_jobs AS j ON j.id = :id;

-- name: subscribe
INSERT INTO sqlq_subscriptions (topic, tube) VALUES (:topic, :tube) ON CONFLICT DO NOTHING;

-- name: unsubscribe
DELETE FROM sqlq_subscriptions WHERE topic = :topic AND tube = :tube RETURNING tube;

-- name: topic_tubes
-- The tubes publish() fills, in a stable order (the ids it returns follow it).
SELECT tube FROM sqlq_subscriptions WHERE topic = :topic ORDER BY tube;

-- name: list_subscriptions
SELECT topic, tube FROM sqlq_subscriptions
 WHERE :topic IS NULL OR topic = :topic
 ORDER BY topic, tube;

-- name: count_topics
SELECT count(DISTINCT topic) FROM sqlq_subscriptions;

-- name: claim_periodic_slot
-- Record that a periodic task's slot is being enqueued, only if it is later
-- than the last one recorded: a row comes back to the one caller that may put
-- the slot's job (in the same transaction). See migrations/0003.
INSERT INTO sqlq_periodic (name, last_slot, enqueued_at) VALUES (:name, :slot, :now)
ON CONFLICT (name) DO UPDATE SET last_slot = excluded.last_slot,
                                 enqueued_at = excluded.enqueued_at
 WHERE excluded.last_slot > sqlq_periodic.last_slot
RETURNING last_slot;

-- name: count_everything
-- sqlq copy refuses a target that holds anything: jobs, ids ever issued, or state.
SELECT (SELECT count(*) FROM sqlq_jobs) + (SELECT count(*) FROM sqlq_tubes)
     + (SELECT count(*) FROM sqlq_results) + (SELECT count(*) FROM sqlq_subscriptions)
     + (SELECT count(*) FROM sqlq_periodic)
     + coalesce((SELECT id FROM sqlq_last_id), 0);

-- name: export_job
-- sqlq copy: live jobs a page at a time, in id order. A reserved job is copied as
-- ready: its holder works on the source, and cannot acknowledge it in the target.
SELECT id, tube, priority, CASE WHEN state = 2 THEN 0 ELSE state END, delay_until, ttr,
       body, created_at, reserves, timeouts, releases, buries, kicks, bury_reason,
       unique_key, delay, waiting_on, dependents, trace, steps, grp, turn
  FROM sqlq_jobs WHERE id > :after ORDER BY id LIMIT (SELECT :limit);

-- name: import_job
INSERT INTO sqlq_jobs (id, tube, priority, state, delay_until, ttr, body, created_at,
                       reserves, timeouts, releases, buries, kicks, bury_reason, unique_key,
                       delay, waiting_on, dependents, trace, steps, grp, turn)
VALUES (:id, :tube, :priority, :state, :delay_until, :ttr, :body, :created_at, :reserves,
        :timeouts, :releases, :buries, :kicks, :bury_reason, :unique_key, :delay, :waiting_on,
        :dependents, :trace, :steps, :grp, :turn);

-- name: export_tube
-- A tube's pause, limits and whether it is grouped (a rate's tokens start full on the copy).
SELECT name, paused_until, pause_ms, concurrency, rate, rate_ms, grouped, group_concurrency,
       group_rate, group_rate_ms
  FROM sqlq_tubes ORDER BY name;

-- name: import_tube
INSERT INTO sqlq_tubes (name, paused_until, pause_ms, concurrency, rate, rate_ms, grouped,
                        group_concurrency, group_rate, group_rate_ms)
VALUES (:name, :paused_until, :pause_ms, :concurrency, :rate, :rate_ms, :grouped,
        :group_concurrency, :group_rate, :group_rate_ms);

-- name: export_group
-- A tube's groups and their last turns (a group's rate starts full on the copy).
SELECT tube, grp, turn FROM sqlq_groups ORDER BY tube, grp;

-- name: import_group
INSERT INTO sqlq_groups (tube, grp, turn) VALUES (:tube, :grp, :turn);

-- name: export_result
-- A page at a time past :after, as export_job (a result is up to the max job size).
SELECT job_id, result, expires_at FROM sqlq_results WHERE job_id > :after ORDER BY job_id
 LIMIT (SELECT :limit);

-- name: import_result
INSERT INTO sqlq_results (job_id, result, expires_at) VALUES (:job_id, :result, :expires_at);

-- name: export_subscription
SELECT topic, tube FROM sqlq_subscriptions ORDER BY topic, tube;

-- name: import_subscription
INSERT INTO sqlq_subscriptions (topic, tube) VALUES (:topic, :tube);

-- name: export_periodic
SELECT name, last_slot, enqueued_at FROM sqlq_periodic ORDER BY name;

-- name: import_periodic
INSERT INTO sqlq_periodic (name, last_slot, enqueued_at)
VALUES (:name, :last_slot, :enqueued_at);

-- name: set_total_jobs
-- After a copy, ids go on from the source's: an id is never issued twice.
UPDATE sqlq_last_id SET id = :total WHERE id < :total;

-- name: checkpoint
-- sqlq maintain: copy the WAL into the file and truncate it (readers may hold part of it
-- back: the first column is then 1). Runs outside a transaction.
-- Returns: busy, WAL frames, frames checkpointed.
PRAGMA wal_checkpoint(TRUNCATE);

-- name: checkpoint_passive
-- The horizon's gauge (sqlite/horizon.py): copy into the file what WAL frames no reader
-- still needs, as the autocheckpoint after a commit does, waiting for nobody and taking
-- no lock a writer needs. Runs outside a transaction. Returns: busy (1: another
-- checkpoint ran, the next two are then -1), frames in the WAL, frames copied back.
-- Frames a reader's snapshot holds stay uncopied, and the WAL cannot start again.
PRAGMA wal_checkpoint(PASSIVE);

-- name: wal_frame_size
-- The horizon's gauge: bytes per WAL frame (a page and its 24-byte header).
SELECT page_size + 24 FROM pragma_page_size;

-- name: vacuum_into
-- sqlq backup: a consistent copy of the whole file, as of one read transaction, into the
-- empty file :path (writers go on meanwhile: WAL readers block no one). Compact (free
-- pages left out), and one statement in either driver; runs outside a transaction.
VACUUM INTO :path;

-- name: used_bytes
-- sqlq backup's progress bar: about what VACUUM INTO writes (the pages in use).
SELECT (SELECT page_size FROM pragma_page_size)
       * ((SELECT page_count FROM pragma_page_count)
          - (SELECT freelist_count FROM pragma_freelist_count));

-- name: integrity_check
-- sqlq backup: SQLite's full check of a copy, "ok" or the first problem it finds.
PRAGMA integrity_check(1);

-- name: free_pages
-- A prune's look (Backend.reclaim): the file's auto_vacuum mode (2: incremental, every file
-- made since migration 0004), its pages and its free pages.
SELECT (SELECT auto_vacuum FROM pragma_auto_vacuum),
       (SELECT page_count FROM pragma_page_count),
       (SELECT freelist_count FROM pragma_freelist_count);

-- name: incremental_vacuum
-- Give up to 500 free pages (1 MB at 2 KiB) back to the file system, the file's end
-- moved into them: one short write (about 20 ms measured), repeated by Backend.reclaim.
PRAGMA incremental_vacuum(500);

-- name: optimize
-- sqlq maintain: refresh the planner's statistics where SQLite thinks they are stale.
PRAGMA optimize;

-- name: file_health
-- sqlq maintain: page size, pages, free pages (deleted jobs' pages, reused by later
-- writes) and the first line of a quick integrity check ("ok").
SELECT (SELECT page_size FROM pragma_page_size),
       (SELECT page_count FROM pragma_page_count),
       (SELECT freelist_count FROM pragma_freelist_count),
       (SELECT quick_check FROM pragma_quick_check LIMIT 1);

-- ---------------------------------------------------------------------------------------------
-- Read-only views for the dashboard and /metrics (observe.py). Each answers from
-- indexes in time that grows with what it shows, not with the jobs in the file.

-- name: tube_names
-- Every tube that holds jobs, in O(tubes x log n): a "loose index scan" that hops
-- from one tube to the next in each state's partial index (list_tubes reads every
-- job instead). Reserved jobs are few (one per running worker), so their index is
-- walked whole; paused and subscribed tubes are listed too, as in list_tubes.
WITH RECURSIVE
  ready(tube) AS (
    SELECT (SELECT min(tube) FROM sqlq_jobs WHERE state = 0)
    UNION ALL
    SELECT (SELECT min(tube) FROM sqlq_jobs WHERE state = 0 AND tube > ready.tube)
      FROM ready WHERE ready.tube IS NOT NULL),
  delayed(tube) AS (
    SELECT (SELECT min(tube) FROM sqlq_jobs WHERE state = 1)
    UNION ALL
    SELECT (SELECT min(tube) FROM sqlq_jobs WHERE state = 1 AND tube > delayed.tube)
      FROM delayed WHERE delayed.tube IS NOT NULL),
  buried(tube) AS (
    SELECT (SELECT min(tube) FROM sqlq_jobs WHERE state = 3)
    UNION ALL
    SELECT (SELECT min(tube) FROM sqlq_jobs WHERE state = 3 AND tube > buried.tube)
      FROM buried WHERE buried.tube IS NOT NULL)
SELECT tube FROM ready WHERE tube IS NOT NULL
UNION SELECT tube FROM delayed WHERE tube IS NOT NULL
UNION SELECT tube FROM buried WHERE tube IS NOT NULL
UNION SELECT tube FROM sqlq_jobs WHERE state = 2 AND reserved_until IS NOT NULL
UNION SELECT name FROM sqlq_tubes WHERE paused_until > :now
UNION SELECT tube FROM sqlq_subscriptions;

-- name: known_tubes
-- Tubes the database remembers though they may hold no job now: those with counters
-- (migrations 0005, 0009), the latest run of puts, a pause (even one that ended) or
-- histogram rows. The dashboard and /metrics list them at zero instead of dropping
-- them (a Prometheus series would go stale instead of reading 0). O(tubes).
SELECT tube FROM sqlq_counters
UNION SELECT tube FROM sqlq_tube_run WHERE tube IS NOT NULL
UNION SELECT name FROM sqlq_tubes
UNION SELECT DISTINCT tube FROM sqlq_durations;

-- name: tube_counts
-- One tube's jobs by state as of now (as count_jobs: the kept counts of migration 0005
-- and the ranges of what is due), the oldest ready job and the pause. The oldest ready
-- job is the least id of each priority's first entry in sqlq_jobs_ready: a hop from one
-- priority to the next (O(priorities x log n)), not a walk of the tube's ready jobs.
-- Columns: ready, urgent, reserved, delayed, buried, oldest ready id, earliest
-- due delay_until, paused_until.
WITH RECURSIVE
  kept AS (SELECT coalesce(sum(n * (state = 0)), 0) AS ready,
                  coalesce(sum(n * urgent), 0) AS urgent,
                  coalesce(sum(n * (state = 1)), 0) AS delayed,
                  coalesce(sum(n * (state = 3)), 0) AS buried
             FROM sqlq_job_counts WHERE tube = (SELECT :tube)),
  pri(p) AS (
    SELECT (SELECT min(priority) FROM sqlq_jobs WHERE state = 0 AND tube = (SELECT :tube))
    UNION ALL
    SELECT (SELECT min(priority) FROM sqlq_jobs
             WHERE state = 0 AND tube = (SELECT :tube) AND priority > pri.p)
      FROM pri WHERE pri.p IS NOT NULL)
SELECT kept.ready + due.n + expired.n, kept.urgent + due.urgent + expired.urgent, held.n,
       kept.delayed - due.n, kept.buried,
       (SELECT min((SELECT id FROM sqlq_jobs
                     WHERE state = 0 AND tube = (SELECT :tube) AND priority = pri.p
                     ORDER BY id LIMIT 1))
          FROM pri WHERE pri.p IS NOT NULL),
       due.since,
       (SELECT paused_until FROM sqlq_tubes WHERE name = (SELECT :tube))
  FROM kept,
       (SELECT count(*) AS n, coalesce(sum(priority < 1024), 0) AS urgent,
               min(delay_until) AS since FROM sqlq_jobs
         WHERE state = 1 AND tube = (SELECT :tube) AND delay_until <= (SELECT :now)) AS due,
       (SELECT count(*) AS n, coalesce(sum(priority < 1024), 0) AS urgent FROM sqlq_jobs
         WHERE state = 2 AND reserved_until <= (SELECT :now)
           AND tube = (SELECT :tube)) AS expired,
       (SELECT count(*) AS n FROM sqlq_jobs
         WHERE state = 2 AND reserved_until > (SELECT :now)
           AND tube = (SELECT :tube)) AS held;

-- name: job_created_at
SELECT created_at FROM sqlq_jobs WHERE id = :id;

-- name: list_ready_jobs
-- A page of a tube's jobs in one state, in that state's index order (the order a
-- reserve, a promotion or a kick takes them), after the last row of the previous
-- page (keyset paging: page 1000 costs what page 1 does). :key and :after are
-- that row's sort key and id. Columns: as select_job, then the body's first
-- bytes and its length.
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE state = 0 AND tube = (SELECT :tube) AND (priority, id) > (:key, :after)
 ORDER BY priority, id LIMIT (SELECT :limit);

-- name: list_delayed_jobs
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE state = 1 AND tube = (SELECT :tube) AND (delay_until, id) > (:key, :after)
 ORDER BY delay_until, id LIMIT (SELECT :limit);

-- name: list_reserved_jobs
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE state = 2 AND reserved_until IS NOT NULL AND tube = (SELECT :tube)
   AND (reserved_until, id) > (:key, :after)
 ORDER BY reserved_until, id LIMIT (SELECT :limit);

-- name: list_buried_jobs
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE state = 3 AND tube = (SELECT :tube) AND id > :after
 ORDER BY id LIMIT (SELECT :limit);

-- name: search_jobs
-- Jobs of a tube whose id, unique key or body contains :text, newest first,
-- among ids above :min_id only: a body search cannot use an index, so it is
-- bounded to the most recent ids (a rowid range), never the whole file.
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE id > :min_id AND tube = (SELECT :tube)
   AND (instr(body, :bytes) > 0 OR instr(unique_key, :text) > 0 OR CAST(id AS TEXT) = :text)
 ORDER BY id DESC LIMIT (SELECT :limit);

-- name: owner_reservations
-- The processes holding live reservations (sqlq's workers), from the reserved
-- index: jobs held and the earliest of their reservations' starts. A detached
-- reservation (sqlq reserve) has no owner.
SELECT owner, count(*), min(reserved_until - ttr), group_concat(DISTINCT tube)
  FROM sqlq_jobs
 WHERE state = 2 AND reserved_until > :now
 GROUP BY owner ORDER BY owner;

-- name: list_periodic
SELECT name, last_slot, enqueued_at FROM sqlq_periodic ORDER BY name;

-- name: event_counters
-- Buries, kicks and timeouts since the file was created, per tube (migration 0005).
SELECT tube, buries, kicks, timeouts FROM sqlq_counters ORDER BY tube;

-- name: add_durations
-- A worker adds the waits and runs it observed since its last flush (migration
-- 0006): one row per bucket it saw, added to what every process added before.
INSERT INTO sqlq_durations (tube, metric, le, count, sum)
VALUES (:tube, :metric, :le, :count, :sum)
ON CONFLICT (tube, metric, le) DO UPDATE SET count = count + excluded.count,
                                             sum = sum + excluded.sum;

-- name: durations
-- Every bucket of the wait and run histograms, for /metrics (sqlq/histograms.py
-- cumulates them).
SELECT tube, metric, le, count, sum FROM sqlq_durations ORDER BY tube, metric;

-- ---------------------------------------------------------------------------------------------
-- Batches (reserve_many, delete_many): one statement each, one commit for many jobs.

-- name: claim_jobs
-- claim_job for up to :n jobs (after promote_due, as claim_job): the :n best ready
-- jobs of each watched tube without a pause or limits (one index range per tube), then the :n best
-- of those, in one UPDATE. random() runs per row: each job gets a lease of its own.
-- LIMIT (SELECT :n), not LIMIT :n: the same plan, but measured 13 us a claim instead
-- of 66 (a bare bound LIMIT costs the statement extra work on every run).
UPDATE sqlq_jobs
   SET state = 2, reserved_until = :now + ttr, reserves = reserves + 1,
       lease = abs(random()), owner = :owner
 WHERE id IN (
       SELECT j.id
         FROM json_each(:tubes) AS t
         JOIN sqlq_jobs AS j
           ON j.id IN (SELECT r.id FROM sqlq_jobs AS r
                        WHERE r.state = 0 AND r.tube = t.value
                        ORDER BY r.priority, r.id LIMIT (SELECT :n))
        WHERE NOT EXISTS (SELECT 1 FROM sqlq_tubes AS p
                           WHERE p.name = t.value
                             AND (p.paused_until > :now OR coalesce(p.concurrency, p.rate, p.grouped)
                                                           IS NOT NULL))
        ORDER BY j.priority, j.id
        LIMIT (SELECT :n))
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: claim_jobs_in_tube
-- (Outside a transaction only: inside one, pick_jobs_in_tube and claim_picked_range.)
-- claim_jobs for a reserve_many that watches one tube (claim_job_in_tube's reason): the
-- same :n jobs without json_each, the join, the second index range per job and the
-- sort, 0.45 us a job less in a batch of 10 (of about 3.5). The caller sorts the rows,
-- as claim_jobs' (RETURNING has no order). ?1 now, ?2 owner, ?3 tube, ?4 n.
UPDATE sqlq_jobs
   SET state = 2, reserved_until = ?1 + ttr, reserves = reserves + 1,
       lease = abs(random()), owner = ?2
 WHERE id IN (SELECT id FROM sqlq_jobs
               WHERE state = 0 AND tube = (SELECT ?3)
               ORDER BY priority, id LIMIT (SELECT ?4))
   AND NOT EXISTS (SELECT 1 FROM sqlq_tubes
                    WHERE name = (SELECT ?3)
                      AND (paused_until > ?1 OR coalesce(concurrency, rate, grouped) IS NOT NULL))
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: pick_jobs_in_tube
-- claim_jobs_in_tube inside a transaction that holds the write lock (every reserve_many
-- of one tube: the engine's claims run in BEGIN IMMEDIATE on SQLite): the jobs it would
-- claim, in claim order, read with the values its RETURNING gives, then claimed by
-- claim_picked_range (or claim_picked_jobs): no RETURNING (a temporary table) and no
-- "id IN (SELECT ...)" (an ephemeral index), about 4k instructions a job less in a
-- batch of 10. Each job's lease is ?4 + its id (?4: 62 random bits, drawn per batch by
-- store.py), computed alike here and in the UPDATE: a lease of its own per job, and no
-- random() that Python would have to read back. ?1 now, ?2 owner (unused here),
-- ?3 tube, ?4 the leases' base, ?5 n.
SELECT id, tube, priority, ttr, body, created_at, reserves + 1, timeouts, releases, buries,
       kicks, ?4 + id, ?1 + ttr, unique_key, delay, trace, grp
  FROM sqlq_jobs
 WHERE state = 0 AND tube = (SELECT ?3)
   AND NOT EXISTS (SELECT 1 FROM sqlq_tubes
                    WHERE name = (SELECT ?3)
                      AND (paused_until > ?1 OR coalesce(concurrency, rate, grouped) IS NOT NULL))
 ORDER BY priority, id LIMIT (SELECT ?5);

-- name: claim_picked_range
-- The jobs pick_jobs_in_tube read when they share one priority (nearly always): then
-- they are exactly the tube's ready jobs of that priority with ids from the first
-- picked to the last (any other such job would sort among them, so it was picked), one
-- range of sqlq_jobs_ready. Nothing changed them since: the caller holds the write lock.
-- ?1 now, ?2 owner, ?3 tube, ?4 the leases' base, ?5 the priority, ?6 the first id,
-- ?7 the last.
UPDATE OR IGNORE sqlq_jobs
   SET state = 2, reserved_until = ?1 + ttr, reserves = reserves + 1, lease = ?4 + id,
       owner = ?2
 WHERE state = 0 AND tube = (SELECT ?3) AND priority = (SELECT ?5)
   AND id BETWEEN (SELECT ?6) AND (SELECT ?7);

-- name: claim_picked_jobs
-- The jobs pick_jobs_in_tube read, of several priorities: by id (a JSON array).
-- ?1 now, ?2 owner, ?3 the ids, ?4 the leases' base.
UPDATE OR IGNORE sqlq_jobs
   SET state = 2, reserved_until = ?1 + ttr, reserves = reserves + 1, lease = ?4 + id,
       owner = ?2
 WHERE id IN (SELECT value FROM json_each(?3));

-- name: delete_leased_jobs
-- delete_leased_job for many: :jobs is a JSON array of [id, lease] pairs (each id once:
-- SQLiteClaims.delete_many). changes() tells whether every pair's job was found (then
-- delete_ended_jobs deletes them all); if not, the caller goes pair by pair. No
-- RETURNING: SQLite keeps returned rows in a temporary table. One primary-key probe per
-- pair, driven by the pairs (a join): "(id, lease) IN (SELECT ...)" built an ephemeral
-- index of the pairs first, about 10k instructions a job more in a batch of 10
-- (bench_callgrind.py batch). json_extract, not ->>: the sqlite3 driver's system SQLite
-- may be older than 3.38.
INSERT OR REPLACE INTO sqlq_finished (id, tube, grp, outcome, ended_at, worker, ran,
                                      attempts, created_at, unique_key, body)
SELECT j.id, j.tube, j.grp, 'done', :now, j.owner, :now - (j.reserved_until - j.ttr),
       j.reserves, j.created_at, j.unique_key, coalesce(substr(j.body, 1, 256), X'')
  FROM json_each(:jobs) AS p
  JOIN sqlq_jobs AS j ON j.id = json_extract(p.value, '$[0]')
 WHERE j.lease = json_extract(p.value, '$[1]')
   AND j.state = 2 AND j.reserved_until > :now AND j.dependents = 0;

-- ---------------------------------------------------------------------------------------------
-- Failed attempts (migration 0008, sqlq/attempts.py). Written only when a run fails: the
-- success path (claim, delete) never reads or writes sqlq_attempts.

-- name: count_failure
-- A failed run is written: count it on the job (the delete trigger sqlq_forget_attempts
-- of migration 0008 fires only for a job whose count is above 0). Nothing for a job gone.
UPDATE sqlq_jobs SET failures = failures + 1 WHERE id = :job_id;

-- name: insert_attempt
-- One failed run, in the transaction that released or buried the job (or alone, for a
-- run whose reservation was lost), after count_failure. Nothing for a job gone: no row
-- outlives its job. The same attempt written twice keeps the later.
INSERT INTO sqlq_attempts (job_id, attempt, started_at, duration, host, pid, outcome, error,
                           message, traceback, trace, location)
SELECT id, :attempt, :started_at, :duration, :host, :pid, :outcome, :error, :message,
       :traceback, :trace, :location
  FROM sqlq_jobs
 WHERE id = :job_id
ON CONFLICT (job_id, attempt) DO UPDATE
   SET started_at = excluded.started_at, duration = excluded.duration,
       host = excluded.host, pid = excluded.pid, outcome = excluded.outcome,
       error = excluded.error, message = excluded.message, traceback = excluded.traceback,
       trace = excluded.trace, location = excluded.location;

-- name: trim_attempts
-- Keep a job's last :kept attempts (run only once it has had more runs than that):
-- a range of the primary key.
DELETE FROM sqlq_attempts WHERE job_id = :job_id AND attempt <= :attempt - :kept;

-- name: list_attempts
SELECT job_id, attempt, started_at, duration, host, pid, outcome, error, message, traceback,
       trace, location
  FROM sqlq_attempts WHERE job_id = :job_id ORDER BY attempt;

-- name: last_attempt
-- stats_job's failures, last-error and last-traceback: the job's count of failed runs and
-- its newest kept attempt (no row: no such job).
SELECT j.failures, a.error, a.message, a.traceback
  FROM sqlq_jobs AS j
  LEFT JOIN (SELECT error, message, traceback FROM sqlq_attempts WHERE job_id = :job_id
              ORDER BY attempt DESC LIMIT 1) AS a ON true
 WHERE j.id = :job_id;

-- ---------------------------------------------------------------------------------------------
-- Dependencies (migration 0010): a put with after= parents; the delete of a job with edges,
-- its children released in the same transaction (JobStore.delete_linked).

-- name: hold_parents
-- A put's parents still in the file, each now counting :n more dependents (the edges
-- this put adds), under the write lock: a parent deleted before this runs is gone, and
-- one deleted after it finds the edges. :parents is a JSON array of ids.
UPDATE sqlq_jobs SET dependents = dependents + :n
 WHERE id IN (SELECT value FROM json_each(:parents))
RETURNING id;

-- name: insert_waiting_job
-- A job waiting for :waiting_on parents: no delay_until yet (its delay counts from its
-- release), in no claim's index.
INSERT INTO sqlq_jobs (id, tube, priority, state, delay, delay_until, ttr, body, created_at,
                       unique_key, waiting_on)
VALUES ((SELECT max(coalesce((SELECT max(id) FROM sqlq_jobs), 0), id) + 1 FROM sqlq_last_id),
        :tube, :priority, 4, :delay, NULL, :ttr, :body, :now, :unique_key, :waiting_on)
RETURNING id;

-- name: insert_edges
-- Every (parent, child) of a put: :parents and :children are JSON arrays of ids.
INSERT INTO sqlq_edges (parent, child)
SELECT p.value, c.value FROM json_each(:parents) AS p, json_each(:children) AS c;

-- name: export_edge
-- A page at a time past the edge (:parent, :child), in primary-key order: a fan-in of a
-- million jobs is a million edges.
SELECT parent, child FROM sqlq_edges WHERE (parent, child) > (:parent, :child)
 ORDER BY parent, child LIMIT (SELECT :limit);

-- name: import_edge
INSERT INTO sqlq_edges (parent, child) VALUES (:parent, :child);

-- name: job_links
-- Why a delete that skips linked jobs found nothing: (dependents, waiting_on) of the job,
-- or no row. Read only when the delete found nothing.
SELECT dependents, waiting_on FROM sqlq_jobs WHERE id = :id;

-- name: delete_linked_job
-- A job with dependents or parents, by id (:lease NULL) or under its live lease, inside
-- a savepoint with the release of its children and the removal of its edges. Its steps
-- and cursors as JSON for its record (insert_finished, written after: sqlq_forget_steps
-- finds no record to copy them to): RETURNING's subquery runs before the AFTER DELETE
-- trigger deletes them (tests/unit/test_finished_steps.py checks, on both drivers).
DELETE FROM sqlq_jobs
 WHERE id = :id
   AND (:lease IS NULL OR (state = 2 AND lease = :lease AND reserved_until > :now))
RETURNING tube, dependents, waiting_on, state, owner, reserved_until - ttr, reserves,
          created_at, unique_key, coalesce(substr(body, 1, 256), X''), grp,
          CASE WHEN steps > 0 THEN (
               SELECT json_group_array(json_object('kind', s.kind, 'name', s.name,
                                                   'value', json(s.value), 'at', s.done_at))
                 FROM sqlq_steps AS s WHERE s.job_id = sqlq_jobs.id) END;

-- name: release_children
-- A finished parent's children, one less parent each (an edge is unique): a child
-- reaching 0 becomes ready, or delayed by its own delay counted from now. One range of
-- sqlq_edges' primary key, one primary-key probe per child: no scan of waiting jobs.
UPDATE sqlq_jobs
   SET waiting_on = waiting_on - 1,
       state = CASE WHEN waiting_on > 1 THEN 4 WHEN delay > 0 THEN 1 ELSE 0 END,
       delay_until = CASE WHEN waiting_on = 1 AND delay > 0 THEN :now + delay END
 WHERE id IN (SELECT child FROM sqlq_edges WHERE parent = :id) AND state = 4
RETURNING delay_until;

-- name: forget_parent_edges
DELETE FROM sqlq_edges WHERE parent = :id;

-- name: forget_child_edges
-- A waiting job deleted takes its edges (its parents' dependents stay: a release that
-- finds no child does nothing).
DELETE FROM sqlq_edges WHERE child = :id;

-- name: job_parents
-- Queue.links: the parents a job still waits for (sqlq_edges_child: one index range).
SELECT parent FROM sqlq_edges WHERE child = :id ORDER BY parent;

-- name: job_children
-- Queue.links: the jobs waiting for this one (sqlq_edges' primary key: one range).
SELECT child FROM sqlq_edges WHERE parent = :id ORDER BY child;

-- name: count_waiting
-- Waiting jobs per tube (all tubes, or :tube's) for the dashboard and /metrics. No index
-- holds waiting jobs (migration 0010), but each has an edge naming it as child for as long
-- as it waits: one walk of sqlq_edges_child and a primary-key probe per waiting job, in
-- time that grows with the waiting jobs, never with the file.
SELECT tube, count(*) FROM sqlq_jobs
 WHERE id IN (SELECT child FROM sqlq_edges) AND state = 4
   AND (:tube IS NULL OR tube = :tube)
 GROUP BY tube;

-- name: list_waiting_jobs
-- A page of a tube's waiting jobs, by id (as list_buried_jobs), found through
-- sqlq_edges_child as count_waiting does.
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE id IN (SELECT child FROM sqlq_edges WHERE child > :after) AND state = 4
   AND tube = (SELECT :tube)
 ORDER BY id LIMIT (SELECT :limit);

-- ---------------------------------------------------------------------------------------------
-- Tracing (migration 0011, sqlq/tracing.py): written and read only while an OpenTelemetry
-- tracer provider is configured; an untraced put or run never runs these.

-- name: set_job_trace
-- A traced put's trace context, beside the bodies it just inserted, in its transaction:
-- one primary-key probe per id (:ids is a JSON array). A separate statement, not a
-- column of the puts' inserts: those, the hottest statements, stay as they are.
UPDATE sqlq_jobs SET trace = :trace WHERE id IN (SELECT value FROM json_each(:ids));

-- name: job_trace
-- The trace context a traced put stored with the job, for the dashboard's job page (a
-- primary-key probe; NULL: put untraced, no row: no such job).
SELECT trace FROM sqlq_jobs WHERE id = :id;

-- name: attempt_trace
-- The traceparent of a job's latest failed run that kept one: the link of its next run's
-- span (a range of sqlq_attempts' primary key, read only for a run after the first).
SELECT trace FROM sqlq_attempts
 WHERE job_id = :job_id AND trace IS NOT NULL
 ORDER BY attempt DESC LIMIT 1;

-- ---------------------------------------------------------------------------------------------
-- Operators (issue 26): failed jobs grouped by error, the workers registry (migration 0012),
-- throughput history (migration 0012). Reads for the dashboard and /metrics; the registry's
-- writes come from each worker at most once per heartbeat (sqlq/workers.py), never per job.

-- name: failed_groups
-- Buried jobs across all tubes by how they failed: the newest kept attempt's error (the
-- exception's type; '' when the job was buried without a kept attempt) and location
-- (where it was raised, migration 0015; '' if not kept), and the bury reason's first
-- :reason_chars characters (reasons are capped when buried; an older, longer one is
-- keyed by its start), each with its count, newest id and tubes. sqlq/failures.py folds
-- these into the page's groups: by error and location when there is one, else by error
-- and reason, the reasons listed inside. Only the newest :depth buried jobs are grouped,
-- read from the buried index (bounded by the buried jobs, never the whole table); the
-- attempt is two primary-key probes per job. INDEXED BY: without it SQLite walks the
-- table backwards by id to skip the sort, which reads every job when few are buried.
SELECT coalesce((SELECT a.error FROM sqlq_attempts AS a WHERE a.job_id = b.id
                  ORDER BY a.attempt DESC LIMIT 1), '') AS error,
       coalesce((SELECT a.location FROM sqlq_attempts AS a WHERE a.job_id = b.id
                  ORDER BY a.attempt DESC LIMIT 1), '') AS location,
       substr(coalesce(b.bury_reason, ''), 1, :reason_chars) AS reason,
       count(*), max(b.id), group_concat(DISTINCT b.tube)
  FROM (SELECT id, tube, bury_reason FROM sqlq_jobs INDEXED BY sqlq_jobs_buried WHERE state = 3
         ORDER BY id DESC LIMIT (SELECT :depth)) AS b
 GROUP BY 1, 2, 3;

-- name: failed_group_ids
-- The ids and tubes of one group of failed_groups (the same newest :depth buried jobs),
-- oldest first: what a retry or a delete of the whole group acts on. A group with a
-- location takes every reason; one without, its reason alone.
SELECT b.id, b.tube
  FROM (SELECT id, tube, bury_reason FROM sqlq_jobs INDEXED BY sqlq_jobs_buried WHERE state = 3
         ORDER BY id DESC LIMIT (SELECT :depth)) AS b
 WHERE (:location <> '' OR substr(coalesce(b.bury_reason, ''), 1, :reason_chars) = :reason)
   AND coalesce((SELECT a.error FROM sqlq_attempts AS a WHERE a.job_id = b.id
                  ORDER BY a.attempt DESC LIMIT 1), '') = :error
   AND coalesce((SELECT a.location FROM sqlq_attempts AS a WHERE a.job_id = b.id
                  ORDER BY a.attempt DESC LIMIT 1), '') = :location
 ORDER BY b.id;

-- name: beat_worker
-- A worker's row, written when it starts, once per heartbeat after, and when the job it
-- runs changes for longer than a second (registry.py, work/presence.py): never per job.
INSERT INTO sqlq_workers (token, host, pid, tubes, started_at, seen_at, job_id, jobs_done)
VALUES (:token, :host, :pid, :tubes, :started_at, :seen_at, :job_id, :jobs_done)
ON CONFLICT (token) DO UPDATE SET host = excluded.host, pid = excluded.pid,
    tubes = excluded.tubes, started_at = excluded.started_at, seen_at = excluded.seen_at,
    job_id = excluded.job_id, jobs_done = excluded.jobs_done;

-- name: forget_worker
DELETE FROM sqlq_workers WHERE token = :token;

-- name: list_workers
SELECT token, host, pid, tubes, started_at, seen_at, job_id, jobs_done
  FROM sqlq_workers ORDER BY started_at, token;

-- name: throughput_sampled
SELECT 1 FROM sqlq_throughput WHERE minute = :minute;

-- name: add_throughput
-- The first sample of a minute wins (two workers may beat in the same minute); older
-- samples go (trim_throughput), so the table keeps a day at most.
INSERT INTO sqlq_throughput (minute, at, puts, deletes, buries)
VALUES (:minute, :at, :puts, :deletes, :buries)
ON CONFLICT (minute) DO NOTHING;

-- name: trim_throughput
DELETE FROM sqlq_throughput WHERE minute < :oldest;

-- name: list_throughput
SELECT minute, at, puts, deletes, buries FROM sqlq_throughput
 WHERE minute >= :since ORDER BY minute;

-- ---------------------------------------------------------------------------------------------
-- Control of running jobs (migration 0013, issue 25): cancel and progress. Nothing here is
-- on the put, claim or delete path: a holder's verb reads sqlq_cancelled only after its
-- ordinary lease-checked statement found nothing (JobStore.lease_failure).

-- name: cancel_state
-- What a cancel finds: the job's state and, if reserved under a live lease, that lease
-- and its end (an expired reservation is ready as of now: deleted as a ready job is).
SELECT state, CASE WHEN state = 2 AND reserved_until > :now THEN lease END, reserved_until
  FROM sqlq_jobs WHERE id = :id;

-- name: remember_cancelled
-- A reserved job cancelled: its holder's next verb under :lease raises JobCancelled.
-- Deleted in the same transaction (store.py), so it is never handed out again.
INSERT INTO sqlq_cancelled (id, lease, until) VALUES (:id, :lease, :until)
ON CONFLICT (id) DO UPDATE SET lease = excluded.lease, until = excluded.until;

-- name: purge_cancelled
-- Cancellations kept past their time (an index range of sqlq_cancelled_until): each
-- cancel purges these, so the table holds only recent ones without a reaper.
DELETE FROM sqlq_cancelled WHERE until <= :now;

-- name: cancelled_lease
-- Why a holder's verb found nothing: the lease its job was cancelled under, if it was.
SELECT lease FROM sqlq_cancelled WHERE id = :id;

-- name: cancelled_among
-- Which of the running jobs :ids (a JSON array) were cancelled: a worker's one read a
-- second while it runs jobs (sqlq/work/cancel.py), primary-key probes of a small table.
SELECT id, lease FROM sqlq_cancelled WHERE id IN (SELECT value FROM json_each(:ids));

-- name: set_progress
-- Job.progress: under the holder's live lease (any reserved job's, by id, without one).
-- One row by primary key; no index holds the columns.
UPDATE sqlq_jobs SET progress = :progress, progress_message = :message
 WHERE id = :id AND state = 2 AND reserved_until > :now
   AND (:lease IS NULL OR lease = :lease)
RETURNING id;

-- name: job_progress
-- stats_job's progress and progress-message, and a result() waiter's (no row: no job).
SELECT progress, progress_message FROM sqlq_jobs WHERE id = :id;

-- ---------------------------------------------------------------------------------------------
-- Limits (migration 0014, sqlq/limits.py): a tube's concurrency cap and rate, on its row of
-- sqlq_tubes. The claims above skip a tube with limits; the engine claims from it through
-- claim_limited (store.py), in one write transaction, with these.

-- name: limited_tubes
-- Whether any of these tubes has limits: the engine asks once per list of tubes, and
-- again when a claim without limits found nothing (a limit set by another process).
SELECT 1 FROM sqlq_tubes
 WHERE name IN (SELECT value FROM json_each(:tubes)) AND coalesce(concurrency, rate, grouped) IS NOT NULL
 LIMIT 1;

-- name: lock_limits
-- The limits of those of these tubes that have some, inside claim_limited's transaction
-- (SQLite's write lock is held: nobody else claims meanwhile).
SELECT name, concurrency, rate, rate_ms, rate_at, grouped, group_concurrency,
       group_rate, group_rate_ms, paused_until
  FROM sqlq_tubes
 WHERE name IN (SELECT value FROM json_each(:tubes)) AND coalesce(concurrency, rate, grouped) IS NOT NULL
 ORDER BY name;

-- name: live_reservations
-- Jobs reserved under live leases, per tube of these (an expired lease does not count:
-- its job is as good as ready). A range of sqlq_jobs_reserved from :now.
SELECT tube, count(*) FROM sqlq_jobs
 WHERE state = 2 AND reserved_until > :now AND tube IN (SELECT value FROM json_each(:tubes))
 GROUP BY tube;

-- name: spend_rate
-- The next claim the tube's rate allows, after claim_limited's claims.
UPDATE sqlq_tubes SET rate_at = :rate_at WHERE name = :tube;

-- name: set_limits
-- A tube's limits, whole (NULL: none); a row made for them has no pause (paused_until 0,
-- not counted as a pause: migration 0014). A rate changed or removed starts afresh; a
-- group rate too (its groups' next claims forgotten: set_group_limits).
INSERT INTO sqlq_tubes (name, paused_until, pause_ms, concurrency, rate, rate_ms,
                        group_concurrency, group_rate, group_rate_ms)
VALUES (:tube, 0, 0, :concurrency, :rate, :rate_ms, :group_concurrency, :group_rate,
        :group_rate_ms)
ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, rate = excluded.rate,
                                 rate_ms = excluded.rate_ms,
                                 rate_at = CASE WHEN excluded.rate IS rate
                                                 AND excluded.rate_ms IS rate_ms
                                                THEN rate_at END,
                                 group_concurrency = excluded.group_concurrency,
                                 group_rate = excluded.group_rate,
                                 group_rate_ms = excluded.group_rate_ms;

-- name: forget_group_rates
-- A group rate changed or removed: each group's bucket starts full.
UPDATE sqlq_groups SET rate_at = NULL WHERE tube = :tube AND rate_at IS NOT NULL;

-- name: drop_limits_row
-- A row made for limits alone, once they are gone (a paused tube's row stays).
DELETE FROM sqlq_tubes
 WHERE name = :tube AND paused_until = 0 AND concurrency IS NULL AND rate IS NULL
   AND group_concurrency IS NULL AND group_rate IS NULL AND grouped IS NULL;

-- name: list_limits
-- Every tube with limits, or the one tube :tube (NULL: all).
SELECT name, concurrency, rate, rate_ms, group_concurrency, group_rate, group_rate_ms
  FROM sqlq_tubes
 WHERE coalesce(concurrency, rate, group_concurrency, group_rate) IS NOT NULL
   AND (:tube IS NULL OR name = :tube)
 ORDER BY name;

-- ---------------------------------------------------------------------------------------------
-- Durable steps and cursors (migration 0002, sqlq/steps.py): rows of sqlq_steps, each
-- written only under the job's live lease (step_lease first, in the same transaction).
-- kind 0 is a step (written once), 1 a cursor (saved again and again).

-- name: step_lease
-- The job's count of steps and cursors while :lease is its live reservation; no row when
-- it is not (the lease is lost: lease_failure says why). The write lock is already held.
SELECT steps FROM sqlq_jobs
 WHERE id = :id AND state = 2 AND reserved_until > :now AND lease = :lease;

-- name: find_step
SELECT value, done_at FROM sqlq_steps WHERE job_id = :id AND kind = :kind AND name = :name;

-- name: insert_step
INSERT INTO sqlq_steps (job_id, kind, name, value, done_at)
VALUES (:id, :kind, :name, :value, :now);

-- name: count_step
-- One more row in sqlq_steps for the job: the cap's count, and sqlq_forget_steps' WHEN.
UPDATE sqlq_jobs SET steps = steps + 1 WHERE id = :id;

-- name: save_cursor
-- A cursor saved again: its row replaced (no row: its first save inserts it).
UPDATE sqlq_steps SET value = :value, done_at = :now
 WHERE job_id = :id AND kind = 1 AND name = :name
RETURNING done_at;

-- name: job_steps
-- A job's steps and cursors: what a run's first step() or cursor() loads, stats_job and
-- peek show. One range of the primary key.
SELECT kind, name, value, done_at FROM sqlq_steps WHERE job_id = :id
 ORDER BY kind, done_at, name;

-- name: unclaim_counts
-- A snooze (a release that does not count): the claim's reserves (the attempt number, the
-- retry budget's count) and the release's releases taken back.
UPDATE sqlq_jobs SET reserves = max(reserves - 1, 0), releases = max(releases - 1, 0)
 WHERE id = :id;

-- name: export_step
-- A page at a time past the row (:job_id, :kind, :name), in primary-key order.
SELECT job_id, kind, name, value, done_at FROM sqlq_steps
 WHERE (job_id, kind, name) > (:job_id, :kind, :name)
 ORDER BY job_id, kind, name LIMIT (SELECT :limit);

-- name: import_step
INSERT INTO sqlq_steps (job_id, kind, name, value, done_at)
VALUES (:job_id, :kind, :name, :value, :done_at);

-- The record of finished jobs (migration 0004, issue 39): written by the deletes above, read
-- by Queue.finished and the dashboard's lists, pruned by sqlq/retention.py.

-- name: finished_job
-- One record by primary key, its result if still kept, its worker's host and pid while
-- its row is in the registry.
SELECT f.id, f.tube, f.grp, f.outcome, f.ended_at, f.worker, f.actor, f.ran, f.attempts,
       f.created_at, f.unique_key, f.body, f.steps,
       (SELECT result FROM sqlq_results WHERE job_id = f.id AND expires_at > :now),
       w.host, w.pid
  FROM sqlq_finished AS f LEFT JOIN sqlq_workers AS w ON w.token = f.worker
 WHERE f.id = :id;

-- name: list_finished
-- A page of a tube's records of one outcome, newest first, after the key (ended_at, id)
-- of the last one shown: one range of sqlq_finished_list.
SELECT id, tube, grp, outcome, ended_at, worker, actor, ran, attempts, created_at,
       unique_key, body, steps, NULL, NULL, NULL
  FROM sqlq_finished
 WHERE tube = (SELECT :tube) AND outcome = (SELECT :outcome) AND (ended_at, id) < ((SELECT :at), (SELECT :after))
 ORDER BY ended_at DESC, id DESC LIMIT (SELECT :limit);

-- name: search_finished
-- A tube's records of one outcome whose id, unique key or body's head contains :text,
-- newest first, among its newest :depth only (a body search cannot use an index).
SELECT id, tube, grp, outcome, ended_at, worker, actor, ran, attempts, created_at,
       unique_key, body, steps, NULL, NULL, NULL
  FROM (SELECT * FROM sqlq_finished WHERE tube = (SELECT :tube) AND outcome = (SELECT :outcome)
         ORDER BY ended_at DESC, id DESC LIMIT (SELECT :depth)) AS f
 WHERE instr(body, :bytes) > 0 OR instr(unique_key, :text) > 0 OR CAST(id AS TEXT) = :text
 ORDER BY ended_at DESC, id DESC LIMIT (SELECT :limit);

-- name: finished_tubes
-- The tubes that have records, in O(tubes x log n): a loose index scan of
-- sqlq_finished_list (as tube_names).
WITH RECURSIVE t(tube) AS (
    SELECT (SELECT min(tube) FROM sqlq_finished)
    UNION ALL
    SELECT (SELECT min(tube) FROM sqlq_finished WHERE tube > t.tube)
      FROM t WHERE t.tube IS NOT NULL)
SELECT tube FROM t WHERE tube IS NOT NULL;

-- name: finished_cutoff
-- The newest record a count bound drops: the (:keep + 1)th newest of the tube's outcome
-- (an index walk of :keep entries, in a read transaction: no writer waits on it).
SELECT ended_at, id FROM sqlq_finished
 WHERE tube = (SELECT :tube) AND outcome = (SELECT :outcome)
 ORDER BY ended_at DESC, id DESC LIMIT 1 OFFSET (SELECT :keep);

-- name: prune_finished
-- At most :batch of a tube's records of one outcome older than the key (:at, :id): the
-- oldest first, one short write each (sqlq/retention.py loops).
DELETE FROM sqlq_finished
 WHERE id IN (SELECT id FROM sqlq_finished
               WHERE tube = (SELECT :tube) AND outcome = (SELECT :outcome) AND (ended_at, id) < ((SELECT :at), (SELECT :id))
               ORDER BY ended_at, id LIMIT (SELECT :batch))
RETURNING id;

-- name: set_retention
INSERT INTO sqlq_retention (tube, max_age, max_count) VALUES (:tube, :max_age, :max_count)
ON CONFLICT (tube) DO UPDATE SET max_age = excluded.max_age, max_count = excluded.max_count;

-- name: drop_retention
DELETE FROM sqlq_retention WHERE tube = :tube;

-- name: list_retention
SELECT tube, max_age, max_count FROM sqlq_retention ORDER BY tube;

-- Groups (migration 0003_groups, sqlq/groups.py): a tube that has held a grouped job is
-- claimed fairly by claim_limited (store/groups.py), in its write transaction; the plain
-- claims skip it (sqlq_tubes.turn set). A put without a group costs nothing here.

-- name: grouped_tubes
-- The tubes claimed fairly: a put without a group into one gives its jobs turns.
SELECT name FROM sqlq_tubes WHERE grouped IS NOT NULL;

-- name: tube_grouped
SELECT grouped FROM sqlq_tubes WHERE name = :tube;

-- name: group_tube
-- A tube's first grouped put: from now on it is claimed fairly (its row made if need be,
-- without a pause: paused_until 0 is not counted as one).
INSERT INTO sqlq_tubes (name, paused_until, pause_ms, grouped) VALUES (:tube, 0, 0, 1)
ON CONFLICT (name) DO UPDATE SET grouped = 1;

-- name: group_turns
-- The turns of :n jobs put in a group: one past the later of the group's last turn and
-- the tube's round, then one each; the last is kept and returned. The round: the turn
-- before the tube's next claim (its first ready job in claim order, sqlq_jobs_turns),
-- or with none ready, the last turn given (sqlq_groups_turn): one probe each.
INSERT INTO sqlq_groups (tube, grp, turn)
SELECT :tube, :grp, coalesce(
           (SELECT turn - 1 FROM sqlq_jobs
             WHERE state = 0 AND turn IS NOT NULL AND tube = (SELECT :tube)
             ORDER BY priority, turn, id LIMIT 1),
           (SELECT max(turn) FROM sqlq_groups WHERE tube = (SELECT :tube)), 0) + :n
WHERE true
ON CONFLICT (tube, grp) DO UPDATE
   SET turn = max(turn, excluded.turn - :n) + :n
RETURNING turn;

-- name: set_group
-- A put's jobs in their group (NULL: the tube's jobs without a group), with their turns
-- in id order (a put numbers its ids consecutively under the write lock).
UPDATE sqlq_jobs SET grp = :grp, turn = :first_turn + id - :first_id
 WHERE id BETWEEN :first_id AND :last_id;

-- name: ready_head
-- The best ready job of a tube in claim order (sqlq_jobs_ready): a job put without a
-- group before its put knew the tube grouped (turn NULL) is taken when it heads it.
SELECT id, priority, turn FROM sqlq_jobs
 WHERE state = 0 AND tube = (SELECT :tube)
 ORDER BY priority, id LIMIT 1;

-- name: fair_heads
-- A grouped tube's ready jobs in claim order (priority, turn, id: sqlq_jobs_turns) after
-- (:priority, :turn, :id), with their group's rate time (a job without a group: none):
-- the fair claim takes the first whose group is not capped. One range of the index, a
-- primary-key probe of sqlq_groups a row.
SELECT j.priority, j.id, j.grp, j.turn, g.rate_at
  FROM sqlq_jobs AS j LEFT JOIN sqlq_groups AS g ON g.tube = j.tube AND g.grp = j.grp
 WHERE j.state = 0 AND j.turn IS NOT NULL AND j.tube = (SELECT :tube)
   AND (j.priority, j.turn, j.id) > ((SELECT :priority), (SELECT :turn), (SELECT :id))
 ORDER BY j.priority, j.turn, j.id LIMIT (SELECT :n);

-- name: claim_fair_head
-- The fair claim of a grouped tube without group limits, in one statement: its first
-- ready job in claim order (priority, turn, id: one probe of sqlq_jobs_turns), or
-- before it the head of sqlq_jobs_ready if that has no turn (put by a process that did
-- not know the tube grouped yet: taken in its place in id order). Unless
-- :checked (claim_limited read the tube's row), nothing while the tube is paused or has
-- limits, in the same probe of its row as the plain claims': the engine's fast path for
-- a grouped tube it saw without limits (Engine._claim_fair) then falls back.
UPDATE sqlq_jobs
   SET state = 2, reserved_until = :now + ttr, reserves = reserves + 1,
       lease = abs(random()), owner = :owner
 WHERE id = (SELECT c.id FROM (
                  SELECT h.id, 0 AS k FROM (SELECT id, turn FROM sqlq_jobs
                                             WHERE state = 0 AND tube = (SELECT :tube)
                                             ORDER BY priority, id LIMIT 1) AS h
                   WHERE h.turn IS NULL
                  UNION ALL
                  SELECT f.id, 1 FROM (SELECT id FROM sqlq_jobs
                                        WHERE state = 0 AND turn IS NOT NULL
                                          AND tube = (SELECT :tube)
                                        ORDER BY priority, turn, id LIMIT 1) AS f) AS c
              ORDER BY c.k LIMIT 1)
   AND state = 0
   AND NOT EXISTS (SELECT 1 FROM sqlq_tubes
                    WHERE name = (SELECT :tube) AND NOT :checked
                      AND (paused_until > :now
                           OR coalesce(concurrency, rate, group_concurrency, group_rate)
                              IS NOT NULL))
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: claim_ready_job
-- The job the fair claim chose, if still ready.
UPDATE sqlq_jobs
   SET state = 2, reserved_until = :now + ttr, reserves = reserves + 1,
       lease = abs(random()), owner = :owner
 WHERE id = :id AND state = 0
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: group_live
-- Jobs reserved under live leases per group of a tube (a range of sqlq_jobs_reserved
-- from :now, as live_reservations).
SELECT grp, count(*) FROM sqlq_jobs
 WHERE state = 2 AND reserved_until > :now AND tube = :tube AND grp IS NOT NULL
 GROUP BY grp;

-- name: spend_group_rate
UPDATE sqlq_groups SET rate_at = :rate_at WHERE tube = :tube AND grp = :grp;

-- name: busiest_groups
-- The dashboard's groups of a tube: ready and reserved jobs per group, the busiest
-- first, capped at :limit groups. A walk of the tube's entries of sqlq_jobs_turns and of
-- the live reservations (an operator's read, as tube_counts).
SELECT grp, sum(ready), sum(held) FROM (
       SELECT grp, 1 AS ready, 0 AS held FROM sqlq_jobs
        WHERE state = 0 AND turn IS NOT NULL AND tube = (SELECT :tube) AND grp IS NOT NULL
       UNION ALL
       SELECT grp, 0, 1 FROM sqlq_jobs
        WHERE state = 2 AND reserved_until > (SELECT :now) AND tube = (SELECT :tube)
          AND grp IS NOT NULL)
 GROUP BY grp ORDER BY sum(ready) + sum(held) DESC, grp LIMIT (SELECT :limit);
