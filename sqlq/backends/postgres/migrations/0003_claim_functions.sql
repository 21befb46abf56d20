-- sqlq schema 3 on PostgreSQL: the claim as a function, so that a worker's "delete the
-- job I finished and claim the next" is one statement: one round trip, one commit
-- (four with BEGIN, DELETE, the claim and COMMIT sent one by one).
--
-- sqlq_claim: the most urgent job that is ready as of now across the watched,
-- unpaused tubes. Per tube, three fenced probes (a ready job, a due delayed job, an
-- expired reservation), each on its own partial index and each FOR UPDATE SKIP
-- LOCKED, so concurrent claimers never wait on each other and never take the same
-- row; the best of them wins. Every filter is inside the locked probes (paused tubes
-- are never probed), so no row is locked that the UPDATE would refuse; the other
-- probes' locks end with the transaction. No sweeper is needed: due and expired
-- jobs are taken as ready ones are. PL/pgSQL, so each session plans it once.

CREATE FUNCTION sqlq_claim(p_tubes text[], p_now bigint, p_owner text)
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
              LEFT JOIN LATERAL (SELECT id, priority FROM sqlq_jobs
                                  WHERE state = 0 AND tube = t.name
                                  ORDER BY priority, id LIMIT 1 FOR UPDATE SKIP LOCKED) AS r ON true
              LEFT JOIN LATERAL (SELECT id, priority FROM sqlq_jobs
                                  WHERE state = 1 AND tube = t.name AND delay_until <= p_now
                                  ORDER BY priority, id LIMIT 1 FOR UPDATE SKIP LOCKED) AS d ON true
              LEFT JOIN LATERAL (SELECT id, priority FROM sqlq_jobs
                                  WHERE state = 2 AND reserved_until <= p_now AND tube = t.name
                                  ORDER BY priority, id LIMIT 1 FOR UPDATE SKIP LOCKED) AS x ON true
             CROSS JOIN LATERAL (VALUES (r.id, r.priority), (d.id, d.priority),
                                        (x.id, x.priority)) AS c(id, priority)
             WHERE c.id IS NOT NULL
             ORDER BY c.priority, c.id
             LIMIT 1) AS pick
     WHERE j.id = pick.id
    RETURNING j.*;
END
$body$;

-- sqlq_delete_and_claim: delete a job under its live lease, then claim the next, in
-- one transaction. A lease that no longer holds raises SQLSTATE SQ001 (the caller's
-- JobLost), and the failed statement changes nothing: no job is claimed.
CREATE FUNCTION sqlq_delete_and_claim(p_id bigint, p_lease bigint, p_now bigint,
                                      p_tubes text[], p_owner text)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql AS $body$
#variable_conflict use_column
BEGIN
    DELETE FROM sqlq_jobs
     WHERE id = p_id AND state = 2 AND lease = p_lease AND reserved_until > p_now;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: lease lost', p_id USING ERRCODE = 'SQ001';
    END IF;
    RETURN QUERY SELECT * FROM sqlq_claim(p_tubes, p_now, p_owner);
END
$body$;
