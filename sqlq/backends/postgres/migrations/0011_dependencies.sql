-- sqlq schema 11 on PostgreSQL: job dependencies (the SQLite file's schema 10 says what
-- the columns, the edges and the waiting state 4 are).
--
-- The release is a function, sqlq_release_children(parents, now): the store calls it when
-- it deletes a job with dependents (delete_job and delete_leased_job skip such a job,
-- testing dependents = 0 on the row they read anyway: a job without dependents costs
-- what it did), and the delete-and-claim functions below call it for the rows they
-- delete whose dependents is above 0. Concurrent parents' deletes each decrement a
-- child's counter in an UPDATE that locks the child's row: they are serialised, and the
-- one that reaches 0 (the UPDATE re-reads a row another transaction committed) makes
-- the child ready exactly once. Time is the caller's (p_now), never the server's clock.
-- No trigger: even one whose WHEN is false is work on every delete.

ALTER TABLE sqlq_jobs ADD COLUMN waiting_on integer NOT NULL DEFAULT 0;
ALTER TABLE sqlq_jobs ADD COLUMN dependents integer NOT NULL DEFAULT 0;
ALTER TABLE sqlq_jobs DROP CONSTRAINT sqlq_jobs_state_check;
ALTER TABLE sqlq_jobs ADD CONSTRAINT sqlq_jobs_state_check CHECK (state BETWEEN 0 AND 4);

CREATE TABLE sqlq_edges (
    parent bigint NOT NULL,   -- a job the child waits for (ids are never reused)
    child  bigint NOT NULL,   -- the waiting job
    PRIMARY KEY (parent, child)
);
CREATE INDEX sqlq_edges_child ON sqlq_edges (child);

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
                                  THEN p_now + j.delay END
          FROM n
         WHERE j.id = n.child AND j.state = 4
        RETURNING j.tube, j.state)
    SELECT count(pg_notify('sqlq', tube)) INTO v_ready FROM done WHERE state <> 4;
    RETURN v_ready;
END
$body$;

-- Schema 3's function, releasing the children of the job it deletes.
CREATE OR REPLACE FUNCTION sqlq_delete_and_claim(p_id bigint, p_lease bigint, p_now bigint,
                                                 p_tubes text[], p_owner text)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql AS $body$
#variable_conflict use_column
DECLARE
    v_dependents integer;
BEGIN
    DELETE FROM sqlq_jobs
     WHERE id = p_id AND state = 2 AND lease = p_lease AND reserved_until > p_now
    RETURNING dependents INTO v_dependents;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job %: lease lost', p_id USING ERRCODE = 'SQ001';
    END IF;
    IF v_dependents > 0 THEN
        PERFORM sqlq_release_children(ARRAY[p_id], p_now);
    END IF;
    RETURN QUERY SELECT * FROM sqlq_claim(p_tubes, p_now, p_owner);
END
$body$;

-- Schema 5's function, releasing the children of the jobs it deletes.
CREATE OR REPLACE FUNCTION sqlq_delete_and_claim_many(p_ids bigint[], p_leases bigint[],
                                                      p_now bigint, p_tubes text[],
                                                      p_owner text, p_n integer)
RETURNS SETOF sqlq_jobs LANGUAGE plpgsql AS $body$
#variable_conflict use_column
DECLARE
    v_lost bigint[];
    v_lost_leases bigint[];
    v_parents bigint[];
    v_row sqlq_jobs;
BEGIN
    IF cardinality(p_ids) > 0 THEN
        WITH gone AS (
            DELETE FROM sqlq_jobs AS j USING unnest(p_ids, p_leases) AS k(id, lease)
             WHERE j.id = k.id AND j.lease = k.lease AND j.state = 2
               AND j.reserved_until > p_now
            RETURNING j.id, j.lease, j.dependents)
        SELECT array_agg(k.id) FILTER (WHERE g.id IS NULL),
               array_agg(k.lease) FILTER (WHERE g.id IS NULL),
               array_agg(g.id) FILTER (WHERE g.dependents > 0)
          INTO v_lost, v_lost_leases, v_parents
          FROM unnest(p_ids, p_leases) AS k(id, lease)
          LEFT JOIN gone AS g ON g.id = k.id AND g.lease = k.lease;
        IF v_parents IS NOT NULL THEN
            PERFORM sqlq_release_children(v_parents, p_now);
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
