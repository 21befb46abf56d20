-- sqlq schema 6: histograms of how long jobs wait before they are reserved and how
-- long they run, for /metrics (sqlq/histograms.py).
--
-- Only the workers of `sqlq work` know both moments. Each keeps its observations in
-- memory and adds them here at most every ten seconds and when it stops, in one
-- short transaction, so put, reserve and delete write nothing more. A row counts
-- the observations of one bucket and their sum (seconds), not cumulated, so a
-- flush adds to the buckets it saw and nothing else; le is the bucket's upper
-- bound as Prometheus writes it ('0.005' ... '3600.0', '+Inf').

CREATE TABLE sqlq_durations (
    tube   TEXT    NOT NULL,
    metric TEXT    NOT NULL,  -- 'wait' or 'run'
    le     TEXT    NOT NULL,
    count  INTEGER NOT NULL,
    sum    REAL    NOT NULL,
    PRIMARY KEY (tube, metric, le)
) WITHOUT ROWID;
