"""Jobs waiting for parents (issue 24) as the beanstalkd server shows them, over real
sockets: only as ``current-jobs-waiting`` in ``stats`` and ``stats-tube`` (a key of
sqlq's own); every command by id answers NOT_FOUND for one, and a protocol ``delete``
leaves it be. The library puts them (the protocol has no put with parents)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import sqlq
from tests.servers import Raw, Running


@pytest.fixture
def raw(srv: Running) -> Iterator[Raw]:
    client = Raw(srv.address)
    yield client
    client.close()


@pytest.fixture
def lib(db_url: str, srv: Running) -> Iterator[sqlq.Queue]:
    """Another process's view of the server's database: a Queue of its own."""
    with sqlq.Queue(db_url, durability="normal") as queue:  # type: ignore[arg-type]
        yield queue


def stats(client: Raw, line: bytes = b"stats") -> dict[str, str]:
    head, _, body = client.cmd(line).partition(b"\r\n")
    assert head == b"OK %d" % (len(body) - 2), head
    return dict(row.split(": ", 1) for row in body[4:-2].decode().splitlines())


def test_a_waiting_job_is_found_by_no_command_by_id(raw: Raw, lib: sqlq.Queue) -> None:
    assert raw.cmd(b"put 0 0 60 6\r\nparent") == b"INSERTED 1\r\n"
    child = lib.put(b"child", after=1)
    line = str(child).encode()
    for cmd in (b"peek ", b"stats-job ", b"kick-job ", b"reserve-job ", b"delete "):
        assert raw.cmd(cmd + line) == b"NOT_FOUND\r\n", cmd
    job = lib.peek(child)
    assert job is not None and job.state == "waiting"  # the delete deleted nothing
    assert lib.links(child).parents == [1]
    assert raw.cmd(b"peek-ready") == b"FOUND 1 6\r\nparent\r\n"
    assert raw.cmd(b"kick 10") == b"KICKED 0\r\n"
    assert raw.cmd(b"reserve-with-timeout 0") == b"RESERVED 1 6\r\nparent\r\n"
    assert raw.cmd(b"reserve-with-timeout 0") == b"TIMED_OUT\r\n"
    assert raw.cmd(b"delete 1") == b"DELETED\r\n"  # the parent done: the child is ready
    assert raw.cmd(b"peek " + line) == b"FOUND %d 5\r\nchild\r\n" % child
    assert stats(raw, b"stats-job " + line)["state"] == "ready"
    assert raw.cmd(b"reserve-with-timeout 0") == b"RESERVED %d 5\r\nchild\r\n" % child


def test_stats_and_stats_tube_count_waiting_jobs_in_a_key_of_their_own(
        raw: Raw, lib: sqlq.Queue) -> None:
    assert stats(raw)["current-jobs-waiting"] == "0"
    assert stats(raw, b"stats-tube default")["current-jobs-waiting"] == "0"
    parent = lib.put(b"p")
    lib.put_many([b"a", b"b"], tube="kids", after=parent)
    lib.put(b"c", after=parent)
    server = stats(raw)
    assert (server["current-jobs-waiting"], server["current-jobs-ready"]) == ("3", "1")
    assert list(server)[-3:] == ["sqlq-version", "sqlq-process", "current-jobs-waiting"]
    kids = stats(raw, b"stats-tube kids")
    assert (kids["current-jobs-waiting"], kids["current-jobs-ready"]) == ("2", "0")
    assert list(kids)[-1] == "current-jobs-waiting"
    assert stats(raw, b"stats-tube default")["current-jobs-waiting"] == "1"
    assert raw.cmd(b"delete %d" % parent) == b"DELETED\r\n"
    assert stats(raw)["current-jobs-waiting"] == "0"
    assert stats(raw, b"stats-tube kids")["current-jobs-ready"] == "2"
