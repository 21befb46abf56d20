"""Limits under real concurrency: 8 processes hammering a tube capped at 2, a rate over
10 seconds, and the beanstalkd server obeying a cap (sqlq/limits.py; the rules one by
one are in tests/unit/test_limits.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

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
    jobs = 2000
    with sqlq.Queue(db_url) as q:
        procs, outs = hammer(q, db_url, tmp_path, jobs)
        sampled = 0
        samples = 0
        # The database's own view, sampled meanwhile: live reservations of the tube.
        while any(p.poll() is None for p in procs):
            sampled = max(sampled, q.stats_tube("capped")["current-jobs-reserved"])
            samples += 1
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
        killed = False
        while any(p.poll() is None for p in procs):
            stats = q.stats_tube("capped")
            sampled = max(sampled, stats["current-jobs-reserved"])
            if not killed and stats["cmd-delete"] >= jobs // 4:
                for p in procs[:3]:
                    p.send_signal(signal.SIGKILL)
                killed = True
        for p in procs[3:]:
            _, err = p.communicate(timeout=PATIENCE)
            assert p.returncode == 0, err
        for p in procs[:3]:
            p.communicate(timeout=PATIENCE)
            assert p.returncode == -signal.SIGKILL  # killed, not finished first
        stats = q.stats_tube("capped")
    print(f"\nmost reserved at once, sampled: {sampled}; after the kills: {stats}")
    assert killed and sampled <= 2
    assert stats["current-jobs-ready"] == stats["current-jobs-reserved"] == 0
    assert stats["cmd-delete"] == jobs  # the dead holders' jobs came back and were done


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
    # Jobs were always there: the rate, not the workers, set the pace; a burst's worth of
    # tokens may go unused when a loaded machine stalls every claimer past a full bucket.
    assert in_window >= n * 10 - n


@pytest.mark.slow
def test_the_server_obeys_a_cap_and_a_rate(db_url: str, request: pytest.FixtureRequest) -> None:
    if "://" in db_url:
        # Issue 25, open: on PostgreSQL a delete sends no NOTIFY, so a reserve waiting on
        # a full tube learns of the freed slot at its liveness poll (about 5 s), not at
        # once; this run sometimes meets it. Remove the mark with the fix.
        request.applymarker(pytest.mark.xfail(
            reason="issue 25: a freed slot on PostgreSQL wakes waiters at their poll only",
            strict=False))
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
