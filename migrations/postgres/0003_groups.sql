-- sqlq schema 3 on PostgreSQL: groups (issue 38); the SQLite file's 0003 says what each
-- column is for. Here, what PostgreSQL does otherwise.
--
-- On a big table: ADD COLUMN without a default changes the catalog only (no rewrite;
-- a brief ACCESS EXCLUSIVE lock). The one new index is partial and holds no row on a
-- store that never used groups, but its build reads the whole table once under a SHARE
-- lock (puts and claims wait for it: seconds per million jobs).
ALTER TABLE sqlq_jobs ADD COLUMN grp text;
ALTER TABLE sqlq_jobs ADD COLUMN turn bigint;

ALTER TABLE sqlq_tubes ADD COLUMN grouped smallint;
ALTER TABLE sqlq_tubes ADD COLUMN group_concurrency integer;
ALTER TABLE sqlq_tubes ADD COLUMN group_rate integer;
ALTER TABLE sqlq_tubes ADD COLUMN group_rate_ms bigint;

CREATE TABLE sqlq_groups (
    tube    text   NOT NULL,
    grp     text   NOT NULL,
    turn    bigint NOT NULL,
    rate_at double precision,
    PRIMARY KEY (tube, grp)
);
CREATE INDEX sqlq_groups_turn ON sqlq_groups (tube, turn);

CREATE INDEX sqlq_jobs_turns ON sqlq_jobs (tube, priority, turn, id)
    WHERE state = 0 AND turn IS NOT NULL;

-- The plain claim skips a grouped tube (sqlq_tubes.grouped set) as it skips a limited one,
-- in the same probe of its row: the function of 0001 with that one test more.
CREATE OR REPLACE FUNCTION sqlq_claim(p_tubes text[], p_now bigint, p_owner text,
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
                                          OR (NOT p_capped AND coalesce(p.concurrency, p.rate,
                                                               p.grouped) IS NOT NULL))))
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
