-- sqlq schema 10 on PostgreSQL: per-tube totals of puts and pauses (beanstalkd's
-- total-jobs and cmd-pause-tube of a tube; its cmd-delete is puts minus the tube's
-- live jobs).
--
-- Puts are counted once per statement (a put_many of 10,000 jobs adds one row's
-- worth), from the statement's inserted rows. A single counter row per tube would be
-- a hot row: concurrent producers of one tube would wait for each other's commits
-- on its lock. So each tube has up to 64 rows, one per slot, a session writing the
-- slot of its backend pid: two sessions rarely share one. A tube's puts are the sum.
-- Jobs live when this migration runs count as puts of their tube.

CREATE TABLE sqlq_tube_puts (
    tube text   NOT NULL,
    slot int    NOT NULL,  -- pg_backend_pid() % 64 of the sessions that put
    puts bigint NOT NULL,
    PRIMARY KEY (tube, slot)
);
INSERT INTO sqlq_tube_puts (tube, slot, puts) SELECT tube, 0, count(*) FROM sqlq_jobs GROUP BY tube;

CREATE FUNCTION sqlq_count_puts() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_tube_puts AS p (tube, slot, puts)
    SELECT tube, pg_backend_pid() % 64, count(*) FROM sqlq_new_jobs GROUP BY tube ORDER BY tube
    ON CONFLICT (tube, slot) DO UPDATE SET puts = p.puts + excluded.puts;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_count_puts AFTER INSERT ON sqlq_jobs
REFERENCING NEW TABLE AS sqlq_new_jobs
FOR EACH STATEMENT EXECUTE FUNCTION sqlq_count_puts();

-- Pauses are rare: one more per pause-tube (a pause of 0, which ends one, counts too).
ALTER TABLE sqlq_counters ADD COLUMN pauses bigint NOT NULL DEFAULT 0;

CREATE FUNCTION sqlq_count_pauses() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_counters AS c (tube, pauses) VALUES (NEW.name, 1)
    ON CONFLICT (tube) DO UPDATE SET pauses = c.pauses + 1;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_count_pauses AFTER INSERT OR UPDATE OF paused_until, pause_ms
ON sqlq_tubes FOR EACH ROW EXECUTE FUNCTION sqlq_count_pauses();
