"""fsyncs are spent where they buy safety, and SQLITE_BUSY never reaches the caller.

A counting VFS wraps SQLite's default one and counts xSync calls per file, so the
test sees exactly which operations pay for durability in each mode.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sqlq import Job, Queue
from tests.conftest import spawn
from tests.vfs import CountingVFS
from tests.workers import SQLITE_WRITE_LOCK_HOLDER


@pytest.fixture
def vfs() -> Iterator[CountingVFS]:
    v = CountingVFS()
    yield v
    v.unregister()


def _syncs(vfs: CountingVFS, action) -> int:  # type: ignore[no-untyped-def]
    before = vfs.counts["wal"]
    action()
    return vfs.counts["wal"] - before


def test_full_mode_syncs_puts_deletes_buries_but_not_claims(db_path: str,
                                                            vfs: CountingVFS) -> None:
    with Queue(db_path, durability="full", vfs="counting") as q:
        q.put(b"warm-up")  # the first commit also syncs the new WAL's header
        assert _syncs(vfs, lambda: q.put(b"a")) == 1
        assert _syncs(vfs, lambda: q.put_many([b"b", b"c", b"d"])) == 1
        jobs = []
        assert _syncs(vfs, lambda: jobs.append(q.reserve(timeout=0))) == 0
        assert _syncs(vfs, lambda: jobs[0].touch()) == 0
        assert _syncs(vfs, lambda: jobs[0].release()) == 0
        assert _syncs(vfs, lambda: jobs.append(q.reserve(timeout=0))) == 0
        # The worker's fast path: the delete is durable, the next claim rides along.
        assert _syncs(vfs, lambda: jobs.append(q.reserve(timeout=0, delete=jobs[-1]))) == 1
        assert _syncs(vfs, lambda: jobs[-1].bury(reason="x")) == 1
        assert _syncs(vfs, lambda: q.kick(1)) == 1
        assert _syncs(vfs, lambda: q.delete(jobs[-1].id)) == 1


def test_full_mode_syncs_the_one_statement_writes_right_after_a_claim(
        db_path: str, vfs: CountingVFS) -> None:
    """A claim commits with synchronous=NORMAL; the put and the job.delete() that follow
    run as one autocommit statement each (Database.write's inline path), which must
    raise it to FULL again first: each pays its fsync, each claim none."""
    with Queue(db_path, durability="full", vfs="counting") as q:
        q.put(b"warm-up")
        jobs: list[Job | None] = []
        for _ in range(2):
            jobs.clear()
            assert _syncs(vfs, lambda: jobs.append(q.reserve(timeout=0))) == 0
            assert _syncs(vfs, lambda: q.put(b"next")) == 1
            assert _syncs(vfs, lambda: jobs.append(q.reserve(timeout=0))) == 0
            job, job2 = jobs
            assert job is not None and job2 is not None
            assert _syncs(vfs, job2.delete) == 1
            assert _syncs(vfs, job.delete) == 1
            assert _syncs(vfs, lambda: q.put(b"again")) == 1


def test_normal_mode_syncs_only_at_checkpoints(db_path: str, vfs: CountingVFS) -> None:
    with Queue(db_path, durability="normal", vfs="counting") as q:
        q.put(b"warm-up")
        assert _syncs(vfs, lambda: [q.put(b"x") for _ in range(20)]) == 0
        job = q.reserve(timeout=0)
        assert _syncs(vfs, lambda: q.reserve(timeout=0, delete=job)) == 0


def test_busy_database_waits_instead_of_failing(db_path: str) -> None:
    """Another process holds the write lock for a second: put waits it out."""
    Queue(db_path).close()
    holder = spawn(SQLITE_WRITE_LOCK_HOLDER, db_path, "1.0")
    assert holder.stdout.readline().strip() == "locked"
    with Queue(db_path) as q:
        start = time.monotonic()
        jid = q.put(b"waited")
        assert time.monotonic() - start >= 0.8
        assert q.reserve(timeout=0).id == jid  # type: ignore[union-attr]
    assert holder.wait(10) == 0


def test_lock_held_past_the_busy_timeout_is_retried(db_path: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Past one attempt's busy timeout, tenacity retries the whole transaction."""
    from sqlq.backends.sqlite import db
    monkeypatch.setattr(db, "BUSY_TIMEOUT_S", 0.1)
    Queue(db_path).close()
    holder = spawn(SQLITE_WRITE_LOCK_HOLDER, db_path, "0.8")
    assert holder.stdout.readline().strip() == "locked"
    with Queue(db_path) as q:
        start = time.monotonic()
        q.put(b"x")
        assert time.monotonic() - start >= 0.6
        assert q.stats()["current-jobs-ready"] == 1
    assert holder.wait(10) == 0


@pytest.mark.slow
def test_file_stays_bounded_under_churn(db_path: str) -> None:
    """Deleted jobs' pages are reused and the WAL is checkpointed: churn does not grow
    the file without limit. Every job leaves a record (sqlq/finished.py), kept up to the
    retention's count: once that many are kept, pruning (a worker's beat, once a
    minute; here once a round) makes room for as many as each round adds, and the file
    stops growing. A small count, so the plateau comes within the test."""
    import os
    body = b"x" * 500
    kept = 2000
    with Queue(db_path, durability="normal") as q:
        q.retention(max_count=kept)
        sizes, pruned = [], []
        for _ in range(30):
            ids = q.put_many([body] * 1000)
            job = q.reserve(timeout=0)
            while job is not None:
                job = q.reserve(timeout=0, delete=job)
            assert q.stats()["total-jobs"] == ids[-1]
            pruned.append(q.prune()["finished"])
            sizes.append(os.path.getsize(db_path) + os.path.getsize(db_path + "-wal"))
        records = q.backend.db.conn.execute(  # type: ignore[attr-defined]
            "SELECT count(*) FROM sqlq_finished").fetchall()[0][0]
    assert records == kept and pruned[2:] == [1000] * 28, pruned
    # 1000 live jobs of 500 bytes and 2000 records of a 256-byte head need about 1.7 MB;
    # 30 000 jobs went through.
    assert max(sizes[10:]) <= max(sizes[:10]) * 1.5, sizes
    assert os.path.getsize(db_path) < 4 * 1024 * 1024


PUT_AND_DELETE_THE_TOP = """
import sys
import sqlq
q = sqlq.Queue(sys.argv[1], durability="normal")
q.put(b"keeps the table from emptying", priority=2**32 - 1)
while True:
    job_id = q.put(b"x")
    print(job_id, flush=True)
    q.delete(job_id)  # the highest id left: it goes to sqlq_last_id
"""


def test_ids_are_not_issued_again_after_a_sigkill_mid_put(db_path: str) -> None:
    """A process putting and deleting the job with the highest id is SIGKILLed at some
    point of its loop, three times: each time the next id is past every id it was given,
    and past any put it made that committed unacknowledged (total-jobs counts it)."""
    import signal

    Queue(db_path).close()
    given: list[int] = []
    for _ in range(3):
        child = spawn(PUT_AND_DELETE_THE_TOP, db_path)
        for _ in range(200):
            given.append(int(child.stdout.readline()))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        given.extend(int(line) for line in out.split())
        with Queue(db_path, durability="normal") as q:
            total = q.stats()["total-jobs"]
            assert total >= max(given)
            assert q.put(b"after the kill") == total + 1
            assert q.backend.db.conn.execute(  # type: ignore[attr-defined]
                "PRAGMA integrity_check").fetchall() == [("ok",)]
    assert len(given) == len(set(given))
