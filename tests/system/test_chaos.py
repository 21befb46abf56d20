"""Chaos: producers and workers on one database, killed with SIGKILL at random moments.

It runs on both backends: a SQLite file, and a PostgreSQL database (where a
killed holder's session lock is what gives its jobs back).

For SQLQ_CHAOS_SECONDS (10 in ``make test``, 60 in ``make test-chaos``) the test
runs rounds of a few seconds. In a round, three producer and four worker
processes (tests/chaos_agent.py, each with a random durability; one worker is
``sqlq work``'s Worker claiming batches, ``--prefetch`` 2 to 32 or adaptive, and a
fourth its ``--concurrency`` event-loop worker, prefetching likewise) share one
file; every 50-400 ms one of them, chosen at random, is killed with SIGKILL and
a fresh one takes its place; at the end of the round all of them are killed.
On a file, half the agents open it through a symlink to it, and now and then
the driver deletes the ``<db>-sqlq`` sidecar (``rm -rf``) under them all.
After every round tests/chaos_checker.py reads the file and all the logs so
far and proves: no acknowledged job lost, no job completed twice (only a live
lease can delete), no job reserved again while its holder lived (the sidecar's
deletion, or a second name for the file, once caused that), and on a file
``PRAGMA integrity_check`` ok. After the last round a clean
worker drains the file, which shows that what was left (reserved by dead
processes, delayed, buried) can still be worked.

One summary line is printed, even without ``-s``.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

import sqlq
from sqlq.durations import now_ms
from tests import chaos_checker
from tests.chaos_agent import TUBES
from tests.timing import PATIENCE

AGENT = Path(__file__).parents[1] / "chaos_agent.py"
ROOT = AGENT.parent.parent
PRODUCERS = 3
#: The worker agents of a round: library loops, and sqlq work's Worker and its event-loop
#: worker (--concurrency), prefetching.
WORKERS = ["worker", "worker", "pworker", "aworker"]
ROUND_SECONDS = 2.5
#: The chance that a step of the round deletes the sidecar directory instead of killing.
SIDECAR_REMOVAL = 0.1
#: The chance that a kill picks any agent, even one that has not started work yet.
STARTUP_KILLS = 0.2


class Fleet:
    """The agent processes of one round, and the kills done to them."""

    def __init__(self, db: str, log_dir: Path, rng: random.Random, round_no: int) -> None:
        self.db, self.log_dir, self.rng, self.round_no = db, log_dir, rng, round_no
        # A file is also opened through a symlink, and its sidecar deleted now and then.
        self.file = "://" not in db
        self.link = str(symlink_to(Path(db))) if self.file else db
        self.procs: list[tuple[str, Path, subprocess.Popen[bytes]]] = []
        self.started = 0
        self.kills = 0
        self.sidecar_removals = 0

    def start(self, role: str) -> None:
        self.started += 1
        log = self.log_dir / f"r{self.round_no:03d}-{self.started:04d}-{role}.log"
        path = self.rng.choice([self.db, self.link])
        proc = subprocess.Popen(
            [sys.executable, str(AGENT), role, str(path), str(log),
             str(self.rng.getrandbits(32))],
            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        self.procs.append((role, log, proc))

    def step(self) -> None:
        """Kill one agent and start another, or now and then delete the sidecar."""
        if self.file and self.rng.random() < SIDECAR_REMOVAL:
            shutil.rmtree(f"{self.db}-sqlq", ignore_errors=True)
            self.sidecar_removals += 1
            return
        # Kill mostly agents at work (their log has a line), now and then any agent, even
        # one still starting; but only once the round has work going: on a busy machine
        # an interpreter can take seconds to start, and killing agents before any of them
        # got going would leave a round (or a whole run) with nothing done.
        busy = self.busy()
        if not busy:
            return
        pool = busy if self.rng.random() >= STARTUP_KILLS else range(len(self.procs))
        index = self.rng.choice(list(pool))
        role, log, proc = self.procs.pop(index)
        self._kill(log, proc)
        self.start(role)

    def busy(self) -> list[int]:
        """The indexes of the agents that have logged something: they are at work."""
        return [i for i, (_, log, _) in enumerate(self.procs)
                if log.exists() and log.stat().st_size > 0]

    def kill_all(self) -> None:
        for _, log, proc in self.procs:
            self._kill(log, proc)
        self.procs.clear()

    def _kill(self, log: Path, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            # Written before the signal: the agent was surely alive until this time.
            with open(self.log_dir / "kills.txt", "a", encoding="utf-8") as kills:
                kills.write(f"{log.name} {time.time_ns() // 1_000_000}\n")
            proc.send_signal(signal.SIGKILL)
            self.kills += 1
        proc.wait()
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        # An agent that died by itself (a traceback) is a failure: only SIGKILL may stop one.
        assert proc.returncode == -signal.SIGKILL, f"agent exited {proc.returncode}: {err}"


def symlink_to(db: Path) -> Path:
    """A second name for the file, in another directory (SQLite resolves it)."""
    link = db.parent / "via-link" / db.name
    if not link.is_symlink():
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(db)
    return link


def drain(db: str, log_dir: Path, deadline: float) -> None:
    """Finish every job left in the file, logging like a worker (the checker counts it).

    Every agent is dead by now. Those whose owner file went with a deleted sidecar left
    their reservations to the TTR (up to 30 s): the drain's clock runs that far ahead.
    """
    ahead = 31_000
    with sqlq.Queue(db, durability="normal", clock=lambda: now_ms() + ahead) as q, \
            open(log_dir / "zz-drain.log", "w", encoding="utf-8") as log:
        while time.monotonic() < deadline:
            job = q.reserve(TUBES, timeout=0.5)
            if job is None:
                # Only now kick the buried (kicking before every reserve made the
                # drain too slow for what a minute of fast producers leaves behind).
                for tube in TUBES:
                    q.kick(100_000, tube)
                stats = q.stats()
                left = sum(stats[f"current-jobs-{s}"]
                           for s in ("ready", "reserved", "delayed", "buried"))
                if left == 0:
                    return
                continue
            tag = job.body.split(b" ", 1)[0].decode()
            chaos_agent_line(log, "R", job.id, job.lease, tag)
            chaos_agent_line(log, "D", job.id, job.lease)
            job.delete()
            chaos_agent_line(log, "C", job.id, job.lease)


def chaos_agent_line(log: object, *fields: object) -> None:
    log.write(" ".join(map(str, fields)) + "\n")  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_chaos(db_url: str, tmp_path: Path, summary_line: Callable[[str], None]) -> None:
    seconds = float(os.environ.get("SQLQ_CHAOS_SECONDS", "10"))
    seed = int(os.environ.get("SQLQ_CHAOS_SEED", str(random.randrange(2**32))))
    rng = random.Random(seed)
    db = db_url
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    sqlq.Queue(db).close()  # created once, before the first process races for it

    summary = chaos_checker.Summary()
    started = time.monotonic()
    end = started + seconds
    round_no = 0
    while True:
        round_no += 1
        fleet = Fleet(db, log_dir, rng, round_no)
        for _ in range(PRODUCERS):
            fleet.start("producer")
        for role in WORKERS:
            fleet.start(role)
        round_start = time.monotonic()
        round_end = min(round_start + ROUND_SECONDS, end)
        try:
            # A round runs its time, and longer while none of its agents is at work yet
            # (a loaded machine starts interpreters slowly), up to PATIENCE.
            while (now := time.monotonic()) < round_end or (
                    not fleet.busy() and now < round_start + PATIENCE):
                time.sleep(rng.uniform(0.05, 0.4))
                fleet.step()
        finally:
            fleet.kill_all()
        summary.kills += fleet.kills
        summary.sidecar_removals += fleet.sidecar_removals
        summary.add(chaos_checker.check(db, log_dir))
        if time.monotonic() >= end - 0.5:
            break

    drain(db, log_dir, time.monotonic() + 120)
    final = chaos_checker.check(db, log_dir)
    summary.add(final)
    summary.rounds -= 1  # the drain's look is not a round of kills
    backend = "postgres" if "://" in db else "sqlite"
    line = summary.line(time.monotonic() - started) + f" seed={seed} ({backend})"
    summary_line(line)
    assert summary.ok, "\n".join([line, *summary.problems[:20]])
    assert final.in_file == 0, f"the drain left {final.in_file} jobs in the file"
    assert summary.acknowledged > 0 and summary.completed > 0, line


def test_checker_finds_lost_jobs_duplicates_and_bad_leases(tmp_path: Path) -> None:
    """The checker is only worth its zeros if it reports what it is meant to catch."""
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        kept = q.put(b"p1-0 kept", tube="chaos-a")
        done = q.put(b"p1-1 done", tube="chaos-a")
        twice = q.put(b"p1-2 twice", tube="chaos-a")
        dangling = q.put(b"p1-3 dangling", tube="chaos-a")
        lost = q.put(b"p1-4 lost", tube="chaos-a")
        for job_id in (done, twice, dangling, lost):
            q.delete(job_id)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "p.log").write_text("".join(f"P {j} p1-{i}\n" for i, j in
                                        enumerate((kept, done, twice, dangling, lost)))
                                + "P 999 p1-torn")  # torn: not acknowledged
    (logs / "w1.log").write_text(f"R {done} 11 p1-1\nD {done} 11\nC {done} 11\n"
                                 f"R {twice} 12 p1-2\nD {twice} 12\nC {twice} 12\n")
    (logs / "w2.log").write_text(f"R {twice} 13 p1-2\nD {twice} 13\nC {twice} 99\n"
                                 f"R {dangling} 14 p1-3\nD {dangling} 14\n" + "C 4")  # torn
    verdict = chaos_checker.check(db, logs)
    assert verdict.integrity_ok
    assert verdict.acknowledged == 5 and verdict.in_file == 1
    assert verdict.lost == [lost]
    assert verdict.duplicates == [twice]
    assert any("not the one it reserved" in p for p in verdict.problems), verdict.problems


def test_checker_finds_a_job_taken_from_a_live_holder(tmp_path: Path) -> None:
    """Reserved again before the holder's deadline, while it lived and held on: stolen.
    After its kill, after its deadline, or after it released the job: fine."""
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        ids = q.put_many([b"p1-%d" % i for i in range(4)], tube="chaos-a")
    stolen, after_kill, after_deadline, released = ids
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text(
        f"R {stolen} 1 p1-0 5000 1000\nR {after_deadline} 2 p1-2 5000 1000\n"
        f"R {released} 3 p1-3 5000 1000\nX {released} 3\n")
    (logs / "k.log").write_text(f"R {after_kill} 4 p1-1 5000 1000\n")
    (logs / "b.log").write_text(
        f"R {stolen} 5 p1-0 9000 2000\nR {after_kill} 6 p1-1 9000 2500\n"
        f"R {after_deadline} 7 p1-2 9000 5001\nR {released} 8 p1-3 9000 2000\n")
    (logs / "kills.txt").write_text("k.log 2400\n")
    verdict = chaos_checker.check(db, logs)
    assert verdict.stolen == [stolen]
    summary = chaos_checker.Summary()
    summary.add(verdict)
    assert not summary.ok and "stolen-from-live-holders=1" in summary.line(1)


def test_checker_reads_a_corrupt_file_as_an_integrity_failure(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        q.put_many([b"p1-%d " % i + b"x" * 3000 for i in range(200)], tube="chaos-a")
    conn = apsw.Connection(str(db))
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlq_jobs_ready'"
                        ).fetchone()[0]
    conn.close()
    data = bytearray(db.read_bytes())
    # Scribble over the cells of an index's root page: the b-tree check must notice.
    start = (root - 1) * page + 8
    data[start:start + 64] = bytes(range(64))
    db.write_bytes(bytes(data))
    logs = tmp_path / "logs"
    logs.mkdir()
    verdict = chaos_checker.check(db, logs)
    assert not verdict.integrity_ok
    assert verdict.problems[0].startswith("integrity_check: "), verdict.problems
