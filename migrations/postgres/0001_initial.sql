-- sqlq schema 1 on PostgreSQL: the whole schema of the first release, the pre-release
-- migrations 0001-0019 squashed into one (CHANGELOG 0.1.0). The same tables as the
-- SQLite file's 0001, which says what each is for; here, what PostgreSQL does otherwise.
--
-- Job states (sqlq_jobs.state): 0 ready, 1 delayed, 2 reserved, 3 buried, 4 waiting (on
-- parents). A delayed job whose delay_until has passed, and a reserved job whose
-- reserved_until has passed, are ready "as of now": a claim takes them as it takes ready
-- jobs, so no sweeper is needed. Times are wall-clock ms since the epoch (the caller's
-- clock, p_now, never the server's); ttr and delay are ms.

CREATE TABLE sqlq_jobs (
    id               bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- never reused
    tube             text     NOT NULL,
    priority         bigint   NOT NULL CHECK (priority BETWEEN 0 AND 4294967295),
    state            smallint NOT NULL CHECK (state BETWEEN 0 AND 4),
    delay_until      bigint   CHECK ((state = 1) = (delay_until IS NOT NULL)),
    reserved_until   bigint   CHECK ((state = 2) = (reserved_until IS NOT NULL)),
    ttr              bigint   NOT NULL,
    body             bytea    NOT NULL,
    created_at       bigint   NOT NULL,
    reserves         integer  NOT NULL DEFAULT 0,
    timeouts         integer  NOT NULL DEFAULT 0,
    releases         integer  NOT NULL DEFAULT 0,
    buries           integer  NOT NULL DEFAULT 0,
    kicks            integer  NOT NULL DEFAULT 0,
    lease            bigint,                        -- token of the current reservation
    owner            text,                          -- process holding the reservation
    bury_reason      text,
    unique_key       text,
    delay            bigint   NOT NULL DEFAULT 0,   -- as last set by put or release
    failures         integer  NOT NULL DEFAULT 0,   -- attempts written to sqlq_attempts
    waiting_on       integer  NOT NULL DEFAULT 0,   -- parents not yet gone (state 4)
    dependents       integer  NOT NULL DEFAULT 0,   -- edges naming it as parent
    trace            text,                          -- W3C trace context of its put
    progress         text,                          -- JSON: a float 0-1 or a count
    progress_message text,
    -- true while reserved by the limits path's claim in a tube with a concurrency cap:
    -- its delete (delete_leased_job, the delete-and-claim functions) sends NOTIFY, so a
    -- reserve blocked by the cap learns of the freed slot; other deletes send none (one
    -- NOTIFY per acknowledgement would queue every ack on NOTIFY's one lock).
    capped           boolean,
    -- made ready again with its old id (release, kick, a dependency's release, a dead
    -- holder's jobs given back, a copy): below a claim floor, found by sqlq_jobs_again.
    again            boolean  NOT NULL DEFAULT false
) WITH (
    -- A queue is a delete-heavy table: leave room for HOT updates (claim, release)
    -- and vacuum early, so dead rows do not pile up at the head of the claim index.
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);

-- One partial index per state, each in the order its readers need; a waiting job is in
-- none of them.
CREATE INDEX sqlq_jobs_ready    ON sqlq_jobs (tube, priority, id)  WHERE state = 0;
CREATE INDEX sqlq_jobs_delayed  ON sqlq_jobs (tube, delay_until)   WHERE state = 1;
CREATE INDEX sqlq_jobs_reserved ON sqlq_jobs (reserved_until)      WHERE state = 2;
CREATE INDEX sqlq_jobs_buried   ON sqlq_jobs (tube, id)            WHERE state = 3;
CREATE UNIQUE INDEX sqlq_jobs_unique ON sqlq_jobs (tube, unique_key)
    WHERE unique_key IS NOT NULL;
CREATE INDEX sqlq_jobs_again ON sqlq_jobs (tube, priority, id) WHERE state = 0 AND again;

-- A row records a pause or limits (a row for limits alone has paused_until = 0).
CREATE TABLE sqlq_tubes (
    name         text   PRIMARY KEY,
    paused_until bigint NOT NULL,
    pause_ms     bigint NOT NULL,
    concurrency  integer,
    rate         integer,
    rate_ms      bigint,
    rate_at      double precision
);

CREATE TABLE sqlq_results (
    job_id     bigint PRIMARY KEY,
    result     bytea  NOT NULL,
    expires_at bigint NOT NULL
);
CREATE INDEX sqlq_results_expires ON sqlq_results (expires_at);

CREATE TABLE sqlq_subscriptions (
    topic text NOT NULL,
    tube  text NOT NULL,
    PRIMARY KEY (topic, tube)
);

CREATE TABLE sqlq_periodic (
    name        text   PRIMARY KEY,
    last_slot   bigint NOT NULL,
    enqueued_at bigint NOT NULL
);

-- Per-tube counts of buries, kicks, timeouts (by sqlq_count_events: it fires only where
-- one of them grows, never on put, an ordinary claim or delete) and pauses.
CREATE TABLE sqlq_counters (
    tube     text   PRIMARY KEY,
    buries   bigint NOT NULL DEFAULT 0,
    kicks    bigint NOT NULL DEFAULT 0,
    timeouts bigint NOT NULL DEFAULT 0,
    pauses   bigint NOT NULL DEFAULT 0
);

CREATE TABLE sqlq_durations (
    tube   text             NOT NULL,
    metric text             NOT NULL,  -- 'wait' or 'run'
    le     text             NOT NULL,
    count  bigint           NOT NULL,
    sum    double precision NOT NULL,
    PRIMARY KEY (tube, metric, le)
);

-- A row for each process that reserves. A holder whose session advisory lock ("sqlq
-- owner <token>") is free is dead only when its process is seen gone on the reaper's
-- own machine (same boot and pid namespace: `place`), or when its keeper has not
-- written seen_at for the grace period (liveness.py): a session can end while its
-- process runs on (a server restart, pg_terminate_backend, a dropped connection).
CREATE TABLE sqlq_owners (
    token      text        PRIMARY KEY,
    host       text        NOT NULL,
    pid        integer     NOT NULL,
    place      text        NOT NULL,  -- boot id and pid namespace: where pid names this process
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    -- reservations a reaper handed out since the keeper last registered: a keeper that
    -- takes its lock again says what it found instead of presuming they stand
    handed_out integer     NOT NULL DEFAULT 0
);

CREATE TABLE sqlq_attempts (
    job_id     bigint  NOT NULL,   -- the job (ids are never reused)
    attempt    integer NOT NULL,   -- the run: the job's reserves when it ran (1 = first)
    started_at bigint  NOT NULL,   -- ms since the epoch
    duration   bigint  NOT NULL,   -- ms the run took
    host       text    NOT NULL,   -- the worker's host name
    pid        integer,            -- and process id
    outcome    text    NOT NULL,   -- retried, buried, lost
    error      text    NOT NULL,   -- exception type, exit status, 'timed out', or ''
    message    text    NOT NULL,   -- one line: what a burial keeps as its reason
    traceback  text    NOT NULL,   -- the traceback, or a command's stderr tail ('' if none)
    trace      text,               -- the worker span's traceparent, for the next run's link
    location   text    NOT NULL DEFAULT '',  -- "myapp/tasks.py:41 in lookup"; '' unknown
    PRIMARY KEY (job_id, attempt)
);

-- Puts are counted once per statement, from its inserted rows (a put_many of 10,000
-- jobs adds one row's worth). One counter row per tube would be a hot row, concurrent
-- producers waiting on its lock: each tube has up to 64 rows, one per slot, a session
-- writing the slot of its backend pid. A tube's puts are the sum.
CREATE TABLE sqlq_tube_puts (
    tube text   NOT NULL,
    slot int    NOT NULL,  -- pg_backend_pid() % 64 of the sessions that put
    puts bigint NOT NULL,
    PRIMARY KEY (tube, slot)
);

CREATE TABLE sqlq_edges (
    parent bigint NOT NULL,   -- a job the child waits for (ids are never reused)
    child  bigint NOT NULL,   -- the waiting job
    PRIMARY KEY (parent, child)
);
CREATE INDEX sqlq_edges_child ON sqlq_edges (child);

CREATE TABLE sqlq_workers (
    token      text    PRIMARY KEY,  -- the owner token (liveness: owners.py)
    host       text    NOT NULL,
    pid        integer NOT NULL,
    tubes      text    NOT NULL,     -- the tubes it watches, comma-separated
    started_at bigint  NOT NULL,     -- ms since the epoch
    seen_at    bigint  NOT NULL,     -- ms: its last heartbeat
    job_id     bigint,               -- the job it ran at its last heartbeat; NULL: idle
    jobs_done  bigint  NOT NULL      -- runs ended (whatever their outcome), as of seen_at
);

CREATE TABLE sqlq_throughput (
    minute  bigint PRIMARY KEY,  -- minutes since the epoch
    at      bigint NOT NULL,     -- ms: when the sample was taken
    puts    bigint NOT NULL,     -- jobs ever put, deleted, buried, as of `at`
    deletes bigint NOT NULL,
    buries  bigint NOT NULL
);

CREATE TABLE sqlq_cancelled (
    id    bigint PRIMARY KEY,   -- the job's id (ids are never reused)
    lease bigint NOT NULL,      -- the lease it was reserved under when cancelled
    until bigint NOT NULL       -- ms: kept until then (the lease's end plus an hour)
);
CREATE INDEX sqlq_cancelled_until ON sqlq_cancelled (until);

-- A holder's grace counts from when the server became reachable, not from its
-- postmaster's start (reliability.md F11; owners.py): a crashed server recovers before
-- it accepts anyone (12-13 s under load), a promoted standby keeps the standby's start
-- time. One row: the postmaster's start time, and when the first sqlq reaper looked at
-- this incarnation of the server (note_server_epoch; until then nobody is silent).
-- UNLOGGED on purpose: PostgreSQL empties it at the end of every crash recovery, on a
-- promoted standby and in a base backup, so the row can only describe the server as it
-- runs now; after a clean restart it survives, but its start time no longer matches.
CREATE UNLOGGED TABLE sqlq_server_epoch (
    started timestamptz PRIMARY KEY,              -- pg_postmaster_start_time() it belongs to
    seen_at timestamptz NOT NULL DEFAULT now()    -- the first reaper's look after that
);

-- Triggers: counters kept beside the rows, at no cost to put, claim or delete.

CREATE FUNCTION sqlq_count_events() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_counters AS c (tube, buries, kicks, timeouts)
    VALUES (NEW.tube, NEW.buries - OLD.buries, NEW.kicks - OLD.kicks,
            NEW.timeouts - OLD.timeouts)
    ON CONFLICT (tube) DO UPDATE SET buries = c.buries + excluded.buries,
                                     kicks = c.kicks + excluded.kicks,
                                     timeouts = c.timeouts + excluded.timeouts;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_count_events AFTER UPDATE OF buries, kicks, timeouts ON sqlq_jobs
FOR EACH ROW
WHEN (NEW.buries > OLD.buries OR NEW.kicks > OLD.kicks OR NEW.timeouts > OLD.timeouts)
EXECUTE FUNCTION sqlq_count_events();

-- The WHEN is evaluated on the row being deleted: a job that never failed (the common
-- case) queues no trigger event and never reads sqlq_attempts.
CREATE FUNCTION sqlq_forget_attempts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    DELETE FROM sqlq_attempts WHERE job_id = OLD.id;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_forget_attempts AFTER DELETE ON sqlq_jobs
FOR EACH ROW
WHEN (OLD.failures > 0)
EXECUTE FUNCTION sqlq_forget_attempts();

CREATE FUNCTION sqlq_count_puts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_tube_puts AS p (tube, slot, puts)
    SELECT tube, pg_backend_pid() % 64, count(*) FROM sqlq_new_jobs GROUP BY tube ORDER BY tube
    ON CONFLICT (tube, slot) DO UPDATE SET puts = p.puts + excluded.puts;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_count_puts AFTER INSERT ON sqlq_jobs
REFERENCING NEW TABLE AS sqlq_new_jobs
FOR EACH STATEMENT EXECUTE FUNCTION sqlq_count_puts();

-- Pauses are rare: one more per pause-tube (a pause of 0, which ends one, counts too);
-- a row made for limits alone (paused_until = 0) is no pause.
CREATE FUNCTION sqlq_count_pauses() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_counters AS c (tube, pauses) VALUES (NEW.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = c.pauses + 1;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_count_pauses AFTER INSERT OR UPDATE OF paused_until, pause_ms
ON sqlq_tubes FOR EACH ROW WHEN (NEW.paused_until > 0) EXECUTE FUNCTION sqlq_count_pauses();

-- Dependencies: the store calls sqlq_release_children when it deletes a job with
-- dependents (the deletes skip such a job, testing dependents = 0 on the row they read
-- anyway), and the delete-and-claim functions call it for the rows they delete whose
-- dependents is above 0. Concurrent parents' deletes each decrement a child's counter in
-- an UPDATE that locks the child's row: serialised, and the one that reaches 0 makes the
-- child ready exactly once. No trigger: even one whose WHEN is false is work on every
-- delete. A child made ready keeps its (old) id, so it is marked `again`.
CREATE FUNCTION sqlq_release_children(p_parents bigint[], p_now bigint)
RETURNS integer LANGUAGE plpgsql AS $body$
DECLARE
    v_ready integer;
BEGIN
    WITH edge AS (
        DELETE FROM sqlq_edges WHERE parent = ANY (p_parents) RETURNING child),
    n AS (SELECT child, count(*)::int AS k FROM edge GROUP BY child),
    done AS (
        UPDATE sqlq_jobs AS j
           SET waiting_on = j.waiting_on - n.k,
               state = CASE WHEN j.waiting_on > n.k THEN 4 WHEN j.delay > 0 THEN 1 ELSE 0 END,
               delay_until = CASE WHEN j.waiting_on = n.k AND j.delay > 0
                                  THEN p_now + j.delay END,
               again = true
          FROM n
         WHERE j.id = n.child AND j.state = 4
        RETURNING j.tube, j.state)
    SELECT count(pg_notify('sqlq', tube)) INTO v_ready FROM done WHERE state <> 4;
    RETURN v_ready;
END
$body$;

-- The claim: the p_n most urgent jobs ready as of now across the watched tubes that are
-- not paused (nor limited, unless p_capped: the limits path, store.py claim_limited,
-- passes only the tubes that may give a job now, their rows locked FOR UPDATE). A
-- function, so that "delete the job I finished and claim the next" is one statement:
-- one round trip, one commit. Per tube, fenced probes, each on its own partial index,
-- each LIMIT p_n FOR UPDATE SKIP LOCKED, so concurrent claimers never wait on each other
-- and never take the same row; the p_n best of them win, each with a lease of its own.
-- Probes are wrapped in subqueries (a locking clause is not allowed in a UNION); rows
-- locked but not taken are free when the transaction ends. The picked ids are an ARRAY
-- and the update finds them by id = ANY(...): the primary key in any plan (a join to
-- the pick made the generic plan scan the whole table).
--
-- Claim floors (issue 28; docs/internals.md "Claims under a held snapshot"): while a
-- transaction holds the xmin horizon back, every claimed job leaves its sqlq_jobs_ready
-- entry at the head of its band, and every later claim walked them. So each band's scan
-- starts at a floor the caller knows (store.py ClaimFloors, proved by sqlq_floors): an
-- id below which no fresh ready job of the band exists. Jobs made ready again with an
-- old id are marked `again` and read through sqlq_jobs_again whole.
-- p_scan_tube/lo/hi/from: one row per scan, each a range of priorities [lo, hi] of one
-- tube whose fresh jobs are read from id `from` on; together they must cover every
-- priority of every tube in p_tubes. p_expired_from: expired reservations are taken from
-- that reserved_until on (NULL: none this time; the caller looks at least every quarter
-- second). Without p_scan_tube: every band from its start, every expired lease.
--
-- plan_cache_mode: the generic plan's estimate is dearer (no values for p_n and p_now),
-- so every call was planned anew: 0.45-0.55 ms a claim against 0.17-0.19 ms with the
-- generic plan, whose shape is the same (tests/unit/test_queries.py checks that no
-- probe scans the table). Set on the function, it holds for the claims inside the
-- delete-and-claim functions too, and nowhere else.
CREATE FUNCTION sqlq_claim(p_tubes text[], p_now bigint, p_owner text,
                           p_n integer DEFAULT 1, p_capped boolean DEFAULT false,
                           p_scan_tube text[] DEFAULT NULL, p_scan_lo bigint[] DEFAULT NULL,
                           p_scan_hi bigint[] DEFAULT NULL, p_scan_from bigint[] DEFAULT NULL,
                           p_expired_from bigint DEFAULT NULL)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
-- The generic plan is made once per session, from the table's size then: a session
-- that began on an empty queue found its claimed rows by reading the whole table
-- (measured: 460 pages read a claim by the end of a 10,000-job drain, and growing)
-- until an ANALYZE made it plan again. Every probe here has its index.
SET enable_seqscan = off
AS $body$
#variable_conflict use_column
BEGIN
    IF p_scan_tube IS NULL THEN
        p_scan_tube := p_tubes;
        p_scan_lo := array_fill('-9223372036854775808'::bigint, ARRAY[cardinality(p_tubes)]);
        p_scan_hi := array_fill(9223372036854775807::bigint, ARRAY[cardinality(p_tubes)]);
        p_scan_from := array_fill(0::bigint, ARRAY[cardinality(p_tubes)]);
        p_expired_from := '-9223372036854775808'::bigint;
    END IF;
    RETURN QUERY
    UPDATE sqlq_jobs AS j
       SET state = 2, reserved_until = p_now + j.ttr, reserves = j.reserves + 1,
           timeouts = j.timeouts + (j.state = 2)::int, delay_until = NULL,
           lease = floor(random() * 9007199254740991)::bigint + 1, owner = p_owner
     WHERE j.id = ANY (ARRAY(
           WITH t AS MATERIALIZED (
               SELECT u.name FROM unnest(p_tubes) AS u(name)
                WHERE NOT EXISTS (SELECT 1 FROM sqlq_tubes AS p
                                   WHERE p.name = u.name
                                     AND (p.paused_until > p_now
                                          OR (NOT p_capped AND coalesce(p.concurrency, p.rate)
                                                               IS NOT NULL))))
           SELECT c.id
             FROM (SELECT f.id, f.priority
                     FROM unnest(p_scan_tube, p_scan_lo, p_scan_hi, p_scan_from)
                          AS s(tube, lo, hi, from_id)
                    CROSS JOIN LATERAL (
                          SELECT id, priority FROM sqlq_jobs
                           WHERE state = 0 AND tube = s.tube AND priority >= s.lo
                             AND priority <= s.hi AND id >= s.from_id
                           ORDER BY priority, id LIMIT p_n FOR UPDATE SKIP LOCKED) AS f
                    WHERE s.tube IN (SELECT name FROM t)
                   UNION ALL
                   SELECT o.id, o.priority
                     FROM t CROSS JOIN LATERAL (
                          SELECT * FROM (SELECT id, priority FROM sqlq_jobs
                                          WHERE state = 0 AND again AND tube = t.name
                                          ORDER BY priority, id LIMIT p_n
                                            FOR UPDATE SKIP LOCKED) AS a
                          UNION ALL
                          SELECT * FROM (SELECT id, priority FROM sqlq_jobs
                                          WHERE state = 1 AND tube = t.name
                                            AND delay_until <= p_now
                                          ORDER BY priority, id LIMIT p_n
                                            FOR UPDATE SKIP LOCKED) AS d
                          UNION ALL
                          SELECT * FROM (SELECT id, priority FROM sqlq_jobs
                                          WHERE state = 2 AND reserved_until <= p_now
                                            AND reserved_until >= p_expired_from
                                            AND tube = t.name
                                          ORDER BY priority, id LIMIT p_n
                                            FOR UPDATE SKIP LOCKED) AS x
                          ) AS o) AS c
            GROUP BY c.priority, c.id  -- a job made ready again, above its band's floor,
            ORDER BY c.priority, c.id  -- comes from both scans: once in the n
            LIMIT p_n))
    RETURNING j.*;
END
$body$;

-- Delete a job under its live lease, then claim the next, in one transaction. A lease
-- that no longer holds raises SQLSTATE SQ001 (the caller's JobLost), and the failed
-- statement changes nothing: no job is claimed. It releases the children of the job it
-- deletes and, for a capped job, sends NOTIFY (the claim after it frees nothing).
CREATE FUNCTION sqlq_delete_and_claim(p_id bigint, p_lease bigint, p_now bigint,
                                      p_tubes text[], p_owner text,
                                      p_scan_tube text[] DEFAULT NULL,
                                      p_scan_lo bigint[] DEFAULT NULL,
                                      p_scan_hi bigint[] DEFAULT NULL,
                                      p_scan_from bigint[] DEFAULT NULL,
                                      p_expired_from bigint DEFAULT NULL)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql AS $body$
#variable_conflict use_column
DECLARE
    v_dependents integer;
    v_capped boolean;
BEGIN
    -- state + 0: after an ANALYZE that saw few reservations the planner chose their
    -- partial index (state = 2: every job reserved in the last TTR, and under a held
    -- snapshot every one finished since) over the primary key, and kept that plan.
    DELETE FROM sqlq_jobs
     WHERE id = p_id AND state + 0 = 2 AND lease = p_lease AND reserved_until > p_now
    RETURNING dependents, capped INTO v_dependents, v_capped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: lease lost', p_id USING ERRCODE = 'SQ001';
    END IF;
    IF v_dependents > 0 THEN
        PERFORM sqlq_release_children(ARRAY[p_id], p_now);
    END IF;
    IF v_capped THEN
        PERFORM pg_notify('sqlq', '');  -- listeners wake whatever the payload
    END IF;
    RETURN QUERY SELECT * FROM sqlq_claim(p_tubes, p_now, p_owner, 1, false, p_scan_tube,
                                          p_scan_lo, p_scan_hi, p_scan_from, p_expired_from);
END
$body$;

-- Delete jobs under their live leases (p_ids[i] under p_leases[i]), then, if every lease
-- held, claim up to p_n jobs (0: none), in one statement: a batch worker's one commit.
-- The deletes under leases that still hold are kept even when some lease was lost (an
-- acknowledgement is never dropped); each (id, lease) lost comes back as a row with only
-- its id and lease (tube NULL: a claimed row always has a tube), and nothing is claimed.
CREATE FUNCTION sqlq_delete_and_claim_many(p_ids bigint[], p_leases bigint[],
                                           p_now bigint, p_tubes text[],
                                           p_owner text, p_n integer,
                                           p_scan_tube text[] DEFAULT NULL,
                                           p_scan_lo bigint[] DEFAULT NULL,
                                           p_scan_hi bigint[] DEFAULT NULL,
                                           p_scan_from bigint[] DEFAULT NULL,
                                           p_expired_from bigint DEFAULT NULL)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql AS $body$
#variable_conflict use_column
DECLARE
    v_lost bigint[];
    v_lost_leases bigint[];
    v_parents bigint[];
    v_capped boolean;
    v_row sqlq_jobs;
BEGIN
    IF cardinality(p_ids) > 0 THEN
        WITH gone AS (
            DELETE FROM sqlq_jobs AS j USING unnest(p_ids, p_leases) AS k(id, lease)
             WHERE j.id = k.id AND j.lease = k.lease AND j.state + 0 = 2  -- as above
               AND j.reserved_until > p_now
            RETURNING j.id, j.lease, j.dependents, j.capped)
        SELECT array_agg(k.id) FILTER (WHERE g.id IS NULL),
               array_agg(k.lease) FILTER (WHERE g.id IS NULL),
               array_agg(g.id) FILTER (WHERE g.dependents > 0),
               bool_or(g.capped)
          INTO v_lost, v_lost_leases, v_parents, v_capped
          FROM unnest(p_ids, p_leases) AS k(id, lease)
          LEFT JOIN gone AS g ON g.id = k.id AND g.lease = k.lease;
        IF v_parents IS NOT NULL THEN
            PERFORM sqlq_release_children(v_parents, p_now);
        END IF;
        IF v_capped THEN
            PERFORM pg_notify('sqlq', '');
        END IF;
        IF v_lost IS NOT NULL THEN
            FOR i IN 1 .. cardinality(v_lost) LOOP
                v_row.id := v_lost[i];
                v_row.lease := v_lost_leases[i];
                RETURN NEXT v_row;
            END LOOP;
            RETURN;
        END IF;
    END IF;
    IF p_n > 0 THEN
        RETURN QUERY SELECT * FROM sqlq_claim(p_tubes, p_now, p_owner, p_n, false, p_scan_tube,
                                              p_scan_lo, p_scan_hi, p_scan_from,
                                              p_expired_from);
    END IF;
END
$body$;

-- What a claim may use of the caller's floors, proved in the claim's own statement
-- (store.py ClaimFloors proposes, this decides). A band's candidate floor is the id of
-- a job an earlier claim took from it; it holds when
--   1. every transaction that was open when that claim ran has ended (its snapshot's
--      xmax, p_scan_xmax, is now below the oldest running xid), so no put still in
--      flight took an id below it: ids are taken in order, and a put has its xid when
--      it writes its row (the caller waits a while before it asks, for the instant
--      between the two; after a long wait it passes no xmax, so that a transaction
--      idle for hours cannot stop the floor: a put it holds is found by the caller's
--      full scan, at least every 30 s); and
--   2. no job of the band is ready between the floor and the candidate: a plain read,
--      which sees a row that another claim has locked but not committed, so a claim
--      that rolls back cannot leave its job below the floor.
-- status per scan row: 0 no candidate, 1 the candidate is the floor now, 2 waiting
-- for transactions that were open, 3 refused (a ready job below it). Expired
-- reservations: with p_expired_check, the earliest one from p_expired_from on (NULL:
-- none), which the claim then takes them from; otherwise p_expired_from as given.
CREATE FUNCTION sqlq_floors(p_tubes text[], p_now bigint, p_scan_tube text[],
                            p_scan_lo bigint[], p_scan_from bigint[], p_scan_cand bigint[],
                            p_scan_xmax xid8[], p_expired_from bigint, p_expired_check boolean,
                            OUT scan_from bigint[], OUT status smallint[],
                            OUT expired_from bigint, OUT xmax xid8)
-- PL/pgSQL, not SQL: a SQL function that is not inlined is planned at every call
-- (measured: a third of the claim's time); PL/pgSQL keeps the plans of its session.
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $body$
BEGIN
    WITH s AS MATERIALIZED (
        SELECT s.n, s.from_id, s.cand,
               CASE WHEN s.cand IS NULL THEN 0
                    WHEN s.cand_xmax IS NOT NULL
                         AND pg_snapshot_xmin(pg_current_snapshot()) < s.cand_xmax THEN 2
                    WHEN EXISTS (SELECT 1 FROM sqlq_jobs
                                  WHERE state = 0 AND tube = s.tube AND priority = s.lo
                                    AND id >= s.from_id AND id < s.cand) THEN 3
                    ELSE 1 END::smallint AS status
          FROM unnest(p_scan_tube, p_scan_lo, p_scan_from, p_scan_cand, p_scan_xmax)
               WITH ORDINALITY AS s(tube, lo, from_id, cand, cand_xmax, n))
    SELECT ARRAY(SELECT CASE WHEN s.status = 1 THEN s.cand ELSE s.from_id END
                   FROM s ORDER BY s.n),
           ARRAY(SELECT s.status FROM s ORDER BY s.n),
           CASE WHEN p_expired_check
                THEN (SELECT min(reserved_until) FROM sqlq_jobs
                       WHERE state = 2 AND reserved_until >= p_expired_from
                         AND reserved_until <= p_now AND tube = ANY (p_tubes))
                ELSE p_expired_from END,
           pg_snapshot_xmax(pg_current_snapshot())
      INTO scan_from, status, expired_from, xmax;
END
$body$;
