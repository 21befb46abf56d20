CREATE TABLE public.sqlq_jobs (
    id bigint NOT NULL,
    tube text NOT NULL,
    priority bigint NOT NULL,
    state smallint NOT NULL,
    delay_until bigint,
    reserved_until bigint,
    ttr bigint NOT NULL,
    body bytea NOT NULL,
    created_at bigint NOT NULL,
    reserves integer DEFAULT 0 NOT NULL,
    timeouts integer DEFAULT 0 NOT NULL,
    releases integer DEFAULT 0 NOT NULL,
    buries integer DEFAULT 0 NOT NULL,
    kicks integer DEFAULT 0 NOT NULL,
    lease bigint,
    owner text,
    bury_reason text,
    unique_key text,
    delay bigint DEFAULT 0 NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    waiting_on integer DEFAULT 0 NOT NULL,
    dependents integer DEFAULT 0 NOT NULL,
    trace text,
    progress text,
    progress_message text,
    capped boolean,
    again boolean DEFAULT false NOT NULL,
    steps integer DEFAULT 0 NOT NULL,
    grp text,
    turn bigint,
    CONSTRAINT sqlq_jobs_check CHECK (((state = 1) = (delay_until IS NOT NULL))),
    CONSTRAINT sqlq_jobs_check1 CHECK (((state = 2) = (reserved_until IS NOT NULL))),
    CONSTRAINT sqlq_jobs_priority_check CHECK (((priority >= 0) AND (priority <= '4294967295'::bigint))),
    CONSTRAINT sqlq_jobs_state_check CHECK (((state >= 0) AND (state <= 4)))
)
WITH (fillfactor='70', autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_cost_delay='0');
CREATE FUNCTION public.sqlq_claim(p_tubes text[], p_now bigint, p_owner text, p_n integer DEFAULT 1, p_capped boolean DEFAULT false, p_scan_tube text[] DEFAULT NULL::text[], p_scan_lo bigint[] DEFAULT NULL::bigint[], p_scan_hi bigint[] DEFAULT NULL::bigint[], p_scan_from bigint[] DEFAULT NULL::bigint[], p_expired_from bigint DEFAULT NULL::bigint) RETURNS SETOF public.sqlq_jobs
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
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
$$;
CREATE FUNCTION public.sqlq_count_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF sqlq_count_later() THEN
        INSERT INTO sqlq_count_deltas (tube, state, urgent, n)
        VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024, -1);
        RETURN NULL;
    END IF;
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n)
    VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024,
            pg_backend_pid() % 64, -1)
    ON CONFLICT (tube, state, urgent, slot) DO UPDATE SET n = c.n - 1;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sqlq_count_events() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO sqlq_counters AS c (tube, buries, kicks, timeouts)
    VALUES (NEW.tube, NEW.buries - OLD.buries, NEW.kicks - OLD.kicks,
            NEW.timeouts - OLD.timeouts)
    ON CONFLICT (tube) DO UPDATE SET buries = c.buries + excluded.buries,
                                     kicks = c.kicks + excluded.kicks,
                                     timeouts = c.timeouts + excluded.timeouts;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sqlq_count_later() RETURNS boolean
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_mark text := current_setting('sqlq.counts', true);
BEGIN
    IF v_mark = 'd' THEN
        RETURN true;
    ELSIF v_mark = 'c' THEN
        PERFORM set_config('sqlq.counts', 'd', true);
        RETURN true;
    END IF;
    PERFORM set_config('sqlq.counts', 'c', true);
    RETURN false;
END
$$;
CREATE FUNCTION public.sqlq_count_moved() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF sqlq_count_later() THEN
        INSERT INTO sqlq_count_deltas (tube, state, urgent, n)
        SELECT k.tube, k.state, k.urgent, k.d
          FROM (VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024, -1),
                       (NEW.tube, NEW.state, NEW.state = 0 AND NEW.priority < 1024, 1))
               AS k (tube, state, urgent, d)
         WHERE k.state IN (0, 1, 3);
        RETURN NULL;
    END IF;
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n)
    SELECT k.tube, k.state, k.urgent, pg_backend_pid() % 64, sum(k.d)
      FROM (VALUES (OLD.tube, OLD.state, OLD.state = 0 AND OLD.priority < 1024, -1),
                   (NEW.tube, NEW.state, NEW.state = 0 AND NEW.priority < 1024, 1))
           AS k (tube, state, urgent, d)
     WHERE k.state IN (0, 1, 3)
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tube, state, urgent, slot) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sqlq_count_pauses() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO sqlq_counters AS c (tube, pauses) VALUES (NEW.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = c.pauses + 1;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sqlq_count_puts() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF sqlq_count_later() THEN
        INSERT INTO sqlq_count_deltas (tube, state, urgent, n, puts)
        SELECT tube, state, state = 0 AND priority < 1024,
               count(*) FILTER (WHERE state IN (0, 1, 3)), count(*)
          FROM sqlq_new_jobs GROUP BY 1, 2, 3;
        RETURN NULL;
    END IF;
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n, puts)
    SELECT tube, state, state = 0 AND priority < 1024, pg_backend_pid() % 64,
           count(*) FILTER (WHERE state IN (0, 1, 3)), count(*)
      FROM sqlq_new_jobs
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tube, state, urgent, slot)
    DO UPDATE SET n = c.n + excluded.n, puts = c.puts + excluded.puts;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sqlq_delete_and_claim(p_id bigint, p_lease bigint, p_now bigint, p_tubes text[], p_owner text, p_scan_tube text[] DEFAULT NULL::text[], p_scan_lo bigint[] DEFAULT NULL::bigint[], p_scan_hi bigint[] DEFAULT NULL::bigint[], p_scan_from bigint[] DEFAULT NULL::bigint[], p_expired_from bigint DEFAULT NULL::bigint) RETURNS SETOF public.sqlq_jobs
    LANGUAGE plpgsql
    SET jit TO 'off'
    AS $$
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
$$;
CREATE FUNCTION public.sqlq_delete_and_claim_many(p_ids bigint[], p_leases bigint[], p_now bigint, p_tubes text[], p_owner text, p_n integer, p_scan_tube text[] DEFAULT NULL::text[], p_scan_lo bigint[] DEFAULT NULL::bigint[], p_scan_hi bigint[] DEFAULT NULL::bigint[], p_scan_from bigint[] DEFAULT NULL::bigint[], p_expired_from bigint DEFAULT NULL::bigint) RETURNS SETOF public.sqlq_jobs
    LANGUAGE plpgsql
    SET jit TO 'off'
    AS $$
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
$$;
CREATE FUNCTION public.sqlq_floors(p_tubes text[], p_now bigint, p_scan_tube text[], p_scan_lo bigint[], p_scan_from bigint[], p_scan_cand bigint[], p_scan_xmax xid8[], p_expired_from bigint, p_expired_check boolean, OUT scan_from bigint[], OUT status smallint[], OUT expired_from bigint, OUT xmax xid8) RETURNS record
    LANGUAGE plpgsql STABLE
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
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
$$;
CREATE FUNCTION public.sqlq_fold_counts() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF current_setting('sqlq.counts', true) IS DISTINCT FROM 'd' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('sqlq.counts', 'c', true);
    WITH d AS (DELETE FROM sqlq_count_deltas RETURNING tube, state, urgent, n, puts)
    INSERT INTO sqlq_job_counts AS c (tube, state, urgent, slot, n, puts)
    SELECT tube, state, urgent, pg_backend_pid() % 64, sum(n), sum(puts)
      FROM d GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tube, state, urgent, slot)
    DO UPDATE SET n = c.n + excluded.n, puts = c.puts + excluded.puts;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sqlq_forget_attempts() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM sqlq_attempts WHERE job_id = OLD.id;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sqlq_forget_steps() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM sqlq_steps WHERE job_id = OLD.id;
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sqlq_job_steps(p_id bigint) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT json_agg(json_build_object('kind', kind, 'name', name, 'value', value::json,
                                      'at', done_at) ORDER BY kind, done_at, name)::text
      FROM sqlq_steps WHERE job_id = p_id
$$;
CREATE FUNCTION public.sqlq_release_children(p_parents bigint[], p_now bigint) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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
$$;
CREATE TABLE public.sqlq_attempts (
    job_id bigint NOT NULL,
    attempt integer NOT NULL,
    started_at bigint NOT NULL,
    duration bigint NOT NULL,
    host text NOT NULL,
    pid integer,
    outcome text NOT NULL,
    error text NOT NULL,
    message text NOT NULL,
    traceback text NOT NULL,
    trace text,
    location text DEFAULT ''::text NOT NULL
);
CREATE TABLE public.sqlq_cancelled (
    id bigint NOT NULL,
    lease bigint NOT NULL,
    until bigint NOT NULL
);
CREATE UNLOGGED TABLE public.sqlq_count_deltas (
    tube text NOT NULL,
    state smallint,
    urgent boolean NOT NULL,
    n bigint NOT NULL,
    puts bigint DEFAULT 0 NOT NULL
);
CREATE TABLE public.sqlq_counters (
    tube text NOT NULL,
    buries bigint DEFAULT 0 NOT NULL,
    kicks bigint DEFAULT 0 NOT NULL,
    timeouts bigint DEFAULT 0 NOT NULL,
    pauses bigint DEFAULT 0 NOT NULL
);
CREATE TABLE public.sqlq_durations (
    tube text NOT NULL,
    metric text NOT NULL,
    le text NOT NULL,
    count bigint NOT NULL,
    sum double precision NOT NULL
);
CREATE TABLE public.sqlq_edges (
    parent bigint NOT NULL,
    child bigint NOT NULL
);
CREATE TABLE public.sqlq_finished (
    id bigint NOT NULL,
    tube text NOT NULL,
    grp text,
    outcome text NOT NULL,
    ended_at bigint NOT NULL,
    worker text,
    actor text,
    ran bigint,
    attempts integer NOT NULL,
    created_at bigint NOT NULL,
    unique_key text,
    body bytea NOT NULL,
    steps text
)
WITH (autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='1000');
CREATE TABLE public.sqlq_groups (
    tube text NOT NULL,
    grp text NOT NULL,
    turn bigint NOT NULL,
    rate_at double precision
);
CREATE TABLE public.sqlq_job_counts (
    tube text NOT NULL,
    state smallint NOT NULL,
    urgent boolean NOT NULL,
    slot integer NOT NULL,
    n bigint NOT NULL,
    puts bigint DEFAULT 0 NOT NULL
);
ALTER TABLE public.sqlq_jobs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.sqlq_jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);
CREATE TABLE public.sqlq_owners (
    token text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    place text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    handed_out integer DEFAULT 0 NOT NULL
);
CREATE TABLE public.sqlq_periodic (
    name text NOT NULL,
    last_slot bigint NOT NULL,
    enqueued_at bigint NOT NULL
);
CREATE TABLE public.sqlq_results (
    job_id bigint NOT NULL,
    result bytea NOT NULL,
    expires_at bigint NOT NULL
);
CREATE TABLE public.sqlq_retention (
    tube text NOT NULL,
    max_age bigint,
    max_count bigint
);
CREATE TABLE public.sqlq_schema (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at bigint NOT NULL
);
CREATE UNLOGGED TABLE public.sqlq_server_epoch (
    started timestamp with time zone NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL
);
CREATE TABLE public.sqlq_steps (
    job_id bigint NOT NULL,
    kind smallint NOT NULL,
    name text NOT NULL,
    value text NOT NULL,
    done_at bigint NOT NULL,
    CONSTRAINT sqlq_steps_kind_check CHECK ((kind = ANY (ARRAY[0, 1])))
);
CREATE TABLE public.sqlq_subscriptions (
    topic text NOT NULL,
    tube text NOT NULL
);
CREATE TABLE public.sqlq_throughput (
    minute bigint NOT NULL,
    at bigint NOT NULL,
    puts bigint NOT NULL,
    deletes bigint NOT NULL,
    buries bigint NOT NULL
);
CREATE TABLE public.sqlq_tubes (
    name text NOT NULL,
    paused_until bigint NOT NULL,
    pause_ms bigint NOT NULL,
    concurrency integer,
    rate integer,
    rate_ms bigint,
    rate_at double precision,
    grouped smallint,
    group_concurrency integer,
    group_rate integer,
    group_rate_ms bigint
);
CREATE TABLE public.sqlq_workers (
    token text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    tubes text NOT NULL,
    started_at bigint NOT NULL,
    seen_at bigint NOT NULL,
    job_id bigint,
    jobs_done bigint NOT NULL
);
ALTER TABLE ONLY public.sqlq_attempts
    ADD CONSTRAINT sqlq_attempts_pkey PRIMARY KEY (job_id, attempt);
ALTER TABLE ONLY public.sqlq_cancelled
    ADD CONSTRAINT sqlq_cancelled_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.sqlq_counters
    ADD CONSTRAINT sqlq_counters_pkey PRIMARY KEY (tube);
ALTER TABLE ONLY public.sqlq_durations
    ADD CONSTRAINT sqlq_durations_pkey PRIMARY KEY (tube, metric, le);
ALTER TABLE ONLY public.sqlq_edges
    ADD CONSTRAINT sqlq_edges_pkey PRIMARY KEY (parent, child);
ALTER TABLE ONLY public.sqlq_finished
    ADD CONSTRAINT sqlq_finished_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.sqlq_groups
    ADD CONSTRAINT sqlq_groups_pkey PRIMARY KEY (tube, grp);
ALTER TABLE ONLY public.sqlq_job_counts
    ADD CONSTRAINT sqlq_job_counts_pkey PRIMARY KEY (tube, state, urgent, slot);
ALTER TABLE ONLY public.sqlq_jobs
    ADD CONSTRAINT sqlq_jobs_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.sqlq_owners
    ADD CONSTRAINT sqlq_owners_pkey PRIMARY KEY (token);
ALTER TABLE ONLY public.sqlq_periodic
    ADD CONSTRAINT sqlq_periodic_pkey PRIMARY KEY (name);
ALTER TABLE ONLY public.sqlq_results
    ADD CONSTRAINT sqlq_results_pkey PRIMARY KEY (job_id);
ALTER TABLE ONLY public.sqlq_retention
    ADD CONSTRAINT sqlq_retention_pkey PRIMARY KEY (tube);
ALTER TABLE ONLY public.sqlq_schema
    ADD CONSTRAINT sqlq_schema_pkey PRIMARY KEY (version);
ALTER TABLE ONLY public.sqlq_server_epoch
    ADD CONSTRAINT sqlq_server_epoch_pkey PRIMARY KEY (started);
ALTER TABLE ONLY public.sqlq_steps
    ADD CONSTRAINT sqlq_steps_pkey PRIMARY KEY (job_id, kind, name);
ALTER TABLE ONLY public.sqlq_subscriptions
    ADD CONSTRAINT sqlq_subscriptions_pkey PRIMARY KEY (topic, tube);
ALTER TABLE ONLY public.sqlq_throughput
    ADD CONSTRAINT sqlq_throughput_pkey PRIMARY KEY (minute);
ALTER TABLE ONLY public.sqlq_tubes
    ADD CONSTRAINT sqlq_tubes_pkey PRIMARY KEY (name);
ALTER TABLE ONLY public.sqlq_workers
    ADD CONSTRAINT sqlq_workers_pkey PRIMARY KEY (token);
CREATE INDEX sqlq_cancelled_until ON public.sqlq_cancelled USING btree (until);
CREATE INDEX sqlq_edges_child ON public.sqlq_edges USING btree (child);
CREATE INDEX sqlq_finished_list ON public.sqlq_finished USING btree (tube, outcome, ended_at, id);
CREATE INDEX sqlq_groups_turn ON public.sqlq_groups USING btree (tube, turn);
CREATE INDEX sqlq_jobs_again ON public.sqlq_jobs USING btree (tube, priority, id) WHERE ((state = 0) AND again);
CREATE INDEX sqlq_jobs_buried ON public.sqlq_jobs USING btree (tube, id) WHERE (state = 3);
CREATE INDEX sqlq_jobs_delayed ON public.sqlq_jobs USING btree (tube, delay_until) WHERE (state = 1);
CREATE INDEX sqlq_jobs_ready ON public.sqlq_jobs USING btree (tube, priority, id) WHERE (state = 0);
CREATE INDEX sqlq_jobs_reserved ON public.sqlq_jobs USING btree (reserved_until) WHERE (state = 2);
CREATE INDEX sqlq_jobs_turns ON public.sqlq_jobs USING btree (tube, priority, turn, id) WHERE ((state = 0) AND (turn IS NOT NULL));
CREATE UNIQUE INDEX sqlq_jobs_unique ON public.sqlq_jobs USING btree (tube, unique_key) WHERE (unique_key IS NOT NULL);
CREATE INDEX sqlq_results_expires ON public.sqlq_results USING btree (expires_at);
CREATE TRIGGER sqlq_count_deleted AFTER DELETE ON public.sqlq_jobs FOR EACH ROW WHEN ((old.state = ANY (ARRAY[0, 1, 3]))) EXECUTE FUNCTION public.sqlq_count_deleted();
CREATE TRIGGER sqlq_count_events AFTER UPDATE OF buries, kicks, timeouts ON public.sqlq_jobs FOR EACH ROW WHEN (((new.buries > old.buries) OR (new.kicks > old.kicks) OR (new.timeouts > old.timeouts))) EXECUTE FUNCTION public.sqlq_count_events();
CREATE TRIGGER sqlq_count_moved AFTER UPDATE OF state, priority ON public.sqlq_jobs FOR EACH ROW WHEN ((((old.state = ANY (ARRAY[0, 1, 3])) OR (new.state = ANY (ARRAY[0, 1, 3]))) AND ((old.state <> new.state) OR ((old.state = 0) AND ((old.priority < 1024) <> (new.priority < 1024)))))) EXECUTE FUNCTION public.sqlq_count_moved();
CREATE TRIGGER sqlq_count_pauses AFTER INSERT OR UPDATE OF paused_until, pause_ms ON public.sqlq_tubes FOR EACH ROW WHEN ((new.paused_until > 0)) EXECUTE FUNCTION public.sqlq_count_pauses();
CREATE TRIGGER sqlq_count_puts AFTER INSERT ON public.sqlq_jobs REFERENCING NEW TABLE AS sqlq_new_jobs FOR EACH STATEMENT EXECUTE FUNCTION public.sqlq_count_puts();
CREATE CONSTRAINT TRIGGER sqlq_fold_counts AFTER INSERT ON public.sqlq_count_deltas DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.sqlq_fold_counts();
CREATE TRIGGER sqlq_forget_attempts AFTER DELETE ON public.sqlq_jobs FOR EACH ROW WHEN ((old.failures > 0)) EXECUTE FUNCTION public.sqlq_forget_attempts();
CREATE TRIGGER sqlq_forget_steps AFTER DELETE ON public.sqlq_jobs FOR EACH ROW WHEN ((old.steps > 0)) EXECUTE FUNCTION public.sqlq_forget_steps();
