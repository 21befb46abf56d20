-- sqlq schema 19 on PostgreSQL: where a failed attempt was raised (web check F-2), as
-- SQLite's migration 0015 (see it for why). A constant default: no table rewrite.
ALTER TABLE sqlq_attempts ADD COLUMN location text NOT NULL DEFAULT '';
