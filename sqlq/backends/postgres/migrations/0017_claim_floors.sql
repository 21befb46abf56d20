-- sqlq schema 17 on PostgreSQL: claims that stay fast while another transaction holds
-- the xmin horizon back (issue 28; docs/internals.md "Claims under a held snapshot").
--
-- PostgreSQL cannot remove a row that an older snapshot may still see, nor mark its
-- index entries dead. Every job a claim takes leaves its sqlq_jobs_ready entry behind
-- at the head of its (tube, priority) band, and while a REPEATABLE READ report, a
-- pg_dump or a replication slot holds the horizon, every later claim walked all of
-- them (measured: 0.11-0.32x of the first rate at the end of a 20,000-job drain).
--
-- The claim now starts each band's scan at a floor the caller knows: an id below which
-- no fresh ready job of the band can exist (store.py's ClaimFloors proves each floor
-- before using it: see claim_job in queries.sql). A fresh job is one put once and never
-- made ready again: ids grow with puts, so a band's new jobs land above its floor. A
-- job made ready again with its old id (a release, a kick, a dependency's release, a
-- dead holder's jobs given back, a copied job) could land below a floor: those rows
-- are marked `again` and found through their own small index, sqlq_jobs_again, which
-- every claim reads whole. Above a floor they are read with the fresh ones, in order
-- (not filtered out: 10,000 children released at once would be walked by every
-- claim). Reads other than claims (stats, peek, has_ready_job) keep sqlq_jobs_ready:
-- `again` changes nothing else.
--
-- The floor arguments are optional: a claim without them (an older sqlq's process
-- during an upgrade) scans every band from its start, as before.

ALTER TABLE sqlq_jobs ADD COLUMN again boolean NOT NULL DEFAULT false;
CREATE INDEX sqlq_jobs_again ON sqlq_jobs (tube, priority, id) WHERE state = 0 AND again;
-- Jobs ready now were put before any floor existed: fresh, as the default says.

-- p_scan_tube/lo/hi/from: one row per scan, each a range of priorities [lo, hi] of one
-- tube whose fresh jobs are read from id `from` on; together they must cover every
-- priority of every tube in p_tubes (store.py builds them: each band with a floor, and
-- the gaps between). p_expired_from: expired reservations are taken from that
-- reserved_until on (NULL: none this time; the caller looks for them at least every
-- quarter second). Without p_scan_tube: every band from its start, every expired lease.
DROP FUNCTION sqlq_claim(text[], bigint, text, integer, boolean);
CREATE FUNCTION sqlq_claim(p_tubes text[], p_now bigint, p_owner text,
                           p_n integer DEFAULT 1, p_capped boolean DEFAULT false,
                           p_scan_tube text[] DEFAULT NULL, p_scan_lo bigint[] DEFAULT NULL,
                           p_scan_hi bigint[] DEFAULT NULL, p_scan_from bigint[] DEFAULT NULL,
                           p_expired_from bigint DEFAULT NULL)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan  -- schema 6's setting, restated
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

-- Schema 16's functions (a capped job's delete notifies), passing the floors through.
DROP FUNCTION sqlq_delete_and_claim(bigint, bigint, bigint, text[], text);
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

DROP FUNCTION sqlq_delete_and_claim_many(bigint[], bigint[], bigint, text[], text, integer);
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

-- Schema 11's release of children: a child made ready keeps its (old) id, so it is
-- marked `again`.
CREATE OR REPLACE FUNCTION sqlq_release_children(p_parents bigint[], p_now bigint)
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
