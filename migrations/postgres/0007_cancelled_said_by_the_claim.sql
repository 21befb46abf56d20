-- The worker's delete-and-claim (0004) says why a lease no longer holds: SQLSTATE SQ002
-- when the job was cancelled under it (sqlq_cancelled), SQ001 otherwise. Its caller read
-- sqlq_cancelled after the error, which it cannot do where the statement ran inside a
-- transaction (through a transaction pool with lock_wait or a synchronous_commit set per
-- transaction): the error aborted it, and the holder of a cancelled job was told JobLost,
-- not JobCancelled (the chaos run through PgBouncer found it). The read is made only
-- when the lease does not hold: the delete-and-claim that succeeds costs what it did.
CREATE OR REPLACE FUNCTION sqlq_delete_and_claim(p_id bigint, p_lease bigint, p_now bigint,
                                      p_tubes text[], p_owner text,
                                      p_scan_tube text[] DEFAULT NULL,
                                      p_scan_lo bigint[] DEFAULT NULL,
                                      p_scan_hi bigint[] DEFAULT NULL,
                                      p_scan_from bigint[] DEFAULT NULL,
                                      p_expired_from bigint DEFAULT NULL)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql SET jit = off AS $body$
#variable_conflict use_column
DECLARE
    v_dependents integer;
    v_capped boolean;
BEGIN
    -- state + 0: after an ANALYZE that saw few reservations the planner chose their
    -- partial index (state = 2: every job reserved in the last TTR, and under a held
    -- snapshot every one finished since) over the primary key, and kept that plan.
    WITH gone AS (
        DELETE FROM sqlq_jobs
         WHERE id = p_id AND state + 0 = 2 AND lease = p_lease AND reserved_until > p_now
        RETURNING id, tube, grp, owner, reserved_until - ttr AS began, reserves, created_at,
                  unique_key, substr(body, 1, 256) AS head, dependents, capped, steps),
    kept AS (
        INSERT INTO sqlq_finished (id, tube, grp, outcome, ended_at, worker, ran, attempts,
                                   created_at, unique_key, body, steps)
        SELECT id, tube, grp, 'done', p_now, owner, p_now - began, reserves, created_at,
               unique_key, head, CASE WHEN steps > 0 THEN sqlq_job_steps(id) END
          FROM gone
        ON CONFLICT (id) DO UPDATE
            SET tube = excluded.tube, grp = excluded.grp, outcome = excluded.outcome,
                ended_at = excluded.ended_at, worker = excluded.worker, actor = excluded.actor,
                ran = excluded.ran, attempts = excluded.attempts,
                created_at = excluded.created_at, unique_key = excluded.unique_key,
                body = excluded.body, steps = excluded.steps)
    SELECT dependents, capped INTO v_dependents, v_capped FROM gone;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM sqlq_cancelled WHERE id = p_id AND lease = p_lease) THEN
            RAISE EXCEPTION 'job %: cancelled', p_id USING ERRCODE = 'SQ002';
        END IF;
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
