-- Every statement sqlq runs on PostgreSQL, by name (the SQLite file's queries.sql
-- has the same names; see it for what each is for).
--
-- Format: a block starts with "-- name: NAME", then comment lines that say why,
-- then the SQL. Parameters are bound by name (%(name)s), never formatted; a
-- literal percent sign is written %%. %(now)s is the caller's clock in ms;
-- %(tubes)s is a text[] of tube names. States: 0 ready, 1 delayed, 2 reserved,
-- 3 buried, 4 waiting (for parents: migration 0011). A statement that may make a job
-- ready, or a result final, sends a NOTIFY in the same transaction: it is delivered only if that commits, and
-- identical ones in one transaction are folded into one. So does a delete that frees a
-- slot of a tube's concurrency cap (migration 0016); a worker's other deletes send none.

-- name: insert_job
-- dialect: the id comes back by RETURNING (a sequence: no single writer numbers ids), and
--   pg_notify wakes waiters (SQLite's watch the -wal).
-- One job without a unique key: the hot path of every put. A plain INSERT, not the ON
-- CONFLICT of insert_unique_job: an INSERT with an arbiter index is a speculative
-- insertion (a pre-check of the arbiter, a speculative lock, and one more WAL record
-- to confirm the row) even for a row the partial unique index would never hold;
-- measured 48 bytes of WAL and about 10 us of the server's CPU a put. The NOTIFY
-- rides the same statement.
WITH job AS (
    INSERT INTO sqlq_jobs (tube, priority, state, delay, delay_until, ttr, body, created_at)
    VALUES (%(tube)s, %(priority)s, %(state)s, %(delay)s, %(delay_until)s, %(ttr)s, %(body)s,
            %(now)s)
    RETURNING id)
SELECT id, pg_notify('sqlq', %(tube)s) FROM job;

-- name: insert_unique_job
-- One job with a unique key; with the key already live in the tube, nothing is
-- inserted (the caller then reads the live job's id). The NOTIFY rides the same
-- statement.
WITH job AS (
    INSERT INTO sqlq_jobs (tube, priority, state, delay, delay_until, ttr, body, created_at,
                           unique_key)
    VALUES (%(tube)s, %(priority)s, %(state)s, %(delay)s, %(delay_until)s, %(ttr)s, %(body)s,
            %(now)s, %(unique_key)s)
    ON CONFLICT (tube, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id)
SELECT id, pg_notify('sqlq', %(tube)s) FROM job;

-- name: insert_jobs
-- Many jobs in one statement, in the order given (ids ascend with ordinality).
WITH job AS (
    INSERT INTO sqlq_jobs (tube, priority, state, delay, delay_until, ttr, body, created_at)
    SELECT %(tube)s, %(priority)s, %(state)s, %(delay)s, %(delay_until)s, %(ttr)s, b.body,
           %(now)s
      FROM unnest(%(bodies)s::bytea[]) WITH ORDINALITY AS b(body, n)
     ORDER BY b.n
    RETURNING id)
SELECT id, pg_notify('sqlq', %(tube)s) FROM job;

-- name: insert_puts
-- The puts of several threads sharing one commit (group commit), each with its own
-- tube and options, in one statement: ids ascend with ordinality, as in insert_jobs.
WITH job AS (
    INSERT INTO sqlq_jobs (tube, priority, state, delay, delay_until, ttr, body, created_at)
    SELECT p.tube, p.priority, CASE WHEN p.delay > 0 THEN 1 ELSE 0 END, p.delay,
           CASE WHEN p.delay > 0 THEN %(now)s + p.delay END, p.ttr, p.body, %(now)s
      FROM unnest(%(tubes)s::text[], %(priorities)s::bigint[], %(delays)s::bigint[],
                  %(ttrs)s::bigint[], %(bodies)s::bytea[])
           WITH ORDINALITY AS p(tube, priority, delay, ttr, body, n)
     ORDER BY p.n
    RETURNING id, tube)
SELECT id, pg_notify('sqlq', tube) FROM job;

-- name: find_unique_job
SELECT id FROM sqlq_jobs WHERE tube = %(tube)s AND unique_key = %(unique_key)s;

-- name: _claim_floors
-- The floors of the four claim statements (claim_job, delete_and_claim, claim_jobs,
-- delete_and_claim_jobs), as their CTE f: sqlq_floors decides which hold, but only when
-- %(prove)s, for a ripe candidate or a look for expired leases (one claim in tens:
-- floors.py); every other claim gets the answer sqlq_floors would give it (its floors as
-- they are, status 0, expired_from as given, the snapshot's xmax) without the call, which
-- cost 12% of a job's server CPU (bench/bench_pg_cpu_ab.py). LIMIT 1 keeps the
-- planner's estimate of f at one row, as the function's was: with two, a statement that
-- calls a claim function once per row of f (delete_and_claim) costs its generic plan twice
-- a custom one's, and PostgreSQL planned it anew at every call
-- (test_claim_floors.py checks both).
WITH f AS MATERIALIZED (
    SELECT * FROM sqlq_floors(%(tubes)s::text[], %(now)s::bigint, %(scan_tube)s::text[],
                              %(scan_lo)s::bigint[], %(scan_from)s::bigint[],
                              %(scan_cand)s::bigint[], %(scan_xmax)s::xid8[],
                              %(expired_from)s::bigint, %(expired_check)s::boolean)
     WHERE %(prove)s::boolean
    UNION ALL
    SELECT %(scan_from)s::bigint[],
           array_fill(0::smallint, ARRAY[cardinality(%(scan_tube)s::text[])]),
           %(expired_from)s::bigint, pg_snapshot_xmax(pg_current_snapshot())
     WHERE NOT %(prove)s::boolean
    LIMIT 1)

-- name: claim_job
-- dialect: the claim is a function (sqlq_claim, migrations/postgres/0003_groups.sql) with
--   SKIP LOCKED inside; tubes are text[]; %(capped)s as the SQLite file's :capped; the floors.
-- The most urgent job ready as of now in the watched, unpaused tubes, due delayed
-- jobs and expired reservations included: see sqlq_claim. In full
-- durability its commit waits for the WAL flush, as every write's: a claim lost by a
-- server crash would make the job ready again while its holder, alive on another
-- machine, runs it (owners.py), so a claim is not cheaper to lose than a put. Each
-- band is read from its floor (sqlq_floors in migrations/postgres/0001_initial.sql,
-- floors.py ClaimFloors): _claim_floors,
-- in the same statement, says which floors hold (scan_from, status, expired_from, xmax:
-- the last four columns). A claim that found nothing gives one row
-- of NULL job columns, with `limited` true if a watched tube has limits (the claim
-- skipped it), so the engine need not ask (store.py empty_claim_limited).
-- include: _claim_floors
, c AS MATERIALIZED (
    SELECT * FROM sqlq_claim(%(tubes)s::text[], %(now)s::bigint, %(owner)s::text, 1,
                             %(capped)s::boolean, %(scan_tube)s::text[], %(scan_lo)s::bigint[],
                             %(scan_hi)s::bigint[], (SELECT scan_from FROM f),
                             (SELECT expired_from FROM f)))
SELECT c.id, c.tube, c.priority, c.ttr, c.body, c.created_at, c.reserves, c.timeouts,
       c.releases, c.buries, c.kicks, c.lease, c.reserved_until, c.unique_key, c.delay,
       c.trace, c.grp, c.again, NULL::boolean, f.status, f.expired_from, f.xmax::text
  FROM c, f
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL,
       EXISTS (SELECT 1 FROM sqlq_tubes
                WHERE name = ANY(%(tubes)s::text[])
                  AND coalesce(concurrency, rate, grouped) IS NOT NULL),
       f.status, f.expired_from, f.xmax::text
  FROM f
 WHERE NOT EXISTS (SELECT 1 FROM c);

-- name: delete_and_claim
-- The worker's fast path: delete the job it finished (under its lease) and claim the
-- next, in one statement (sqlq_delete_and_claim; SQLSTATE SQ001: the lease is lost),
-- with the floors of claim_job. No row when nothing was claimed.
-- include: _claim_floors
SELECT c.id, c.tube, c.priority, c.ttr, c.body, c.created_at, c.reserves, c.timeouts,
       c.releases, c.buries, c.kicks, c.lease, c.reserved_until, c.unique_key, c.delay,
       c.trace, c.grp, c.again, NULL::boolean, f.status, f.expired_from, f.xmax::text
  FROM f, sqlq_delete_and_claim(%(id)s::bigint, %(lease)s::bigint, %(now)s::bigint,
                                %(tubes)s::text[], %(owner)s::text, %(scan_tube)s::text[],
                                %(scan_lo)s::bigint[], %(scan_hi)s::bigint[], f.scan_from,
                                f.expired_from) AS c;

-- name: claim_job_by_id
-- dialect: a 53-bit random lease in a bigint; a boolean is not an integer (::int); capped
--   (migration 0016).
-- beanstalkd's reserve-job: any job that is not reserved under a live lease, nor waiting.
-- It bypasses a cap but counts against it while reserved: its delete notifies (capped).
UPDATE sqlq_jobs
   SET state = 2, reserved_until = %(now)s + ttr, reserves = reserves + 1,
       lease = floor(random() * 9007199254740991)::bigint + 1, owner = %(owner)s,
       delay_until = NULL, timeouts = timeouts + (state = 2)::int,
       capped = EXISTS (SELECT 1 FROM sqlq_tubes AS l
                         WHERE l.name = sqlq_jobs.tube
                           AND coalesce(l.concurrency, l.group_concurrency) IS NOT NULL)
 WHERE id = %(id)s AND NOT (state = 2 AND reserved_until > %(now)s) AND state <> 4
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: has_ready_job
-- A read a waiting worker makes before it claims (which takes row locks). A tube with
-- limits counts only while it may give a job (a free slot, the rate's next claim due).
SELECT 1
  FROM unnest(%(tubes)s::text[]) AS t(name)
 WHERE NOT EXISTS (SELECT 1 FROM sqlq_tubes AS p
                    WHERE p.name = t.name
                      AND (p.paused_until > %(now)s OR p.rate_at > %(now)s
                           OR CASE WHEN p.concurrency IS NOT NULL
                              THEN p.concurrency <= (SELECT count(*) FROM sqlq_jobs
                                                      WHERE state = 2 AND tube = t.name
                                                        AND reserved_until > %(now)s)
                              END))
   AND (EXISTS (SELECT 1 FROM sqlq_jobs WHERE state = 0 AND tube = t.name)
        OR EXISTS (SELECT 1 FROM sqlq_jobs
                    WHERE state = 1 AND tube = t.name AND delay_until <= %(now)s)
        OR EXISTS (SELECT 1 FROM sqlq_jobs
                    WHERE state = 2 AND reserved_until <= %(now)s AND tube = t.name))
 LIMIT 1;

-- name: next_due
-- dialect: tubes are text[] (unnest), not JSON (json_each).
-- When something in these tubes may next become ready: the earliest delayed job,
-- the earliest reservation deadline, the earliest end of a pause, the earliest next
-- claim a rate allows. Only times still to
-- come, in these tubes (see the SQLite file's next_due: a past time would make a
-- waiter look again at once, in a loop).
SELECT (SELECT min((SELECT delay_until FROM sqlq_jobs
                     WHERE state = 1 AND tube = t.name AND delay_until > %(now)s
                     ORDER BY delay_until LIMIT 1))
          FROM unnest(%(tubes)s::text[]) AS t(name)),
       (SELECT min(reserved_until) FROM sqlq_jobs
         WHERE state = 2 AND reserved_until > %(now)s AND tube = ANY(%(tubes)s::text[])),
       (SELECT min(paused_until) FROM sqlq_tubes
         WHERE paused_until > %(now)s AND name = ANY(%(tubes)s::text[])),
       (SELECT min(rate_at) FROM sqlq_tubes
         WHERE rate_at > %(now)s AND name = ANY(%(tubes)s::text[])),
       (SELECT min(rate_at) FROM sqlq_groups
         WHERE rate_at > %(now)s AND tube = ANY(%(tubes)s::text[]));

-- name: delete_job
-- dialect: pg_notify, so a waiting result() learns of the delete; the tube through the CTE.
-- An administrator's delete; a result waiter learns of it from the NOTIFY. A job with
-- dependency edges is left to delete_linked_job (migration 0011).
-- The job's record (issue 39) in the same statement: a data-modifying CTE. Its steps
-- (sqlq_job_steps, migration 0004) are read in the statement's snapshot: the delete of
-- sqlq_forget_steps, an AFTER trigger, runs at its end and is not seen.
WITH job AS (DELETE FROM sqlq_jobs WHERE id = %(id)s AND dependents = 0 AND waiting_on = 0
             RETURNING id, tube, grp, state, owner, reserved_until - ttr AS began, reserves,
                       created_at, unique_key, substr(body, 1, 256) AS head, steps),
kept AS (INSERT INTO sqlq_finished (id, tube, grp, outcome, ended_at, worker, actor, ran,
                                    attempts, created_at, unique_key, body, steps)
         SELECT id, tube, grp, %(outcome)s, %(now)s, CASE WHEN state = 2 THEN owner END,
                %(actor)s, CASE WHEN state = 2 THEN %(now)s - began END, reserves,
                created_at, unique_key, head,
                CASE WHEN steps > 0 THEN sqlq_job_steps(id) END
           FROM job
         ON CONFLICT (id) DO UPDATE
            SET tube = excluded.tube, grp = excluded.grp, outcome = excluded.outcome,
                ended_at = excluded.ended_at, worker = excluded.worker, actor = excluded.actor,
                ran = excluded.ran, attempts = excluded.attempts,
                created_at = excluded.created_at, unique_key = excluded.unique_key,
                body = excluded.body, steps = excluded.steps)
SELECT tube, pg_notify('sqlq', '') FROM job;

-- name: delete_leased_job
-- dialect: pg_notify for a job that held a capped tube's slot (SQLite's waiters see
--   every commit); state + 0: the primary key finds the row, never the reservations'
--   partial index.
-- The worker's delete: no NOTIFY (the NOTIFY lock would serialise every ack); a
-- result() waiting on a job deleted without a result learns it at its next look. But
-- a job whose reservation counted against a concurrency cap (capped, set by the limits
-- path's claim: mark_capped, migration 0016) frees a slot a reserve may be blocked on:
-- then one NOTIFY, in this statement (CASE evaluates pg_notify only for such a row; any
-- other costs a column test). Parameters in order, as SQLite's (the store binds one
-- tuple): id, lease, now, and now once more, for the job's record (issue 39), written
-- in the same statement (a data-modifying CTE: no round trip more). A job with
-- dependents is left to delete_linked_job.
WITH job AS (
    DELETE FROM sqlq_jobs
     WHERE id = %s AND state + 0 = 2 AND lease = %s AND reserved_until > %s
       AND dependents = 0
    RETURNING id, tube, grp, owner, reserved_until - ttr AS began, reserves, created_at,
              unique_key, substr(body, 1, 256) AS head, capped, steps),
kept AS (INSERT INTO sqlq_finished (id, tube, grp, outcome, ended_at, worker, ran, attempts,
                                    created_at, unique_key, body, steps)
         SELECT id, tube, grp, 'done', t.now, owner, t.now - began, reserves, created_at,
                unique_key, head, CASE WHEN steps > 0 THEN sqlq_job_steps(id) END
           FROM job, (SELECT %s::bigint AS now) AS t
         ON CONFLICT (id) DO UPDATE
            SET tube = excluded.tube, grp = excluded.grp, outcome = excluded.outcome,
                ended_at = excluded.ended_at, worker = excluded.worker, actor = excluded.actor,
                ran = excluded.ran, attempts = excluded.attempts,
                created_at = excluded.created_at, unique_key = excluded.unique_key,
                body = excluded.body, steps = excluded.steps)
SELECT tube, CASE WHEN capped THEN pg_notify('sqlq', tube) END FROM job;

-- name: lease_state
SELECT state, lease, reserved_until FROM sqlq_jobs WHERE id = %(id)s;

-- name: release_job
-- dialect: NULL parameters need a type (::bigint), and pg_notify wakes waiters for the job;
--   state + 0: the primary key finds the row, never the reservations' partial index.
WITH job AS (
    UPDATE sqlq_jobs
       SET state = CASE WHEN %(delay_until)s::bigint IS NULL THEN 0 ELSE 1 END,
           delay = %(delay)s, delay_until = %(delay_until)s, reserved_until = NULL,
           lease = NULL, owner = NULL, priority = coalesce(%(priority)s, priority),
           releases = releases + 1, again = true
     WHERE id = %(id)s AND state + 0 = 2 AND reserved_until > %(now)s
       AND (%(lease)s::bigint IS NULL OR lease = %(lease)s)
    RETURNING tube)
SELECT tube, pg_notify('sqlq', tube) FROM job;

-- name: bury_job
-- dialect: a NULL lease needs a type (::bigint), and pg_notify tells a waiting result();
--   state + 0: the primary key finds the row, never the reservations' partial index.
WITH job AS (
    UPDATE sqlq_jobs
       SET state = 3, reserved_until = NULL, lease = NULL, owner = NULL,
           priority = coalesce(%(priority)s, priority), buries = buries + 1,
           bury_reason = %(reason)s
     WHERE id = %(id)s AND state + 0 = 2 AND reserved_until > %(now)s
       AND (%(lease)s::bigint IS NULL OR lease = %(lease)s)
    RETURNING tube)
SELECT tube, pg_notify('sqlq', '') FROM job;

-- name: touch_job
-- dialect: a NULL lease needs a type (::bigint);
--   state + 0: the primary key finds the row, never the reservations' partial index.
UPDATE sqlq_jobs SET reserved_until = %(now)s + ttr
 WHERE id = %(id)s AND state + 0 = 2 AND reserved_until > %(now)s
   AND (%(lease)s::bigint IS NULL OR lease = %(lease)s)
RETURNING reserved_until;

-- name: kick_buried
-- dialect: FOR UPDATE SKIP LOCKED (concurrent kicks), and pg_notify wakes waiters.
WITH job AS (
    UPDATE sqlq_jobs SET state = 0, kicks = kicks + 1, bury_reason = NULL, again = true
     WHERE id IN (SELECT id FROM sqlq_jobs WHERE state = 3 AND tube = %(tube)s
                   ORDER BY id LIMIT %(bound)s FOR UPDATE SKIP LOCKED)
    RETURNING id)
SELECT id, pg_notify('sqlq', %(tube)s) FROM job;

-- name: kick_delayed
-- dialect: FOR UPDATE SKIP LOCKED (concurrent kicks), and pg_notify wakes waiters.
-- Only jobs still waiting: a due one is already ready as of now.
WITH job AS (
    UPDATE sqlq_jobs SET state = 0, delay_until = NULL, kicks = kicks + 1, again = true
     WHERE id IN (SELECT id FROM sqlq_jobs
                   WHERE state = 1 AND tube = %(tube)s AND delay_until > %(now)s
                   ORDER BY delay_until, id LIMIT %(bound)s FOR UPDATE SKIP LOCKED)
    RETURNING id)
SELECT id, pg_notify('sqlq', %(tube)s) FROM job;

-- name: kick_job
-- dialect: pg_notify wakes the tube's waiters (it returns the tube for it).
WITH job AS (
    UPDATE sqlq_jobs
       SET state = 0, delay_until = NULL, kicks = kicks + 1, bury_reason = NULL, again = true
     WHERE id = %(id)s AND (state = 3 OR (state = 1 AND delay_until > %(now)s))
    RETURNING tube)
SELECT tube, pg_notify('sqlq', tube) FROM job;

-- name: postpone_job
-- dialect: a NULL time needs a type (::bigint); pg_notify wakes the tube's waiters (a job
--   ready at once, or due sooner than a waiter's timer), and a job made ready again is
--   marked again (the claim floors).
-- A ready or delayed job made to wait until :delay_until (ready at once when NULL):
-- an operator's "not before". Reserved, buried and waiting jobs are left as they are.
WITH job AS (
    UPDATE sqlq_jobs
       SET state = CASE WHEN %(delay_until)s::bigint IS NULL THEN 0 ELSE 1 END,
           delay = %(delay)s, delay_until = %(delay_until)s, again = true
     WHERE id = %(id)s AND state IN (0, 1)
    RETURNING tube)
SELECT tube, pg_notify('sqlq', tube) FROM job;

-- name: replace_job
-- dialect: a NULL time needs a type (::bigint); pg_notify wakes the tube's waiters (a job
--   ready at once, or due sooner than a waiter's timer), and a job made ready again under
--   its old id is marked again (the claim floors: its priority may be a new band).
-- A put with on_conflict="replace": the ready, delayed or waiting job holding the key in
-- the tube takes the put's body, priority, ttr and delay (counted from :now; a waiting
-- job's delay_until stays NULL: its release writes it). It keeps its id, and so its place
-- among the jobs of its priority. A reserved or buried holder is left to pass_unique_key.
-- Under READ COMMITTED a holder claimed meanwhile is re-checked and skipped.
-- (A put option that a replace changes goes in this SET and in upsert_unique_job's.)
WITH job AS (
    UPDATE sqlq_jobs
       SET body = %(body)s, priority = %(priority)s, ttr = %(ttr)s, delay = %(delay)s,
           state = CASE WHEN state = 4 THEN 4
                        WHEN %(delay_until)s::bigint IS NULL THEN 0 ELSE 1 END,
           delay_until = CASE WHEN state = 4 THEN NULL ELSE %(delay_until)s::bigint END,
           again = true
     WHERE tube = %(tube)s AND unique_key = %(unique_key)s AND state IN (0, 1, 4)
    RETURNING id, tube)
SELECT id, pg_notify('sqlq', tube) FROM job;

-- name: pass_unique_key
-- A replace that found the key held by a reserved or buried job: that job is never changed
-- but for its key, which passes to the job the replace puts to wait for it. The row stays
-- locked until the put commits: a concurrent replace of the key waits here, then finds
-- the new job.
UPDATE sqlq_jobs SET unique_key = NULL
 WHERE tube = %(tube)s AND unique_key = %(unique_key)s AND state IN (2, 3)
RETURNING id;

-- name: upsert_unique_job
-- dialect: the id comes from the sequence (one is used up when the row exists: only when
--   another producer put the key between replace_job and this), again and pg_notify as in
--   replace_job.
-- A replace that found no holder: insert the job, or, when another producer's put of the
-- key won the race, change that job as replace_job does (ON CONFLICT locks the row: no
-- lost update). No row back: a reserved or buried job holds the key (pass_unique_key).
WITH job AS (
    INSERT INTO sqlq_jobs (tube, priority, state, delay, delay_until, ttr, body, created_at,
                           unique_key)
    VALUES (%(tube)s, %(priority)s,
            CASE WHEN %(delay_until)s::bigint IS NULL THEN 0 ELSE 1 END, %(delay)s,
            %(delay_until)s, %(ttr)s, %(body)s, %(now)s, %(unique_key)s)
    ON CONFLICT (tube, unique_key) WHERE unique_key IS NOT NULL DO UPDATE
       SET body = excluded.body, priority = excluded.priority, ttr = excluded.ttr,
           delay = excluded.delay,
           state = CASE WHEN sqlq_jobs.state = 4 THEN 4 ELSE excluded.state END,
           delay_until = CASE WHEN sqlq_jobs.state = 4 THEN NULL
                              ELSE excluded.delay_until END,
           again = true
     WHERE sqlq_jobs.state IN (0, 1, 4)
    RETURNING id, tube)
SELECT id, pg_notify('sqlq', tube) FROM job;

-- name: select_job
-- dialect: a boolean is not an integer (::int).
-- A job as an observer sees it now: due delayed jobs and expired reservations
-- read as ready (an expired reservation counts one more timeout).
SELECT id, tube, priority,
       CASE WHEN state = 1 AND delay_until <= %(now)s THEN 0
            WHEN state = 2 AND reserved_until <= %(now)s THEN 0
            ELSE state END,
       ttr, body, created_at, reserves,
       timeouts + (state = 2 AND reserved_until <= %(now)s)::int, releases, buries, kicks,
       CASE WHEN state = 1 AND delay_until > %(now)s THEN delay_until END,
       CASE WHEN state = 2 AND reserved_until > %(now)s THEN reserved_until END,
       bury_reason, unique_key, delay, grp
  FROM sqlq_jobs WHERE id = %(id)s;

-- name: peek_ready_id
-- dialect: a derived table needs an alias; SQLite needs the LIMIT 1 branch wrapped in
--   SELECT *.
SELECT id FROM (
    (SELECT id, priority FROM sqlq_jobs WHERE state = 0 AND tube = %(tube)s
      ORDER BY priority, id LIMIT 1)
    UNION ALL
    SELECT id, priority FROM sqlq_jobs
     WHERE state = 1 AND tube = %(tube)s AND delay_until <= %(now)s
    UNION ALL
    SELECT id, priority FROM sqlq_jobs
     WHERE state = 2 AND reserved_until <= %(now)s AND tube = %(tube)s) AS u
 ORDER BY priority, id LIMIT 1;

-- name: peek_delayed_id
SELECT id FROM sqlq_jobs WHERE state = 1 AND tube = %(tube)s AND delay_until > %(now)s
 ORDER BY delay_until, id LIMIT 1;

-- name: peek_buried_id
SELECT id FROM sqlq_jobs WHERE state = 3 AND tube = %(tube)s ORDER BY id LIMIT 1;

-- name: count_jobs
-- dialect: the kept counts' slots summed; a typed NULL test of the tube.
-- Jobs per tube and state as of now, for stats, from the kept counts (migration 0005) and
-- the ranges of what "as of now" changes (SQLite's count_jobs says which).
SELECT tube, sum(ready)::bigint, sum(urgent)::bigint, sum(held)::bigint,
       sum(delayed)::bigint, sum(buried)::bigint, sum(waiting)::bigint
  FROM (SELECT tube, sum(n) FILTER (WHERE state = 0) AS ready,
               sum(n) FILTER (WHERE urgent) AS urgent, 0 AS held,
               sum(n) FILTER (WHERE state = 1) AS delayed,
               sum(n) FILTER (WHERE state = 3) AS buried, 0 AS waiting
          FROM sqlq_job_counts WHERE %(tube)s::text IS NULL OR tube = %(tube)s GROUP BY tube
        UNION ALL
        SELECT tube, count(*), count(*) FILTER (WHERE priority < 1024), 0, -count(*), 0, 0
          FROM sqlq_jobs
         WHERE state = 1 AND delay_until <= %(now)s
           AND tube IN (SELECT tube FROM sqlq_job_counts
                         WHERE state = 1 AND (%(tube)s::text IS NULL OR tube = %(tube)s)
                         GROUP BY tube HAVING sum(n) > 0)
         GROUP BY tube
        UNION ALL
        SELECT tube, count(*) FILTER (WHERE reserved_until <= %(now)s),
               count(*) FILTER (WHERE reserved_until <= %(now)s AND priority < 1024),
               count(*) FILTER (WHERE reserved_until > %(now)s), 0, 0, 0
          FROM sqlq_jobs WHERE state = 2 AND (%(tube)s::text IS NULL OR tube = %(tube)s)
         GROUP BY tube
        UNION ALL
        SELECT j.tube, 0, 0, 0, 0, 0, count(*)
          FROM (SELECT DISTINCT child FROM sqlq_edges) AS e JOIN sqlq_jobs AS j ON j.id = e.child
         WHERE j.state = 4 AND (%(tube)s::text IS NULL OR j.tube = %(tube)s)
         GROUP BY j.tube) AS parts
 GROUP BY tube
HAVING coalesce(sum(ready), 0) + sum(held) + coalesce(sum(delayed), 0)
       + coalesce(sum(buried), 0) + sum(waiting) > 0;

-- name: total_jobs
-- dialect: ids come from a sequence (SQLite: the highest id issued, migration 0007).
-- Ids issued so far (a rolled-back put or a unique-key conflict uses one up too), not
-- the puts that committed as on SQLite (where ids have no gaps, migration 0007): a
-- sequence is not transactional, so nothing records which ids were rolled back once
-- their jobs are deleted. An exact count would be a counter row written by every put
-- (put, put_many, publish, sqlq.put through the application's connection, copy): one
-- more write per put, and a row lock that every producer's commit queues on.
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM sqlq_jobs_id_seq;

-- name: change_token
-- dialect: the transaction snapshot (SQLite: PRAGMA data_version and total_changes()).
-- A value that changes whenever what a new statement reads may have changed: the
-- snapshot (xmin, xmax, transactions in progress) moves with every transaction that
-- takes an id or ends, in the whole cluster. Equal before and after a read, nothing
-- committed in between; equal again later, nothing has since (sqlq serve reuses its
-- stats while it holds: server/stats.py). NOTIFY would not do: a worker's delete
-- sends none.
SELECT pg_current_snapshot()::text;

-- name: list_tubes
-- dialect: the kept counts' slots summed; the waiting jobs joined from their edges (the
--   planner scanned every job for "id IN (SELECT child ...)").
-- Tubes with jobs from the kept counts (migration 0005), the reserved index and the
-- waiting jobs' edges: no walk of every job.
SELECT tube FROM sqlq_job_counts GROUP BY tube HAVING sum(n) > 0
UNION
SELECT tube FROM sqlq_jobs WHERE state = 2
UNION
SELECT j.tube FROM (SELECT DISTINCT child FROM sqlq_edges) AS e
  JOIN sqlq_jobs AS j ON j.id = e.child WHERE j.state = 4
UNION
SELECT name FROM sqlq_tubes WHERE paused_until > %(now)s
UNION
SELECT tube FROM sqlq_subscriptions;

-- name: pause_tube
-- dialect: pg_notify, so the tube's waiters look again.
-- The NOTIFY lets waiters re-read when the pause ends (a pause of 0 ends one now).
INSERT INTO sqlq_tubes (name, paused_until, pause_ms)
VALUES (%(tube)s, %(now)s + %(pause_ms)s, %(pause_ms)s)
ON CONFLICT (name) DO UPDATE SET paused_until = excluded.paused_until,
                                 pause_ms = excluded.pause_ms
RETURNING pg_notify('sqlq', %(tube)s);

-- name: tube_totals
-- dialect: puts are counted on the kept counts' rows (migration 8; SQLite: runs of ids in
--   sqlq_tube_run).
-- A tube's puts and pauses since the database was created (migration 0010): the sum
-- of its rows' puts.
SELECT coalesce((SELECT sum(puts) FROM sqlq_job_counts WHERE tube = %(tube)s), 0)::bigint,
       coalesce((SELECT pauses FROM sqlq_counters WHERE tube = %(tube)s), 0);

-- name: tube_pause
SELECT paused_until, pause_ms FROM sqlq_tubes WHERE name = %(tube)s;

-- name: reserving_owners
SELECT DISTINCT owner FROM sqlq_jobs
 WHERE state = 2 AND reserved_until > %(now)s AND owner IS NOT NULL AND owner <> %(owner)s;

-- name: release_owner
-- dialect: pg_notify wakes waiters for the jobs given back.
WITH job AS (
    UPDATE sqlq_jobs
       SET state = 0, reserved_until = NULL, lease = NULL, owner = NULL, again = true
     WHERE state = 2 AND owner = %(owner)s
    RETURNING tube)
SELECT tube, pg_notify('sqlq', tube) FROM job;

-- name: dead_owners
-- Holders that may be dead: their session advisory lock can be taken (the server
-- released it when their session ended; the locks taken here are given back at once),
-- with what tells a dead process from one re-making its session (owners.py): its
-- place and pid, and whether its keeper has been silent for the grace period, counted
-- from the first reaper's look at the server as it runs now at the earliest (a
-- restart loses unflushed heartbeats, and a server that recovers for longer than the
-- grace lets no keeper in meanwhile). That look is sqlq_server_epoch's row (migration
-- 0018); while there is none, silent is NULL (not silent) and the reaper writes it
-- (note_server_epoch). A read: people's views (the workers page) ask it too. A token
-- with no row is judged by its lock alone: its holder closed (unregister_owner) or was
-- forgotten; a crash cannot undo a registration (register_owner commits durably).
SELECT t.token, o.place, o.pid,
       CASE WHEN o.token IS NULL THEN true
            WHEN e.seen_at IS NULL THEN NULL
            ELSE greatest(o.seen_at, e.seen_at)
                 < now() - make_interval(secs => %(grace)s::float8) END AS silent
  FROM unnest(%(tokens)s::text[]) AS t(token)
  LEFT JOIN sqlq_owners AS o ON o.token = t.token
  LEFT JOIN sqlq_server_epoch AS e ON e.started = pg_postmaster_start_time()
 WHERE pg_try_advisory_lock(hashtextextended('sqlq owner ' || t.token, 0))
   AND pg_advisory_unlock(hashtextextended('sqlq owner ' || t.token, 0));

-- name: note_server_epoch
-- The first reaper's look at the server as it runs now (it found a free lock and no
-- row here): the grace can run from now. The rows of earlier runs (a clean restart
-- keeps them: the table is emptied by crashes only) go.
WITH earlier AS (
    DELETE FROM sqlq_server_epoch WHERE started <> pg_postmaster_start_time())
INSERT INTO sqlq_server_epoch (started) VALUES (pg_postmaster_start_time())
ON CONFLICT (started) DO NOTHING;

-- name: release_dead_owner
-- Give back a dead holder's reservations, deciding again in this transaction, under
-- its lock (held until the commit), that it is dead: a holder re-taking its lock on
-- a new session waits for the commit, then finds its jobs gone (JobLost), never
-- given to a second worker while it holds them. %(gone)s: the reaper saw its
-- process gone on its own machine; otherwise its keeper must be silent for the grace,
-- counted as dead_owners counts it (no epoch row: not silent). The row is kept, with
-- how many jobs went, for a keeper that comes back to say so (owners.py).
WITH dead AS (
    SELECT 1 AS yes
     WHERE pg_try_advisory_xact_lock(hashtextextended('sqlq owner ' || %(owner)s, 0))
       AND (%(gone)s::boolean
            OR NOT EXISTS (SELECT 1 FROM sqlq_owners
                            WHERE token = %(owner)s
                              AND greatest(seen_at, coalesce(
                                      (SELECT e.seen_at FROM sqlq_server_epoch AS e
                                        WHERE e.started = pg_postmaster_start_time()),
                                      'infinity'))
                                  >= now() - make_interval(secs => %(grace)s::float8)))),
job AS (
    UPDATE sqlq_jobs
       SET state = 0, reserved_until = NULL, lease = NULL, owner = NULL, again = true
     WHERE state = 2 AND owner = %(owner)s AND EXISTS (SELECT 1 FROM dead)
    RETURNING tube),
handed AS (
    UPDATE sqlq_owners SET handed_out = handed_out + (SELECT count(*) FROM job)
     WHERE token = %(owner)s AND EXISTS (SELECT 1 FROM dead))
SELECT tube, pg_notify('sqlq', tube) FROM job;

-- name: release_unseen_claim
-- The jobs a claim cut off by a lost connection may have taken (db.ClaimLedger): this
-- owner's, reserved at that claim's time, but for those claims seen to commit took.
WITH job AS (
    UPDATE sqlq_jobs
       SET state = 0, reserved_until = NULL, lease = NULL, owner = NULL, again = true
     WHERE state = 2 AND owner = %(owner)s AND reserved_until - ttr = %(now)s
       AND id <> ALL (%(known)s::bigint[])
    RETURNING tube)
SELECT tube, pg_notify('sqlq', tube) FROM job;

-- name: try_lock_owner
-- This process's liveness: a session lock the server drops when the session ends.
-- Busy only for the moment a reaper holds it (release_dead_owner): the caller retries.
SELECT pg_try_advisory_lock(hashtextextended('sqlq owner ' || %(token)s, 0));

-- name: lock_owner
-- Through a transaction pool (no session to keep a lock): the token's lock for the
-- transaction that registers the holder, waiting while a reaper's hand-over holds it.
SELECT pg_advisory_xact_lock(hashtextextended('sqlq owner ' || %(token)s, 0));

-- name: register_owner
-- Under the token's lock: who holds it, and its first (or renewed) sign of life; how
-- many of its jobs reapers handed out since it last registered (NULL: no row, a new
-- holder, or one forgotten), reset to 0.
-- Committed durably whatever the session's synchronous_commit (set_config, local to this
-- transaction: the commit reads it): a reaper judges a token without a row by its free
-- lock alone (a closed holder's), so a crash must not undo the row of a holder that goes
-- on claiming under it (a chaos run saw that, at normal durability: 12 jobs handed out).
WITH durable AS (SELECT set_config('synchronous_commit', 'on', true)),
before AS (SELECT handed_out FROM sqlq_owners WHERE token = %(token)s),
registered AS (
    INSERT INTO sqlq_owners AS o (token, host, pid, place)
    VALUES (%(token)s, %(host)s, %(pid)s, %(place)s)
    ON CONFLICT (token) DO UPDATE SET seen_at = now(), handed_out = 0)
SELECT (SELECT handed_out FROM before) FROM durable;

-- name: owner_jobs
-- A keeper that took its lock again: the reservations its process still holds (the
-- reserved jobs' index; once a lost session).
SELECT count(*) FROM sqlq_jobs WHERE state = 2 AND owner = %(token)s;

-- name: owner_heartbeat
-- The keeper's sign of life, once a HEARTBEAT_S; no row: forgotten (forget_silent_owners,
-- or an older sqlq's reaper), and the keeper registers again.
UPDATE sqlq_owners SET seen_at = now() WHERE token = %(token)s RETURNING 1;

-- name: unregister_owner
DELETE FROM sqlq_owners WHERE token = %(token)s;

-- name: forget_silent_owners
-- Rows of holders gone long ago: those that held nothing when they died (nothing
-- reaped them), and those reaped (release_dead_owner keeps the row).
DELETE FROM sqlq_owners AS o
 WHERE seen_at < now() - interval '1 hour'
   AND pg_try_advisory_xact_lock(hashtextextended('sqlq owner ' || o.token, 0));

-- name: insert_result
-- dialect: pg_notify wakes a waiting result().
INSERT INTO sqlq_results (job_id, result, expires_at)
VALUES (%(id)s, %(result)s, %(expires_at)s)
RETURNING pg_notify('sqlq', '');

-- name: purge_results
DELETE FROM sqlq_results
 WHERE job_id IN (SELECT job_id FROM sqlq_results WHERE expires_at <= %(now)s
                   ORDER BY expires_at LIMIT %(limit)s)
RETURNING job_id;

-- name: result_outcome
SELECT (SELECT result FROM sqlq_results WHERE job_id = %(id)s AND expires_at > %(now)s),
       j.state, j.bury_reason
  FROM (SELECT 1) AS one LEFT JOIN sqlq_jobs AS j ON j.id = %(id)s;

-- name: subscribe
INSERT INTO sqlq_subscriptions (topic, tube) VALUES (%(topic)s, %(tube)s) ON CONFLICT DO NOTHING;

-- name: unsubscribe
DELETE FROM sqlq_subscriptions WHERE topic = %(topic)s AND tube = %(tube)s RETURNING tube;

-- name: topic_tubes
SELECT tube FROM sqlq_subscriptions WHERE topic = %(topic)s ORDER BY tube;

-- name: list_subscriptions
-- dialect: a NULL parameter needs a type (::text).
SELECT topic, tube FROM sqlq_subscriptions
 WHERE %(topic)s::text IS NULL OR topic = %(topic)s
 ORDER BY topic, tube;

-- name: count_topics
SELECT count(DISTINCT topic) FROM sqlq_subscriptions;

-- name: claim_periodic_slot
INSERT INTO sqlq_periodic (name, last_slot, enqueued_at) VALUES (%(name)s, %(slot)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET last_slot = excluded.last_slot,
                                 enqueued_at = excluded.enqueued_at
 WHERE excluded.last_slot > sqlq_periodic.last_slot
RETURNING last_slot;

-- name: count_everything
-- dialect: ids come from a sequence (SQLite: sqlq_last_id).
SELECT (SELECT count(*) FROM sqlq_jobs) + (SELECT count(*) FROM sqlq_tubes)
     + (SELECT count(*) FROM sqlq_results) + (SELECT count(*) FROM sqlq_subscriptions)
     + (SELECT count(*) FROM sqlq_periodic)
     + (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM sqlq_jobs_id_seq);

-- name: export_job
SELECT id, tube, priority, CASE WHEN state = 2 THEN 0 ELSE state END, delay_until, ttr,
       body, created_at, reserves, timeouts, releases, buries, kicks, bury_reason,
       unique_key, delay, waiting_on, dependents, trace, steps, grp, turn
  FROM sqlq_jobs WHERE id > %(after)s ORDER BY id LIMIT %(limit)s;

-- name: import_job
-- dialect: a page of jobs in one statement, each column an array (SQLite: one INSERT a
-- job). sqlq_count_puts, a statement trigger, upserts its counter row once a statement:
-- once a job, a copy wrote a new version of that row per job in one transaction, and
-- each upsert walked every version before it (100,000 jobs took 86 s; a page a
-- statement, 6 s). OVERRIDING SYSTEM VALUE: the id is an identity column.
INSERT INTO sqlq_jobs (id, tube, priority, state, delay_until, ttr, body, created_at,
                       reserves, timeouts, releases, buries, kicks, bury_reason, unique_key,
                       delay, waiting_on, dependents, trace, steps, grp, turn, again)
OVERRIDING SYSTEM VALUE
SELECT j.*, true
  FROM unnest(%(id)s::bigint[], %(tube)s::text[], %(priority)s::bigint[],
              %(state)s::smallint[], %(delay_until)s::bigint[], %(ttr)s::bigint[],
              %(body)s::bytea[], %(created_at)s::bigint[], %(reserves)s::integer[],
              %(timeouts)s::integer[], %(releases)s::integer[], %(buries)s::integer[],
              %(kicks)s::integer[], %(bury_reason)s::text[], %(unique_key)s::text[],
              %(delay)s::bigint[], %(waiting_on)s::integer[], %(dependents)s::integer[],
              %(trace)s::text[], %(steps)s::integer[], %(grp)s::text[], %(turn)s::bigint[])
       AS j(id, tube, priority, state, delay_until, ttr, body, created_at, reserves,
            timeouts, releases, buries, kicks, bury_reason, unique_key, delay, waiting_on,
            dependents, trace, steps, grp, turn)
 ORDER BY j.id;

-- name: export_tube
SELECT name, paused_until, pause_ms, concurrency, rate, rate_ms, grouped, group_concurrency,
       group_rate, group_rate_ms
  FROM sqlq_tubes ORDER BY name;

-- name: import_tube
INSERT INTO sqlq_tubes (name, paused_until, pause_ms, concurrency, rate, rate_ms, grouped,
                        group_concurrency, group_rate, group_rate_ms)
VALUES (%(name)s, %(paused_until)s, %(pause_ms)s, %(concurrency)s, %(rate)s, %(rate_ms)s,
        %(grouped)s, %(group_concurrency)s, %(group_rate)s, %(group_rate_ms)s);

-- name: export_group
SELECT tube, grp, turn FROM sqlq_groups ORDER BY tube, grp;

-- name: import_group
INSERT INTO sqlq_groups (tube, grp, turn) VALUES (%(tube)s, %(grp)s, %(turn)s);

-- name: export_result
SELECT job_id, result, expires_at FROM sqlq_results WHERE job_id > %(after)s ORDER BY job_id
 LIMIT %(limit)s;

-- name: import_result
INSERT INTO sqlq_results (job_id, result, expires_at)
VALUES (%(job_id)s, %(result)s, %(expires_at)s);

-- name: export_subscription
SELECT topic, tube FROM sqlq_subscriptions ORDER BY topic, tube;

-- name: import_subscription
INSERT INTO sqlq_subscriptions (topic, tube) VALUES (%(topic)s, %(tube)s);

-- name: export_periodic
SELECT name, last_slot, enqueued_at FROM sqlq_periodic ORDER BY name;

-- name: import_periodic
INSERT INTO sqlq_periodic (name, last_slot, enqueued_at)
VALUES (%(name)s, %(last_slot)s, %(enqueued_at)s);

-- name: set_total_jobs
-- dialect: setval on the sequence (SQLite: sqlq_last_id).
-- After a copy, ids go on from the source's: an id is never issued twice.
SELECT setval('sqlq_jobs_id_seq', greatest(%(total)s, 1), %(total)s > 0);

-- name: table_health
-- sqlq maintain: live and dead rows of sqlq's tables, and when they were last vacuumed.
SELECT relname, n_live_tup, n_dead_tup,
       extract(epoch FROM greatest(last_vacuum, last_autovacuum))::bigint
  FROM pg_stat_user_tables WHERE relname LIKE 'sqlq%%' ORDER BY relname;

-- name: horizon_holders
-- What keeps deleted rows of sqlq's tables from being vacuumed (postgres/horizon.py,
-- sqlq maintain): every xmin that holds this database's horizon back, oldest first
-- (by transaction ids: exact, where times are not). Since PostgreSQL 14 a user table's
-- horizon is its own database's sessions and prepared transactions (before 14: every
-- database's), plus what holds every database: replication slots' xmin and walsenders'
-- (a standby's hot_standby_feedback without a slot). A logical slot's catalog_xmin
-- holds back only the system catalogs, not these tables; a VACUUM's xmin holds nothing.
-- backend_xmin and backend_xid are visible to any role, xact_start, state and query
-- only to the session's own role or pg_read_all_stats: the rest shows as not visible
-- (NULL state). Texts as bytes (the caller decodes): in a SQL_ASCII database left()
-- counts bytes and may cut a UTF-8 character, and another session may have sent text
-- in any encoding; as text either one fails the whole report ("invalid byte sequence").
SELECT kind, name, xmin, xid_age, seconds, detail, visible FROM (
  SELECT CASE WHEN a.backend_type = 'walsender' THEN 'standby' ELSE 'transaction' END,
         convert_to('pid ' || a.pid, 'SQL_ASCII'),
         coalesce(a.backend_xmin, a.backend_xid)::text,
         greatest(age(a.backend_xmin), age(a.backend_xid)),
         extract(epoch FROM now() - a.xact_start)::float8,
         convert_to(concat_ws(', ', a.usename || coalesce(' on ' || a.datname, ''),
                              nullif(a.application_name, ''),
                              a.state || coalesce(': ' || left(a.query, 80), '')),
                    'SQL_ASCII'),
         a.state IS NOT NULL OR a.backend_type = 'walsender'
    FROM pg_stat_activity a
   WHERE a.pid <> pg_backend_pid()
     AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
     AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
     AND (a.datname = current_database() OR a.datname IS NULL
          OR current_setting('server_version_num')::int < 140000)
  UNION ALL
  SELECT 'prepared', convert_to('gid ' || p.gid, 'SQL_ASCII'), p.transaction::text,
         age(p.transaction), extract(epoch FROM now() - p.prepared)::float8,
         convert_to(p.owner || ' on ' || p.database, 'SQL_ASCII'), true
    FROM pg_prepared_xacts p
   WHERE p.database = current_database()
      OR current_setting('server_version_num')::int < 140000
  UNION ALL
  -- inactive_since: PostgreSQL 17 and later (read through jsonb: no error before).
  SELECT 'slot', convert_to(s.slot_name, 'SQL_ASCII'), s.xmin::text, age(s.xmin),
         extract(epoch FROM now() - (to_jsonb(s) ->> 'inactive_since')::timestamptz)::float8,
         convert_to(s.slot_type || CASE WHEN s.active THEN ', active, pid ' || s.active_pid
                                        ELSE ', inactive' END, 'SQL_ASCII'),
         true
    FROM pg_replication_slots s WHERE s.xmin IS NOT NULL
) AS holders (kind, name, xmin, xid_age, seconds, detail, visible)
ORDER BY xid_age DESC;

-- name: vacuum_jobs
-- Runs outside a transaction. SKIP_LOCKED: never wait behind a lock on the hot table.
VACUUM (ANALYZE, SKIP_LOCKED) sqlq_jobs;

-- ---------------------------------------------------------------------------------------------
-- Read-only views for the dashboard and /metrics (observe.py); the SQLite file's
-- queries.sql says why each is shaped as it is.

-- name: tube_names
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
UNION SELECT name FROM sqlq_tubes WHERE paused_until > %(now)s
UNION SELECT tube FROM sqlq_subscriptions;

-- name: known_tubes
-- dialect: puts are counted on the kept counts' rows (migration 8; SQLite: sqlq_tube_run).
-- Tubes the database remembers though they may hold no job now: those with counters
-- (migrations 0002, 0010), a pause (even one that ended) or histogram rows. The
-- dashboard and /metrics list them at zero instead of dropping them (a Prometheus
-- series would go stale instead of reading 0). O(tubes).
SELECT tube FROM sqlq_counters
UNION SELECT DISTINCT tube FROM sqlq_job_counts
UNION SELECT name FROM sqlq_tubes
UNION SELECT DISTINCT tube FROM sqlq_durations;

-- name: tube_counts
-- dialect: count(*) FILTER: a boolean does not sum; the kept counts' slots summed.
-- As SQLite's: the kept counts (migration 0005), the ranges of what is due, the oldest
-- ready job found by a hop from one priority to the next in sqlq_jobs_ready.
WITH RECURSIVE
  kept AS (SELECT coalesce(sum(n) FILTER (WHERE state = 0), 0) AS ready,
                  coalesce(sum(n) FILTER (WHERE urgent), 0) AS urgent,
                  coalesce(sum(n) FILTER (WHERE state = 1), 0) AS delayed,
                  coalesce(sum(n) FILTER (WHERE state = 3), 0) AS buried
             FROM sqlq_job_counts WHERE tube = %(tube)s),
  pri(p) AS (
    SELECT (SELECT min(priority) FROM sqlq_jobs WHERE state = 0 AND tube = %(tube)s)
    UNION ALL
    SELECT (SELECT min(priority) FROM sqlq_jobs
             WHERE state = 0 AND tube = %(tube)s AND priority > pri.p)
      FROM pri WHERE pri.p IS NOT NULL)
SELECT kept.ready + due.n + expired.n, kept.urgent + due.urgent + expired.urgent, held.n,
       kept.delayed - due.n, kept.buried,
       (SELECT min((SELECT id FROM sqlq_jobs
                     WHERE state = 0 AND tube = %(tube)s AND priority = pri.p
                     ORDER BY id LIMIT 1))
          FROM pri WHERE pri.p IS NOT NULL),
       due.since,
       (SELECT paused_until FROM sqlq_tubes WHERE name = %(tube)s)
  FROM kept,
       (SELECT count(*) AS n, count(*) FILTER (WHERE priority < 1024) AS urgent,
               min(delay_until) AS since FROM sqlq_jobs
         WHERE state = 1 AND tube = %(tube)s AND delay_until <= %(now)s) AS due,
       (SELECT count(*) AS n, count(*) FILTER (WHERE priority < 1024) AS urgent
          FROM sqlq_jobs
         WHERE state = 2 AND reserved_until <= %(now)s AND tube = %(tube)s) AS expired,
       (SELECT count(*) AS n FROM sqlq_jobs
         WHERE state = 2 AND reserved_until > %(now)s AND tube = %(tube)s) AS held;

-- name: job_created_at
SELECT created_at FROM sqlq_jobs WHERE id = %(id)s;

-- name: list_ready_jobs
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE state = 0 AND tube = %(tube)s AND (priority, id) > (%(key)s, %(after)s)
 ORDER BY priority, id LIMIT %(limit)s;

-- name: list_delayed_jobs
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE state = 1 AND tube = %(tube)s AND (delay_until, id) > (%(key)s, %(after)s)
 ORDER BY delay_until, id LIMIT %(limit)s;

-- name: list_reserved_jobs
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE state = 2 AND reserved_until IS NOT NULL AND tube = %(tube)s
   AND (reserved_until, id) > (%(key)s, %(after)s)
 ORDER BY reserved_until, id LIMIT %(limit)s;

-- name: list_buried_jobs
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE state = 3 AND tube = %(tube)s AND id > %(after)s
 ORDER BY id LIMIT %(limit)s;

-- name: search_jobs
-- dialect: position()/strpos()/::text for SQLite's instr() and CAST.
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE id > %(min_id)s AND tube = %(tube)s
   AND (position(%(bytes)s::bytea IN body) > 0 OR strpos(unique_key, %(text)s) > 0
        OR id::text = %(text)s)
 ORDER BY id DESC LIMIT %(limit)s;

-- name: owner_reservations
-- dialect: string_agg() for SQLite's group_concat().
SELECT owner, count(*), min(reserved_until - ttr), string_agg(DISTINCT tube, ',')
  FROM sqlq_jobs
 WHERE state = 2 AND reserved_until > %(now)s
 GROUP BY owner ORDER BY owner;

-- name: list_periodic
SELECT name, last_slot, enqueued_at FROM sqlq_periodic ORDER BY name;

-- name: event_counters
SELECT tube, buries, kicks, timeouts FROM sqlq_counters ORDER BY tube;

-- name: add_durations
-- dialect: the target needs an alias: count and sum are ambiguous in DO UPDATE.
-- A worker adds the waits and runs it observed since its last flush (migration
-- 0004): one row per bucket it saw, in key order, so two flushes lock rows in the
-- same order and never deadlock.
INSERT INTO sqlq_durations AS d (tube, metric, le, count, sum)
VALUES (%(tube)s, %(metric)s, %(le)s, %(count)s, %(sum)s)
ON CONFLICT (tube, metric, le) DO UPDATE SET count = d.count + excluded.count,
                                             sum = d.sum + excluded.sum;

-- name: durations
-- Every bucket of the wait and run histograms, for /metrics (sqlq/histograms.py
-- cumulates them).
SELECT tube, metric, le, count, sum FROM sqlq_durations ORDER BY tube, metric;

-- ---------------------------------------------------------------------------------------------
-- Batches (reserve_many, delete_many): one statement, one commit for many jobs.

-- name: claim_jobs
-- dialect: the batch claim is the same function (sqlq_claim with n), with claim_job's floors.
-- Up to %(n)s of the most urgent jobs ready as of now, each under a lease of its own
-- (sqlq_claim in migrations/0005: the same claim as claim_job, LIMIT n, as durable).
-- include: _claim_floors
SELECT c.id, c.tube, c.priority, c.ttr, c.body, c.created_at, c.reserves, c.timeouts,
       c.releases, c.buries, c.kicks, c.lease, c.reserved_until, c.unique_key, c.delay,
       c.trace, c.grp, c.again, NULL::boolean, f.status, f.expired_from, f.xmax::text
  FROM f, sqlq_claim(%(tubes)s::text[], %(now)s::bigint, %(owner)s::text, %(n)s::integer,
                     false, %(scan_tube)s::text[], %(scan_lo)s::bigint[], %(scan_hi)s::bigint[],
                     f.scan_from, f.expired_from) AS c;

-- name: delete_and_claim_jobs
-- Delete jobs under their leases and claim up to %(n)s more (0: none), in one statement
-- (sqlq_delete_and_claim_many, migrations/0005), with claim_job's floors. A row with a NULL tube names a job and
-- a lease that was lost; the other deletes stand, and nothing was claimed.
-- include: _claim_floors
SELECT c.id, c.tube, c.priority, c.ttr, c.body, c.created_at, c.reserves, c.timeouts,
       c.releases, c.buries, c.kicks, c.lease, c.reserved_until, c.unique_key, c.delay,
       c.trace, c.grp, c.again, NULL::boolean, f.status, f.expired_from, f.xmax::text
  FROM f, sqlq_delete_and_claim_many(%(ids)s::bigint[], %(leases)s::bigint[], %(now)s::bigint,
                                     %(tubes)s::text[], %(owner)s::text, %(n)s::integer,
                                     %(scan_tube)s::text[], %(scan_lo)s::bigint[],
                                     %(scan_hi)s::bigint[], f.scan_from, f.expired_from) AS c;

-- ---------------------------------------------------------------------------------------------
-- Failed attempts (migration 0009, sqlq/attempts.py). Written only when a run fails: the
-- success path (claim, delete) never reads or writes sqlq_attempts.

-- name: insert_attempt
-- dialect: the failure is counted in the same statement (SQLite: count_failure first).
-- One failed run, in the transaction that released or buried the job (or alone, for a
-- run whose reservation was lost), counted on the job in the same statement (the delete
-- trigger sqlq_forget_attempts of migration 0009 fires only for a job whose count is
-- above 0). Nothing for a job gone: no row outlives its job. The same attempt written
-- twice keeps the later.
WITH job AS (
    UPDATE sqlq_jobs SET failures = failures + 1 WHERE id = %(job_id)s RETURNING id)
INSERT INTO sqlq_attempts (job_id, attempt, started_at, duration, host, pid, outcome, error,
                           message, traceback, trace, location)
SELECT id, %(attempt)s::integer, %(started_at)s::bigint, %(duration)s::bigint,
       %(host)s::text, %(pid)s::integer, %(outcome)s::text, %(error)s::text,
       %(message)s::text, %(traceback)s::text, %(trace)s::text, %(location)s::text
  FROM job
ON CONFLICT (job_id, attempt) DO UPDATE
   SET started_at = excluded.started_at, duration = excluded.duration,
       host = excluded.host, pid = excluded.pid, outcome = excluded.outcome,
       error = excluded.error, message = excluded.message, traceback = excluded.traceback,
       trace = excluded.trace, location = excluded.location;

-- name: trim_attempts
-- dialect: integer parameters need a type in arithmetic (::integer).
-- Keep a job's last `kept` attempts (run only once it has had more runs than that):
-- a range of the primary key.
DELETE FROM sqlq_attempts
 WHERE job_id = %(job_id)s AND attempt <= %(attempt)s::integer - %(kept)s::integer;

-- name: list_attempts
SELECT job_id, attempt, started_at, duration, host, pid, outcome, error, message, traceback,
       trace, location
  FROM sqlq_attempts WHERE job_id = %(job_id)s ORDER BY attempt;

-- name: last_attempt
-- stats_job's failures, last-error and last-traceback: the job's count of failed runs and
-- its newest kept attempt (no row: no such job).
SELECT j.failures, a.error, a.message, a.traceback
  FROM sqlq_jobs AS j
  LEFT JOIN (SELECT error, message, traceback FROM sqlq_attempts WHERE job_id = %(job_id)s
              ORDER BY attempt DESC LIMIT 1) AS a ON true
 WHERE j.id = %(job_id)s;

-- ---------------------------------------------------------------------------------------------
-- Dependencies (migration 0011): a put with after= parents; the delete of a job with edges,
-- its children released in the same transaction (the shared store's _delete_linked).

-- name: hold_parents
-- dialect: ids are bigint[] (SQLite: JSON); the UPDATE's row lock is the race guard.
-- A put's parents still in the table, each now counting %(n)s more dependents. The
-- UPDATE locks each parent's row until the put commits: a concurrent delete of a
-- parent waits, then reads dependents > 0 and finds the edges; a parent deleted
-- before is not returned (gone: it counts as finished).
UPDATE sqlq_jobs SET dependents = dependents + %(n)s
 WHERE id = ANY (%(parents)s::bigint[])
RETURNING id;

-- name: insert_waiting_job
-- dialect: ON CONFLICT for a unique key another producer put meanwhile (no row back).
-- A job waiting for its parents: no delay_until yet, in no claim's index.
INSERT INTO sqlq_jobs (tube, priority, state, delay, delay_until, ttr, body, created_at,
                       unique_key, waiting_on)
VALUES (%(tube)s, %(priority)s, 4, %(delay)s, NULL, %(ttr)s, %(body)s, %(now)s,
        %(unique_key)s, %(waiting_on)s)
ON CONFLICT (tube, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: insert_edges
-- dialect: ids are bigint[] (SQLite: JSON arrays).
INSERT INTO sqlq_edges (parent, child)
SELECT p, c FROM unnest(%(parents)s::bigint[]) AS p, unnest(%(children)s::bigint[]) AS c;

-- name: export_edge
SELECT parent, child FROM sqlq_edges WHERE (parent, child) > (%(parent)s, %(child)s)
 ORDER BY parent, child LIMIT %(limit)s;

-- name: import_edge
INSERT INTO sqlq_edges (parent, child) VALUES (%(parent)s, %(child)s);

-- name: job_links
SELECT dependents, waiting_on FROM sqlq_jobs WHERE id = %(id)s;

-- name: delete_linked_job
-- dialect: pg_notify for a result waiter (as delete_job); a typed NULL test of the lease;
--   the job's record in the same statement (SQLite's returns what insert_finished needs).
WITH job AS (
    DELETE FROM sqlq_jobs
     WHERE id = %(id)s
       AND (%(lease)s::bigint IS NULL
            OR (state = 2 AND lease = %(lease)s AND reserved_until > %(now)s))
    RETURNING id, tube, grp, dependents, waiting_on, state, owner, reserved_until - ttr AS began,
              reserves, created_at, unique_key, substr(body, 1, 256) AS head, steps),
kept AS (INSERT INTO sqlq_finished (id, tube, grp, outcome, ended_at, worker, actor, ran,
                                    attempts, created_at, unique_key, body, steps)
         SELECT id, tube, grp, %(outcome)s, %(now)s, CASE WHEN state = 2 THEN owner END,
                %(actor)s, CASE WHEN state = 2 THEN %(now)s - began END, reserves,
                created_at, unique_key, head,
                CASE WHEN steps > 0 THEN sqlq_job_steps(id) END
           FROM job
         ON CONFLICT (id) DO UPDATE
            SET tube = excluded.tube, grp = excluded.grp, outcome = excluded.outcome,
                ended_at = excluded.ended_at, worker = excluded.worker, actor = excluded.actor,
                ran = excluded.ran, attempts = excluded.attempts,
                created_at = excluded.created_at, unique_key = excluded.unique_key,
                body = excluded.body, steps = excluded.steps)
SELECT tube, dependents, waiting_on, pg_notify('sqlq', '') FROM job;

-- name: release_children
-- dialect: one call of sqlq_release_children (migration 0011), which the delete-and-claim
--   functions call too; it drops the parent's edges and notifies for children made ready.
SELECT sqlq_release_children(ARRAY[%(id)s::bigint], %(now)s::bigint);

-- name: forget_child_edges
DELETE FROM sqlq_edges WHERE child = %(id)s;

-- name: job_parents
-- Queue.links: the parents a job still waits for (sqlq_edges_child: one index range).
SELECT parent FROM sqlq_edges WHERE child = %(id)s ORDER BY parent;

-- name: job_children
-- Queue.links: the jobs waiting for this one (sqlq_edges' primary key: one range).
SELECT child FROM sqlq_edges WHERE parent = %(id)s ORDER BY child;

-- name: count_waiting
-- dialect: a typed NULL test of the tube.
-- Waiting jobs per tube (all tubes, or %(tube)s's), through sqlq_edges_child: no index
-- holds waiting jobs, but each has an edge naming it as child while it waits. The edges
-- drive the join (a primary-key probe per waiting job): "id IN (SELECT child ...)" was
-- planned as a scan of every job (issue 39: O(backlog) in the dashboard's overview).
SELECT j.tube, count(*)
  FROM (SELECT DISTINCT child FROM sqlq_edges) AS e JOIN sqlq_jobs AS j ON j.id = e.child
 WHERE j.state = 4 AND (%(tube)s::text IS NULL OR j.tube = %(tube)s)
 GROUP BY j.tube;

-- name: list_waiting_jobs
SELECT id, tube, priority, state, ttr, substr(body, 1, 160), created_at, reserves, timeouts,
       releases, buries, kicks, delay_until, reserved_until, bury_reason, unique_key, delay,
       length(body)
  FROM sqlq_jobs
 WHERE id IN (SELECT child FROM sqlq_edges WHERE child > %(after)s) AND state = 4
   AND tube = %(tube)s
 ORDER BY id LIMIT %(limit)s;

-- ---------------------------------------------------------------------------------------------
-- Tracing (migration 0012, sqlq/tracing.py): written and read only while an OpenTelemetry
-- tracer provider is configured; an untraced put or run never runs these.

-- name: set_job_trace
-- dialect: ids are bigint[] (SQLite: JSON arrays).
-- A traced put's trace context, beside the bodies it just inserted, in its transaction.
UPDATE sqlq_jobs SET trace = %(trace)s WHERE id = ANY (%(ids)s::bigint[]);

-- name: job_trace
-- The trace context a traced put stored with the job, for the dashboard's job page.
SELECT trace FROM sqlq_jobs WHERE id = %(id)s;

-- name: attempt_trace
-- The traceparent of a job's latest failed run that kept one: the link of its next run's
-- span (a range of sqlq_attempts' primary key, read only for a run after the first).
SELECT trace FROM sqlq_attempts
 WHERE job_id = %(job_id)s AND trace IS NOT NULL
 ORDER BY attempt DESC LIMIT 1;

-- ---------------------------------------------------------------------------------------------
-- Operators (issue 26): failed jobs grouped by error, the workers registry (migration 0013),
-- throughput history (migration 0013). See sqlite/queries.sql for why each is shaped so.

-- name: failed_groups
-- dialect: string_agg() for SQLite's group_concat(); the newest attempt in one LATERAL
-- probe (SQLite: two scalar subqueries); SQLite names the buried index.
SELECT coalesce(a.error, '') AS error, coalesce(a.location, '') AS location,
       substr(coalesce(b.bury_reason, ''), 1, %(reason_chars)s::integer) AS reason,
       count(*), max(b.id), string_agg(DISTINCT b.tube, ',')
  FROM (SELECT id, tube, bury_reason FROM sqlq_jobs WHERE state = 3
         ORDER BY id DESC LIMIT %(depth)s) AS b
  LEFT JOIN LATERAL (SELECT error, location FROM sqlq_attempts WHERE job_id = b.id
                      ORDER BY attempt DESC LIMIT 1) AS a ON true
 GROUP BY 1, 2, 3;

-- name: failed_group_ids
-- dialect: SQLite names the buried index (INDEXED BY); PostgreSQL's planner picks it.
SELECT b.id, b.tube
  FROM (SELECT id, tube, bury_reason FROM sqlq_jobs WHERE state = 3
         ORDER BY id DESC LIMIT %(depth)s) AS b
  LEFT JOIN LATERAL (SELECT error, location FROM sqlq_attempts WHERE job_id = b.id
                      ORDER BY attempt DESC LIMIT 1) AS a ON true
 WHERE (%(location)s::text <> ''
        OR substr(coalesce(b.bury_reason, ''), 1, %(reason_chars)s::integer) = %(reason)s::text)
   AND coalesce(a.error, '') = %(error)s::text AND coalesce(a.location, '') = %(location)s::text
 ORDER BY b.id;

-- name: beat_worker
-- A worker's row, written when it starts, once per heartbeat after, and when the job it
-- runs changes for longer than a second (registry.py, work/presence.py): never per job.
INSERT INTO sqlq_workers (token, host, pid, tubes, started_at, seen_at, job_id, jobs_done)
VALUES (%(token)s, %(host)s, %(pid)s, %(tubes)s, %(started_at)s, %(seen_at)s, %(job_id)s, %(jobs_done)s)
ON CONFLICT (token) DO UPDATE SET host = excluded.host, pid = excluded.pid,
    tubes = excluded.tubes, started_at = excluded.started_at, seen_at = excluded.seen_at,
    job_id = excluded.job_id, jobs_done = excluded.jobs_done;

-- name: forget_worker
DELETE FROM sqlq_workers WHERE token = %(token)s;

-- name: list_workers
SELECT token, host, pid, tubes, started_at, seen_at, job_id, jobs_done
  FROM sqlq_workers ORDER BY started_at, token;

-- name: throughput_sampled
SELECT 1 FROM sqlq_throughput WHERE minute = %(minute)s;

-- name: add_throughput
-- The first sample of a minute wins (two workers may beat in the same minute); older
-- samples go (trim_throughput), so the table keeps a day at most.
INSERT INTO sqlq_throughput (minute, at, puts, deletes, buries)
VALUES (%(minute)s, %(at)s, %(puts)s, %(deletes)s, %(buries)s)
ON CONFLICT (minute) DO NOTHING;

-- name: trim_throughput
DELETE FROM sqlq_throughput WHERE minute < %(oldest)s;

-- name: list_throughput
SELECT minute, at, puts, deletes, buries FROM sqlq_throughput
 WHERE minute >= %(since)s ORDER BY minute;

-- ---------------------------------------------------------------------------------------------
-- Control of running jobs (migration 0014, issue 25): cancel and progress (the SQLite
-- file's section says why each is shaped so).

-- name: cancel_state
-- dialect: FOR UPDATE: under READ COMMITTED a claim committing between this read and the
-- delete would give the job a lease this read never saw, and its holder JobLost, not
-- JobCancelled (the chaos run found it); the lock waits for that claim and reads its lease.
SELECT state, CASE WHEN state = 2 AND reserved_until > %(now)s THEN lease END, reserved_until
  FROM sqlq_jobs WHERE id = %(id)s FOR UPDATE;

-- name: remember_cancelled
INSERT INTO sqlq_cancelled (id, lease, until) VALUES (%(id)s, %(lease)s, %(until)s)
ON CONFLICT (id) DO UPDATE SET lease = excluded.lease, until = excluded.until;

-- name: purge_cancelled
DELETE FROM sqlq_cancelled WHERE until <= %(now)s;

-- name: cancelled_lease
SELECT lease FROM sqlq_cancelled WHERE id = %(id)s;

-- name: cancelled_among
-- dialect: an array parameter, not a JSON one.
SELECT id, lease FROM sqlq_cancelled WHERE id = ANY (%(ids)s::bigint[]);

-- name: set_progress
-- dialect: a NULL lease needs a type (::bigint), and pg_notify wakes a waiting result();
--   state + 0: the primary key finds the row, never the reservations' partial index.
WITH job AS (
    UPDATE sqlq_jobs SET progress = %(progress)s, progress_message = %(message)s
     WHERE id = %(id)s AND state + 0 = 2 AND reserved_until > %(now)s
       AND (%(lease)s::bigint IS NULL OR lease = %(lease)s)
    RETURNING id)
SELECT id, pg_notify('sqlq', '') FROM job;

-- name: job_progress
SELECT progress, progress_message FROM sqlq_jobs WHERE id = %(id)s;

-- ---------------------------------------------------------------------------------------------
-- Limits (migration 0015, sqlq/limits.py): see the SQLite file. claim_limited's
-- transaction locks the limited tubes' rows (lock_limits, FOR UPDATE, in name order), so
-- claims of a limited tube are serialised across sessions and hosts; each statement after
-- the lock sees what the previous holder committed (READ COMMITTED: a snapshot per
-- statement).

-- name: limited_tubes
-- dialect: tubes are text[].
SELECT 1 FROM sqlq_tubes
 WHERE name = ANY(%(tubes)s::text[]) AND coalesce(concurrency, rate, grouped) IS NOT NULL
 LIMIT 1;

-- name: lock_limits
-- dialect: FOR UPDATE: the row lock serialises the claims of a limited tube.
SELECT name, concurrency, rate, rate_ms, rate_at, grouped, group_concurrency,
       group_rate, group_rate_ms, paused_until
  FROM sqlq_tubes
 WHERE name = ANY(%(tubes)s::text[]) AND coalesce(concurrency, rate, grouped) IS NOT NULL
 ORDER BY name
   FOR UPDATE;

-- name: live_reservations
-- dialect: tubes are text[].
SELECT tube, count(*) FROM sqlq_jobs
 WHERE state = 2 AND reserved_until > %(now)s AND tube = ANY(%(tubes)s::text[])
 GROUP BY tube;

-- name: mark_capped
-- The jobs a limited claim just took (in its transaction) in tubes with a concurrency
-- cap: marked, so their deletes notify (delete_leased_job, migration 0016). Run by the
-- limits path only (LimitStore.claim_limited): the plain claim, sqlq_claim, is as it was.
UPDATE sqlq_jobs SET capped = true WHERE id = ANY(%(ids)s::bigint[]);

-- name: spend_rate
UPDATE sqlq_tubes SET rate_at = %(rate_at)s WHERE name = %(tube)s;

-- name: set_limits
-- dialect: pg_notify, so the tube's waiters look again (a cap raised frees slots); the
--   tube's reserved jobs marked capped.
-- A cap set on a tube also marks the jobs reserved there now (claimed plainly, before
-- it): their deletes free the cap's slots, and notify as a capped claim's jobs' do
-- (delete_leased_job). One range of the reserved index; an operator's act, not a claim.
WITH held AS (
    UPDATE sqlq_jobs SET capped = true
     WHERE state = 2 AND tube = %(tube)s
       AND coalesce(%(concurrency)s::integer, %(group_concurrency)s::integer) IS NOT NULL)
INSERT INTO sqlq_tubes (name, paused_until, pause_ms, concurrency, rate, rate_ms,
                        group_concurrency, group_rate, group_rate_ms)
VALUES (%(tube)s, 0, 0, %(concurrency)s, %(rate)s, %(rate_ms)s, %(group_concurrency)s,
        %(group_rate)s, %(group_rate_ms)s)
ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, rate = excluded.rate,
                                 rate_ms = excluded.rate_ms,
                                 rate_at = CASE WHEN excluded.rate IS NOT DISTINCT FROM
                                                     sqlq_tubes.rate
                                                 AND excluded.rate_ms IS NOT DISTINCT FROM
                                                     sqlq_tubes.rate_ms
                                                THEN sqlq_tubes.rate_at END,
                                 group_concurrency = excluded.group_concurrency,
                                 group_rate = excluded.group_rate,
                                 group_rate_ms = excluded.group_rate_ms
RETURNING pg_notify('sqlq', %(tube)s);

-- name: forget_group_rates
UPDATE sqlq_groups SET rate_at = NULL WHERE tube = %(tube)s AND rate_at IS NOT NULL;

-- name: drop_limits_row
DELETE FROM sqlq_tubes
 WHERE name = %(tube)s AND paused_until = 0 AND concurrency IS NULL AND rate IS NULL
   AND group_concurrency IS NULL AND group_rate IS NULL AND grouped IS NULL;

-- name: list_limits
-- dialect: a NULL parameter needs a type.
SELECT name, concurrency, rate, rate_ms, group_concurrency, group_rate, group_rate_ms
  FROM sqlq_tubes
 WHERE coalesce(concurrency, rate, group_concurrency, group_rate) IS NOT NULL
   AND (%(tube)s::text IS NULL OR name = %(tube)s)
 ORDER BY name;

-- ---------------------------------------------------------------------------------------------
-- Durable steps and cursors (migration 0002, sqlq/steps.py): see the SQLite file.

-- name: step_lease
-- dialect: FOR NO KEY UPDATE holds the job's row to the commit, so no claim or reaper can
--   hand the job to another holder between this check and the record (claims skip locked
--   rows); state + 0: the primary key finds the row, never the reservations' index.
SELECT steps FROM sqlq_jobs
 WHERE id = %(id)s AND state + 0 = 2 AND reserved_until > %(now)s AND lease = %(lease)s
   FOR NO KEY UPDATE;

-- name: find_step
SELECT value, done_at FROM sqlq_steps
 WHERE job_id = %(id)s AND kind = %(kind)s AND name = %(name)s;

-- name: insert_step
INSERT INTO sqlq_steps (job_id, kind, name, value, done_at)
VALUES (%(id)s, %(kind)s, %(name)s, %(value)s, %(now)s);

-- name: count_step
UPDATE sqlq_jobs SET steps = steps + 1 WHERE id = %(id)s;

-- name: save_cursor
UPDATE sqlq_steps SET value = %(value)s, done_at = %(now)s
 WHERE job_id = %(id)s AND kind = 1 AND name = %(name)s
RETURNING done_at;

-- name: job_steps
SELECT kind, name, value, done_at FROM sqlq_steps WHERE job_id = %(id)s
 ORDER BY kind, done_at, name;

-- name: unclaim_counts
-- dialect: greatest, not SQLite's two-argument max.
UPDATE sqlq_jobs SET reserves = greatest(reserves - 1, 0), releases = greatest(releases - 1, 0)
 WHERE id = %(id)s;

-- name: export_step
-- dialect: the first page's name is bound as 0, compared as text (SQLite orders a number
--   before any text; here a row of two types is refused).
-- A page at a time past the row (:job_id, :kind, :name), in primary-key order (a first
-- page starts past (0, 0, '0'): ids start at 1, so the name never decides it).
SELECT job_id, kind, name, value, done_at FROM sqlq_steps
 WHERE (job_id, kind, name) > (%(job_id)s, %(kind)s, %(name)s::text)
 ORDER BY job_id, kind, name LIMIT %(limit)s;

-- name: import_step
INSERT INTO sqlq_steps (job_id, kind, name, value, done_at)
VALUES (%(job_id)s, %(kind)s, %(name)s, %(value)s, %(done_at)s);

-- The record of finished jobs (migration 0004, issue 39): written by the deletes above, read
-- by Queue.finished and the dashboard's lists, pruned by sqlq/retention.py.

-- name: finished_job
-- One record by primary key, its result if still kept, its worker's host and pid while
-- its row is in the registry.
SELECT f.id, f.tube, f.grp, f.outcome, f.ended_at, f.worker, f.actor, f.ran, f.attempts,
       f.created_at, f.unique_key, f.body, f.steps,
       (SELECT result FROM sqlq_results WHERE job_id = f.id AND expires_at > %(now)s),
       w.host, w.pid
  FROM sqlq_finished AS f LEFT JOIN sqlq_workers AS w ON w.token = f.worker
 WHERE f.id = %(id)s;

-- name: list_finished
-- A page of a tube's records of one outcome, newest first, after the key (ended_at, id)
-- of the last one shown: one range of sqlq_finished_list.
SELECT id, tube, grp, outcome, ended_at, worker, actor, ran, attempts, created_at,
       unique_key, body, steps, NULL, NULL, NULL
  FROM sqlq_finished
 WHERE tube = %(tube)s AND outcome = %(outcome)s AND (ended_at, id) < (%(at)s, %(after)s)
 ORDER BY ended_at DESC, id DESC LIMIT %(limit)s;

-- name: search_finished
-- dialect: position()/strpos()/::text for SQLite's instr() and CAST.
-- A tube's records of one outcome whose id, unique key or body's head contains :text,
-- newest first, among its newest :depth only (a body search cannot use an index).
SELECT id, tube, grp, outcome, ended_at, worker, actor, ran, attempts, created_at,
       unique_key, body, steps, NULL, NULL, NULL
  FROM (SELECT * FROM sqlq_finished WHERE tube = %(tube)s AND outcome = %(outcome)s
         ORDER BY ended_at DESC, id DESC LIMIT %(depth)s) AS f
 WHERE position(%(bytes)s::bytea IN body) > 0 OR strpos(unique_key, %(text)s) > 0
    OR id::text = %(text)s
 ORDER BY ended_at DESC, id DESC LIMIT %(limit)s;

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
 WHERE tube = %(tube)s AND outcome = %(outcome)s
 ORDER BY ended_at DESC, id DESC LIMIT 1 OFFSET %(keep)s;

-- name: prune_finished
-- At most :batch of a tube's records of one outcome older than the key (:at, :id): the
-- oldest first, one short write each (sqlq/retention.py loops).
DELETE FROM sqlq_finished
 WHERE id IN (SELECT id FROM sqlq_finished
               WHERE tube = %(tube)s AND outcome = %(outcome)s AND (ended_at, id) < (%(at)s, %(id)s)
               ORDER BY ended_at, id LIMIT %(batch)s)
RETURNING id;

-- name: set_retention
INSERT INTO sqlq_retention (tube, max_age, max_count) VALUES (%(tube)s, %(max_age)s, %(max_count)s)
ON CONFLICT (tube) DO UPDATE SET max_age = excluded.max_age, max_count = excluded.max_count;

-- name: drop_retention
DELETE FROM sqlq_retention WHERE tube = %(tube)s;

-- name: list_retention
SELECT tube, max_age, max_count FROM sqlq_retention ORDER BY tube;

-- Groups (migration 0003_groups): see the SQLite file. The fair claim runs after
-- lock_limits took the grouped tube's row FOR UPDATE: the claims of a grouped tube are
-- serialised across sessions, as a limited tube's.

-- name: grouped_tubes
-- The tubes claimed fairly: a put without a group into one gives its jobs turns.
SELECT name FROM sqlq_tubes WHERE grouped IS NOT NULL;

-- name: tube_grouped
SELECT grouped FROM sqlq_tubes WHERE name = %(tube)s;

-- name: group_tube
-- A tube's first grouped put: from now on it is claimed fairly (its row made if need be,
-- without a pause: paused_until 0 is not counted as one).
INSERT INTO sqlq_tubes (name, paused_until, pause_ms, grouped) VALUES (%(tube)s, 0, 0, 1)
ON CONFLICT (name) DO UPDATE SET grouped = 1;

-- name: group_turns
-- dialect: greatest(), not max(); no WHERE needed before ON CONFLICT.
-- The turns of :n jobs put in a group: one past the later of the group's last turn and
-- the tube's round, then one each; the last is kept and returned. The round: the turn
-- before the tube's next claim (its first ready job in claim order, sqlq_jobs_turns),
-- or with none ready, the last turn given (sqlq_groups_turn): one probe each.
INSERT INTO sqlq_groups (tube, grp, turn)
SELECT %(tube)s, %(grp)s, coalesce(
           (SELECT turn - 1 FROM sqlq_jobs
             WHERE state = 0 AND turn IS NOT NULL AND tube = %(tube)s
             ORDER BY priority, turn, id LIMIT 1),
           (SELECT max(turn) FROM sqlq_groups WHERE tube = %(tube)s), 0) + %(n)s
ON CONFLICT (tube, grp) DO UPDATE
   SET turn = greatest(sqlq_groups.turn, excluded.turn - %(n)s) + %(n)s
RETURNING turn;

-- name: set_group
-- dialect: ids are not consecutive (an identity column): each id's rank in the array.
UPDATE sqlq_jobs AS j SET grp = %(grp)s, turn = %(first_turn)s + k.n - 1
  FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS k(id, n)
 WHERE j.id = k.id;

-- name: promote_grouped
-- PostgreSQL's plain claim folds due jobs in itself (sqlq_claim); the fair claim writes
-- them down first, as SQLite's promote_due does, in the grouped tubes only (again: made
-- ready with its old id; timeouts: an expired reservation).
UPDATE sqlq_jobs
   SET state = 0, delay_until = NULL, reserved_until = NULL, lease = NULL, owner = NULL,
       timeouts = timeouts + (state = 2)::int, again = true
 WHERE id IN (SELECT id FROM sqlq_jobs
               WHERE state = 1 AND tube = ANY(%(tubes)s::text[]) AND delay_until <= %(now)s
              UNION ALL
              SELECT id FROM sqlq_jobs
               WHERE state = 2 AND reserved_until <= %(now)s
                 AND tube = ANY(%(tubes)s::text[]));

-- name: ready_head
-- The best ready job of a tube in claim order (sqlq_jobs_ready): a job put without a
-- group before its put knew the tube grouped (turn NULL) is taken when it heads it.
SELECT id, priority, turn FROM sqlq_jobs
 WHERE state = 0 AND tube = %(tube)s
 ORDER BY priority, id LIMIT 1;

-- name: fair_heads
-- dialect: no (SELECT) needed around parameters; a row value needs its types.
-- A grouped tube's ready jobs in claim order (priority, turn, id: sqlq_jobs_turns) after
-- (:priority, :turn, :id), with their group's rate time (a job without a group: none):
-- the fair claim takes the first whose group is not capped. One range of the index, a
-- primary-key probe of sqlq_groups a row.
SELECT j.priority, j.id, j.grp, j.turn, g.rate_at
  FROM sqlq_jobs AS j LEFT JOIN sqlq_groups AS g ON g.tube = j.tube AND g.grp = j.grp
 WHERE j.state = 0 AND j.turn IS NOT NULL AND j.tube = %(tube)s
   AND (j.priority, j.turn, j.id) > (%(priority)s::bigint, %(turn)s::bigint, %(id)s::bigint)
 ORDER BY j.priority, j.turn, j.id LIMIT %(n)s;

-- name: claim_fair_head
-- dialect: a 53-bit random lease in a bigint; no (SELECT) needed around parameters.
-- The fair claim of a grouped tube without group limits, in one statement: its first
-- ready job in claim order (priority, turn, id: one probe of sqlq_jobs_turns), or
-- before it the head of sqlq_jobs_ready if that has no turn (put by a process that did
-- not know the tube grouped yet: taken in its place in id order). Unless
-- :checked (claim_limited read the tube's row), nothing while the tube is paused or has
-- limits, in the same probe of its row as the plain claims': the engine's fast path for
-- a grouped tube it saw without limits (Engine._claim_fair) then falls back.
UPDATE sqlq_jobs
   SET state = 2, reserved_until = %(now)s + ttr, reserves = reserves + 1,
       lease = floor(random() * 9007199254740991)::bigint + 1, owner = %(owner)s
 WHERE id = (SELECT c.id FROM (
                  SELECT h.id, 0 AS k FROM (SELECT id, turn FROM sqlq_jobs
                                             WHERE state = 0 AND tube = %(tube)s
                                             ORDER BY priority, id LIMIT 1) AS h
                   WHERE h.turn IS NULL
                  UNION ALL
                  SELECT f.id, 1 FROM (SELECT id FROM sqlq_jobs
                                        WHERE state = 0 AND turn IS NOT NULL
                                          AND tube = %(tube)s
                                        ORDER BY priority, turn, id LIMIT 1) AS f) AS c
              ORDER BY c.k LIMIT 1)
   AND state = 0
   AND NOT EXISTS (SELECT 1 FROM sqlq_tubes
                    WHERE name = %(tube)s AND %(checked)s::int = 0
                      AND (paused_until > %(now)s
                           OR coalesce(concurrency, rate, group_concurrency, group_rate)
                              IS NOT NULL))
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: claim_ready_job
-- dialect: a 53-bit random lease in a bigint.
-- The job the fair claim chose, if still ready.
UPDATE sqlq_jobs
   SET state = 2, reserved_until = %(now)s + ttr, reserves = reserves + 1,
       lease = floor(random() * 9007199254740991)::bigint + 1, owner = %(owner)s
 WHERE id = %(id)s AND state = 0
RETURNING id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
          kicks, lease, reserved_until, unique_key, delay, trace, grp;

-- name: group_live
SELECT grp, count(*) FROM sqlq_jobs
 WHERE state = 2 AND reserved_until > %(now)s AND tube = %(tube)s AND grp IS NOT NULL
 GROUP BY grp;

-- name: spend_group_rate
-- dialect: typed parameters (a NULL's type is not inferred here).
UPDATE sqlq_groups SET rate_at = %(rate_at)s::double precision
 WHERE tube = %(tube)s::text AND grp = %(grp)s::text;

-- name: busiest_groups
-- dialect: a subquery in FROM needs a name.
SELECT grp, sum(ready), sum(held) FROM (
       SELECT grp, 1 AS ready, 0 AS held FROM sqlq_jobs
        WHERE state = 0 AND turn IS NOT NULL AND tube = %(tube)s AND grp IS NOT NULL
       UNION ALL
       SELECT grp, 0, 1 FROM sqlq_jobs
        WHERE state = 2 AND reserved_until > %(now)s AND tube = %(tube)s
          AND grp IS NOT NULL) AS g
 GROUP BY grp ORDER BY sum(ready) + sum(held) DESC, grp LIMIT %(limit)s;
