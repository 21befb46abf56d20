-- The record of finished jobs (issue 39): every job that ends leaves one small row,
-- written by the statement that deletes it (a data-modifying CTE: no round trip more),
-- and kept for the retention set per tube and overall (sqlq_retention; pruned in small
-- batches by whichever process gets to it first: sqlq/retention.py).
CREATE TABLE sqlq_finished (
    id         bigint  PRIMARY KEY,   -- the job's id (ids are never reused)
    tube       text    NOT NULL,
    grp        text,                  -- its group (NULL: none)
    outcome    text    NOT NULL,      -- done (by its holder, after a run), deleted, cancelled
    ended_at   bigint  NOT NULL,      -- ms since the epoch
    worker     text,                  -- owner token of its holder when it ended; NULL: none
    actor      text,                  -- who deleted or cancelled it by id ('dashboard', 'cli')
    ran        bigint,                -- ms since its last reservation (or touch); NULL: none
    attempts   integer NOT NULL,      -- its reserves
    created_at bigint  NOT NULL,
    unique_key text,
    body       bytea   NOT NULL,      -- its first 256 bytes: what a search reads
    steps      text                   -- its steps and cursors as JSON, or NULL: see SQLite's
) WITH (
    -- insert-only, then deleted by age in batches: vacuum early, as sqlq_jobs.
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000
);

-- The Done, Cancelled and Deleted lists of a tube (newest first) and retention, which
-- works per (tube, outcome): one range each. The one index a record adds to a delete.
CREATE INDEX sqlq_finished_list ON sqlq_finished (tube, outcome, ended_at, id);

-- How long finished records are kept: tube '' is the setting of every tube without its
-- own row; NULL: the built-in default (sqlq/retention.py).
CREATE TABLE sqlq_retention (
    tube      text PRIMARY KEY,
    max_age   bigint,                 -- ms
    max_count bigint                  -- records kept per tube and outcome
);

-- A job's steps and cursors as its record keeps them (issue 40): a JSON array of {kind,
-- name, value, at}. Called by the statement that deletes the job, for a job with
-- steps > 0 only; STABLE, so it reads that statement's snapshot: sqlq_forget_steps, an
-- AFTER trigger, deletes them at the statement's end, unseen.
CREATE FUNCTION sqlq_job_steps(p_id bigint) RETURNS text LANGUAGE sql STABLE AS $body$
    SELECT json_agg(json_build_object('kind', kind, 'name', name, 'value', value::json,
                                      'at', done_at) ORDER BY kind, done_at, name)::text
      FROM sqlq_steps WHERE job_id = p_id
$body$;

-- The worker's delete-and-claim functions (0001) write the record of the job they delete
-- in their DELETE's statement.
CREATE OR REPLACE FUNCTION sqlq_delete_and_claim(p_id bigint, p_lease bigint, p_now bigint,
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

CREATE OR REPLACE FUNCTION sqlq_delete_and_claim_many(p_ids bigint[], p_leases bigint[],
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
            RETURNING j.id, j.lease, j.dependents, j.capped, j.tube, j.grp, j.owner,
                      j.reserved_until - j.ttr AS began, j.reserves, j.created_at,
                      j.unique_key, substr(j.body, 1, 256) AS head, j.steps),
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
