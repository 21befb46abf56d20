"""Jobs waiting for parents (issue 24) as the beanstalkd server shows them, over real
sockets: not at all. ``stats`` and ``stats-tube`` have beanstalkd's keys only (the
library's ``stats()`` counts them in ``current-jobs-waiting``); every command by id
answers NOT_FOUND for one, and a protocol ``delete`` leaves it be. The library puts
them (the protocol has no put with parents)."""

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


def test_stats_and_stats_tube_show_waiting_jobs_in_no_key_only_the_librarys_stats_do(
        raw: Raw, lib: sqlq.Queue) -> None:
    parent = lib.put(b"p")
    lib.put_many([b"a", b"b"], tube="kids", after=parent)
    lib.put(b"c", after=parent)
    server = stats(raw)
    assert "current-jobs-waiting" not in server and server["current-jobs-ready"] == "1"
    kids = stats(raw, b"stats-tube kids")
    assert "current-jobs-waiting" not in kids and kids["current-jobs-ready"] == "0"
    assert lib.stats()["current-jobs-waiting"] == 3
    assert lib.stats_tube("kids")["current-jobs-waiting"] == 2
    assert raw.cmd(b"delete %d" % parent) == b"DELETED\r\n"
    assert lib.stats()["current-jobs-waiting"] == 0
    assert stats(raw, b"stats-tube kids")["current-jobs-ready"] == "2"
