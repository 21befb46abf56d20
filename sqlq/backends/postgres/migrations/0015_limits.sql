-- sqlq schema 15 on PostgreSQL: flow control, a tube's concurrency and rate limits
-- (issue 25; the SQLite file's schema 14 says what the columns are).
--
-- sqlq_claim gains p_capped (default false): false, the claim every worker makes, skips
-- a tube with limits as it skips a paused one, in the probe of sqlq_tubes it makes
-- anyway (a tube without limits pays nothing); true, the claim of the limits path
-- (store.py claim_limited), which has already locked the limited tubes' rows FOR UPDATE,
-- counted their live reservations and passes only the tubes that may give a job now,
-- skips paused tubes only. The body is schema 7's otherwise. Its generic plan (schema
-- 6) holds: the new test is on columns of the row the NOT EXISTS probe reads, the same
-- plan for either value of p_capped. The delete-and-claim functions call sqlq_claim
-- with three or four arguments: p_capped is false there.

ALTER TABLE sqlq_tubes ADD COLUMN concurrency integer;
ALTER TABLE sqlq_tubes ADD COLUMN rate integer;
ALTER TABLE sqlq_tubes ADD COLUMN rate_ms bigint;
ALTER TABLE sqlq_tubes ADD COLUMN rate_at double precision;

-- A row made for limits alone (paused_until = 0) is no pause: not counted as one.
DROP TRIGGER sqlq_count_pauses ON sqlq_tubes;
CREATE TRIGGER sqlq_count_pauses AFTER INSERT OR UPDATE OF paused_until, pause_ms
ON sqlq_tubes FOR EACH ROW WHEN (NEW.paused_until > 0) EXECUTE FUNCTION sqlq_count_pauses();

DROP FUNCTION sqlq_claim(text[], bigint, text, integer);
CREATE FUNCTION sqlq_claim(p_tubes text[], p_now bigint, p_owner text,
                           p_n integer DEFAULT 1, p_capped boolean DEFAULT false)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan  -- schema 6's setting, restated
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE sqlq_jobs AS j
       SET state = 2, reserved_until = p_now + j.ttr, reserves = j.reserves + 1,
           timeouts = j.timeouts + (j.state = 2)::int, delay_until = NULL,
           lease = floor(random() * 9007199254740991)::bigint + 1, owner = p_owner
     WHERE j.id = ANY (ARRAY(
           SELECT c.id
             FROM (SELECT u.name FROM unnest(p_tubes) AS u(name)
                    WHERE NOT EXISTS (SELECT 1 FROM sqlq_tubes AS p
                                       WHERE p.name = u.name
                                         AND (p.paused_until > p_now
                                              OR (NOT p_capped AND coalesce(p.concurrency, p.rate)
                                                                   IS NOT NULL)))) AS t
            CROSS JOIN LATERAL (
                  SELECT * FROM (SELECT id, priority FROM sqlq_jobs
                                  WHERE state = 0 AND tube = t.name
                                  ORDER BY priority, id LIMIT p_n FOR UPDATE SKIP LOCKED) AS r
                  UNION ALL
                  SELECT * FROM (SELECT id, priority FROM sqlq_jobs
                                  WHERE state = 1 AND tube = t.name AND delay_until <= p_now
                                  ORDER BY priority, id LIMIT p_n FOR UPDATE SKIP LOCKED) AS d
                  UNION ALL
                  SELECT * FROM (SELECT id, priority FROM sqlq_jobs
                                  WHERE state = 2 AND reserved_until <= p_now AND tube = t.name
                                  ORDER BY priority, id LIMIT p_n FOR UPDATE SKIP LOCKED) AS x
                  ) AS c
            ORDER BY c.priority, c.id
            LIMIT p_n))
    RETURNING j.*;
END
$body$;
