"""Group commit in ``sqlq serve`` (server/batch.py): commands that arrive together share
one transaction and one fsync, and nobody hears of a write before it is durable.

* pipelined on one connection, replies match beanstalkd's byte for byte, failures
  (EXPECTED_CRLF, NOT_FOUND, JOB_TOO_BIG, BAD_FORMAT...) answering only their command;
* in full mode, a few hundred puts pipelined on one connection, or sent at once by
  several connections, cost a few fsyncs, not one each;
* SIGKILL of the server (full mode) while clients pipeline puts and deletes: every
  acknowledged put is in the file, every acknowledged delete is gone.

Power cuts during pipelined rounds are in system/test_powercut.py.
"""

from __future__ import annotations

import os
import random
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

import sqlq
from tests.servers import BeanstalkdProcess, Raw, Running, on_both
from tests.vfs import CountingVFS

BODY = b"x" * 40


def put(body: bytes = BODY, pri: int = 1024, ttr: int = 600) -> bytes:
    return b"put %d 0 %d %d\r\n%s\r\n" % (pri, ttr, len(body), body)


def replies(client: Raw, n: int) -> list[bytes]:
    return [client.reply() for _ in range(n)]


# ---- the protocol, pipelined ----------------------------------------------------------------

PIPELINED = [
    put(b"a", 5), put(b"bb", 1), b"use t1\r\n", put(b"c"),
    b"delete 99\r\n", b"reserve-with-timeout 0\r\n", b"peek 2\r\n", b"put 0 0 1 65536\r\n"
    + b"z" * 65536 + b"\r\n", b"reserve-job 1\r\n", b"release 1 7 0\r\n", b"bury 2 3\r\n",
    b"bury 2 3\r\n", b"kick 5\r\n", b"delete 3\r\n", b"delete 3\r\n", b"touch 1\r\n",
    b"reservex\r\n", b"hello\r\n", b"reserve-with-timeout 0\r\n", b"delete 1\r\n",
    b"kick-job 2\r\n", b"kick-job 2\r\n", b"peek-ready\r\n", b"watch t1\r\n",
    b"reserve-with-timeout 0\r\n", b"delete 2\r\n", b"reserve-with-timeout 0\r\n",
    b"list-tube-used\r\n", b"pause-tube t1 0\r\n", b"pause-tube nope 1\r\n",
    b"put 0 0 1 3\r\nabcXY",  # last: beanstalkd spends a job id on it, sqlq does not
]


def test_pipelined_commands_answer_as_beanstalkd_byte_for_byte(tmp_path: Path) -> None:
    """One write holding puts, claims, deletes and failures of every kind: each command
    gets beanstalkd's reply, in order, the failures touching only their own command."""
    def play(address: tuple[str, int]) -> list[bytes]:
        client = Raw(address)
        try:
            client.send(b"".join(PIPELINED))
            return replies(client, len(PIPELINED))
        finally:
            client.close()

    ours, theirs = on_both(tmp_path, play)
    for command, a, b in zip(PIPELINED, ours, theirs, strict=True):
        assert a == b, command[:40]


def test_pipelined_puts_from_many_connections_keep_each_connections_order(
        srv: Running) -> None:
    clients = [Raw(srv.address) for _ in range(6)]
    for n, client in enumerate(clients):
        client.send(b"use c%d\r\n" % n + b"".join(put(b"%d-%d" % (n, i)) for i in range(50)))
    ids: list[int] = []
    for client in clients:
        assert client.reply().startswith(b"USING ")
        mine = [int(r.split()[1]) for r in replies(client, 50)]
        assert mine == sorted(mine)  # a connection's puts are stored in its order
        ids += mine
    assert len(set(ids)) == 300
    for n, client in enumerate(clients):  # and each body went to its own tube
        client.send(b"watch c%d\r\nignore default\r\n" % n)
        replies(client, 2)
        for i in range(50):
            assert client.cmd(b"reserve-with-timeout 0").endswith(b"\r\n%d-%d\r\n" % (n, i))
        client.close()


# ---- one fsync for many commands ----------------------------------------------------------


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[Running, CountingVFS]]:
    """A full-durability server whose file's fsyncs are counted."""
    vfs = CountingVFS()
    running = Running(str(tmp_path / "counted.db"), durability="full", vfs="counting")
    yield running, vfs
    running.stop()
    vfs.unregister()


@pytest.mark.sqlite_only
def test_pipelined_puts_and_deletes_share_fsyncs(
        counted: tuple[Running, CountingVFS]) -> None:
    running, vfs = counted
    client = Raw(running.address)
    before = vfs.counts["wal"]
    client.send(b"".join(put() for _ in range(300)))
    assert replies(client, 300) == [b"INSERTED %d\r\n" % i for i in range(1, 301)]
    client.send(b"".join(b"delete %d\r\n" % i for i in range(1, 301, 2)))
    assert replies(client, 150) == [b"DELETED\r\n"] * 150
    syncs = vfs.counts["wal"] - before
    assert syncs <= 30, f"{syncs} fsyncs for 450 pipelined writes"  # one each: 450
    client.close()


@pytest.mark.sqlite_only
def test_puts_from_many_connections_at_once_share_fsyncs(
        counted: tuple[Running, CountingVFS]) -> None:
    running, vfs = counted
    clients = [Raw(running.address) for _ in range(8)]
    go = threading.Barrier(8)
    before = vfs.counts["wal"]
    got: list[BaseException] = []

    def run(client: Raw) -> None:
        try:
            go.wait()
            for _ in range(5):
                client.send(b"".join(put() for _ in range(20)))
                assert all(r.startswith(b"INSERTED ") for r in replies(client, 20))
        except BaseException as e:  # reported below
            got.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not got, got
    syncs = vfs.counts["wal"] - before
    assert syncs < 400 // 4, f"{syncs} fsyncs for 800 puts from 8 connections"
    for client in clients:
        client.close()
    with sqlq.Queue(running.path) as q:
        assert q.stats()["current-jobs-ready"] == 800


@pytest.mark.sqlite_only
def test_a_put_failing_in_sqlite_answers_only_itself_without_a_savepoint(srv: Running) -> None:
    """A put whose INSERT fails in the middle of a pipelined round (here a trigger
    refuses its body; a full disk would too) answers INTERNAL_ERROR; the round's
    other puts, run without savepoints (Backend.statement_atomic), are all stored."""
    with apsw.Connection(srv.path) as db:
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON sqlq_jobs WHEN NEW.body = x'626164' "
                   "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    client = Raw(srv.address)
    bodies = [b"a", b"b", b"bad", b"c", b"bad", b"d"]
    client.send(b"".join(put(body) for body in bodies))
    assert replies(client, 6) == [b"INSERTED 1\r\n", b"INSERTED 2\r\n", b"INTERNAL_ERROR\r\n",
                                  b"INSERTED 3\r\n", b"INTERNAL_ERROR\r\n", b"INSERTED 4\r\n"]
    client.close()
    with apsw.Connection(srv.path) as db:
        rows = list(db.execute("SELECT id, body FROM sqlq_jobs ORDER BY id"))
    assert rows == [(1, b"a"), (2, b"b"), (3, b"c"), (4, b"d")]


# ---- reserves arriving together -----------------------------------------------------------


def held_loop(running: Running) -> threading.Event:
    """Stop the server's loop until the returned event is set: whatever clients send
    meanwhile is read in one round of the loop."""
    entered, go = threading.Event(), threading.Event()

    def block() -> None:
        entered.set()
        go.wait(30)

    running.server.loop.call_soon_threadsafe(block)
    assert entered.wait(10)
    return go


def test_reserves_from_many_connections_in_one_round_share_a_claim(srv: Running) -> None:
    """Eight connections reserve in the same round: one claim serves them (server
    waiters.flush), no job goes to two of them, and together they get the eight most
    urgent jobs, as eight claims one after another would have."""
    rng = random.Random(12)
    producer = Raw(srv.address)
    pris = [rng.choice([0, 5, 5, 9, 1024]) for _ in range(20)]
    producer.send(b"".join(put(b"%d" % i, pri) for i, pri in enumerate(pris)))
    assert replies(producer, 20) == [b"INSERTED %d\r\n" % i for i in range(1, 21)]
    workers = [Raw(srv.address) for _ in range(8)]
    for w in workers:  # connected and accepted before the loop stops
        assert w.cmd(b"list-tube-used") == b"USING default\r\n"
    go = held_loop(srv)
    for w in workers:
        w.send(b"reserve-with-timeout 0\r\n")
    go.set()
    got = [int(w.reply().split()[1]) for w in workers]
    assert len(set(got)) == 8, got
    best = sorted(range(1, 21), key=lambda i: (pris[i - 1], i))[:8]
    assert sorted(got) == sorted(best)
    assert srv.server.waiters.claimed_together >= 2
    for w, job in zip(workers, got, strict=True):  # each holds its own under its lease
        assert w.cmd(b"delete %d" % job) == b"DELETED\r\n"
    for c in (producer, *workers):
        c.close()


def test_reserves_in_one_round_with_other_tubes_and_too_few_jobs(srv: Running) -> None:
    """Reserves of one round over different watch lists, more of them than ready jobs:
    each gets a job of its own tubes or TIMED_OUT, and a blocking one waits for the
    next put."""
    producer = Raw(srv.address)
    producer.send(b"use a\r\n" + put(b"a1", 3) + put(b"a2", 1) + b"use b\r\n" + put(b"b1"))
    assert replies(producer, 5)[1:] == [b"INSERTED 1\r\n", b"INSERTED 2\r\n",
                                        b"USING b\r\n", b"INSERTED 3\r\n"]
    watching = [b"a", b"a", b"a", b"b", b"b", b"c"]
    workers = [Raw(srv.address) for _ in watching]
    for w, tube in zip(workers, watching, strict=True):
        assert w.cmd(b"watch " + tube) == b"WATCHING 2\r\n"
        assert w.cmd(b"ignore default") == b"WATCHING 1\r\n"
    go = held_loop(srv)
    for w in workers[:5]:
        w.send(b"reserve-with-timeout 0\r\n")
    workers[5].send(b"reserve\r\n")
    go.set()
    answers = [w.reply() for w in workers[:5]]
    assert sorted(answers[:3]) == [b"RESERVED 1 2\r\na1\r\n", b"RESERVED 2 2\r\na2\r\n",
                                   b"TIMED_OUT\r\n"]
    assert sorted(answers[3:]) == [b"RESERVED 3 2\r\nb1\r\n", b"TIMED_OUT\r\n"]
    assert srv.server.waiters.claimed_together >= 2  # a1 and a2 in one claim
    assert producer.cmd(b"use c") == b"USING c\r\n"
    producer.send(put(b"c1"))
    assert producer.reply() == b"INSERTED 4\r\n"
    assert workers[5].reply() == b"RESERVED 4 2\r\nc1\r\n"
    for c in (producer, *workers):
        c.close()


def test_eight_workers_draining_together_get_each_job_once(srv: Running) -> None:
    """Eight connections reserve and delete as fast as they can: every job is handed
    out once (each delete under its reserver's lease succeeds), the most urgent
    first within each worker, and rounds of several reserves did share claims."""
    producer = Raw(srv.address)
    rng = random.Random(8)
    pris = [rng.randrange(4) for _ in range(200)]
    producer.send(b"".join(put(b"%d" % i, pri) for i, pri in enumerate(pris)))
    assert replies(producer, 200)[-1] == b"INSERTED 200\r\n"
    got: list[list[int]] = [[] for _ in range(8)]
    errors: list[BaseException] = []

    def work(n: int) -> None:
        client = Raw(srv.address)
        try:
            while (reply := client.cmd(b"reserve-with-timeout 0")) != b"TIMED_OUT\r\n":
                job = int(reply.split()[1])
                got[n].append(job)
                assert client.cmd(b"delete %d" % job) == b"DELETED\r\n"
        except BaseException as e:  # reported below
            errors.append(e)
        finally:
            client.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    every = sorted(job for jobs in got for job in jobs)
    assert every == list(range(1, 201))
    for jobs in got:  # each worker's jobs come in priority order (ties: by id)
        keys = [(pris[j - 1], j) for j in jobs]
        assert keys == sorted(keys)
    assert srv.server.waiters.claimed_together > 0
    producer.close()


# ---- SIGKILL ------------------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_sigkill_loses_no_acknowledged_pipelined_put_or_delete(tmp_path: Path) -> None:
    """Four clients pipeline rounds of puts and deletes at a full-durability server,
    which is SIGKILLed once a few hundred writes were acknowledged."""
    server = BeanstalkdProcess(tmp_path, "-f", "0")
    acked_puts: list[set[int]] = [set() for _ in range(4)]
    acked_deletes: list[set[int]] = [set() for _ in range(4)]
    # Deletes sent but not yet answered: the kill may land after their commit and before
    # their reply, so such a job may be gone without the client having been told.
    sent_deletes: list[set[int]] = [set() for _ in range(4)]
    enough = threading.Event()
    errors: list[BaseException] = []

    def client(n: int) -> None:
        rng = random.Random(n)
        raw = Raw(("127.0.0.1", server.port))
        try:
            while True:
                mine = sorted(acked_puts[n] - acked_deletes[n])
                doomed = rng.sample(mine, min(len(mine), rng.randint(0, 8)))
                k = rng.randint(1, 12)
                sent_deletes[n].update(doomed)
                raw.send(b"".join(put(b"%d" % n) for _ in range(k))
                         + b"".join(b"delete %d\r\n" % i for i in doomed))
                for _ in range(k):
                    acked_puts[n].add(int(raw.reply().split()[1]))
                for i in doomed:
                    assert raw.reply() == b"DELETED\r\n"
                    acked_deletes[n].add(i)
                if sum(map(len, acked_puts)) > 600:
                    enough.set()
        except (EOFError, OSError):
            return  # the server is gone: what was acknowledged so far counts
        except BaseException as e:
            errors.append(e)
            enough.set()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    assert enough.wait(60)
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait()
    for t in threads:
        t.join(30)
    server.stop()
    assert not errors, errors
    with apsw.Connection(str(server.db)) as db:
        live = {row[0] for row in db.execute("SELECT id FROM sqlq_jobs")}
    for n in range(4):
        kept = acked_puts[n] - acked_deletes[n] - sent_deletes[n]
        assert kept <= live, f"acknowledged puts lost: {sorted(kept - live)[:10]}"
        assert not acked_deletes[n] & live, "acknowledged deletes came back"
