"""Group commit: threads sharing one Queue share transactions and commits (backends/group.py).

A group is formed on purpose: the first put's clock blocks inside its write (holding
the connection) until the other threads' writes are queued behind it; they then run
together in the next transaction. Each caller must still get its own result or error,
and an explicit transaction must never take in another thread's write. The Queues are
``full``: PostgreSQL groups only then (a commit without a WAL flush is cheap).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

import sqlq
from tests.groups import WAIT_S, GateClock, queued, run_as_group, wait_until


@pytest.fixture
def gq(db_url: str) -> Iterator[tuple[sqlq.Queue, GateClock]]:
    clock = GateClock()
    with sqlq.Queue(db_url, durability="full", clock=clock) as queue:
        yield queue, clock


def transactions_of(q: sqlq.Queue, ids: list[int]) -> int:
    """How many transactions inserted these jobs (PostgreSQL: their rows' xmin)."""
    rows = q.backend.read(lambda c: list(c.execute(
        "SELECT count(DISTINCT xmin::text) FROM sqlq_jobs WHERE id = ANY(%s)", (ids,))))
    return int(rows[0][0])


def test_puts_queued_behind_a_commit_share_the_next_one(gq: tuple[sqlq.Queue, GateClock],
                                                        backend: str) -> None:
    q, clock = gq
    commits: list[int] = []
    if backend == "sqlite":
        def count() -> bool:
            commits.append(1)
            return False  # go on with the commit

        q.backend.db.conn.set_commit_hook(count)  # type: ignore[attr-defined]
    holder_id, outcomes = run_as_group(q, clock, [
        lambda i=i: q.put(b"job %d" % i) for i in range(7)])
    ids = [value for kind, value in outcomes if kind == "ok"]
    assert len(ids) == 7 and len(set(ids)) == 7 and min(ids) > holder_id
    for i, (_, job_id) in enumerate(outcomes):
        job = q.peek(job_id)
        assert job is not None and job.body == b"job %d" % i
    # One thread (the leader) ran all seven writes...
    assert len(set(clock.callers[-7:])) == 1, clock.callers
    # ... in one transaction, after the holder's.
    if backend == "sqlite":
        assert len(commits) == 2, commits
    else:
        assert transactions_of(q, ids) == 1


def test_a_postgresql_groups_puts_go_in_as_one_statement(pg_url: str) -> None:
    """A run of puts in a group is one INSERT (one round trip, no BEGIN and COMMIT
    around it: rows of one statement share their cmin), each job with its own tube
    and options, and the ids in the order the puts were queued."""
    clock = GateClock()
    with sqlq.Queue(pg_url, durability="full", clock=clock) as q:
        options = [{"tube": f"t{i % 3}", "priority": i, "delay": i % 2 * 60, "ttr": 10 + i}
                   for i in range(6)]
        _, outcomes = run_as_group(q, clock, [
            lambda i=i: q.put(b"job %d" % i, **options[i]) for i in range(6)])
        ids = [value for kind, value in outcomes if kind == "ok"]
        assert len(ids) == 6 and ids == sorted(ids), outcomes
        rows = q.backend.read(lambda c: list(c.execute(
            "SELECT count(DISTINCT xmin::text), count(DISTINCT cmin::text) FROM sqlq_jobs"
            " WHERE id = ANY(%s)", (ids,))))
        assert rows == [(1, 1)]
        for i, job_id in enumerate(ids):
            stats = q.stats_job(job_id)
            assert (stats["tube"], stats["pri"], stats["ttr"]) == (
                options[i]["tube"], i, 10 + i)
            assert stats["state"] == ("delayed" if i % 2 else "ready")
            assert q.peek(job_id).body == b"job %d" % i  # type: ignore[union-attr]


def test_a_failing_write_fails_only_its_caller(gq: tuple[sqlq.Queue, GateClock]) -> None:
    q, clock = gq
    lost = q.put(b"lost lease")
    stale = q.reserve(timeout=0)
    assert stale is not None and stale.id == lost
    q.release(lost)
    live = q.reserve(timeout=0)
    assert live is not None and live.id == lost
    _, outcomes = run_as_group(q, clock, [
        lambda: q.put(b"a"),
        lambda: q.delete(999_999),
        lambda: q.put(b"b", unique_key="k"),
        lambda: q.delete(lost, lease=stale.lease),
        lambda: q.put_many([b"c", b"d"]),
        lambda: q.bury(lost, lease=stale.lease),
        lambda: q.put(b"e"),
    ])
    kinds = [kind for kind, _ in outcomes]
    assert kinds == ["ok", "error", "ok", "error", "ok", "error", "ok"], outcomes
    assert isinstance(outcomes[1][1], sqlq.JobNotFound)
    assert isinstance(outcomes[3][1], sqlq.JobLost)
    assert isinstance(outcomes[5][1], sqlq.JobLost)
    put = {outcomes[0][1]: b"a", outcomes[2][1]: b"b", outcomes[6][1]: b"e",
           **dict(zip(outcomes[4][1], [b"c", b"d"], strict=True))}
    for job_id, body in put.items():
        job = q.peek(job_id)
        assert job is not None and job.body == body
    # The job under a lost lease is untouched: still reserved under the live one.
    job = q.peek(lost)
    assert job is not None and job.state == "reserved"
    live.delete()
    # The unique key holds within a group too: the same key twice, one job.
    _, outcomes = run_as_group(q, clock.reset(), [
        lambda: q.put(b"x", unique_key="u"), lambda: q.put(b"y", unique_key="u")])
    assert outcomes[0] == outcomes[1] and outcomes[0][0] == "ok", outcomes


def test_an_explicit_transaction_takes_in_no_other_threads_write(db_url: str) -> None:
    """Threads put while one thread's transaction is open and puts into it: theirs wait
    and commit on their own; its puts join it (no deadlock) and roll back with it."""
    with sqlq.Queue(db_url, durability="full") as q:
        inside = threading.Event()
        others_done: list[int] = []
        mine: list[int] = []

        def other() -> None:
            others_done.append(q.put(b"other"))

        class Abandon(Exception):
            pass

        def own() -> None:
            try:
                with q.transaction() as tx:
                    mine.append(tx.put(b"mine 1"))
                    inside.set()
                    # The other threads queue up behind this open transaction...
                    wait_until(lambda: queued(q) >= 2, "queued writes")
                    # ... and this thread's next put still joins it at once.
                    mine.append(tx.put(b"mine 2"))
                    mine.append(q.put(b"mine 3"))
                    raise Abandon
            except Abandon:
                pass

        owner = threading.Thread(target=own)
        owner.start()
        assert inside.wait(WAIT_S)
        others = [threading.Thread(target=other) for _ in range(4)]
        for t in others:
            t.start()
        for t in [owner, *others]:
            t.join(WAIT_S)
            assert not t.is_alive()
        assert len(mine) == 3 and len(others_done) == 4
        # Rolled back: the others' jobs are all there is (they may reuse the ids).
        assert q.stats()["current-jobs-ready"] == 4
        for job_id in others_done:
            job = q.peek(job_id)
            assert job is not None and job.body == b"other"


def test_threads_sharing_a_queue_get_their_own_ids_in_order(db_url: str) -> None:
    """Eight threads, puts and put_manys: every id once, each thread's in increasing
    order, each job with the body its thread put."""
    with sqlq.Queue(db_url, durability="full") as q:
        got: dict[int, list[tuple[int, bytes]]] = {}
        start = threading.Barrier(8)

        def putter(t: int) -> None:
            mine = got.setdefault(t, [])
            start.wait()
            for n in range(40):
                if n % 10 == 9:
                    bodies = [b"t%d-%d-%d" % (t, n, k) for k in range(3)]
                    mine += zip(q.put_many(bodies, tube="many"), bodies, strict=True)
                else:
                    body = b"t%d-%d" % (t, n)
                    mine.append((q.put(body), body))

        threads = [threading.Thread(target=putter, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT_S * 2)
            assert not t.is_alive()
        every = [job_id for mine in got.values() for job_id, _ in mine]
        assert len(every) == len(set(every)) == 8 * (36 + 4 * 3)
        for mine in got.values():
            ids = [job_id for job_id, _ in mine]
            assert ids == sorted(ids)
            for job_id, body in mine:
                job = q.peek(job_id)
                assert job is not None and job.body == body
        assert q.stats()["current-jobs-ready"] == len(every)


def test_a_normal_postgresql_queue_does_not_group(pg_url: str) -> None:
    """Without a WAL flush to share, a PostgreSQL commit costs less than a group's
    BEGIN, COMMIT and hand-overs: each write commits on its own."""
    with sqlq.Queue(pg_url, durability="normal") as q, sqlq.Queue(pg_url) as full:
        assert not q.backend.commits_are_costly
        assert full.backend.commits_are_costly


def test_a_writer_interrupted_while_queued_leaves_the_queue_working(db_url: str) -> None:
    """Ctrl-C in a thread waiting in the queue: it raises KeyboardInterrupt there, its
    write is withdrawn, and the turn still passes on to the writers after it."""
    clock = GateClock()
    with sqlq.Queue(db_url, durability="full", clock=clock) as q:
        holder = threading.Thread(target=lambda: q.put(b"holder"), name="holder")
        clock.holder = holder
        holder.start()
        assert clock.held.wait(WAIT_S)

        def interrupt() -> None:
            wait_until(lambda: queued(q) == 1, "the main thread queued")
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

        # As a terminal's Ctrl-C would: Python's handler, even where this run was started
        # with SIGINT ignored (a background job).
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            threading.Thread(target=interrupt).start()
            with pytest.raises(KeyboardInterrupt):
                q.put(b"interrupted")
        finally:
            signal.signal(signal.SIGINT, previous)
        assert queued(q) == 0
        clock.gate.set()
        holder.join(WAIT_S)
        after: list[int] = []
        putter = threading.Thread(target=lambda: after.append(q.put(b"after")))
        putter.start()
        putter.join(WAIT_S)
        assert after, "the turn never passed on"
