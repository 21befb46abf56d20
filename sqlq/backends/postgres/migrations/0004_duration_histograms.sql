-- sqlq schema 4 on PostgreSQL: histograms of how long jobs wait before they are
-- reserved and how long they run, for /metrics (the SQLite file's schema 6 says
-- how: workers add what they observed at most every ten seconds, never on the
-- hot path; one row per tube, metric and bucket, not cumulated).

CREATE TABLE sqlq_durations (
    tube   text             NOT NULL,
    metric text             NOT NULL,  -- 'wait' or 'run'
    le     text             NOT NULL,
    count  bigint           NOT NULL,
    sum    double precision NOT NULL,
    PRIMARY KEY (tube, metric, le)
);
