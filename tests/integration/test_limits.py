"""Limits under real concurrency: 8 processes hammering a tube capped at 2, a rate over
10 seconds, and the beanstalkd server obeying a cap (sqlq/core/limits.py; the rules one by
one are in tests/unit/test_limits.py)."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests.conftest import spawn
from tests.servers import BeanstalkdProcess
from tests.timing import PATIENCE, soon

#: A worker: reserve (half of them with the one-commit delete-and-claim), hold the job a
#: moment, delete; log when each hold began and ended (wall clock, shared by the
#: processes). A logged hold lies inside the reservation (after the claim committed,
#: before the delete did), so holds that overlap mean reservations that did.
HAMMER = """
import json, random, sys, time, sqlq
url, tube, out, fast = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
q = sqlq.Queue(url, durability="normal")
holds, job = [], q.reserve(tube, timeout=10)
while job is not None:
    begun = time.time()
    time.sleep(random.random() * 0.002)  # the job's work
    holds.append((begun, time.time()))
    if fast:
        job = q.reserve(tube, timeout=5, delete=job)
    else:
        job.delete()
        job = q.reserve(tube, timeout=5)
json.dump(holds, open(out, "w"))
"""


def most_at_once(holds: list[tuple[float, float]]) -> int:
    """The largest number of holds in progress at one moment."""
    edges = sorted([(b, 1) for b, _ in holds] + [(e, -1) for _, e in holds],
                   key=lambda edge: (edge[0], edge[1]))  # an end before a begin at a tie
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def hammer(q: sqlq.Queue, db_url: str, tmp_path: Path, jobs: int
           ) -> tuple[list[subprocess.Popen[str]], list[Path]]:
    """``jobs`` jobs in a tube "capped" at 2, and 8 HAMMER processes on it (half of them
    deleting and claiming in one commit); the processes and their log files."""
    q.put_many([b"x"] * jobs, tube="capped")
    q.limit("capped", concurrency=2)
    outs = [tmp_path / f"holds{i}.json" for i in range(8)]
    return [spawn(HAMMER, db_url, "capped", str(out), str(i % 2))
            for i, out in enumerate(outs)], outs


@pytest.mark.slow
def test_eight_processes_never_hold_three_of_a_tube_capped_at_two(db_url: str,
                                                                  tmp_path: Path) -> None:
    jobs = 1000  # 8 contenders for 2 slots: the cap is reached within the first claims
    with sqlq.Queue(db_url) as q:
        procs, outs = hammer(q, db_url, tmp_path, jobs)
        sampled = 0
        samples = 0
        # The database's own view, sampled meanwhile: live reservations of the tube.
        while any(p.poll() is None for p in procs):
            sampled = max(sampled, q.stats_tube("capped")["current-jobs-reserved"])
            samples += 1
            time.sleep(0.005)  # a sample every few ms; a busy loop took a core from the 8
        for p in procs:
            _, err = p.communicate(timeout=PATIENCE)
            assert p.returncode == 0, err
        holds = [tuple(h) for out in outs for h in json.loads(out.read_text())]
        assert len(holds) == jobs
        assert q.stats_tube("capped")["current-jobs-ready"] == 0
    print(f"\n{jobs} claims by 8 processes; most held at once: {most_at_once(holds)} (holds), "
          f"{sampled} (of {samples} samples of the database)")
    assert most_at_once(holds) == 2  # the cap was reached, and never passed
    assert sampled <= 2


@pytest.mark.slow
def test_sigkilled_holders_never_let_the_cap_be_passed(db_url: str, tmp_path: Path) -> None:
    """Chaos: three of eight hammering processes SIGKILLed mid-run. A dead holder's jobs
    count against the cap until it is reaped, then come back; the others finish them."""
    jobs = 600
    with sqlq.Queue(db_url) as q:
        procs, _ = hammer(q, db_url, tmp_path, jobs)
        sampled = 0
        killed: list[subprocess.Popen[str]] = []
        while any(p.poll() is None for p in procs):
            stats = q.stats_tube("capped")
            sampled = max(sampled, stats["current-jobs-reserved"])
            if not killed and stats["cmd-delete"] >= jobs // 4:
                # three still running: one left waiting for a slot 5 s has ended by itself
                killed = [p for p in procs if p.poll() is None][:3]
                for p in killed:
                    p.send_signal(signal.SIGKILL)
            time.sleep(0.005)
        for p in procs:
            _, err = p.communicate(timeout=PATIENCE)
            # the killed ones killed, not finished first; the others finished
            assert p.returncode == (-signal.SIGKILL if p in killed else 0), err
        stats = q.stats_tube("capped")
    print(f"\nmost reserved at once, sampled: {sampled}; after the kills: {stats}")
    assert len(killed) == 3 and sampled <= 2
    assert stats["current-jobs-ready"] == stats["current-jobs-reserved"] == 0
    assert stats["cmd-delete"] == jobs  # the dead holders' jobs came back and were done


#: The blocked reserve of the wake-up tests, in a process of its own: for each line
#: on stdin, check that the cap holds, say "blocked", wait in a reserve, then print
#: when (wall clock) it got a job and free the slot again with the job's delete.
BLOCKED = """
import json, sys, time, sqlq
url, tube = sys.argv[1], sys.argv[2]
q = sqlq.Queue(url, durability="normal")
for line in sys.stdin:
    assert q.reserve(tube, timeout=0) is None, "the cap let a second job out"
    print("blocked", flush=True)
    job = q.reserve(tube, timeout=60)
    print(json.dumps(None if job is None else time.time()), flush=True)
    if job is not None:
        job.delete()
"""

#: A holder that dies holding the only slot (owned: its death is what frees it).
HOLDER = """
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1], durability="normal")
assert q.reserve(sys.argv[2], timeout=10) is not None
print("holding", flush=True)
time.sleep(600)
"""


def quiet(proc: subprocess.Popen[str], seconds: float) -> bool:
    """Whether ``proc`` writes nothing for ``seconds`` (it is blocked, not answering)."""
    assert proc.stdout is not None
    return not select.select([proc.stdout], [], [], seconds)[0]


def line_of(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"the process ended: {proc.stderr.read() if proc.stderr else ''}"
    return line.strip()


#: Each way a reserved job leaves its reservation, done to ``job`` (held detached in
#: the tube capped at 1) by ``q``: the test's own Queue, another process than the waiter.
FREES = {
    "delete": lambda q, job: job.delete(),
    "delete by id and lease": lambda q, job: q.delete(job.id, lease=job.lease),
    "complete": lambda q, job: job.complete(b"done"),
    "delete-and-claim": lambda q, job: q.reserve("other", timeout=0, delete=job, detach=True),
    "delete_many": lambda q, job: q.delete_many([job]),
    "reserve_many with delete": lambda q, job: q.reserve_many(1, "other", timeout=0,
                                                              delete=[job]),
    "release": lambda q, job: job.release(),
    "release with a delay": lambda q, job: job.release(delay=60),
    "bury": lambda q, job: job.bury(),
    "cancel": lambda q, job: q.cancel(job.id),
}


@pytest.mark.slow
def test_a_slot_freed_anywhere_wakes_a_reserve_blocked_in_another_process(db_url: str,
                                                                          tmp_path: Path
                                                                          ) -> None:
    """Issue 25: a reserve blocked by a full cap wakes at once when the slot frees, by
    every way a job leaves its reservation: on PostgreSQL by a NOTIFY (migration 0016:
    a worker's delete sends one only for a capped job), on SQLite by the commit itself.

    The holder's reservations are detached: an owned one in another process would also
    be found by the waiter's liveness poll (every 0.5 s on PostgreSQL while others hold
    jobs), which hides a freed slot that sends nothing; a detached one is never polled
    for, so without the notification the waiter sleeps to its 10 s look of its own."""
    with sqlq.Queue(db_url, durability="normal") as q:
        q.put_many([f"job {i}".encode() for i in range(30)], tube="capped", ttr=300)
        before = q.reserve("capped", timeout=0, detach=True)  # held before the cap was set
        q.limit("capped", concurrency=1)
        waiter = spawn(BLOCKED, db_url, "capped", stdin=subprocess.PIPE)
        assert waiter.stdin is not None
        waits: dict[str, float] = {}
        frees = {"the delete of a job held before the cap was set": FREES["delete"], **FREES}
        try:
            for path, free in frees.items():
                job = before or q.reserve("capped", timeout=soon(), detach=True)  # the slot
                before = None
                assert job is not None, path
                waiter.stdin.write("go\n")
                waiter.stdin.flush()
                assert line_of(waiter) == "blocked", path
                assert quiet(waiter, 0.3), path  # it waits (and is in its wait by now)
                start = time.time()
                free(q, job)
                woke = json.loads(line_of(waiter))
                assert woke is not None, path
                waits[path] = woke - start
            # A dead holder: an owned reservation whose process is SIGKILLed.
            holder = spawn(HOLDER, db_url, "capped")
            assert line_of(holder) == "holding"
            waiter.stdin.write("go\n")
            waiter.stdin.flush()
            assert line_of(waiter) == "blocked"
            assert quiet(waiter, 0.3)
            start = time.time()
            holder.send_signal(signal.SIGKILL)
            holder.communicate(timeout=PATIENCE)
            woke = json.loads(line_of(waiter))
            assert woke is not None, "a dead holder"
            waits["a dead holder"] = woke - start
        finally:
            waiter.kill()
            waiter.communicate(timeout=PATIENCE)
    print("\nwoken after: " + ", ".join(f"{path} {s * 1000:.0f} ms" for path, s in waits.items()))
    late = {path: round(s, 1) for path, s in waits.items() if s >= soon(0.5)}
    assert not late, f"woken late (s), by a look of its own, not by the freed slot: {late}"


#: A worker of the rate test: claim until a wall-clock time, logging each claim's own
#: time (the Queue's clock the claim ran on: reserved_until - ttr).
CLAIMER = """
import json, sys, time, sqlq
url, tube, out, until = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
q = sqlq.Queue(url, durability="normal")
times = []
while time.time() < until:
    job = q.reserve(tube, timeout=max(until - time.time(), 0))
    if job is None:
        break
    times.append(job.reserved_until - int(job.ttr * 1000))
    job.delete()
json.dump(times, open(out, "w"))
"""


@pytest.mark.slow
def test_a_rate_of_10_a_second_gives_100_give_or_take_the_burst_in_10_seconds(db_url: str,
                                                               tmp_path: Path) -> None:
    n = 10
    with sqlq.Queue(db_url) as q:
        q.put_many([b"x"] * 400, tube="paced")
        q.limit("paced", rate=(n, 1))
        until = time.time() + 12  # 10 s of claims after the processes start, and a margin
        outs = [tmp_path / f"times{i}.json" for i in range(4)]
        procs = [spawn(CLAIMER, db_url, "paced", str(out), str(until)) for out in outs]
        for p in procs:
            _, err = p.communicate(timeout=soon(20))
            assert p.returncode == 0, err
    times = sorted(t for out in outs for t in json.loads(out.read_text()))
    first = times[0]
    in_window = sum(1 for t in times if t < first + 10_000)
    # Any 10 s window: at most the burst (N) plus N per second.
    busiest = max(sum(1 for t in times if s <= t < s + 10_000) for s in times)
    gaps = sorted(b - a for a, b in zip(times, times[1:], strict=False))[-5:]
    print(f"\nrate {n}/s: {in_window} claims in the first 10 s, at most {busiest} in any 10 s; "
          f"longest gaps {gaps} ms")
    assert busiest <= n * 10 + n
    # Jobs were always there: the rate, not the workers, set the pace. The bound is the
    # promise; the pace is asserted generously: a machine loaded enough to stall every
    # claimer past a full bucket loses those tokens (69 of 100 once in CI, with the chaos
    # runs beside it; 109 on a quiet machine).
    assert in_window >= n * 10 * 0.6


@pytest.mark.slow
def test_the_server_obeys_a_cap_and_a_rate(db_url: str) -> None:
    import socket

    with sqlq.Queue(db_url) as q:
        q.put_many([b"a", b"b", b"c"], tube="capped")
        q.limit("capped", concurrency=1)
    server = BeanstalkdProcess(None, serve=True, location=db_url)
    try:
        def client() -> socket.socket:
            s = server.connect(PATIENCE)
            s.sendall(b"watch capped\r\n")
            assert s.recv(100) == b"WATCHING 2\r\n"
            return s

        first, second = client(), client()
        first.sendall(b"reserve-with-timeout 0\r\n")
        reply = first.recv(100)
        assert reply.startswith(b"RESERVED ")
        job_id = reply.split()[1]
        second.sendall(b"reserve-with-timeout 0\r\n")
        assert second.recv(100) == b"TIMED_OUT\r\n"  # the cap holds across connections
        second.sendall(b"reserve-with-timeout 60\r\n")  # a waiting reserve, woken by ...
        start = time.monotonic()
        first.sendall(b"delete " + job_id + b"\r\n")  # ... the slot this frees
        assert first.recv(100) == b"DELETED\r\n"
        assert second.recv(100).startswith(b"RESERVED ")
        assert time.monotonic() - start < soon()
        # A rate: the waiting reserve wakes when the next token is due (Engine.due).
        with sqlq.Queue(db_url) as q:
            q.put_many([b"d", b"e"], tube="paced")
            q.limit("paced", rate=(1, 0.5))
        third, fourth = (server.connect(PATIENCE).makefile("rwb", buffering=0)
                         for _ in range(2))
        for conn in (third, fourth):
            conn.write(b"watch paced\r\nignore default\r\n")
            assert conn.readline() == b"WATCHING 2\r\n"
            assert conn.readline() == b"WATCHING 1\r\n"
        third.write(b"reserve-with-timeout 0\r\n")
        assert third.readline().startswith(b"RESERVED ")  # the bucket's one token
        start = time.monotonic()
        fourth.write(b"reserve-with-timeout 30\r\n")
        assert fourth.readline().startswith(b"RESERVED ")
        assert 0.45 <= time.monotonic() - start < soon(0.5)
        third.close()
        fourth.close()
        first.close()
        second.close()
    finally:
        server.stop()


#: Each way a job held by a connection of the server leaves its reservation: the
#: holder's command (or its leaving), or an administrator's delete by id from another
#: process.
SERVER_FREES = {
    "delete": lambda held, job_id, q: held.write(b"delete %d\r\n" % job_id),
    "release": lambda held, job_id, q: held.write(b"release %d 0 0\r\n" % job_id),
    "release with a delay": lambda held, job_id, q: held.write(b"release %d 0 60\r\n" % job_id),
    "bury": lambda held, job_id, q: held.write(b"bury %d 0\r\n" % job_id),
    "the holder's connection closed": lambda held, job_id, q: held.close(),
    "an administrator's delete": lambda held, job_id, q: q.delete(job_id),
}


@pytest.mark.slow
def test_a_slot_freed_anywhere_wakes_a_reserve_blocked_in_the_server(db_url: str) -> None:
    """Issue 25 in ``sqlq serve``: a reserve blocked by a full cap wakes at once when a
    connection of the same server frees the slot (Waiters.freed pokes its waiters: the
    holder is the server itself, which no liveness poll looks at, so without it the
    waiter would look at its 5 s fallback), when another process deletes a job the
    server's connection holds, and when another process frees a slot it held."""
    with sqlq.Queue(db_url, durability="normal") as q:
        q.put_many([f"job {i}".encode() for i in range(20)], tube="capped", ttr=300)
        q.limit("capped", concurrency=1)
        server = BeanstalkdProcess(None, serve=True, location=db_url)
        waits: dict[str, float] = {}

        def client() -> Any:
            conn = server.connect(PATIENCE).makefile("rwb", buffering=0)
            conn.write(b"watch capped\r\nignore default\r\n")
            assert conn.readline() == b"WATCHING 2\r\n"
            assert conn.readline() == b"WATCHING 1\r\n"
            return conn

        def reserved(conn: Any) -> int:
            reply = conn.readline()
            assert reply.startswith(b"RESERVED "), reply
            conn.readline()  # the body
            return int(reply.split()[1])

        def blocked_then_woken(free: Callable[..., object], *args: object) -> float:
            """The waiter's reserve blocks; ``free(*args)``; how long until it got a job
            (the job is then deleted: the slot is free again)."""
            waiter.write(b"reserve-with-timeout 60\r\n")
            ready = select.select([waiter], [], [], 0.3)[0]
            assert not ready, waiter.readline()  # it waits: the cap is full
            start = time.monotonic()
            free(*args)
            job_id = reserved(waiter)
            took = time.monotonic() - start
            waiter.write(b"delete %d\r\n" % job_id)
            assert waiter.readline() == b"DELETED\r\n"
            return took

        try:
            waiter = client()
            for path, free in SERVER_FREES.items():
                holder = client()
                holder.write(b"reserve-with-timeout 0\r\n")
                job_id = reserved(holder)
                waits[path] = blocked_then_woken(free, holder, job_id, q)
                holder.close()
            holder = client()  # reserve-job bypasses the cap, and counts against it
            ready = q.peek_ready("capped")
            assert ready is not None
            holder.write(b"reserve-job %d\r\n" % ready.id)
            job_id = reserved(holder)
            waits["reserve-job, then delete"] = blocked_then_woken(
                holder.write, b"delete %d\r\n" % job_id)
            holder.close()
            job = q.reserve("capped", timeout=0, detach=True)  # held by another process
            assert job is not None
            waits["another process's delete"] = blocked_then_woken(job.delete)
            waiter.close()
        finally:
            server.stop()
    print("\nwoken after: " + ", ".join(f"{path} {s * 1000:.0f} ms" for path, s in waits.items()))
    late = {path: round(s, 1) for path, s in waits.items() if s >= soon(0.5)}
    assert not late, f"woken late (s), by a look of its own, not by the freed slot: {late}"
