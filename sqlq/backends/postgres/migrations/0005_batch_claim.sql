-- sqlq schema 5 on PostgreSQL: claims and acknowledgements in batches (reserve_many,
-- delete_many), one statement and one commit for many jobs.
--
-- sqlq_claim takes how many jobs to claim (p_n, 1 by default, so the callers of
-- schema 3 are unchanged): the one source of the claim logic. Per unpaused tube,
-- three fenced probes (ready, due delayed, expired reservations), each on its own
-- partial index, each LIMIT p_n FOR UPDATE SKIP LOCKED, so concurrent claimers never
-- wait on each other and never take the same row; the p_n best of them win, each
-- with a lease of its own. The probes are wrapped in subqueries because a locking
-- clause is not allowed directly in a UNION. Rows locked by a probe but not taken
-- are free again when the statement's transaction ends.

DROP FUNCTION sqlq_claim(text[], bigint, text);

CREATE FUNCTION sqlq_claim(p_tubes text[], p_now bigint, p_owner text, p_n integer DEFAULT 1)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE sqlq_jobs AS j
       SET state = 2, reserved_until = p_now + j.ttr, reserves = j.reserves + 1,
           timeouts = j.timeouts + (j.state = 2)::int, delay_until = NULL,
           lease = floor(random() * 9007199254740991)::bigint + 1, owner = p_owner
      FROM (SELECT c.id
              FROM (SELECT u.name FROM unnest(p_tubes) AS u(name)
                     WHERE NOT EXISTS (SELECT 1 FROM sqlq_tubes AS p
                                        WHERE p.name = u.name AND p.paused_until > p_now)) AS t
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
             LIMIT p_n) AS pick
     WHERE j.id = pick.id
    RETURNING j.*;
END
$body$;

-- sqlq_delete_and_claim_many: delete jobs under their live leases (p_ids[i] under
-- p_leases[i]), then, if every lease held, claim up to p_n jobs (0: none), in one
-- statement: a batch worker's one commit. The deletes under leases that still hold
-- are kept even when some lease was lost (an acknowledgement is never dropped); each
-- (id, lease) that was lost comes back as a row with only its id and lease (tube NULL:
-- a claimed row always has a tube), and nothing is claimed then.
CREATE FUNCTION sqlq_delete_and_claim_many(p_ids bigint[], p_leases bigint[], p_now bigint,
                                           p_tubes text[], p_owner text, p_n integer)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql AS $body$
#variable_conflict use_column
DECLARE
    v_lost bigint[];
    v_lost_leases bigint[];
    v_row sqlq_jobs;
BEGIN
    IF cardinality(p_ids) > 0 THEN
        WITH gone AS (
            DELETE FROM sqlq_jobs AS j USING unnest(p_ids, p_leases) AS k(id, lease)
             WHERE j.id = k.id AND j.lease = k.lease AND j.state = 2
               AND j.reserved_until > p_now
            RETURNING j.id, j.lease)
        SELECT array_agg(k.id), array_agg(k.lease) INTO v_lost, v_lost_leases
          FROM unnest(p_ids, p_leases) AS k(id, lease)
         WHERE NOT EXISTS (SELECT 1 FROM gone AS g WHERE g.id = k.id AND g.lease = k.lease);
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
        RETURN QUERY SELECT * FROM sqlq_claim(p_tubes, p_now, p_owner, p_n);
    END IF;
END
$body$;
