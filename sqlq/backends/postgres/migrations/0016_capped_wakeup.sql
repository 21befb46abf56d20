-- sqlq schema 16 on PostgreSQL: a freed slot of a capped tube wakes its waiters (issue 25).
--
-- A worker's delete sends no NOTIFY (one per acknowledgement would queue every ack on
-- NOTIFY's one lock), so a reserve blocked by a full concurrency cap learnt of the slot
-- a delete freed at its next look of its own. Now the delete of a job whose reservation
-- counted against a cap sends one, in the same statement, and a job of any other tube is
-- deleted exactly as before: the limits path's claim marks the job whose reservation
-- counts.
--
-- sqlq_jobs.capped: true while the job is reserved by a claim of the limits path and
-- its tube has a concurrency cap: the limits path's transaction (store.py claim_limited)
-- marks the jobs it claimed (mark_capped), reserve-job marks its job the same way, and
-- a cap set on a tube marks the jobs reserved there (set_limits). A plain claim leaves
-- the column alone (sqlq_claim is not changed: the claim every worker makes costs what
-- it did) and takes no job of a tube with limits (it skips the tube), so the mark of a
-- job it takes is a stale one at most: a tube capped, then its cap removed, then a
-- delete that notifies for nothing. Only a reservation's end reads it:
-- delete_leased_job and the two delete-and-claim functions below send NOTIFY for a
-- deleted row that has it, a column test on the row they delete anyway. Release, bury,
-- an administrator's delete or cancel, a dead holder's jobs given back and a
-- completion's result notify already.

ALTER TABLE sqlq_jobs ADD COLUMN capped boolean;

-- Schema 11's function; a capped job's delete notifies (the plain claim after it does
-- not: it claims for this worker, it frees nothing).
CREATE OR REPLACE FUNCTION sqlq_delete_and_claim(p_id bigint, p_lease bigint, p_now bigint,
                                                 p_tubes text[], p_owner text)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql AS $body$
#variable_conflict use_column
DECLARE
    v_dependents integer;
    v_capped boolean;
BEGIN
    DELETE FROM sqlq_jobs
     WHERE id = p_id AND state = 2 AND lease = p_lease AND reserved_until > p_now
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
    RETURN QUERY SELECT * FROM sqlq_claim(p_tubes, p_now, p_owner);
END
$body$;

-- Schema 11's function; the deletes that stand notify once if one of them held a capped
-- job's slot (a lost lease elsewhere in the batch rolls nothing back: they stand).
CREATE OR REPLACE FUNCTION sqlq_delete_and_claim_many(p_ids bigint[], p_leases bigint[],
                                                      p_now bigint, p_tubes text[],
                                                      p_owner text, p_n integer)
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
             WHERE j.id = k.id AND j.lease = k.lease AND j.state = 2
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
        RETURN QUERY SELECT * FROM sqlq_claim(p_tubes, p_now, p_owner, p_n);
    END IF;
END
$body$;
