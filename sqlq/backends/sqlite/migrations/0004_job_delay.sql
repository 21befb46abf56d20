-- sqlq schema 4: the delay last given to a job (beanstalkd's stats-job "delay").
--
-- delay_until says when a delayed job becomes ready and is cleared once it is;
-- beanstalkd reports the delay itself, as last set by put or release, for the
-- job's whole life. Milliseconds; 0 for a job put or released without one.

ALTER TABLE sqlq_jobs ADD COLUMN delay INTEGER NOT NULL DEFAULT 0;
