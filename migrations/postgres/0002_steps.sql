-- Durable steps and cursors (issue 40, sqlq/steps.py): see the SQLite file.
-- ADD COLUMN with a constant default rewrites no rows (PostgreSQL 11+).

ALTER TABLE sqlq_jobs ADD COLUMN steps integer NOT NULL DEFAULT 0;

CREATE TABLE sqlq_steps (
    job_id  bigint   NOT NULL,
    kind    smallint NOT NULL CHECK (kind IN (0, 1)),
    name    text     NOT NULL,
    value   text     NOT NULL,
    done_at bigint   NOT NULL,
    PRIMARY KEY (job_id, kind, name)
);

CREATE FUNCTION sqlq_forget_steps() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    DELETE FROM sqlq_steps WHERE job_id = OLD.id;
    RETURN NULL;
END
$body$;

CREATE TRIGGER sqlq_forget_steps AFTER DELETE ON sqlq_jobs
FOR EACH ROW
WHEN (OLD.steps > 0)
EXECUTE FUNCTION sqlq_forget_steps();
