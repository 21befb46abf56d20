-- sqlq schema 2 on PostgreSQL: per-tube counts of buries, kicks and timeouts, for
-- /metrics (the SQLite file's schema 5 says why a trigger and not the store).
-- It fires only where one of those counters grows (bury, kick, the claim of an
-- expired reservation), never on put, an ordinary claim or delete.

CREATE TABLE sqlq_counters (
    tube     text   PRIMARY KEY,
    buries   bigint NOT NULL DEFAULT 0,
    kicks    bigint NOT NULL DEFAULT 0,
    timeouts bigint NOT NULL DEFAULT 0
);

CREATE FUNCTION sqlq_count_events() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO sqlq_counters AS c (tube, buries, kicks, timeouts)
    VALUES (NEW.tube, NEW.buries - OLD.buries, NEW.kicks - OLD.kicks,
            NEW.timeouts - OLD.timeouts)
    ON CONFLICT (tube) DO UPDATE SET buries = c.buries + excluded.buries,
                                     kicks = c.kicks + excluded.kicks,
                                     timeouts = c.timeouts + excluded.timeouts;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_count_events AFTER UPDATE OF buries, kicks, timeouts ON sqlq_jobs
FOR EACH ROW
WHEN (NEW.buries > OLD.buries OR NEW.kicks > OLD.kicks OR NEW.timeouts > OLD.timeouts)
EXECUTE FUNCTION sqlq_count_events();
