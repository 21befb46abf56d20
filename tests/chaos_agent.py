"""A producer or worker process for the chaos test (tests/system/test_chaos.py).

    python tests/chaos_agent.py producer DB LOG SEED DURABILITY
    python tests/chaos_agent.py worker   DB LOG SEED DURABILITY
    python tests/chaos_agent.py pworker  DB LOG SEED DURABILITY  # sqlq work's Worker, prefetching
    python tests/chaos_agent.py aworker  DB LOG SEED DURABILITY  # its --concurrency worker
    python tests/chaos_agent.py canceller DB LOG SEED DURABILITY  # q.cancel of random jobs

The driver picks each agent's durability (``full`` or ``normal``) and notes it in
``agents.txt`` beside the logs: on PostgreSQL an immediate server restart may lose a
``normal`` commit (the checker needs to know whose).

Each runs until it is killed (the test sends SIGKILL at random moments, and the
kernel when the driver dies: tests/orphans.py) and
writes one line per event to LOG, appended and flushed line by line: the
kernel keeps a flushed line even when the process is killed right after, so
only the last line can be torn, and the checker ignores a line without its
newline. No fsync: the chaos test kills processes, not the machine.

Producer lines (``put`` returned, so the job is *acknowledged*; logged right
after, so a kill in between leaves a job that is in the file but not in the log,
which the checker allows; a producer with four threads writes them all in its log;
``at``: the time (ms) put returned; ``parents``: the ids of ``after=``, comma-separated,
for a job put to wait for them):

    P <id> <tag> <at> [<parents>]

Some puts (:data:`AFTER`) wait for earlier jobs (``after=``, issue 24): a *fan-in*, a
child after a batch of parents put just before it (taken by different workers, and
deleted concurrently by different processes) or after a few of the producer's recent
jobs; a *chain*, a child after the producer's previous child. A parent may be gone by
then (it counts as finished). A put whose parent was never issued (on PostgreSQL an
immediate restart may undo a ``normal`` put, and its id is issued again or not at all)
raises JobNotFound: nothing was put, the producer writes ``E after`` and goes on.

A put that raised :class:`sqlq.DatabaseError` (on PostgreSQL: the connection was
lost, ``sqlq.Disconnected``; it may or may not have committed) is not acknowledged:
the producer writes ``E put`` and goes on, as a careful user would.

Worker lines, for a job reserved under lease L:

    R <id> <L> <tag> <until> <at> <ttr> <tube>
                       reserved (tag read from the body: the checker matches it to P),
                       until ``reserved_until`` (ms); ``at``: the time (ms) reserve returned;
                       ``ttr`` (ms): so ``until - ttr`` is the claim's own clock reading;
                       ``tube``: the job's (the checker counts a limited tube's holds)
    D <id> <L> <at>    about to delete: written *before* the delete starts, at ``at`` (ms):
                       a parent's children cannot be released before that
    C <id> <L> <at>    the delete (or complete) succeeded at ``at`` (ms): completed
    F <id> <L> [cancelled]
                       the delete (touch, progress, release, bury) failed with JobLost (lease no
                       longer live); ``cancelled``: with JobCancelled (issue 25)
    X <id> <L> [<before>]
                       released;  B <id> <L> [<before>] buried: ``before`` (ms) taken just
                       before the call (the hold ended after it); T <id> <L> touched
    K <n>              kicked n buried jobs back to ready
    U <id> <L> <verb> [<before>]
                       ``verb`` (delete, release, bury) raised DatabaseError: the
                       connection was lost and it may or may not have committed; the
                       worker lets the job go (if it was not done, it comes back at its
                       TTR) and goes on; ``before``: as X's
    E <what>           another call raised DatabaseError (kick, touch; reserve, when an
                       outage outlasts its timeout), and the worker went on

Canceller lines (``q.cancel`` of random recent ids while the workers run, issue 25):

    S <id> <before>    about to cancel, at ``before`` (ms, taken before the call)
    Q <id> <at>        the cancel was acknowledged at ``at`` (ms): the job is cancelled
    N <id>             JobNotFound: the job was not live, nothing was cancelled
    Y <id>             DatabaseError (the connection lost): it may have committed

A trailing ``S`` (the canceller killed during the call) may have committed, as a ``Y``.

A ``D`` with nothing after it from the same worker means the worker was killed
during the delete, which may or may not have committed. A prefetching worker
(``pworker``: the ``Worker`` of ``sqlq work`` with a batch of 2 to 32, or the
adaptive default) deletes its finished jobs together with its next claim: it
writes a ``D`` for each before that commit, then ``C`` or ``F`` for each, then an
``R`` for each job claimed; so the trailing ``D`` lines of a killed one all dangle.
The event-loop worker (``aworker``: ``sqlq work --concurrency`` 2 or 8, async tasks,
prefetching likewise) logs the same way: its claims and deletes are the Worker's.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import sqlq
from sqlq.work.runner import DONE, Outcome
from tests.orphans import die_with_parent

#: "chaos-slow" gets few jobs, each worked on for a while, and some workers watch only
#: it: they wait, idle, and look for dead owners while others hold its jobs.
SLOW = "chaos-slow"
#: The environment variable naming the driver's pid: the agent dies with it.
PARENT = "SQLQ_CHAOS_PARENT"
TUBES = ["chaos-a", "chaos-b", SLOW]


def _open(db: str, durability: str) -> sqlq.Queue:
    """The agent's Queue, once the server answers (an agent may start while the driver
    restarts PostgreSQL: it waits, as ``sqlq work`` does, rather than exit)."""
    from sqlq.work.command import open_queue

    return open_queue(db, "full" if durability == "full" else "normal")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def emit(log: TextIO, *fields: object) -> None:
    log.write(" ".join(map(str, fields)) + "\n")
    log.flush()


def producer(db: str, log: TextIO, rng: random.Random, durability: str) -> None:
    """Puts for ever; half the producers from four threads sharing one Queue, whose
    puts share commits (group commit): a put is logged only once it returned."""
    q = _open(db, durability)
    threads = rng.choice([1, 4])
    if threads == 1:
        put_loop(q, log, rng, f"p{os.getpid()}")  # for ever
        return
    lock = threading.Lock()

    def emit_locked(log: TextIO, *fields: object) -> None:
        with lock:
            emit(log, *fields)

    for i in range(threads):
        seed = rng.getrandbits(32)
        threading.Thread(target=put_loop, daemon=True, args=(
            q, log, random.Random(seed), f"p{os.getpid()}t{i}", emit_locked)).start()
    threading.Event().wait()  # until SIGKILL


#: The share of puts that wait for earlier jobs (``after=``).
AFTER = 0.15


def put_loop(q: sqlq.Queue, log: TextIO, rng: random.Random, tag_base: str,
             emit: Callable[..., None] = emit) -> None:
    seq = 0
    recent: deque[int] = deque(maxlen=32)  # this loop's latest acknowledged ids
    last_child: int | None = None  # the end of this loop's chain
    while True:
        tube = SLOW if rng.random() < 0.005 else rng.choice(TUBES[:2])
        # Short TTRs so that stale leases and expired reservations really happen.
        ttr = rng.choice([1, 1, 2, 30])
        priority = rng.choice([0, 10, 1024, 2**32 - 1])
        delay = rng.choice([0, 0, 0, 0, 0.05, 0.3])
        after: list[int] = []
        if recent and rng.random() < AFTER:
            shape = rng.random()
            if shape < 0.35 and last_child is not None:
                after = [last_child]  # a chain
            elif shape < 0.7:
                # A fan-in over a fresh batch: parents surely live at the put, most often.
                batch = [f"{tag_base}-{seq + i}" for i in range(rng.randint(2, 12))]
                seq += len(batch)
                try:
                    parents = q.put_many([_body(t, rng) for t in batch], tube=tube,
                                         priority=priority, ttr=ttr)
                except sqlq.DatabaseError:
                    emit(log, "E", "put")
                    continue
                at = now_ms()
                for job_id, tag in zip(parents, batch, strict=True):
                    emit(log, "P", job_id, tag, at)
                recent.extend(parents)
                after = parents
            else:  # a fan-in over a few recent jobs, some perhaps done already
                after = rng.sample(list(recent), min(len(recent), rng.randint(1, 4)))
        try:
            if rng.random() < 0.1:
                tags = [f"{tag_base}-{seq + i}" for i in range(rng.randint(2, 8))]
                seq += len(tags)
                bodies = [_body(t, rng) for t in tags]
                ids = q.put_many(bodies, tube=tube, priority=priority, delay=delay, ttr=ttr,
                                 after=after or None)
            else:
                tags = [f"{tag_base}-{seq}"]
                seq += 1
                ids = [q.put(_body(tags[0], rng), tube=tube, priority=priority, delay=delay,
                             ttr=ttr, after=after or None)]
        except sqlq.JobNotFound:
            # A parent never issued (its put undone by a crash of the server): no put.
            emit(log, "E", "after")
            recent.clear()
            last_child = None
            continue
        except sqlq.DatabaseError:
            # Cut off (sqlq.Disconnected): it may have committed, but was not
            # acknowledged, so it is not logged as put. The next put reconnects.
            emit(log, "E", "put")
            continue
        at = now_ms()
        parents_field = [",".join(map(str, after))] if after else []
        for job_id, tag in zip(ids, tags, strict=True):
            emit(log, "P", job_id, tag, at, *parents_field)
        recent.extend(ids)
        if after:
            last_child = ids[-1]
        if rng.random() < 0.3:
            time.sleep(rng.uniform(0, 0.01))


def _body(tag: str, rng: random.Random) -> bytes:
    # Mostly small bodies; some spill into overflow pages.
    size = rng.choice([0, 10, 100, 3000, 20000])
    return tag.encode() + b" " + bytes(rng.getrandbits(8) for _ in range(min(size, 64))) \
        + b"x" * max(0, size - 64)


def worker(db: str, log: TextIO, rng: random.Random, durability: str) -> None:
    q = _open(db, durability)
    tubes = rng.choice([TUBES, [SLOW]])
    pending: sqlq.Job | None = None  # a job to delete through the fast path
    while True:
        if pending is not None:
            emit(log, "D", pending.id, pending.lease, now_ms())
            try:
                job = q.reserve(tubes, timeout=0.5, delete=pending)
                emit(log, "C", pending.id, pending.lease, now_ms())
            except sqlq.JobLost as e:  # never JobNotFound: a stale lease is JobLost (F3)
                emit(log, "F", pending.id, pending.lease, *why(e))
                job = None
            except sqlq.DatabaseError:
                # The delete was in flight when the connection went (Disconnected):
                # done or not, nobody can say; the next reserve reconnects.
                emit(log, "U", pending.id, pending.lease, "delete")
                job = None
            pending = None
        else:
            try:
                job = q.reserve(tubes, timeout=0.5)
            except sqlq.Disconnected:
                # A reserve waits through an outage only up to its timeout, then raises
                # (undocumented in Queue.reserve; sqlq work's Worker claimed so and died).
                emit(log, "E", "reserve")
                continue
        if job is None:
            if rng.random() < 0.3:
                try:
                    kicked = sum(q.kick(20, tube) for tube in TUBES)
                except sqlq.DatabaseError:
                    emit(log, "E", "kick")
                    continue
                if kicked:
                    emit(log, "K", kicked)
            continue
        lease = job.lease
        emit(log, "R", job.id, lease, job.body.split(b" ", 1)[0].decode(), job.reserved_until,
             time.time_ns() // 1_000_000, round(job.ttr * 1000), job.tube)
        verb = "work"
        before = 0  # when a release or bury began (ms)
        try:
            r = rng.random()
            if r < 0.05:
                verb, before = "release", now_ms()
                job.release(delay=rng.choice([0, 0.1]))
                emit(log, "X", job.id, lease, before)
                continue
            if r < 0.08:
                verb, before = "bury", now_ms()
                job.bury(reason="chaos")
                emit(log, "B", job.id, lease, before)
                continue
            if r < 0.11 and job.ttr <= 1:
                # Outlive the lease, then try to finish anyway: must fail, since another
                # worker may hold the job under a new, live lease by now.
                time.sleep(job.ttr + 0.15)
            elif r < 0.15:
                try:
                    job.touch()
                    emit(log, "T", job.id, lease)
                except sqlq.DatabaseError:  # cut off: the lease stands; finish the job
                    emit(log, "E", "touch")
            elif r < 0.25 or job.tube == SLOW:
                # Work on it for a while, well within the TTR: nobody else may get it
                # meanwhile (the checker's "stolen" rule), whatever happens to the sidecar
                # or to the server's sessions. A SLOW job on PostgreSQL sometimes works
                # past the database's idle_session_timeout without a database call.
                long = job.tube == SLOW and job.ttr >= 2 and rng.random() < 0.5
                took = rng.uniform(1.2, 1.8) if long else rng.uniform(0.05, 0.3)
                time.sleep(took / 2)
                try:  # halfway: JobCancelled if a canceller took the job meanwhile
                    job.progress(0.5, "halfway")
                except sqlq.DatabaseError:  # cut off: the lease stands; go on
                    emit(log, "E", "progress")
                time.sleep(took / 2)
        except sqlq.JobLost as e:  # never JobNotFound: a stale lease is JobLost (F3)
            if e.cut_off and verb != "work":  # made again after a cut: as DatabaseError's
                emit(log, "U", job.id, lease, verb, *([before] if before else []))
            else:
                # A one-second TTR can run out on a loaded machine (or the job was
                # cancelled; or a touch, cut off and made again, found it so).
                emit(log, "F", job.id, lease, *why(e))
            continue
        except sqlq.DatabaseError:
            # A release or bury cut off by a lost connection: it may have committed.
            emit(log, "U", job.id, lease, verb, *([before] if before else []))
            continue
        if rng.random() < 0.5:
            pending = job
            continue
        emit(log, "D", job.id, lease, now_ms())
        try:
            if rng.random() < 0.3:
                job.complete(result=job.body[:64])  # delete + result in one commit
            else:
                job.delete()  # made again by sqlq if the connection was lost
            emit(log, "C", job.id, lease, now_ms())
        except sqlq.JobLost as e:  # never JobNotFound: a stale lease is JobLost (F3)
            # Cut off and made again, it may have been what deleted the job: as below.
            emit(log, *(("U", job.id, lease, "delete") if e.cut_off
                        else ("F", job.id, lease, *why(e))))
        except sqlq.DatabaseError:
            emit(log, "U", job.id, lease, "delete")


def why(error: sqlq.JobLost) -> list[str]:
    """An F line's reason: ``cancelled`` for JobCancelled (the lease's job was cancelled),
    none for any other lost lease."""
    return ["cancelled"] if isinstance(error, sqlq.JobCancelled) else []


def canceller(db: str, log: TextIO, rng: random.Random, durability: str) -> None:
    """Cancels jobs while the workers hold or wait for them: a reserved job found among
    recent ids, a recent id (near the newest ready or delayed job seen: most of them
    reserved or done by then), or the next ready job itself. Each cancel is logged before
    the call (``S``: its id, the time) and after (``Q``, ``N`` or ``Y``)."""
    q = _open(db, durability)
    high = 0  # the newest id seen
    while True:
        time.sleep(rng.uniform(0.005, 0.04))
        try:
            seen = [job.id for tube in TUBES[:2] for job in (q.peek_ready(tube),
                                                            q.peek_delayed(tube)) if job]
        except sqlq.DatabaseError:
            emit(log, "E", "peek")
            continue
        high = max([high, *seen])
        if not high:
            continue
        r = rng.random()
        target = (rng.choice(seen) if seen and r < 0.2 else
                  _held(q, rng, high) if r < 0.6 else
                  rng.randint(max(1, high - 60), high + 5) if r < 0.9 else
                  rng.randint(max(1, high - 2000), high))
        if target is None:
            continue
        emit(log, "S", target, now_ms())
        try:
            q.cancel(target)
        except sqlq.JobNotFound:
            emit(log, "N", target)
            continue
        except sqlq.DatabaseError:  # cut off: it may have committed
            emit(log, "Y", target)
            continue
        emit(log, "Q", target, now_ms())


def _held(q: sqlq.Queue, rng: random.Random, high: int) -> int | None:
    """A reserved job among a few recent ids (peeked one by one), if one is found: a
    holder's next verb must then fail with JobCancelled."""
    try:
        for job_id in rng.sample(range(max(1, high - 3000), high + 1), min(high, 20)):
            job = q.peek(job_id)
            if job is not None and job.state == "reserved":
                return job_id
    except sqlq.DatabaseError:
        pass
    return None


class _Nap:
    """A run of a few milliseconds, waited for by the worker's own loop (it touches the
    jobs it holds meanwhile)."""

    name = "chaos-nap"
    keepalive = False
    inline = False

    def __init__(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds

    def wait(self, timeout: float) -> Outcome | None:
        left = self.until - time.monotonic()
        time.sleep(max(0.0, min(left, timeout)))
        return DONE if left <= timeout else None

    def kill(self, reason: str) -> Outcome | None:
        return None  # runs are far shorter than any TTR


class _Naps:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def start(self, job: sqlq.Job) -> _Nap:
        return _Nap(self.rng.choice([0, 0, 0, 0.001, 0.005, 0.02]))

    def close(self) -> None:
        pass


def _logged_handling(log: TextIO, r_lines: bool = True) -> type[Any]:
    """``sqlq work``'s JobHandling, logging what it deletes and (``r_lines``) claims."""
    from sqlq.work.handling import JobHandling
    from sqlq.work.prefetch import Done

    class Logged(JobHandling):
        def claim(self, size: int, timeout: float, acks: list[Done]) -> list[sqlq.Job]:
            for done in acks:
                emit(log, "D", done.job.id, done.job.lease, now_ms())
            jobs = super().claim(size, timeout, acks)
            if r_lines:
                _claimed(log, jobs)
            return jobs

        def ack(self) -> None:
            for done in self.holding.done:
                emit(log, "D", done.job.id, done.job.lease, now_ms())
            super().ack()

        def give_back(self, job: sqlq.Job, why: str, name: str = "") -> None:
            # A release (a stopping worker's; SIGKILL leaves none, but a hold must never
            # end unlogged: the checker would count it on).
            before = now_ms()
            super().give_back(job, why, name)
            emit(log, "X", job.id, job.lease, before)

        def ack_each(self, acks: list[Done]) -> None:
            # The commit deleting them was cut off (Disconnected): it may have
            # committed, and each delete made again may then find its job gone.
            for done in acks:
                emit(log, "U", done.job.id, done.job.lease, "delete")
            super().ack_each(acks)

        def acked(self, acks: list[Done], lost: Sequence[int] = (), *,
                  cut_off: bool = False) -> None:
            at = now_ms()
            for done in acks:
                if done.job.id in lost:
                    # Cut off (and made again): its first commit may have deleted it.
                    emit(log, "U" if cut_off else "F", done.job.id, done.job.lease,
                         *(["delete"] if cut_off else []))
                else:
                    emit(log, "C", done.job.id, done.job.lease, at)

    return Logged


def _claimed(log: TextIO, jobs: Sequence[sqlq.Job]) -> None:
    at = time.time_ns() // 1_000_000
    for job in jobs:
        emit(log, "R", job.id, job.lease, job.body.split(b" ", 1)[0].decode(),
             job.reserved_until, at, round(job.ttr * 1000), job.tube)


def pworker(db: str, log: TextIO, rng: random.Random, durability: str) -> None:
    """``sqlq work``'s Worker with prefetch, logging what it claims and deletes."""
    from sqlq.work.worker import Worker

    class Logged(Worker):
        handling_class = _logged_handling(log)

    prefetch = rng.choice([None, 2, 8, 32])
    Logged(_open(db, durability), _Naps(rng), TUBES, prefetch=prefetch).run()


def aworker(db: str, log: TextIO, rng: random.Random, durability: str) -> None:
    """``sqlq work --concurrency``'s event-loop worker with prefetch, running async naps,
    logging what it claims (all of it passes through ``reserved``) and deletes (the
    JobHandling's ``claim`` and ``ack``, with their ``R`` lines left to ``reserved``)."""
    from sqlq.tasks.task import Task
    from sqlq.work.aworker import AsyncWorker
    from sqlq.work.taskrun import TaskRun, TaskRunner

    class Outcomes(_logged_handling(log, r_lines=False)):  # type: ignore[misc]
        def finish(self, job: sqlq.Job, name: str, outcome: Outcome,
                   duration: float) -> Any:
            before = now_ms()
            done = super().finish(job, name, outcome, duration)
            if outcome.status != "done":  # a nap cancelled at its TTR: released or buried
                emit(log, "X", job.id, job.lease, before)
            return done

        def reserved(self, jobs: Sequence[sqlq.Job]) -> None:
            _claimed(log, jobs)
            super().reserved(jobs)

    class Logged(AsyncWorker):
        handling_class = Outcomes

    async def nap(seconds: float) -> None:
        await asyncio.sleep(seconds)

    q = _open(db, durability)
    task = Task(q, nap, name="chaos-anap")

    class Naps(TaskRunner):
        def start(self, job: sqlq.Job) -> TaskRun:
            return TaskRun(task, [rng.choice([0, 0, 0, 0.001, 0.005, 0.02])], {}, job)

    Logged(q, Naps({}), TUBES, concurrency=rng.choice([2, 8]),
           prefetch=rng.choice([None, 1, 4, 32])).run()


def main() -> None:
    role, db, log_path, seed, durability = sys.argv[1:6]
    # Killed with the driver: a killed pytest leaves no agent running on.
    die_with_parent(int(os.environ[PARENT]))
    rng = random.Random(int(seed))
    with open(log_path, "a", encoding="utf-8") as log:
        {"producer": producer, "worker": worker, "pworker": pworker, "aworker": aworker,
         "canceller": canceller}[role](db, log, rng, durability)


if __name__ == "__main__":
    main()
