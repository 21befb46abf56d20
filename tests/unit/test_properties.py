"""A hypothesis state machine: sqlq against a small in-memory model of beanstalkd's rules.

The model keeps, per job, the state as last written and computes the state "as of
now" the way beanstalkd's observers see it. Every step compares what sqlq
returns (reserve, peek, stats) with the model, under a fake clock.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

import sqlq
from sqlq import Queue
from tests.conftest import PG_SHARED, is_postgres
from tests.timing import FakeClock

pytestmark = pytest.mark.sqlite3_driver

TUBES = ["a", "b"]


@dataclass
class ModelJob:
    id: int
    tube: str
    pri: int
    ttr: int  # ms
    state: str  # as written: ready, delayed, reserved, buried, waiting
    until: int = 0  # delay_until or reserved_until
    delay: int = 0  # ms: the put's delay, counted from the release for a waiting job
    parents: set[int] = field(default_factory=set)  # the live jobs a waiting one waits for
    lease: int = 0
    reserves: int = 0
    timeouts: int = 0
    releases: int = 0
    buries: int = 0
    kicks: int = 0


@dataclass
class Model:
    jobs: dict[int, ModelJob] = field(default_factory=dict)
    paused_until: dict[str, int] = field(default_factory=dict)
    next_lease: int = 0

    def now_state(self, job: ModelJob, now: int) -> str:
        if job.state in ("delayed", "reserved") and job.until <= now:
            return "ready"
        return job.state

    def remove(self, job_id: int, now: int) -> None:
        """A job gone by any path: each child waiting for it has one parent less, and
        with none left is ready, or delayed by its own delay from now."""
        self.jobs.pop(job_id)
        for child in self.jobs.values():
            if job_id in child.parents:
                child.parents.discard(job_id)
                if not child.parents:
                    child.state = "delayed" if child.delay else "ready"
                    child.until = now + child.delay

    def live_lease(self, job_id: int, lease: int, now: int) -> bool:
        job = self.jobs.get(job_id)
        return (job is not None and job.state == "reserved" and job.until > now
                and job.lease == lease)


class QueueMachine(RuleBasedStateMachine):
    handles = Bundle("handles")

    #: Makes a fresh database per example: (its location, what removes it).
    fresh_db: Callable[[], tuple[str, Callable[[], None]]]

    def __init__(self) -> None:
        super().__init__()
        location, self._remove = self.fresh_db()
        self.clock = FakeClock()
        self.q = Queue(location, durability="normal", clock=self.clock)
        self.m = Model()
        self.issued: list[int] = []  # every id put, live or gone: after= draws from them

    def teardown(self) -> None:
        self.q.close()
        self._remove()

    @property
    def now(self) -> int:
        return self.clock.now

    @rule(tube=st.sampled_from(TUBES), pri=st.sampled_from([0, 1, 1024, 2**32 - 1]),
          delay=st.sampled_from([0, 0.5, 1, 3]), ttr=st.sampled_from([1, 2]),
          data=st.data())
    def put(self, tube: str, pri: int, delay: float, ttr: int, data: st.DataObject) -> None:
        # A third of the puts wait for up to three earlier jobs, live or gone.
        after = data.draw(st.lists(st.sampled_from(self.issued), max_size=3)
                          if self.issued else st.just([]))
        jid = self.q.put(b"x", tube=tube, priority=pri, delay=delay, ttr=ttr,
                         after=after or None)
        assert jid not in self.m.jobs
        self.issued.append(jid)
        delay_ms = int(delay * 1000)
        parents = {p for p in after if p in self.m.jobs}
        state = "waiting" if parents else "delayed" if delay_ms else "ready"
        self.m.jobs[jid] = ModelJob(jid, tube, pri, ttr * 1000, state,
                                    0 if parents else self.now + delay_ms, delay=delay_ms,
                                    parents=parents)

    @rule(data=st.data())
    def delete_by_id(self, data: st.DataObject) -> None:
        """An operator's delete of any job, a waiting one or a parent included."""
        if not self.issued:
            return
        jid = data.draw(st.sampled_from(self.issued))
        if jid in self.m.jobs:
            self.q.delete(jid)
            self.m.remove(jid, self.now)
        else:
            with pytest.raises(sqlq.JobNotFound):
                self.q.delete(jid)

    @rule(target=handles, tubes=st.lists(st.sampled_from(TUBES), min_size=1, unique=True))
    def reserve(self, tubes: list[str]) -> object:
        now = self.now
        candidates = [j for j in self.m.jobs.values()
                      if j.tube in tubes and self.m.paused_until.get(j.tube, 0) <= now
                      and self.m.now_state(j, now) == "ready"]
        job = self.q.reserve(tubes=tubes, timeout=0)
        if not candidates:
            assert job is None
            return None
        best = min(candidates, key=lambda j: (j.pri, j.id))
        assert job is not None and job.id == best.id
        if best.state == "reserved":
            best.timeouts += 1
        best.state, best.until, best.reserves = "reserved", now + best.ttr, best.reserves + 1
        best.lease = job.lease  # type: ignore[assignment]
        assert (job.reserves, job.timeouts, job.priority) == (best.reserves, best.timeouts,
                                                               best.pri)
        return job

    def _candidates(self, tubes: list[str]) -> list[ModelJob]:
        now = self.now
        return sorted((j for j in self.m.jobs.values()
                       if j.tube in tubes and self.m.paused_until.get(j.tube, 0) <= now
                       and self.m.now_state(j, now) == "ready"), key=lambda j: (j.pri, j.id))

    def _delete_batch(self, done: list[sqlq.Job | None],
                      call: Callable[[list[sqlq.Job]], object]) -> object:
        """Run a batch verb that deletes ``done``; check the lost leases it names."""
        jobs = [j for j in done if j is not None]
        now = self.now
        live = [j for j in jobs if self.m.live_lease(j.id, j.lease, now)]  # type: ignore[arg-type]
        # by handle: a job named twice, under a stale lease and its live one, is both
        # deleted and named lost
        lost = sorted({j.id for j in jobs if j not in live})
        try:
            value = call(jobs)
        except sqlq.JobLost as e:
            assert lost and sorted(set(e.job_ids)) == lost, (e.job_ids, lost)
            value = None
        else:
            assert not lost, f"no JobLost for {lost}"
        for j in live:  # the live leases' deletes stand either way
            if j.id in self.m.jobs:
                self.m.remove(j.id, now)
        return value

    @rule(target=handles, tubes=st.lists(st.sampled_from(TUBES), min_size=1, unique=True),
          n=st.integers(1, 4), done=st.lists(handles, max_size=3))
    def reserve_many(self, tubes: list[str], n: int, done: list[sqlq.Job | None]) -> object:
        got = self._delete_batch(done, lambda jobs: self.q.reserve_many(
            n, tubes=tubes, timeout=0, delete=jobs or None))
        if got is None:  # a lease was lost: nothing was claimed
            return multiple()
        assert isinstance(got, list)
        now = self.now
        best = self._candidates(tubes)[:n]
        assert [j.id for j in got] == [b.id for b in best]
        assert len({j.lease for j in got}) == len(got)
        for job, b in zip(got, best, strict=True):
            if b.state == "reserved":
                b.timeouts += 1
            b.state, b.until, b.reserves = "reserved", now + b.ttr, b.reserves + 1
            b.lease = job.lease  # type: ignore[assignment]
            assert (job.reserves, job.timeouts, job.priority) == (b.reserves, b.timeouts, b.pri)
        return multiple(*got)

    @rule(done=st.lists(handles, max_size=4))
    def delete_many(self, done: list[sqlq.Job | None]) -> None:
        self._delete_batch(done, self.q.delete_many)

    def _leased(self, job: sqlq.Job | None, action: str, apply) -> None:  # type: ignore[no-untyped-def]
        if job is None:
            return
        live = self.m.live_lease(job.id, job.lease, self.now)  # type: ignore[arg-type]
        try:
            getattr(job, action[0])(*action[1:])
        except sqlq.JobLost:
            # Whatever became of the job (expired, reserved again, deleted), a lease that
            # is no longer live is lost: never JobNotFound for a Job handle.
            assert not live
            return
        assert live, f"{action[0]} succeeded without a live lease"
        apply(self.m.jobs[job.id])

    @rule(job=handles)
    def delete(self, job: sqlq.Job | None) -> None:
        self._leased(job, ("delete",), lambda j: self.m.remove(j.id, self.now))

    @rule(job=handles)
    def complete(self, job: sqlq.Job | None) -> None:
        """A finish with a result: the job goes (its children released) as by delete."""
        self._leased(job, ("complete", b"r"), lambda j: self.m.remove(j.id, self.now))

    @rule(job=handles, delay=st.sampled_from([0, 1]), pri=st.sampled_from([None, 5]))
    def release(self, job: sqlq.Job | None, delay: int, pri: int | None) -> None:
        def apply(j: ModelJob) -> None:
            j.state = "delayed" if delay else "ready"
            j.until = self.now + delay * 1000
            j.releases += 1
            j.pri = j.pri if pri is None else pri
        self._leased(job, ("release", pri, delay), apply)

    @rule(job=handles)
    def bury(self, job: sqlq.Job | None) -> None:
        def apply(j: ModelJob) -> None:
            j.state, j.buries = "buried", j.buries + 1
        self._leased(job, ("bury",), apply)

    @rule(job=handles)
    def touch(self, job: sqlq.Job | None) -> None:
        def apply(j: ModelJob) -> None:
            j.until = self.now + j.ttr
        self._leased(job, ("touch",), apply)

    @rule(tube=st.sampled_from(TUBES), bound=st.integers(0, 3))
    def kick(self, tube: str, bound: int) -> None:
        now = self.now
        buried = sorted(j.id for j in self.m.jobs.values()
                        if j.tube == tube and j.state == "buried")
        if buried:
            chosen = buried[:bound]
        else:
            delayed = sorted((j.until, j.id) for j in self.m.jobs.values()
                             if j.tube == tube and self.m.now_state(j, now) == "delayed")
            chosen = [i for _, i in delayed[:bound]]
        assert self.q.kick(bound, tube) == len(chosen)
        for i in chosen:
            j = self.m.jobs[i]
            j.state, j.kicks = "ready", j.kicks + 1

    @rule(tube=st.sampled_from(TUBES), seconds=st.sampled_from([0, 1, 2]))
    def pause(self, tube: str, seconds: int) -> None:
        self.q.pause_tube(tube, seconds)
        self.m.paused_until[tube] = self.now + seconds * 1000

    @rule(seconds=st.sampled_from([0.001, 0.5, 1, 2.5]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def observers_agree(self) -> None:
        now = self.now
        stats = self.q.stats()
        states = [self.m.now_state(j, now) for j in self.m.jobs.values()]
        for state in ("ready", "reserved", "delayed", "buried", "waiting"):
            assert stats[f"current-jobs-{state}"] == states.count(state), state
        urgent = sum(1 for j in self.m.jobs.values()
                     if self.m.now_state(j, now) == "ready" and j.pri < 1024)
        assert stats["current-jobs-urgent"] == urgent
        for j in self.m.jobs.values():
            info = self.q.stats_job(j.id)
            assert info["state"] == self.m.now_state(j, now)
            expected_timeouts = j.timeouts + (j.state == "reserved" and j.until <= now)
            assert (info["pri"], info["reserves"], info["timeouts"], info["releases"],
                    info["buries"], info["kicks"]) == (
                j.pri, j.reserves, expected_timeouts, j.releases, j.buries, j.kicks)
        for tube in TUBES:
            ready = [j for j in self.m.jobs.values()
                     if j.tube == tube and self.m.now_state(j, now) == "ready"]
            peeked = self.q.peek_ready(tube)
            if ready:
                assert peeked is not None
                assert peeked.id == min(ready, key=lambda j: (j.pri, j.id)).id
            else:
                assert peeked is None
            buried = sorted(j.id for j in self.m.jobs.values()
                            if j.tube == tube and j.state == "buried")
            peek_buried = self.q.peek_buried(tube)
            assert (peek_buried.id if peek_buried else None) == (buried[0] if buried else None)


@pytest.mark.slow
def test_queue_follows_the_model(backend: str, request: pytest.FixtureRequest) -> None:
    """The state machine, on a fresh database per example, on each backend (on
    PostgreSQL, the process's shared database, reset after each example)."""
    if is_postgres(backend):
        shared = request.getfixturevalue(PG_SHARED[backend])

        def fresh_db() -> tuple[str, Callable[[], None]]:
            return shared.url, shared.reset
    else:
        def fresh_db() -> tuple[str, Callable[[], None]]:
            directory = tempfile.TemporaryDirectory()
            return f"{directory.name}/q.db", directory.cleanup

    machine = type("Machine", (QueueMachine,), {"fresh_db": staticmethod(fresh_db)})
    # The model is the same on every backend: the default one gets the most examples;
    # the others, each example several times dearer (a PostgreSQL database reset per
    # example, each statement a round trip), check the same semantics with fewer.
    examples = 60 if backend == "sqlite" else 20
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=40, deadline=None,
        suppress_health_check=[HealthCheck.too_slow]))
