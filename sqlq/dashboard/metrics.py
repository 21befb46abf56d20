"""``/metrics`` and ``sqlq metrics``: the queue in Prometheus' text format.

Every value is read from the file at scrape time (one read snapshot), never kept in
this process, so any number of dashboards, or a textfile collector run by cron, agree
with each other and survive restarts. What is exported, and from where:

* ``sqlq_jobs{tube,state}`` (state: ready, reserved, delayed, buried, waiting: put with
  ``after=``, its parents not all gone), ``sqlq_jobs_urgent{tube}``, ``sqlq_tube_paused{tube}``,
  ``sqlq_oldest_ready_job_age_seconds{tube}``: the overview's counts.
* ``sqlq_jobs_put_total`` and ``sqlq_jobs_deleted_total`` for the whole file: ids handed
  out, and those minus the jobs alive (no per-tube split: counting per tube would cost
  every put a second write).
* ``sqlq_jobs_buried_total``, ``sqlq_jobs_kicked_total``, ``sqlq_jobs_timed_out_total``
  per tube (migration 0005's trigger).
* ``sqlq_workers`` (the running ``sqlq work`` processes, idle ones too, from the workers
  registry, and any other live process holding reservations), ``sqlq_workers_busy`` (those
  of them running a job: idle ones are the difference), ``sqlq_reservations_held``;
  ``sqlq_periodic_last_slot_timestamp_seconds``.

* ``sqlq_job_wait_seconds{tube}`` (from a job's put, or the end of the delay it was put
  with, to its first reservation) and ``sqlq_job_run_seconds{tube}`` (a run, whatever
  its outcome) histograms: what the workers of ``sqlq work`` observed, added to the
  database by each at most every ten seconds and when it stops (sqlq/histograms.py).
  A library user's own reserve loop adds nothing to them.
* What holds back the cleanup of deleted jobs (sqlq/horizon.py, docs/long-transactions.md):
  ``sqlq_horizon_age_seconds`` on both backends; on SQLite ``sqlq_wal_bytes`` and
  ``sqlq_wal_starved_bytes`` (a passive checkpoint runs at each scrape, as an
  autocheckpoint would); on PostgreSQL ``sqlq_horizon_holder_age_seconds{kind}``,
  ``sqlq_horizon_xid_age``, ``sqlq_horizon_hidden_sessions`` and
  ``sqlq_table_dead_rows{table}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlq.core.extras import install_hint
from sqlq.errors import Error
from sqlq.horizon import HOLDER_KINDS, Horizon

try:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
except ImportError:  # pragma: no cover - the dashboard extra is not installed
    raise Error(f"metrics need prometheus-client: {install_hint('dashboard')}") from None

if TYPE_CHECKING:
    from sqlq.queue import Queue

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATES = ("ready", "reserved", "delayed", "buried", "waiting")


class QueueCollector:
    """A prometheus-client collector that reads the queue each time it is collected."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def collect(self) -> Iterator[Metric]:
        """The metric families, from one overview and one look at the workers."""
        overview = self.queue.views.overview()
        workers = self.queue.views.workers()
        now = overview.at
        jobs = GaugeMetricFamily("sqlq_jobs", "Jobs by tube and state, as of now.",
                                 labels=["tube", "state"])
        urgent = GaugeMetricFamily("sqlq_jobs_urgent",
                                   "Ready jobs with priority below 1024.", labels=["tube"])
        paused = GaugeMetricFamily("sqlq_tube_paused", "1 while the tube is paused.",
                                   labels=["tube"])
        oldest = GaugeMetricFamily("sqlq_oldest_ready_job_age_seconds",
                                   "Age of the oldest ready job (0 when none).",
                                   labels=["tube"])
        buried = CounterMetricFamily("sqlq_jobs_buried", "Jobs buried.", labels=["tube"])
        kicked = CounterMetricFamily("sqlq_jobs_kicked", "Jobs kicked.", labels=["tube"])
        timed_out = CounterMetricFamily("sqlq_jobs_timed_out",
                                        "Reservations whose TTR ran out.", labels=["tube"])
        for tube in overview.tubes:
            for state in STATES:
                jobs.add_metric([tube.name, state], getattr(tube, state))
            urgent.add_metric([tube.name], tube.urgent)
            paused.add_metric([tube.name], 1 if tube.paused_until else 0)
            age = 0 if tube.oldest_ready_at is None else max(now - tube.oldest_ready_at, 0)
            oldest.add_metric([tube.name], age / 1000)
            buried.add_metric([tube.name], tube.buries_total)
            kicked.add_metric([tube.name], tube.kicks_total)
            timed_out.add_metric([tube.name], tube.timeouts_total)
        yield from (jobs, urgent, paused, oldest)
        yield CounterMetricFamily("sqlq_jobs_put", "Jobs put into the file since it was "
                                  "created.", value=overview.puts_total)
        yield CounterMetricFamily("sqlq_jobs_deleted", "Jobs deleted or completed since the "
                                  "file was created.", value=overview.deletes_total)
        yield from (buried, kicked, timed_out)
        counted = [w for w in workers if w.token is not None and w.alive]
        yield GaugeMetricFamily("sqlq_workers", "Running sqlq work processes, idle ones "
                                "too, and other live processes holding reservations.",
                                value=len(counted))
        yield GaugeMetricFamily("sqlq_workers_busy", "Of sqlq_workers, those running a job "
                                "(sqlq_workers - sqlq_workers_busy are idle).",
                                value=sum(1 for w in counted if w.busy))
        yield GaugeMetricFamily("sqlq_reservations_held", "Live reservations.",
                                value=sum(w.jobs for w in workers))
        slots = GaugeMetricFamily("sqlq_periodic_last_slot_timestamp_seconds",
                                  "Start of the last slot each periodic task enqueued.",
                                  labels=["task"])
        for slot in self.queue.views.periodic_slots():
            slots.add_metric([slot.name], slot.last_slot / 1000)
        yield slots
        yield from self._histograms()
        try:
            horizon = self.queue.views.horizon()
        except Error:  # e.g. a file whose WAL cannot be checkpointed: the rest still counts
            return
        yield from horizon_metrics(horizon)

    def _histograms(self) -> Iterator[Metric]:
        families = {
            "wait": HistogramMetricFamily(
                "sqlq_job_wait_seconds", "Time from a job becoming ready (put, or the end of "
                "its put delay) to its first reservation, as sqlq work workers saw it.",
                labels=["tube"]),
            "run": HistogramMetricFamily(
                "sqlq_job_run_seconds", "Time a run of a job took in sqlq work, whatever its "
                "outcome.", labels=["tube"]),
        }
        for h in self.queue.views.duration_histograms():
            if h.metric in families:  # another version's metric is not ours to name
                families[h.metric].add_metric([h.tube], h.buckets, h.sum)
        yield from families.values()


def horizon_metrics(horizon: Horizon) -> Iterator[Metric]:
    """What holds back the cleanup of deleted jobs (sqlq/horizon.py): each backend's own."""
    yield GaugeMetricFamily(
        "sqlq_horizon_age_seconds", "How long the oldest snapshot has held back the cleanup "
        "of deleted jobs (PostgreSQL: the holder of this database's xmin horizon; SQLite: "
        "a reader starving checkpoints of the WAL); 0 when none.", value=horizon.age)
    if horizon.backend == "sqlite":
        yield GaugeMetricFamily("sqlq_wal_bytes", "Size of the SQLite -wal file.",
                                value=horizon.wal_bytes or 0)
        yield GaugeMetricFamily("sqlq_wal_starved_bytes", "WAL frames a checkpoint could not "
                                "copy back, held by a reader's snapshot.",
                                value=horizon.wal_starved_bytes or 0)
        return
    kinds = GaugeMetricFamily("sqlq_horizon_holder_age_seconds", "Age of the oldest holder "
                              "of the xmin horizon of each kind (transaction, prepared, "
                              "slot, standby); 0 when none.", labels=["kind"])
    for kind in HOLDER_KINDS:
        ages = [h.seconds for h in horizon.holders if h.kind == kind]
        kinds.add_metric([kind], max(ages, default=0.0))
    yield kinds
    yield GaugeMetricFamily("sqlq_horizon_xid_age", "Transactions since the xmin of the "
                            "horizon's holder (0 when none).",
                            value=horizon.holder.xid_age if horizon.holder else 0)
    yield GaugeMetricFamily("sqlq_horizon_hidden_sessions", "Sessions holding an xmin whose "
                            "transaction this role may not see (grant pg_read_all_stats).",
                            value=horizon.hidden)
    dead = GaugeMetricFamily("sqlq_table_dead_rows", "Dead rows of sqlq's tables, not yet "
                             "vacuumed (the server's statistics, up to a second late).",
                             labels=["table"])
    for table, rows in sorted(horizon.dead_rows.items()):
        dead.add_metric([table], rows)
    yield dead


def render(queue: Queue) -> bytes:
    """The Prometheus text exposition of the queue, read now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(queue))
    return generate_latest(registry)
