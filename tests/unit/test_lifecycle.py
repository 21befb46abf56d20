"""The job lifecycle, transition by transition, against beanstalkd's rules."""

from __future__ import annotations

import pytest

import sqlq
from sqlq import Queue
from tests.timing import FakeClock

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def test_put_reserve_delete(q: Queue) -> None:
    jid = q.put(b"hello", tube="emails")
    job = q.reserve(tubes=["emails"], timeout=0)
    assert job is not None
    assert (job.id, job.tube, job.body, job.priority, job.ttr, job.reserves) == (
        jid, "emails", b"hello", 1024, 60.0, 1)
    assert job.state == "reserved"
    job.delete()
    assert q.peek(jid) is None
    assert q.reserve(tubes="emails", timeout=0) is None


def test_str_body_is_utf8_and_json(q: Queue) -> None:
    q.put('{"to": "ä@example.com"}')
    job = q.reserve(timeout=0)
    assert job is not None
    assert job.body == '{"to": "ä@example.com"}'.encode()
    assert job.json() == {"to": "ä@example.com"}
    assert job.text() == '{"to": "ä@example.com"}'


def test_reserve_only_watched_tubes(q: Queue) -> None:
    q.put(b"a", tube="a")
    assert q.reserve(tubes="b", timeout=0) is None
    assert q.reserve(timeout=0) is None  # default tube
    job = q.reserve(tubes=["b", "a"], timeout=0)
    assert job is not None and job.tube == "a"


def test_priority_then_fifo_across_tubes(q: Queue) -> None:
    ids = [q.put(b"1", priority=5, tube="x"), q.put(b"2", priority=1, tube="y"),
           q.put(b"3", priority=5, tube="y"), q.put(b"4", priority=0, tube="z"),
           q.put(b"5", priority=1, tube="x"), q.put(b"6", priority=2**32 - 1, tube="x")]
    got = []
    while (job := q.reserve(tubes=["x", "y"], timeout=0)) is not None:
        got.append(job.id)
        job.delete()
    assert got == [ids[1], ids[4], ids[0], ids[2], ids[5]]


def test_delay(fq: Queue, clock: FakeClock) -> None:
    jid = fq.put(b"later", delay=10)
    assert fq.peek(jid).state == "delayed"  # type: ignore[union-attr]
    assert fq.reserve(timeout=0) is None
    assert fq.peek_delayed().id == jid  # type: ignore[union-attr]
    clock.advance(9.999)
    assert fq.reserve(timeout=0) is None
    clock.advance(0.001)
    assert fq.peek(jid).state == "ready"  # type: ignore[union-attr]
    assert fq.peek_ready().id == jid  # type: ignore[union-attr]
    job = fq.reserve(timeout=0)
    assert job is not None and job.id == jid


def test_due_delayed_job_competes_on_priority(fq: Queue, clock: FakeClock) -> None:
    ready = fq.put(b"ready", priority=10)
    due = fq.put(b"due", priority=1, delay=1)
    clock.advance(2)
    first = fq.reserve(timeout=0)
    assert first is not None and first.id == due
    second = fq.reserve(timeout=0)
    assert second is not None and second.id == ready


def test_ttr_expiry_makes_job_ready_and_counts_timeout(fq: Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", ttr=5)
    job = fq.reserve(timeout=0)
    assert job is not None
    assert fq.stats_job(jid)["time-left"] == 5
    clock.advance(5)
    # Observers see the expiry before anyone reserves again.
    assert fq.peek(jid).state == "ready"  # type: ignore[union-attr]
    assert fq.stats_job(jid)["timeouts"] == 1
    assert fq.stats()["current-jobs-ready"] == 1
    again = fq.reserve(timeout=0)
    assert again is not None and again.id == jid
    assert (again.reserves, again.timeouts) == (2, 1)
    assert again.lease != job.lease


def test_lease_lost_after_ttr(fq: Queue, clock: FakeClock) -> None:
    fq.put(b"x", ttr=1)
    job = fq.reserve(timeout=0)
    assert job is not None
    clock.advance(1)
    for verb in (job.delete, job.touch, job.bury, job.release, job.complete):
        with pytest.raises(sqlq.JobLost):
            verb()
    assert fq.peek(job.id).state == "ready"  # type: ignore[union-attr]


def test_lease_lost_when_reserved_again(fq: Queue, clock: FakeClock) -> None:
    fq.put(b"x", ttr=1)
    old = fq.reserve(timeout=0)
    clock.advance(1.5)
    new = fq.reserve(timeout=0)
    assert old is not None and new is not None and old.id == new.id
    with pytest.raises(sqlq.JobLost):
        old.delete()
    with pytest.raises(sqlq.JobLost):
        fq.reserve(timeout=0, delete=old)
    new.delete()  # the live lease still works
    assert fq.peek(new.id) is None


def test_lease_lost_after_the_next_holder_deleted_the_job(fq: Queue, clock: FakeClock) -> None:
    """JobLost, not JobNotFound, whatever became of the job: a worker that overran its
    TTR must learn "lost" and go on (reliability F3)."""
    ids = [fq.put(b"x", ttr=1) for _ in range(2)]
    stale = [fq.reserve(timeout=0) for _ in ids]
    clock.advance(1.5)
    for _ in ids:
        fresh = fq.reserve(timeout=0)
        assert fresh is not None
        fresh.delete()
    assert [fq.peek(i) for i in ids] == [None, None]
    old = stale[0]
    assert old is not None
    verbs = (old.delete, old.touch, old.bury, old.release, old.complete,
             lambda: fq.reserve(timeout=0, delete=old))
    for verb in verbs:
        with pytest.raises(sqlq.JobLost):
            verb()
    with pytest.raises(sqlq.JobNotFound):  # the administrator's by-id verbs: not found
        fq.delete(old.id)


def test_release_with_priority_and_delay(fq: Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", priority=100)
    job = fq.reserve(timeout=0)
    assert job is not None
    job.release(priority=7, delay=3)
    info = fq.stats_job(jid)
    assert (info["state"], info["pri"], info["releases"]) == ("delayed", 7, 1)
    assert fq.reserve(timeout=0) is None
    clock.advance(3)
    job = fq.reserve(timeout=0)
    assert job is not None and job.priority == 7
    job.release()
    assert fq.peek(jid).state == "ready"  # type: ignore[union-attr]


def test_bury_kick(q: Queue) -> None:
    jid = q.put(b"x")
    job = q.reserve(timeout=0)
    assert job is not None
    job.bury(reason="bad input", priority=3)
    peeked = q.peek(jid)
    assert peeked is not None
    assert (peeked.state, peeked.bury_reason, peeked.priority) == ("buried", "bad input", 3)
    assert q.peek_buried().id == jid  # type: ignore[union-attr]
    assert q.reserve(timeout=0) is None
    assert q.kick(10) == 1
    info = q.stats_job(jid)
    assert (info["state"], info["buries"], info["kicks"]) == ("ready", 1, 1)
    assert q.peek(jid).bury_reason is None  # type: ignore[union-attr]


def test_kick_buried_first_then_delayed(q: Queue) -> None:
    delayed = [q.put(b"d", delay=100) for _ in range(2)]
    buried = []
    for _ in range(3):
        q.put(b"b")
        job = q.reserve(timeout=0)
        assert job is not None
        job.bury()
        buried.append(job.id)
    assert q.kick(2) == 2
    assert [q.peek(i).state for i in buried] == ["ready", "ready", "buried"]  # type: ignore[union-attr]
    assert q.kick(5) == 1  # the last buried one, delayed untouched
    assert [q.peek(i).state for i in delayed] == ["delayed", "delayed"]  # type: ignore[union-attr]
    assert q.kick(5) == 2  # no buried left: delayed ones
    assert [q.peek(i).state for i in delayed] == ["ready", "ready"]  # type: ignore[union-attr]
    assert q.kick(5) == 0


def test_kick_job(q: Queue) -> None:
    jid = q.put(b"x", delay=100)
    q.kick_job(jid)
    assert q.peek(jid).state == "ready"  # type: ignore[union-attr]
    with pytest.raises(sqlq.JobNotFound):
        q.kick_job(jid)  # ready jobs cannot be kicked
    with pytest.raises(sqlq.JobNotFound):
        q.kick_job(999)


def test_touch_extends_reservation(fq: Queue, clock: FakeClock) -> None:
    fq.put(b"x", ttr=10)
    job = fq.reserve(timeout=0)
    assert job is not None
    clock.advance(8)
    job.touch()
    clock.advance(8)
    assert fq.peek(job.id).state == "reserved"  # type: ignore[union-attr]
    job.delete()


def test_by_id_verbs_need_no_lease(q: Queue) -> None:
    jid = q.put(b"x")
    assert q.reserve(timeout=0) is not None
    q.touch(jid)
    q.release(jid, delay=0)
    assert q.reserve(timeout=0) is not None
    q.bury(jid, reason="admin")
    with pytest.raises(sqlq.JobNotFound):
        q.release(jid)  # not reserved
    q.delete(jid)  # delete works in any state
    with pytest.raises(sqlq.JobNotFound):
        q.delete(jid)
    assert q.peek(jid) is None


def test_reserve_job_by_id(q: Queue) -> None:
    a = q.put(b"a", priority=0)
    b = q.put(b"b", priority=9, delay=100)
    job = q.reserve_job(b)
    assert job.id == b and job.state == "reserved"
    with pytest.raises(sqlq.JobNotFound):
        q.reserve_job(b)
    with pytest.raises(sqlq.JobNotFound):
        q.reserve_job(12345)
    assert q.reserve(timeout=0).id == a  # type: ignore[union-attr]


def test_pause_tube(fq: Queue, clock: FakeClock) -> None:
    fq.put(b"x", tube="p")
    fq.put(b"y", tube="other")
    fq.pause_tube("p", 10)
    job = fq.reserve(tubes=["p", "other"], timeout=0)
    assert job is not None and job.tube == "other"
    assert fq.reserve(tubes="p", timeout=0) is None
    stats = fq.stats_tube("p")
    assert (stats["pause"], stats["pause-time-left"], stats["cmd-pause-tube"]) == (10, 10, 1)
    assert fq.peek_ready("p") is not None  # peek ignores pauses, as in beanstalkd
    clock.advance(10)
    assert fq.reserve(tubes="p", timeout=0) is not None
    fq.pause_tube("other", 100)
    fq.pause_tube("other", 0)
    assert fq.stats_tube("other")["pause"] == 0


def test_unique_key_scoped_to_tube_while_live(q: Queue) -> None:
    a = q.put(b"1", unique_key="k")
    assert q.put(b"2", unique_key="k") == a
    other = q.put(b"3", unique_key="k", tube="elsewhere")
    assert other != a
    job = q.reserve(timeout=0)
    assert job is not None and job.id == a
    assert q.put(b"4", unique_key="k") == a  # reserved is still live
    job.bury()
    assert q.put(b"5", unique_key="k") == a  # buried too
    q.delete(a)
    fresh = q.put(b"6", unique_key="k")
    assert fresh != a
    assert q.stats()["total-jobs"] == 3


def test_ids_never_reused(q: Queue) -> None:
    first = q.put(b"x")
    q.delete(first)
    assert q.put(b"y") == first + 1


def test_put_many_one_transaction(q: Queue) -> None:
    ids = q.put_many([b"a", "b", b"c"], tube="batch", priority=5)
    assert ids == sorted(ids) and len(ids) == 3
    assert [q.reserve(tubes="batch", timeout=0).body for _ in ids] == [b"a", b"b", b"c"]  # type: ignore[union-attr]
    with pytest.raises(sqlq.JobTooBig):
        q.put_many([b"ok", b"x" * (q.max_job_size + 1)], tube="batch")
    assert q.stats_tube("batch")["current-jobs-ready"] == 0  # nothing of the failed batch


def test_stats_values(fq: Queue, clock: FakeClock) -> None:
    fq.put(b"u", priority=1)
    fq.put(b"r")
    fq.put(b"d", delay=5)
    fq.put(b"b", tube="t2")
    job = fq.reserve(tubes="t2", timeout=0)
    job.bury()  # type: ignore[union-attr]
    fq.put(b"res", tube="t2")
    fq.reserve(tubes="t2", timeout=0)
    clock.advance(1)
    stats = fq.stats()
    assert {k: stats[k] for k in stats if k.startswith("current-jobs")} == {
        "current-jobs-urgent": 1, "current-jobs-ready": 2, "current-jobs-reserved": 1,
        "current-jobs-delayed": 1, "current-jobs-buried": 1, "current-jobs-waiting": 0}
    assert stats["total-jobs"] == 5
    assert stats["current-tubes"] == 2
    tube = fq.stats_tube("t2")
    assert (tube["current-jobs-buried"], tube["current-jobs-reserved"], tube["total-jobs"]) == (
        1, 1, 2)
    info = fq.stats_job(3)
    assert info == {"id": 3, "tube": "default", "state": "delayed", "pri": 1024, "age": 1,
                    "delay": 5, "ttr": 60, "time-left": 4, "file": 0, "reserves": 0,
                    "timeouts": 0, "releases": 0, "buries": 0, "kicks": 0,
                    "failures": 0, "last-error": "", "last-traceback": "", "waiting-on": 0,
                    "progress": "", "progress-message": "", "steps": [], "cursors": [],
                    "group": None}
    assert fq.tubes() == ["default", "t2"]
    with pytest.raises(sqlq.JobNotFound):
        fq.stats_job(99)
    assert fq.stats_tube("nope")["current-jobs-ready"] == 0  # a valid name: zeros


def test_ttr_zero_raised_to_one_second(q: Queue) -> None:
    jid = q.put(b"x", ttr=0)
    assert q.stats_job(jid)["ttr"] == 1


def test_body_size_limit(db_url: str) -> None:
    with Queue(db_url, max_job_size=1 << 20) as q:
        q.put(b"x" * (1 << 20))
        with pytest.raises(sqlq.JobTooBig):
            q.put(b"x" * ((1 << 20) + 1))
    with Queue(db_url, max_job_size=10) as small, pytest.raises(sqlq.JobTooBig):
        small.put(b"x" * 11)


@pytest.mark.face
@pytest.mark.parametrize("kwargs, error, word", [
    ({"tube": ""}, sqlq.InvalidTube, "tube"),
    ({"tube": "-x"}, sqlq.InvalidTube, "tube"),
    ({"tube": "a b"}, sqlq.InvalidTube, "tube"),
    ({"tube": "x" * 201}, sqlq.InvalidTube, "tube"),
    ({"tube": 5}, TypeError, "tube"),
    ({"priority": -1}, ValueError, "priority"),
    ({"priority": 2**32}, ValueError, "priority"),
    ({"priority": 1.5}, TypeError, "priority"),
    ({"priority": True}, TypeError, "priority"),
    ({"delay": -1}, ValueError, "delay"),
    ({"delay": float("nan")}, ValueError, "delay"),
    ({"delay": "5"}, TypeError, "delay"),
    ({"ttr": -5}, ValueError, "ttr"),
    ({"ttr": float("inf")}, ValueError, "ttr"),
    ({"unique_key": 5}, TypeError, "unique_key"),
])
def test_bad_arguments_name_the_argument(q: Queue, kwargs: dict[str, object],
                                         error: type[Exception], word: str) -> None:
    with pytest.raises(error, match=word):
        q.put(b"x", **kwargs)  # type: ignore[arg-type]
    assert q.stats()["total-jobs"] == 0


@pytest.mark.face
def test_bad_body_and_reserve_arguments(q: Queue) -> None:
    with pytest.raises(TypeError, match="body"):
        q.put(123)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        q.reserve(timeout=-1)
    with pytest.raises(TypeError, match="tubes"):
        q.reserve(tubes=[1], timeout=0)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="tubes"):
        q.reserve(tubes=[], timeout=0)
    with pytest.raises(sqlq.InvalidTube):
        q.reserve(tubes="bad tube", timeout=0)


def test_errors_share_one_root() -> None:
    for error in (sqlq.JobNotFound, sqlq.JobLost, sqlq.JobTooBig, sqlq.JobBuried,
                  sqlq.Timeout, sqlq.InvalidTube, sqlq.SchemaError, sqlq.DatabaseError):
        assert issubclass(error, sqlq.Error)
    assert str(sqlq.JobLost()).startswith("The job's lease was lost")
    assert issubclass(sqlq.Timeout, TimeoutError) and issubclass(sqlq.InvalidTube, ValueError)
    assert str(sqlq.Timeout()) == "Timed out."


def test_the_servers_own_errors_are_not_sqlq_errors() -> None:
    """They never reach a user as exceptions: one is a reply, the other a usage line."""
    from sqlq.server.flags import UsageError
    from sqlq.server.protocol import ProtocolError

    assert not issubclass(ProtocolError, sqlq.Error) and not issubclass(UsageError, sqlq.Error)


def test_close_gives_reservations_back(db_url: str) -> None:
    with Queue(db_url) as producer:
        jid = producer.put(b"x")
        holder = Queue(db_url)
        assert holder.reserve(timeout=0) is not None
        assert producer.peek(jid).state == "reserved"  # type: ignore[union-attr]
        holder.close()
        assert producer.peek(jid).state == "ready"  # type: ignore[union-attr]


def test_stats_job_delay_is_the_last_delay_set(fq: Queue, clock: FakeClock) -> None:
    """As beanstalkd: put's or release's delay, kept after the job becomes ready or is kicked."""
    jid = fq.put(b"x", delay=3)
    clock.advance(3)
    assert fq.stats_job(jid)["delay"] == 3
    job = fq.reserve(timeout=0)
    assert job is not None
    job.release(delay=100)
    fq.kick_job(jid)
    info = fq.stats_job(jid)
    assert (info["state"], info["delay"]) == ("ready", 100)


def test_a_waiting_look_reads_without_claiming(fq: Queue, clock: FakeClock) -> None:
    """The read a waiting reserve makes before it claims (no public name: the engine's)."""
    def has_ready(tubes: str | list[str] | None = None) -> bool:
        return fq.engine._has_ready(fq.engine.tubes(tubes))

    assert not has_ready()
    fq.put(b"x", delay=1, tube="t")
    assert not has_ready("t")
    clock.advance(1)
    assert has_ready(["other", "t"])
    fq.pause_tube("t", 5)
    assert not has_ready("t")
    assert fq.peek_ready("t") is not None


def test_command_counters_per_tube(q: Queue) -> None:
    a = q.put(b"a", tube="t")
    q.put_many([b"b", b"c"], tube="t")
    q.delete(a)
    job = q.reserve(tubes="t", timeout=0)
    job = q.reserve(tubes="t", timeout=0, delete=job)
    job.complete(b"done")  # type: ignore[union-attr]
    q.pause_tube("t", 0)
    q.put(b"d", tube="t")  # an empty tube does not exist, as in beanstalkd
    stats = q.stats_tube("t")
    assert (stats["total-jobs"], stats["cmd-delete"], stats["cmd-pause-tube"]) == (4, 3, 1)
