"""Power-cut tests: what survives when the machine loses power at any moment.

A workload of a few hundred random operations runs on a real file through
tests/powercut.py's recording VFS, once in each durability mode. Then
SQLQ_POWERCUT_POINTS cuts (200 in ``make test``, 1000 in ``make test-chaos``),
split between the modes, are rebuilt from the recording (unsynced writes
thrown away or torn at sector granularity) and reopened:

* in ``full`` mode no acknowledged put, delete, bury, kick or pause is lost:
  the state recovered is the one after the last such operation or later;
* in ``normal`` mode the file is never corrupt and the state recovered is the
  state after some recent operation: only the last commits may be missing;
* in both, ``PRAGMA integrity_check`` is ok and sqlq opens and uses the file;
* the workload puts jobs with ``after=`` parents and deletes parents: in every
  recovered file the dependencies hold (a child still waiting has a parent still in
  the file, one released has none: never waiting with no live parent; the counters
  add up to the edges), and a parent deleted there releases its children;
* the workload cancels jobs (held here, in any state, or gone: issue 25) and writes
  held jobs' progress: in ``full`` mode a cancel acknowledged survives (the job stays
  gone, its reservation remembered as cancelled); a progress write, which sqlq commits
  without a sync (as a touch), survives once a later durable commit or sync returned;
* threads sharing one ``full`` Queue, whose puts share commits (group commit), lose
  no put that returned: every id returned before the cut is in the file, with its body.

The same holds for ``sqlq serve``, whose rounds of pipelined commands share a
commit (server/batch.py): each round is one operation, acknowledged when its
last reply has arrived.

A summary line is printed, even without ``-s``.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest

import sqlq
from sqlq.server import Server
from tests import powercut
from tests.powercut import Recording, RecordingVFS
from tests.servers import Raw

TUBES = ["mail", "img", "x.y"]
#: A disk's sync, roughly, for the threads that share commits while one syncs (the suite's
#: files are in RAM, where nothing would wait).
DISK_SYNC_S = 0.002


@contextmanager
def recording_vfs(recording: Recording, sync_s: float = 0.0) -> Iterator[str]:
    name = f"powercut-{os.getpid()}-{id(recording)}"
    vfs = RecordingVFS(name, recording, sync_s)
    try:
        yield name
    finally:
        vfs.unregister()


def record_workload(directory: Path, durability: str, operations: int, seed: int,
                    *, claimed_durability: str | None = None) -> Recording:
    """Run random operations on a new file through the recording VFS.

    ``claimed_durability`` marks operations durable as that mode would (the
    self-test claims "full" for a queue that really runs "normal").
    """
    rng = random.Random(seed)
    claimed = claimed_durability or durability
    path = (directory / f"{durability}-{seed}.db").resolve()
    with sqlq.Queue(str(path), durability=durability) as q, q.transaction() as tx:
        tx.execute("CREATE TABLE app_orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
    assert not Path(f"{path}-wal").exists()  # closed cleanly: everything is in the file
    recording = Recording(str(path), {"db": path.read_bytes(), "wal": None})

    with recording_vfs(recording) as vfs:
        q = sqlq.Queue(str(path), durability=durability, vfs=vfs)
        # Checkpoint often and cut the WAL back: the riskiest writes, exercised many times.
        q.backend.db.conn.execute("PRAGMA wal_autocheckpoint = 16")
        q.backend.db.conn.execute("PRAGMA journal_size_limit = 65536")
        recording.digests.append(q.backend.db.read(powercut.state_digest))
        held: list[sqlq.Job] = []
        order = 0

        def op(name: str, durable: bool, fn: object) -> None:
            index = recording.begin(name, durable and claimed == "full")
            try:
                fn()  # type: ignore[operator]
            except (sqlq.JobNotFound, sqlq.JobLost):
                pass  # nothing changed: the state after it is the state before
            recording.ack(index, q.backend.db.read(powercut.state_digest))

        def body() -> bytes:
            size = rng.choice([0, 20, 300, 2500, 9000, 9000, 70000])
            return rng.randbytes(min(size, 256)) + b"." * max(0, size - 256)

        def put() -> None:
            q.put(body(), tube=rng.choice(TUBES), priority=rng.choice([0, 5, 1024]),
                  delay=rng.choice([0, 0, 0, 600]), ttr=rng.choice([60, 600]))

        def transaction() -> None:
            nonlocal order
            order += 1
            with q.transaction() as tx:
                tx.execute("INSERT INTO app_orders (id, note) VALUES (?, ?)",
                           (order, "x" * rng.randrange(3000)))
                tx.put(f"order {order}".encode(), tube="mail")

        def reserve() -> None:
            job = q.reserve(TUBES, timeout=0)
            if job is not None:
                held.append(job)

        def take() -> sqlq.Job:
            return held.pop(rng.randrange(len(held)))

        def delete_and_reserve() -> None:
            job = q.reserve(TUBES, timeout=0, delete=take())
            if job is not None:
                held.append(job)

        def complete() -> None:
            take().complete(result=b"r" * rng.randrange(100))

        def live_ids(where: str = "") -> list[int]:
            return [r[0] for r in q.backend.db.read(lambda c: list(c.execute(
                f"SELECT id FROM sqlq_jobs {where} ORDER BY id")))]

        def put_after() -> None:
            # A child after one to three jobs of the file, now and then one gone too.
            ids = live_ids()
            parents = rng.sample(ids, min(len(ids), rng.randint(1, 3)))
            if ids and rng.random() < 0.2:
                parents.append(rng.randint(1, max(ids)))  # perhaps deleted already
            if not parents:
                return
            if rng.random() < 0.3:
                q.put_many([body() for _ in range(rng.randint(2, 4))], tube=rng.choice(TUBES),
                           after=parents)
            else:
                q.put(body(), tube=rng.choice(TUBES), delay=rng.choice([0, 0, 600]),
                      after=parents)

        def delete_parent() -> None:
            # A parent's delete acknowledged: its children released in the same commit.
            parents = live_ids("WHERE dependents > 0")
            if parents:
                q.delete(rng.choice(parents))

        def delete_any() -> None:
            ids = [r[0] for r in q.backend.db.read(lambda c: list(c.execute(
                "SELECT id FROM sqlq_jobs ORDER BY id")))]
            if ids:
                q.delete(rng.choice(ids))

        def cancel() -> None:
            # A job held here (its holder's next verb then fails: JobCancelled, caught by
            # op), any job of the file, or now and then one gone already (JobNotFound).
            ids = live_ids()
            if held and rng.random() < 0.5:
                q.cancel(held[rng.randrange(len(held))].id)
            elif ids:
                q.cancel(rng.choice(ids) if rng.random() < 0.8 else rng.randint(1, max(ids)))

        def progress() -> None:
            job = held[rng.randrange(len(held))]
            job.progress(rng.choice([0.25, 1.0, 7, 120]), rng.choice([None, "step", "é" * 50]))

        for _ in range(operations):
            live = q.backend.db.read(
                lambda c: c.execute("SELECT count(*) FROM sqlq_jobs").fetchone()[0])
            choices: list[tuple[str, bool, object, int]] = [
                ("put", True, put, 30 if live < 40 else 3),
                ("put_many", True, lambda: q.put_many(
                    [body() for _ in range(rng.randint(2, 6))], tube=rng.choice(TUBES)), 4),
                ("transaction", True, transaction, 4),
                ("reserve", False, reserve, 20),
                ("kick", True, lambda: q.kick(rng.randint(1, 5), rng.choice(TUBES)), 4),
                ("delete-by-id", True, delete_any, 6 if live > 20 else 1),
                ("pause", True, lambda: q.pause_tube(rng.choice(TUBES), rng.choice([0, 3600])), 2),
                ("put-after", True, put_after, 8),
                ("delete-parent", True, delete_parent, 5),
                ("cancel", True, cancel, 5),
            ]
            if held:
                choices += [
                    ("delete", True, lambda: take().delete(), 12),
                    ("delete+reserve", True, delete_and_reserve, 8),
                    ("release", False, lambda: take().release(delay=rng.choice([0, 300])), 5),
                    ("bury", True, lambda: take().bury(reason="power cut test"), 5),
                    ("touch", False, lambda: held[rng.randrange(len(held))].touch(), 3),
                    # Not durable by itself (as a touch: the write sqlq makes is not synced),
                    # so it must survive once a later durable commit or a sync returned.
                    ("progress", False, progress, 4),
                ]
                if hasattr(q, "complete"):
                    choices.append(("complete", True, complete, 5))
            name, durable, fn, _ = rng.choices(choices, weights=[c[3] for c in choices])[0]
            op(name, durable, fn)

        index = recording.begin("close", False)
        q.close()
    conn = apsw.Connection(str(path))
    recording.ack(index, powercut.state_digest(conn))
    conn.close()
    return recording


def reopen_with_sqlq(path: str, first: Callable[[sqlq.Queue], object] | None = None) -> None:
    """The recovered file must be usable, not only readable (``first``: a check made on
    the same Queue before)."""
    with sqlq.Queue(path, durability="normal") as q:
        if first is not None:
            first(q)
        q.reserve(TUBES, timeout=0)
        q.put(b"after the power came back", tube="mail")
        q.stats()


class BrokenLinks(Exception):
    """The recovered file's dependencies do not add up."""


def check_links(q: sqlq.Queue) -> tuple[int, int]:
    """The dependencies of a recovered file hold (issue 24): every waiting job has a
    parent still in the file (its counter is the number of its edges, each to a job
    there), no job that is not waiting counts parents, and the release still works: the
    delete of a parent, through sqlq, takes one parent off each of its children.
    (waiting jobs, parents deleted: 0 or 1) found; BrokenLinks otherwise."""
    jobs: dict[int, tuple[int, int]] = q.backend.db.read(lambda c: {  # type: ignore[attr-defined]
        r[0]: (r[1], r[2]) for r in c.execute("SELECT id, state, waiting_on FROM sqlq_jobs")})
    edges: list[tuple[int, int]] = q.backend.db.read(  # type: ignore[attr-defined]
        lambda c: list(c.execute("SELECT parent, child FROM sqlq_edges")))
    problems = [f"edge {p}->{c} names a job gone" for p, c in edges
                if p not in jobs or c not in jobs]
    count = Counter(c for _, c in edges)
    problems += [f"job {j} in state {state} waits on {n} parents, has {count[j]} edges"
                 for j, (state, n) in jobs.items()
                 if n != count[j] or (state == 4) != (n > 0)]
    if problems:
        raise BrokenLinks(problems[:3])
    parents = sorted({p for p, _ in edges})
    if parents:
        parent = parents[len(parents) // 2]
        children = [c for p, c in edges if p == parent]
        q.delete(parent)
        after = {c: q.peek(c) for c in children}
        for child in children:
            job = after[child]
            waits = jobs[child][1] - 1
            if job is None or (job.state == "waiting") != (waits > 0):
                raise BrokenLinks(f"job {child} after its parent {parent} went: "
                                  f"{job and job.state}, {waits} parents left")
    return sum(1 for state, _ in jobs.values() if state == 4), int(bool(parents))


class Tally:
    def __init__(self) -> None:
        self.points = Counter[str]()
        self.failures: list[str] = []
        self.integrity_failures = 0
        self.acknowledged_lost = 0
        self.impossible = 0
        self.missing_commits = Counter[str]()  # cuts that lost at least one commit
        self.most_missing = Counter[str]()
        self.broken_links = 0
        self.waiting_seen = 0  # waiting jobs found in the recovered files
        self.parents_seen = 0  # ... and parents of jobs, one of each deleted there
        self.operations = Counter[str]()  # cancels and progress writes recorded

    def run(self, recording: Recording, mode: str, points: int, directory: Path,
            rng: random.Random, every: int = 1) -> None:
        self.operations.update(n for n in recording.names if n in ("cancel", "progress"))
        for n, cut in enumerate(powercut.cuts(recording, points, rng)):
            reopen = self.reopen if n % every == 0 else None
            v = powercut.verdict(recording, cut, directory, reopen)
            self.points[mode] += 1
            if v.state is not None and v.state < cut.high:
                self.missing_commits[mode] += 1
                self.most_missing[mode] = max(self.most_missing[mode], cut.high - v.state)
            if not v.ok:
                if "integrity" in v.problem or "cannot read" in v.problem:
                    self.integrity_failures += 1
                elif "BrokenLinks" in v.problem:
                    self.broken_links += 1
                elif "lost" in v.problem:
                    self.acknowledged_lost += 1
                else:
                    self.impossible += 1
                self.failures.append(f"{mode} cut before event {cut.index} ({cut.tear}): "
                                     f"{v.problem}")

    def reopen(self, path: str) -> None:
        """The file's dependencies hold and their release works, then sqlq uses it."""
        reopen_with_sqlq(path, self.check_links)

    def check_links(self, q: sqlq.Queue) -> None:
        waiting, parents = check_links(q)
        self.waiting_seen += waiting
        self.parents_seen += parents

    def line(self, seconds: float, operations: int) -> str:
        return (f"powercut: {seconds:.0f}s points={sum(self.points.values())} "
                f"(full {self.points['full']}, normal {self.points['normal']}; "
                f"{operations} operations each) acknowledged-lost={self.acknowledged_lost} "
                f"integrity-failures={self.integrity_failures} "
                f"impossible-states={self.impossible} broken-links={self.broken_links} "
                f"(waiting jobs seen {self.waiting_seen}, parents deleted "
                f"{self.parents_seen}; cancels {self.operations['cancel']}, progress "
                f"writes {self.operations['progress']}) | cuts that lost unsynced commits: "
                f"full {self.missing_commits['full']} (at most {self.most_missing['full']}, "
                f"none acknowledged as durable), normal {self.missing_commits['normal']} "
                f"(at most {self.most_missing['normal']})")


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_power_cuts(tmp_path: Path, summary_line: Callable[[str], None]) -> None:
    points = int(os.environ.get("SQLQ_POWERCUT_POINTS", "200"))
    seed = int(os.environ.get("SQLQ_POWERCUT_SEED", str(random.randrange(2**32))))
    operations = 300
    started = time.monotonic()
    rng = random.Random(seed)
    tally = Tally()
    for mode in ("full", "normal"):
        recording = record_workload(tmp_path, mode, operations, rng.getrandbits(32))
        tally.run(recording, mode, points // 2, tmp_path / f"cut-{mode}", rng)
    line = tally.line(time.monotonic() - started, operations) + f" seed={seed}"
    summary_line(line)
    assert not tally.failures, "\n".join([line, *tally.failures[:20]])
    # The model must really have thrown commits away, or it proved nothing.
    assert tally.missing_commits["normal"] > 0, line
    # ... and the files must have held waiting jobs, and parents to delete.
    assert tally.waiting_seen > 0 and tally.parents_seen > 0, line
    assert tally.operations["cancel"] > 0 and tally.operations["progress"] > 0, line


def test_check_links_finds_a_child_stranded_or_miscounted(tmp_path: Path) -> None:
    """The dependency check is only worth its passes if it fails a broken file: a parent
    deleted without its release (the child waits with no parent), or a counter off."""
    path = str(tmp_path / "links.db")
    with sqlq.Queue(path, durability="normal") as q:
        parent, other = q.put_many([b"p", b"o"])
        child = q.put(b"c", after=[parent, other])
        assert check_links(q) == (1, 1)  # and it deleted one parent: the child waits on
        assert q.peek(child).state == "waiting"  # type: ignore[union-attr]
    conn = apsw.Connection(path)
    conn.execute("UPDATE sqlq_jobs SET waiting_on = 2 WHERE id = ?", (child,))
    conn.close()
    with sqlq.Queue(path, durability="normal") as q, \
            pytest.raises(BrokenLinks, match="waits on 2 parents, has 1 edges"):
        check_links(q)
    conn = apsw.Connection(path)
    conn.execute("UPDATE sqlq_jobs SET waiting_on = 1 WHERE id = ?", (child,))
    conn.execute("DELETE FROM sqlq_jobs WHERE dependents > 0")  # behind sqlq's back
    conn.close()
    with sqlq.Queue(path, durability="normal") as q, \
            pytest.raises(BrokenLinks, match="names a job gone"):
        check_links(q)


def test_the_model_catches_a_queue_that_does_not_fsync(tmp_path: Path) -> None:
    """Claim ``full`` for a queue running ``normal``: the cuts must find lost puts."""
    recording = record_workload(tmp_path, "normal", 120, seed=7, claimed_durability="full")
    tally = Tally()
    tally.run(recording, "full", 60, tmp_path / "cut", random.Random(7), every=1000)
    assert tally.acknowledged_lost > 0, tally.line(0, 120)
    assert tally.integrity_failures == 0, tally.failures[:5]


def _put_line(body: bytes) -> bytes:
    return b"put 1024 0 600 %d\r\n%s\r\n" % (len(body), body)


def record_server_rounds(directory: Path, durability: str, rounds: int, seed: int) -> Recording:
    """Rounds of pipelined commands through ``sqlq serve`` on a file under the recording VFS.

    Each round is one write on one connection (puts, claims, deletes of held jobs
    and by id, or touches, claims and releases) and one operation of the recording,
    durable in full mode when it holds a put or a delete. A round starts with a write
    and all of it arrives in one read, so it is one commit: the only new state it
    makes is the state after it. The last round deletes what is still held, so that
    closing gives nothing back (no state between the rounds).
    """
    rng = random.Random(seed)
    path = (directory / f"server-{durability}-{seed}.db").resolve()
    sqlq.Queue(str(path), durability=durability).close()
    recording = Recording(str(path), {"db": path.read_bytes(), "wal": None})
    with recording_vfs(recording) as vfs:
        q = sqlq.Queue(str(path), durability=durability, vfs=vfs)
        q.backend.db.conn.execute("PRAGMA wal_autocheckpoint = 16")
        server = Server(q)
        host, port = server.listen("127.0.0.1:0").rsplit(":", 1)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        client = Raw((host, int(port)))
        recording.digests.append(q.backend.db.read(powercut.state_digest))
        held: list[int] = []
        ready: list[int] = []
        for n in range(rounds + 1):
            durable = rng.random() < 0.7 or not held
            if n == rounds:
                if not held:
                    break
                commands, durable = [b"delete %d\r\n" % i for i in held], True
            elif durable:
                commands = [_put_line(rng.randbytes(rng.choice([5, 300, 3000])))
                            for _ in range(rng.randint(1, 6))]
                commands += [b"reserve-with-timeout 0\r\n"] * rng.randint(0, 3)
                commands += [b"delete %d\r\n" % i
                             for i in rng.sample(held, min(len(held), rng.randint(0, 3)))]
                if ready and rng.random() < 0.3:
                    commands.append(b"delete %d\r\n" % ready.pop())
            else:
                some = rng.sample(held, min(len(held), 2))
                commands = [b"touch %d\r\n" % some[0], b"reserve-with-timeout 0\r\n"]
                commands += [b"release %d 1 0\r\n" % i for i in some[1:]]
            index = recording.begin("round", durable and durability == "full")
            client.send(b"".join(commands))
            for command in commands:
                reply = client.reply()
                if reply.startswith(b"INSERTED"):
                    ready.append(int(reply.split()[1]))
                elif reply.startswith(b"RESERVED"):
                    job = int(reply.split()[1])
                    held.append(job)
                    if job in ready:
                        ready.remove(job)
                elif command.startswith((b"delete", b"release")):
                    job = int(command.split()[1])
                    if job in held:
                        held.remove(job)
                    if command.startswith(b"release"):
                        ready.append(job)
            recording.ack(index, q.backend.db.read(powercut.state_digest))
        client.close()
        server.stop()
        thread.join(10)
        index = recording.begin("close", False)
        q.close()
    conn = apsw.Connection(str(path))
    recording.ack(index, powercut.state_digest(conn))
    conn.close()
    return recording


@pytest.mark.timeout(0)
def test_power_cuts_during_pipelined_server_rounds(
        tmp_path: Path, summary_line: Callable[[str], None]) -> None:
    """``sqlq serve`` answers a pipelined round once its commit is durable (full)."""
    points = int(os.environ.get("SQLQ_POWERCUT_POINTS", "200")) // 4
    seed = int(os.environ.get("SQLQ_POWERCUT_SEED", str(random.randrange(2**32))))
    started = time.monotonic()
    rng = random.Random(seed)
    tally = Tally()
    for mode in ("full", "normal"):
        recording = record_server_rounds(tmp_path, mode, 60, rng.getrandbits(32))
        tally.run(recording, mode, points // 2, tmp_path / f"cut-{mode}", rng, every=10)
    line = tally.line(time.monotonic() - started, 60) + f" seed={seed}"
    summary_line("server " + line)
    assert not tally.failures, "\n".join([line, *tally.failures[:20]])


#: The event a putter thread appends once ``put`` returned: (PUT_RETURNED, id, body).
PUT_RETURNED = "put-returned"


def record_threaded_puts(directory: Path, threads: int, puts: int) -> Recording:
    """``threads`` threads putting into one ``full`` Queue through the recording VFS."""
    path = (directory / "threads.db").resolve()
    sqlq.Queue(str(path)).close()
    recording = Recording(str(path), {"db": path.read_bytes(), "wal": None})
    with recording_vfs(recording, sync_s=DISK_SYNC_S) as vfs:
        q = sqlq.Queue(str(path), durability="full", vfs=vfs)
        q.backend.db.conn.execute("PRAGMA wal_autocheckpoint = 16")
        start = threading.Barrier(threads)
        errors: list[BaseException] = []

        def putter(t: int) -> None:
            start.wait()
            try:
                for n in range(puts):
                    body = f"t{t}-{n} ".encode() + b"." * (n * 97 % 3000)
                    job_id = q.put(body, tube=TUBES[n % len(TUBES)])
                    recording.events.append((PUT_RETURNED, job_id, body))
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        pool = [threading.Thread(target=putter, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        q.close()
    assert not errors, errors
    return recording


def test_power_cuts_threads_sharing_a_queue(tmp_path: Path) -> None:
    """Four threads put through one ``full`` Queue; their puts share commits. At every
    cut, each put that had returned is in the file, with its body."""
    threads, puts = 4, 40
    recording = record_threaded_puts(tmp_path, threads, puts)
    syncs = sum(1 for e in recording.events if e[0] == powercut.SYNC and e[1] == "wal")
    # Shared commits, or this proved nothing about them (one sync a put without).
    assert syncs < threads * puts, f"{syncs} WAL syncs for {threads * puts} puts"
    rng = random.Random(12)
    failures = []
    cuts = powercut.cuts(recording, 60, rng)
    for cut in cuts:
        returned = {e[1]: e[2] for e in recording.events[:cut.index] if e[0] == PUT_RETURNED}
        directory = tmp_path / "cut"
        directory.mkdir(exist_ok=True)
        path = directory / "q.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        for key, content in cut.files.items():
            if content is not None:
                Path(f"{path}{'' if key == 'db' else '-wal'}").write_bytes(content)
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            found = dict(conn.execute("SELECT id, body FROM sqlq_jobs"))
        finally:
            conn.close()
        lost = sorted(i for i, body in returned.items() if found.get(i) != body)
        if check != ["ok"] or lost:
            failures.append(f"cut before event {cut.index} ({cut.tear}): {check[:2]}, "
                            f"{len(lost)} of {len(returned)} returned puts lost: {lost[:5]}")
    assert len(cuts) == 60
    assert not failures, "\n".join(failures[:10])
