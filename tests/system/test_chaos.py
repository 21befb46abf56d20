"""Chaos: producers and workers on one database, killed with SIGKILL at random moments.

It runs on both backends: a SQLite file, and a PostgreSQL database (where a
killed holder's session lock, and its process seen gone, give its jobs back).

For SQLQ_CHAOS_SECONDS (10 in ``make test``, 60 in ``make test-chaos``) the test
runs rounds of a few seconds. In a round, three producer and four worker
processes (tests/chaos_agent.py, each with a random durability; one worker is
``sqlq work``'s Worker claiming batches, ``--prefetch`` 2 to 32 or adaptive, and a
fourth its ``--concurrency`` event-loop worker, prefetching likewise) and a canceller
(``q.cancel`` of random recent jobs: ready, reserved by a live or dead worker, waiting,
or gone already) share one file; every 50-400 ms one of them, chosen at random, is
killed with SIGKILL and a fresh one takes its place; at the end of the round all of them are killed.
On a file, half the agents open it through a symlink to it, and now and then
the driver deletes the ``<db>-sqlq`` sidecar (``rm -rf``) under them all.
On PostgreSQL the driver also disturbs the server under load, as production does:
``pg_terminate_backend`` of one live agent's sessions (all of them, or only the
owner session that keeps its reservations), ``pg_ctl restart`` in fast and immediate
modes a few times a run, and the whole run on a database whose
``idle_session_timeout`` is 1 s (PostgreSQL 14 and later), with slow jobs that
work longer than that without a database call. None of it may take a job from a
live holder: its process lives, so it keeps its jobs. The agents behave as careful
users: a put or a verb cut off by the lost connection is not logged as done.
Some puts wait for earlier jobs (``after=``, issue 24): fan-ins (a child after a
batch of parents that different workers finish concurrently, or after a few recent
jobs) and chains (each child after the producer's previous one).
After every round tests/chaos_checker.py reads the file and all the logs so
far and proves: no acknowledged job lost, no job completed twice (only a live
lease can delete), no job reserved again while its holder lived (the sidecar's
deletion, or a second name for the file, once caused that), and on a file
``PRAGMA integrity_check`` ok; for the children, none reserved before the delete of
one of its parents began (released early), none released twice (the file's counters
add up to its edges; a child completed twice), none stranded (waiting with no parent
left); for cancels, none of the jobs whose cancel was acknowledged claimed or completed
after it, or left in the file, their holders told (JobCancelled, or JobLost for a lease
that ran out first), and the loss rule holding with exactly those jobs left out. One
of the tubes every worker watches (:data:`LIMITED`, half of the puts) has a concurrency
cap of 2 or 3 for the whole run (issue 25): never more than that many of its jobs held
under live leases at once, from the workers' logs (the checker's docstring says how a
hold's end is pinned). After the last round a clean
worker drains the file, which shows that what was left (reserved by dead
processes, delayed, buried) can still be worked.

One summary line is printed, even without ``-s``.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

import sqlq
from sqlq.core.durations import now_ms
from tests import chaos_checker, forkserver
from tests.chaos_agent import PARENT, TUBES
from tests.pgserver import PgServer
from tests.timing import PATIENCE

AGENT = Path(__file__).parents[1] / "chaos_agent.py"
ROOT = AGENT.parent.parent
PRODUCERS = 3
#: The worker agents of a round: library loops, and sqlq work's Worker and its event-loop
#: worker (--concurrency), prefetching.
WORKERS = ["worker", "worker", "pworker", "aworker"]
#: The agent that cancels random recent jobs while the workers run (issue 25).
CANCELLERS = 1
ROUND_SECONDS = 2.5
#: The chance that a step of the round deletes the sidecar directory instead of killing.
SIDECAR_REMOVAL = 0.1
#: The chance that a kill picks any agent, even one that has not started work yet.
STARTUP_KILLS = 0.2
#: PostgreSQL: the chance that a step ends a live agent's sessions instead of killing it,
#: and how many server restarts a run makes per 10 s (at least one of each mode).
TERMINATION = 0.2
RESTARTS_PER_10S = 1.5
#: The tube capped for the whole run (issue 25): one that gets half of the puts.
LIMITED = TUBES[0]


class PgDisturber:
    """What the driver does to the PostgreSQL server during a run: restarts at planned
    times, and pg_terminate_backend of a live agent's sessions; it writes each restart
    to ``restarts.txt`` (mode, start ms, end ms) for the checker."""

    def __init__(self, pg: PgServer, db: str, log_dir: Path, rng: random.Random,
                 start: float, seconds: float, bouncer: Any = None) -> None:
        self.pg, self.database, self.log_dir, self.rng = pg, db.rsplit("/", 1)[1], log_dir, rng
        self.bouncer = bouncer
        count = max(2, round(seconds / 10 * RESTARTS_PER_10S))
        modes = [("fast", "immediate")[i % 2] for i in range(count)]
        if bouncer is not None:  # as many restarts of the pooler itself
            modes += ["pgbouncer"] * count
            count = len(modes)
        rng.shuffle(modes)
        # Spread over the run, away from its very end (the drain follows).
        self.plan = sorted(zip([start + seconds * (i + rng.uniform(0.2, 0.8)) / count
                                for i in range(count)], modes, strict=True))
        self.restarts: dict[str, int] = {"fast": 0, "immediate": 0, "pgbouncer": 0}
        self.terminations: dict[str, int] = {"owner": 0, "all": 0, "pooled": 0}
        self.sessions_terminated = 0
        if pg.major() >= 14:
            # sqlq's sessions must outlive it: each sets its own idle_session_timeout to 0.
            pg.psql(f"ALTER DATABASE {self.database} SET idle_session_timeout = '1s'")

    def step(self, fleet: Fleet) -> bool:
        """Disturb the server, or not (then the caller kills); whether it did."""
        # A restart waits for agents at work: it is meant to cut work in flight.
        if self.plan and time.monotonic() >= self.plan[0][0] and fleet.busy():
            _, mode = self.plan.pop(0)
            self.restarts[mode] += 1
            if mode == "pgbouncer":  # its clients' connections cut; no commit undone
                self.bouncer.stop()
                self.bouncer.start()
                return True
            started = time.time_ns() // 1_000_000
            self.pg.restart(mode)
            with open(self.log_dir / "restarts.txt", "a", encoding="utf-8") as f:
                f.write(f"{mode} {started} {time.time_ns() // 1_000_000}\n")
            return True
        if self.rng.random() >= TERMINATION:
            return False
        busy = fleet.busy()
        if not busy:
            return False
        if self.bouncer is not None:  # the pool's server sessions belong to no one agent
            which = "pooled"
            sessions = pooled_sessions(self.pg, self.database)
            pids = self.rng.sample(sessions, min(len(sessions), 2))
        else:
            which = self.rng.choice(["owner", "all"])
            _, _, proc = fleet.procs[self.rng.choice(busy)]
            sessions = agent_sessions(self.pg, self.database, proc.pid)
            pids = [pid for pid, owner in sessions if owner or which == "all"]
        if pids:
            self.sessions_terminated += sum(self.pg.terminate(pid) for pid in pids)
            self.terminations[which] += 1
        return True


def agent_sessions(pg: PgServer, database: str, pid: int) -> list[tuple[int, bool]]:
    """(backend pid, whether it is the owner session) of each session process ``pid`` has
    with the database, matched by the client's TCP port (sqlq names every session
    "sqlq", whatever the URL says): the owner session is the one holding an advisory
    lock (its token's)."""
    ports = client_ports(pid)
    out = pg.psql(
        "SELECT a.pid, a.client_port, EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid"
        " AND l.locktype = 'advisory' AND l.granted) FROM pg_stat_activity a"
        " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()", database)
    sessions = []
    for line in out.splitlines():
        backend, port, owner = line.split("|")
        if port and int(port) in ports:
            sessions.append((int(backend), owner == "t"))
    return sessions


def pooled_sessions(pg: PgServer, database: str) -> list[int]:
    """The backend pids of the pooler's server sessions with the database."""
    out = pg.psql("SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                  " AND pid <> pg_backend_pid()", database)
    return [int(line) for line in out.splitlines() if line.strip()]


def client_ports(pid: int) -> set[int]:
    """The local TCP ports of process ``pid``'s sockets (from /proc)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class Fleet:
    """The agent processes of one round, and the kills done to them."""

    def __init__(self, db: str, log_dir: Path, rng: random.Random, round_no: int,
                 disturber: PgDisturber | None = None) -> None:
        self.db, self.log_dir, self.rng, self.round_no = db, log_dir, rng, round_no
        self.disturber = disturber
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
        durability = self.rng.choice(["full", "normal"])
        with open(self.log_dir / "agents.txt", "a", encoding="utf-8") as agents:
            agents.write(f"{log.name} {role} {durability}\n")
        proc = forkserver.Popen(
            [sys.executable, str(AGENT), role, str(path), str(log),
             str(self.rng.getrandbits(32)), durability],
            env=dict(os.environ, PYTHONPATH=str(ROOT), **{PARENT: str(os.getpid())}),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append((role, log, proc))

    def step(self) -> None:
        """Kill one agent and start another, or now and then delete the sidecar (a file)
        or disturb the server (PostgreSQL)."""
        if self.disturber is not None and self.disturber.step(self):
            return
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
        self._kill(log, proc, "step")
        self.start(role)

    def busy(self) -> list[int]:
        """The indexes of the agents that have logged something: they are at work."""
        return [i for i, (_, log, _) in enumerate(self.procs)
                if log.exists() and log.stat().st_size > 0]

    def kill_all(self) -> None:
        for _, log, proc in self.procs:
            self._kill(log, proc, "end")
        self.procs.clear()

    def _kill(self, log: Path, proc: subprocess.Popen[bytes], why: str) -> None:
        if proc.poll() is None:
            # Written before the signal: the agent was surely alive until this time.
            with open(self.log_dir / "kills.txt", "a", encoding="utf-8") as kills:
                kills.write(f"{log.name} {time.time_ns() // 1_000_000} {why}\n")
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
            # In batches: a minute of fast producers can leave tens of thousands of jobs.
            jobs = q.reserve_many(200, TUBES, timeout=0.5)
            if not jobs:
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
            at = now_ms()
            for job in jobs:
                tag = job.body.split(b" ", 1)[0].decode()
                chaos_agent_line(log, "R", job.id, job.lease, tag, job.reserved_until, at)
                chaos_agent_line(log, "D", job.id, job.lease, now_ms())
            q.delete_many(jobs)
            for job in jobs:
                chaos_agent_line(log, "C", job.id, job.lease)


def chaos_agent_line(log: object, *fields: object) -> None:
    log.write(" ".join(map(str, fields)) + "\n")  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.timeout(0)
@pytest.mark.pg_fresh  # ALTER DATABASE … SET idle_session_timeout
def test_chaos(db_url: str, tmp_path: Path, summary_line: Callable[[str], None],
               request: pytest.FixtureRequest) -> None:
    seconds = float(os.environ.get("SQLQ_CHAOS_SECONDS", "10"))
    seed = int(os.environ.get("SQLQ_CHAOS_SEED", str(random.randrange(2**32))))
    rng = random.Random(seed)
    db = db_url
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    with sqlq.Queue(db) as q:  # created once, before the first process races for it
        cap = rng.choice([2, 3])
        q.limit(LIMITED, concurrency=cap)
    (log_dir / "limits.txt").write_text(f"{LIMITED} {cap}\n")

    summary = chaos_checker.Summary()
    started = time.monotonic()
    end = started + seconds
    disturber = None
    #: What the checker reads: the database itself, not through a pooler the driver restarts.
    oracle = db
    if "://" in db:
        pool = os.environ.get("SQLQ_TEST_PG_POOL")  # db_url goes through PgBouncer
        oracle = str(request.getfixturevalue("pg_url"))
        disturber = PgDisturber(request.getfixturevalue("pg_server"), db, log_dir, rng,
                                started, seconds,
                                request.getfixturevalue("pgbouncer")(pool) if pool else None)
    round_no = 0
    while True:
        round_no += 1
        fleet = Fleet(db, log_dir, rng, round_no, disturber)
        for _ in range(PRODUCERS):
            fleet.start("producer")
        for role in WORKERS:
            fleet.start(role)
        for _ in range(CANCELLERS):
            fleet.start("canceller")
        round_start = time.monotonic()
        at_work: float | None = None
        try:
            # A round gives its agents ROUND_SECONDS at work, counted from the first
            # record of any of them: a loaded machine takes seconds to start seven
            # interpreters, and a round timed from its start was little but start-ups.
            # Without any agent at work it ends after PATIENCE.
            while True:
                now = time.monotonic()
                if at_work is None and fleet.busy():
                    at_work = now
                if now >= (round_start + PATIENCE if at_work is None
                           else at_work + ROUND_SECONDS):
                    break
                time.sleep(rng.uniform(0.05, 0.4))
                fleet.step()
        finally:
            fleet.kill_all()
        summary.kills += fleet.kills
        summary.sidecar_removals += fleet.sidecar_removals
        summary.add(chaos_checker.check(oracle, log_dir))
        if time.monotonic() >= end - 0.5:
            break

    with sqlq.Queue(db) as q:  # the drain is not a test of the cap: no batch of 2 or 3
        q.limit(LIMITED, concurrency=None)
    drain(db, log_dir, time.monotonic() + 120)
    final = chaos_checker.check(oracle, log_dir)
    summary.add(final)
    summary.rounds -= 1  # the drain's look is not a round of kills
    if disturber is not None:
        summary.restarts.update(disturber.restarts)
        summary.terminations.update(disturber.terminations)
        summary.sessions_terminated = disturber.sessions_terminated
    backend = "postgres" if "://" in db else "sqlite"
    if disturber is not None and disturber.bouncer is not None:
        backend += f" through PgBouncer, {disturber.bouncer.mode} mode"
    line = summary.line(time.monotonic() - started) + f" seed={seed} ({backend})"
    summary_line(line)
    assert summary.ok, "\n".join([line, *summary.problems[:20]])
    assert final.in_file == 0, f"the drain left {final.in_file} jobs in the file"
    assert summary.acknowledged > 0 and summary.completed > 0, line
    assert summary.limits.claims > 0, line


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


def test_checker_counts_a_batch_killed_while_logging_its_deletes_as_uncertain(
        tmp_path: Path) -> None:
    """A prefetching worker writes D for each job of a batch, commits, then C for each:
    killed between two C lines, the batch's jobs without C may be gone (committed),
    not lost. One refused (F) among them is not excused."""
    db, ids, logs = _four_jobs(tmp_path)
    with sqlq.Queue(str(db), durability="normal") as q:
        for job_id in ids:
            q.delete(job_id)
    first, second, refused, never = ids
    (logs / "p.log").write_text("".join(f"P {j} p1-{i}\n" for i, j in enumerate(ids)))
    (logs / "w.log").write_text(
        "".join(f"R {j} {j} p1-{i}\n" for i, j in enumerate(ids[:3]))
        + f"D {first} {first}\nD {second} {second}\nD {refused} {refused}\n"
        + f"C {first} {first}\nF {refused} {refused}\n")
    verdict = chaos_checker.check(db, logs)
    assert verdict.lost == sorted([refused, never]), verdict


def _four_jobs(tmp_path: Path) -> tuple[Path, list[int], Path]:
    """A file with four jobs put by producer p1 (bodies p1-0 .. p1-3), and a log folder."""
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        ids = q.put_many([b"p1-%d" % i for i in range(4)], tube="chaos-a")
    logs = tmp_path / "logs"
    logs.mkdir()
    return db, ids, logs


def test_checker_finds_a_job_taken_from_a_live_holder(tmp_path: Path) -> None:
    """Reserved again before the holder's deadline, while it lived and held on: stolen.
    After its kill, after its deadline, or after it released the job: fine."""
    db, ids, logs = _four_jobs(tmp_path)
    stolen, after_kill, after_deadline, released = ids
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


def test_checker_excuses_only_what_an_immediate_restart_may_undo(tmp_path: Path) -> None:
    """A normal-mode put acknowledged just before an immediate restart and a claim made
    then may be undone; the same put long before, or any claim across a fast restart,
    may not. A verb cut off by a lost connection (U) may have committed."""
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        ids = q.put_many([b"p1-%d" % i for i in range(6)], tube="chaos-a")
    crashed_put, old_put, claimed, fast_claimed, cut_delete, cut_release = ids
    with sqlq.Queue(str(db), durability="normal") as q:
        for job_id in (crashed_put, old_put, cut_delete):
            q.delete(job_id)  # gone from the file
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "agents.txt").write_text("p.log producer normal\nw1.log worker full\n"
                                     "w2.log worker full\n")
    (logs / "restarts.txt").write_text("immediate 10000 10600\nfast 20000 20600\n")
    (logs / "p.log").write_text(
        f"P {crashed_put} p1-0 9500\nP {old_put} p1-1 5000\nP {claimed} p1-2 100\n"
        f"P {fast_claimed} p1-3 100\nP {cut_delete} p1-4 100\nP {cut_release} p1-5 100\n")
    (logs / "w1.log").write_text(
        f"R {claimed} 1 p1-2 40000 9700\nR {fast_claimed} 2 p1-3 40000 19700\n"
        f"R {cut_delete} 3 p1-4 40000 30000\nD {cut_delete} 3\nU {cut_delete} 3 delete\n"
        f"R {cut_release} 4 p1-5 40000 30000\nU {cut_release} 4 release\n")
    (logs / "w2.log").write_text(
        f"R {claimed} 5 p1-2 90000 10800\nR {fast_claimed} 6 p1-3 90000 20800\n"
        f"R {cut_release} 7 p1-5 90000 30500\n")
    verdict = chaos_checker.check(db, logs)
    assert verdict.lost == [old_put], verdict
    assert verdict.stolen == [fast_claimed], verdict
    assert verdict.undone_by_crash == {"puts": 1, "claims": 1, "deletes": 0}, verdict


def test_checker_keeps_the_later_put_of_an_id_a_crash_issued_twice(tmp_path: Path) -> None:
    """An immediate restart undid a normal put, and the id went out again to a put
    acknowledged after the server came back but before the restart's end: both puts are
    in the crash's window, the later is the job (ci: "job 859 in the file has body
    p13600-269, put as p13600-267"). Its reservation is read before the producer's log."""
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        job_id = q.put(b"p1-1 again", tube="chaos-a")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "agents.txt").write_text("b-p.log producer normal\na-w.log worker full\n")
    (logs / "restarts.txt").write_text("immediate 10000 10600\n")
    (logs / "b-p.log").write_text(f"P {job_id} p1-0 10050\nP {job_id} p1-1 10400\n")
    (logs / "a-w.log").write_text(f"R {job_id} 1 p1-0 90000 10060\n"  # before the crash
                                  f"R {job_id} 2 p1-1 90000 10500\n")
    verdict = chaos_checker.check(db, logs)
    assert verdict.problems == [] and verdict.lost == [], verdict
    assert verdict.undone_by_crash["ids"] == 1, verdict
    (logs / "a-w.log").write_text(f"R {job_id} 3 p1-7 90000 10500\n")  # no such put
    assert any("has body p1-7" in p for p in chaos_checker.check(db, logs).problems)


def test_checker_measures_how_soon_a_killed_holders_jobs_run_elsewhere(tmp_path: Path) -> None:
    db, ids, logs = _four_jobs(tmp_path)
    held, expired, finished, late = ids
    (logs / "k.log").write_text(
        f"R {held} 1 p1-0 5000 900\nR {expired} 2 p1-1 950 900\n"
        f"R {finished} 3 p1-2 5000 900\nD {finished} 3\nC {finished} 3 950\n"
        f"R {late} 4 p1-3 5000 900\n")
    (logs / "o.log").write_text(f"R {held} 5 p1-0 9000 1250\nR {expired} 6 p1-1 9000 1100\n"
                                f"R {late} 7 p1-3 9000 3500\n")
    (logs / "kills.txt").write_text("k.log 1000 step\no.log 3000 end\n")
    verdict = chaos_checker.check(db, logs)
    assert verdict.recoveries == [250] and verdict.left == 1, verdict
    summary = chaos_checker.Summary()
    summary.add(verdict)
    assert "holder-recovery p50=0.25s max=0.25s n=1 left=1" in summary.line(1)


def test_checker_finds_children_released_early_twice_or_stranded(tmp_path: Path) -> None:
    """A child reserved before a parent's delete began, a child waiting with its parent
    gone (its release lost: the parent deleted behind the store's back), and a counter
    that does not add up are each reported; a child reserved after its parents' deletes
    began is fine."""
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        parent, other, lost_parent = q.put_many([b"p1-0", b"p1-2", b"p1-4"], tube="chaos-a")
        fine = q.put(b"p1-1", tube="chaos-a", after=[parent, other])
        early = q.put(b"p1-3", tube="chaos-a", after=other)
        stranded = q.put(b"p1-5", tube="chaos-a", after=lost_parent)
        q.delete(parent)
        q.delete(other)
    conn = apsw.Connection(str(db))
    conn.execute("DELETE FROM sqlq_jobs WHERE id = ?", (lost_parent,))  # no release
    conn.close()
    logs = tmp_path / "logs"
    logs.mkdir()
    records = {
        "p.log": [f"P {parent} p1-0 100", f"P {other} p1-2 100", f"P {lost_parent} p1-4 100",
                  f"P {fine} p1-1 110 {parent},{other}", f"P {early} p1-3 110 {other}",
                  f"P {stranded} p1-5 110 {lost_parent}"],
        "w1.log": [f"R {parent} 1 p1-0 9000 1000", f"D {parent} 1 1100", f"C {parent} 1 1150",
                   f"R {early} 2 p1-3 9000 1300"],
        "w2.log": [f"R {other} 3 p1-2 9000 1200", f"D {other} 3 1400", f"C {other} 3 1450",
                   f"R {fine} 4 p1-1 9000 1500", f"D {fine} 4 1550", f"C {fine} 4 1560"],
        # the fine child completed a second time
        "w3.log": [f"R {fine} 5 p1-1 9000 1600", f"D {fine} 5 1650", f"C {fine} 5 1700"],
    }
    for name, lines in records.items():
        (logs / name).write_text("".join(line + "\n" for line in lines))
    verdict = chaos_checker.check(db, logs)
    deps = verdict.deps
    assert (deps.children, deps.fan_in, deps.reserved) == (3, 1, 2), deps
    assert deps.early == [early], deps
    assert deps.stranded == [stranded], deps
    assert deps.twice == [fine], deps
    assert any(f"edge {lost_parent}->{stranded}" in b for b in deps.broken_links), deps
    summary = chaos_checker.Summary()
    summary.add(verdict)
    assert not summary.ok
    assert "released-early=1 released-twice=1 stranded=1" in summary.line(1), summary.line(1)


def test_checker_finds_cancelled_jobs_handed_out_completed_or_left(tmp_path: Path) -> None:
    """A job whose cancel was acknowledged and then claimed again, completed, or left in
    the file is reported; a claim made before the cancel, a cancel that found no job (N)
    and one cut off (Y) are not; a cancelled job gone is not lost, but one whose cancel
    found nothing is; JobCancelled for a job never cancelled, and JobLost told to the
    library worker holding a cancelled job's live lease, are reported."""
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        ids = q.put_many([b"p1-%d" % i for i in range(8)], tube="chaos-a")
        for job_id in ids[:2] + ids[3:]:
            q.delete(job_id)
    fine, claimed, left, done, not_found, cut, uncalled, told = ids
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "agents.txt").write_text("w.log worker full\nc.log canceller full\n")
    records = {
        "p.log": [f"P {j} p1-{i} 100" for i, j in enumerate(ids)],
        # fine: claimed at 900 (until 1900 - ttr 1000), cancelled at 1000; its holder told
        "w.log": [f"R {fine} 1 p1-0 1900 905 1000", f"F {fine} 1 cancelled",
                  f"R {claimed} 2 p1-1 3100 2105 1000",  # claimed at 2100, after the cancel
                  f"R {done} 3 p1-3 1900 905 1000", f"D {done} 3 1500", f"C {done} 3 1600",
                  f"R {uncalled} 4 p1-6 1900 905 1000", f"F {uncalled} 4 cancelled",
                  # its lease live at the cancel, yet the worker's own verb got JobLost
                  f"R {told} 5 p1-7 1900 905 1000", f"F {told} 5"],
        "c.log": [f"S {fine} 990", f"Q {fine} 1000", f"S {claimed} 990", f"Q {claimed} 1000",
                  f"S {left} 990", f"Q {left} 1000", f"S {done} 990", f"Q {done} 1000",
                  f"S {not_found} 990", f"N {not_found}", f"S {cut} 990", f"Y {cut}",
                  f"S {told} 990", f"Q {told} 1000"],
    }
    for name, lines in records.items():
        (logs / name).write_text("".join(line + "\n" for line in lines))
    verdict = chaos_checker.check(db, logs)
    c = verdict.cancels
    assert (c.acknowledged, c.not_found, c.uncertain) == (5, 1, 1), c
    assert c.reserved_after == [claimed] and c.completed_after == [done], c
    assert c.left_in_file == [left] and c.cancelled_uncalled == [uncalled], c
    assert (c.holders_cancelled, c.holders_lost) == (1, 1) and c.told_lost == [told], c
    assert verdict.lost == [not_found, uncalled], verdict
    summary = chaos_checker.Summary()
    summary.add(verdict)
    assert not summary.ok and "cancel-violations=5" in summary.line(1), summary.line(1)


def test_checker_excuses_a_normal_cancel_an_immediate_restart_undid(tmp_path: Path) -> None:
    """A normal-mode cancel acknowledged just before an immediate restart may be undone:
    its holder then completes the job under its lease. The same completion after a full
    cancel, or with no restart near, is a violation (found by CI's PostgreSQL chaos run:
    job 1943, cancel-violations=1, restarts fast:1/immediate:1)."""
    db = tmp_path / "c.db"
    with sqlq.Queue(str(db), durability="normal") as q:
        ids = q.put_many([b"p1-%d" % i for i in range(3)], tube="chaos-a")
        for job_id in ids:
            q.delete(job_id)
    undone, full, far = ids
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "agents.txt").write_text("w.log worker full\nc.log canceller normal\n"
                                     "f.log canceller full\n")
    (logs / "restarts.txt").write_text("immediate 10000 10600\n")
    (logs / "p.log").write_text("".join(f"P {j} p1-{i} 100\n" for i, j in enumerate(ids)))
    (logs / "w.log").write_text(
        # claimed at 9005 (until 14005 - ttr 5000), before the cancels at 9500
        f"R {undone} 1 p1-0 14005 9005 5000\nD {undone} 1 11000\nC {undone} 1 11100\n"
        f"R {full} 2 p1-1 14005 9005 5000\nD {full} 2 11000\nC {full} 2 11100\n"
        f"R {far} 3 p1-2 34005 29005 5000\nD {far} 3 31000\nC {far} 3 31100\n")
    (logs / "c.log").write_text(f"S {undone} 9400\nQ {undone} 9500\n"
                                f"S {far} 29400\nQ {far} 29500\n")
    (logs / "f.log").write_text(f"S {full} 9400\nQ {full} 9500\n")
    verdict = chaos_checker.check(db, logs)
    assert verdict.cancels.completed_after == [full, far], verdict.cancels
    assert verdict.undone_by_crash["cancels"] == 1, verdict.undone_by_crash


def test_checker_finds_more_holds_than_the_cap(tmp_path: Path) -> None:
    """Three jobs of a tube capped at 2 held at once are reported; holds ended by a
    delete's start, a release's start, a holder's kill, a cancel acknowledged after the
    claim's clock reading or the TTR before the next one began are not counted on, nor a
    reservation of another tube."""
    db, ids, logs = _four_jobs(tmp_path)
    a, b, c, d = ids
    (logs / "limits.txt").write_text("chaos-a 2\n")
    records = {
        # a: held 1000..1500 (deleted), then b 1500..1800 (released), c until its TTR 2000
        "w1.log": [f"R {a} 1 p1-0 9000 1000 8000 chaos-a", f"D {a} 1 1500",
                   f"C {a} 1 1510", f"R {b} 2 p1-1 9000 1500 7500 chaos-a",
                   f"X {b} 2 1800", f"R {c} 3 p1-2 2000 1600 400 chaos-a"],
        # killed at 1400: its hold of d ends there (reaped later, unknown)
        "w2.log": [f"R {d} 4 p1-3 9000 1100 8000 chaos-a"],
        # another tube's job is no hold of chaos-a
        "w3.log": [f"R {a} 5 p1-0 9000 1200 8000 chaos-b"],
        # claimed at 1440, returned at 1450: a cancel acknowledged at 1449 came after it
        "w5.log": [f"R {d} 8 p1-3 9000 1450 7560 chaos-a"],
        "c.log": [f"S {d} 1430", f"Q {d} 1449"],
    }
    for name, lines in records.items():
        (logs / name).write_text("".join(line + "\n" for line in lines))
    (logs / "kills.txt").write_text("w2.log 1400 step\n")
    verdict = chaos_checker.check(db, logs)
    assert (verdict.limits.max_held, verdict.limits.over) == (2, []), verdict.limits
    # One more hold, from 1700 to 1900: with b and c, three at 1700.
    (logs / "w4.log").write_text(f"R {a} 6 p1-0 9000 1700 8000 chaos-a\nD {a} 6 1900\n")
    verdict = chaos_checker.check(db, logs)
    lim = verdict.limits
    assert (lim.tube, lim.cap, lim.max_held, lim.claims) == ("chaos-a", 2, 3, 6), lim
    assert lim.over == [f"at 1700: 3 held {sorted([a, b, c])}"], lim
    summary = chaos_checker.Summary()
    summary.add(verdict)
    assert not summary.ok
    assert "limited-tube=chaos-a cap=2 max-held=3 claims=6 cap-violations=1" \
        in summary.line(1), summary.line(1)
