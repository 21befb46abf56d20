"""What holds back the cleanup of deleted jobs, as operators see it, on both backends:
the gauges of /metrics (promtool agrees), the overview's banner and the /horizon page,
and sqlq work's warning, logged once when a threshold is passed and once when it clears.
A second real connection holds the snapshot (tests/snapshots.py); the thresholds are set
low through the environment, as an operator would."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

import sqlq
from tests import forkserver
from tests.dashboard_client import running
from tests.pgserver import PgServer
from tests.servers import require
from tests.snapshots import churn, held_snapshot
from tests.workers import ROOT, Work, wait_for

MIB = 1024 * 1024


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def _promtool_passes(text: str) -> None:
    check = subprocess.run([require("promtool", "prometheus"), "check", "metrics"],
                           input=text, text=True, capture_output=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.sql_ascii
def test_gauges_banner_and_page(q: sqlq.Queue, db_url: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """While a snapshot is held: /metrics has the gauges (valid for promtool), the
    overview a banner that says what and links /horizon, which names the holder; when
    it ends (and, on SQLite, a maintain truncates the WAL) the banner goes."""
    monkeypatch.setenv("SQLQ_WARN_HORIZON_AGE", "0.2")
    monkeypatch.setenv("SQLQ_WARN_WAL_SIZE", "1M")
    postgres = q.backend.horizon(0).backend == "postgres"
    with running(q) as c, held_snapshot(db_url) as pid:
        churn(q, jobs=300 if not postgres else 200, size=16_000 if not postgres else 10)
        banner = wait_for(lambda: 'id="horizon-alert"' in (page := c.get("/").text)
                          and 'data-alarm="horizon"' in page and page,
                          what="the banner")
        assert 'href="/horizon"' in banner
        detail = c.get("/horizon").text
        text = c.get("/metrics").text
        samples = _samples(text)
        assert samples["sqlq_horizon_age_seconds", ()] > 0.2
        if postgres:
            assert f"pid {pid}" in banner and f"pid {pid}" in detail
            assert samples["sqlq_horizon_holder_age_seconds", (("kind", "transaction"),)] > 0.2
            assert samples["sqlq_horizon_holder_age_seconds", (("kind", "slot"),)] == 0
            assert samples["sqlq_horizon_xid_age", ()] >= 1
            assert samples["sqlq_horizon_hidden_sessions", ()] == 0
            dead = wait_for(lambda: _samples(c.get("/metrics").text)[
                "sqlq_table_dead_rows", (("table", "sqlq_jobs"),)] >= 200, what="dead rows")
            assert dead
        else:
            assert 'data-alarm="wal"' in banner and "reader&#39;s snapshot" in banner
            assert samples["sqlq_wal_bytes", ()] > 4 * MIB
            assert samples["sqlq_wal_starved_bytes", ()] > 4 * MIB
            assert 'data-field="starved-bytes"' in detail
        _promtool_passes(text)
    if not postgres:
        q.backend.maintain()
    with running(q) as c:
        wait_for(lambda: 'id="horizon-alert"' not in c.get("/").text, what="no banner")
        assert "No threshold passed" in c.get("/horizon").text
        _promtool_passes(c.get("/metrics").text)


@pytest.mark.slow
def test_sqlq_work_warns_once_and_says_when_it_clears(q: sqlq.Queue, db_url: str) -> None:
    """A worker looking every 0.1 s (SQLQ_HORIZON_CHECK) logs the held snapshot once as
    a warning, not at every look, and once that it cleared when the snapshot ends."""
    env = {"SQLQ_WARN_HORIZON_AGE": "0.2", "SQLQ_HORIZON_CHECK": "0.1",
           "SQLQ_WARN_WAL_SIZE": "1G"}
    with Work(db_url, "--tube", "idle", "--", "true", env=env) as w:
        w.wait_log("watching idle")
        with held_snapshot(db_url) as pid:
            churn(q)
            w.wait_log("(see the docs: long-transactions.md)")
            if pid is not None:
                assert f"pid {pid}" in w.text()
            else:
                assert "a reader's snapshot has kept checkpoints from the WAL" in w.text()
        if pid is None:
            q.put(b"a commit after the reader", tube="churn")
        w.wait_log("cleared: no snapshot holds back")
        assert w.text().count("see the docs: long-transactions.md") == 1, w.text()
        assert w.stop() == 0


@pytest.mark.slow
def test_prepared_transactions_hold_it_and_logical_slots_do_not() -> None:
    """On a server of its own (prepared transactions and logical slots need settings
    made at its start): a forgotten prepared transaction holds the horizon and is named
    by its gid; a logical slot's catalog_xmin holds back only the catalogs, not sqlq's
    tables, so it is no holder; a session in another database is none either."""
    with PgServer(settings={"max_prepared_transactions": "2", "wal_level": "logical"}) as pg:
        pg.create_database("app")
        url = pg.url_for("app")
        with sqlq.Queue(url, init=True) as q, psycopg.connect(url, autocommit=True) as c, \
                psycopg.connect(pg.url_for("postgres"), autocommit=True) as other:
            c.execute("SELECT pg_create_logical_replication_slot('decoder', 'test_decoding')")
            other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            other.execute("SELECT txid_current()")
            c.execute("BEGIN")
            c.execute("SELECT txid_current()")
            c.execute("PREPARE TRANSACTION 'forgotten'")
            horizon = q.horizon()
            assert [(h.kind, h.name) for h in horizon.holders] == [
                ("prepared", "gid forgotten")]
            assert horizon.holder is not None and not horizon.holder.observed
            assert "postgres on app" in horizon.holder.detail
            c.execute("ROLLBACK PREPARED 'forgotten'")
            assert q.horizon().holders == []
            other.execute("ROLLBACK")


@pytest.mark.parametrize("command", [["work", "--burst", "--", "true"],
                                     ["dashboard", "--listen", "127.0.0.1:0"]])
def test_a_bad_threshold_stops_at_once_in_one_line(db_path: str, command: list[str]) -> None:
    """A threshold that does not parse stops sqlq work (its supervisor, before any
    worker is started and restarted) and sqlq dashboard with one line naming it."""
    sqlq.Queue(db_path).close()
    env = dict(os.environ, SQLQ_WARN_WAL_SIZE="12 parsecs", PYTHONPATH=str(ROOT))
    done = forkserver.run([sys.executable, "-m", "sqlq", "--db", db_path, *command], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == ("sqlq: $SQLQ_WARN_WAL_SIZE: '12 parsecs' is not a size (bytes, or "
                           "with k, M, G: 256M)\n")
