-- sqlq schema 15: where a failed attempt was raised (web check F-2).
--
-- The Failed page grouped buried jobs by their exact bury reason, so KeyError: 'bob',
-- KeyError: 'carol' and KeyError: 'dave', raised by one line, were three groups. A task's
-- failure now keeps where it was raised: the innermost frame of the project's own code,
-- "myapp/tasks.py:41 in lookup" (sqlq/attempts.py raised_at), and failures are grouped
-- by the error and that location, their messages listed inside (sqlq/failures.py).
--   location  '' for a command, a run stopped at its TTR, and the attempts kept before
ALTER TABLE sqlq_attempts ADD COLUMN location TEXT NOT NULL DEFAULT '';
