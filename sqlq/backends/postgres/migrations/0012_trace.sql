-- sqlq schema 12 on PostgreSQL: the trace context a job carries from its producer to
-- its worker, and the trace of each failed attempt (the SQLite file's schema 11 says
-- what is written when). A nullable column without a default is added to the catalog
-- only: no row is rewritten. The claim functions return SETOF sqlq_jobs (RETURNING j.*):
-- their rows grow the column with the table's row type, without being replaced.

ALTER TABLE sqlq_jobs ADD COLUMN trace text;
ALTER TABLE sqlq_attempts ADD COLUMN trace text;
