"""Malformed command lines and bodies thrown at a live server.

Properties: every malformed line gets an error reply (and the connection stays
usable), the server never dies, and the file passes ``PRAGMA integrity_check``.
When Debian's ``beanstalkd`` is installed, the same lines go to it too and the
replies must match byte for byte: beanstalkd is the oracle, not our parser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import apsw
import greenstalk
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlq.server.protocol import ERROR_REPLIES, GRAMMAR, ProtocolError, Verb, parse_command
from tests.servers import Raw, Running, beanstalkd, on_both

MAX_JOB_SIZE = 1000
_R = TypeVar("_R")
FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

# Commands that answer at once with one reply and change nothing in the file.
_SAFE = {Verb.PEEK, Verb.PEEK_READY, Verb.PEEK_DELAYED, Verb.PEEK_BURIED, Verb.RESERVE_JOB,
         Verb.DELETE, Verb.RELEASE, Verb.BURY, Verb.KICK, Verb.KICK_JOB, Verb.TOUCH,
         Verb.STATS_JOB, Verb.STATS_TUBE, Verb.STATS, Verb.USE, Verb.WATCH, Verb.IGNORE,
         Verb.LIST_TUBES_WATCHED, Verb.LIST_TUBE_USED, Verb.LIST_TUBES}

_prefixes = st.sampled_from([p for p, _, _ in GRAMMAR] + [p.strip() for p, _, _ in GRAMMAR])
_numbers = st.one_of(
    st.integers(0, 2**32 + 5).map(lambda n: str(n).encode()),
    st.integers(-5, 5).map(lambda n: str(n).encode()),
    st.sampled_from([b"18446744073709551615", b"18446744073709551616", b"2147483648", b"+1",
                     b"0x10", b"1e3", b"", b" ", b"  7"]),
)
_words = st.one_of(_numbers, st.binary(max_size=12), st.text("abc-_()$.;/+ ", max_size=12)
                   .map(str.encode))
_near_valid = st.builds(lambda p, args: p + b" ".join(args), _prefixes,
                        st.lists(_words, max_size=5))
_junk = st.binary(max_size=240)
_lines = st.one_of(_near_valid, _junk).filter(lambda b: b"\r\n" not in b and not
                                              b.endswith(b"\r"))


def _rejected(line: bytes) -> ProtocolError | None:
    try:
        parse_command(line, MAX_JOB_SIZE)
    except ProtocolError as e:
        return e
    return None


def _sendable(line: bytes) -> bool:
    """Malformed lines, and well-formed ones that answer at once and change nothing."""
    error = _rejected(line)
    if error is not None:
        return error.discard == 0  # a too-big put would want its body
    cmd = parse_command(line, MAX_JOB_SIZE)
    return cmd.verb in _SAFE or (cmd.verb is Verb.RESERVE_WITH_TIMEOUT and cmd.ints == (0,))


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    running = Running(str(tmp_path_factory.mktemp("fuzz") / "fuzz.db"), MAX_JOB_SIZE)
    yield running
    running.stop()
    with apsw.Connection(running.path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def _alive(client: Raw) -> None:
    assert client.cmd(b"list-tube-used").startswith(b"USING ")


@FUZZ
@given(lines=st.lists(_lines, min_size=1, max_size=20))
def test_every_malformed_line_gets_an_error(fuzzed: Running, lines: list[bytes]) -> None:
    client = Raw(fuzzed.address)
    try:
        for line in lines:
            if not _sendable(line):
                continue
            reply = client.cmd(line)
            error = _rejected(line)
            if error is not None:
                assert reply == error.reply, (line, reply)
                assert reply in ERROR_REPLIES
            else:
                assert reply.split(b" ")[0].strip() not in (b"BAD_FORMAT", b"UNKNOWN_COMMAND")
        _alive(client)
    finally:
        client.close()
    assert fuzzed.thread.is_alive()


@FUZZ
@given(size=st.integers(0, MAX_JOB_SIZE + 50), trailer=st.binary(min_size=2, max_size=2),
       body=st.binary(max_size=MAX_JOB_SIZE + 50), garbage=st.sampled_from([b"", b" ", b"x"]))
def test_bodies_of_every_shape(fuzzed: Running, size: int, trailer: bytes, body: bytes,
                               garbage: bytes) -> None:
    body = (body * (size // max(len(body), 1) + 1))[:size] if body else bytes(size)
    client = Raw(fuzzed.address)
    try:
        client.send(b"use fuzz\r\nput 1 0 60 %d%s\r\n%s%s" % (size, garbage, body, trailer))
        assert client.reply() == b"USING fuzz\r\n"
        reply = client.reply()
        if size > MAX_JOB_SIZE:
            assert reply == b"JOB_TOO_BIG\r\n"  # and the body was skipped
        elif garbage:
            assert reply == b"BAD_FORMAT\r\n"  # the body is read as commands, as in beanstalkd
            client.send(b"\r\nquit\r\n")
            client.sock.settimeout(5)
            while client.sock.recv(65536):
                pass
            return
        elif trailer != b"\r\n":
            assert reply == b"EXPECTED_CRLF\r\n"
        else:
            assert reply.startswith(b"INSERTED ")
            job_id = int(reply.split()[1])
            assert client.cmd(b"peek %d" % job_id) == b"FOUND %d %d\r\n%s\r\n" % (
                job_id, size, body)
            assert client.cmd(b"delete %d" % job_id) == b"DELETED\r\n"
        _alive(client)
    finally:
        client.close()


def test_overlong_lines_and_a_silent_disconnect(fuzzed: Running) -> None:
    client = Raw(fuzzed.address)
    for size in (223, 224, 5000, 300_000):
        client.send(b"u" * size + b"\r\n")
        assert client.reply() == b"BAD_FORMAT\r\n"
    client.send(b"put 0 0 1 10\r\nabc")  # a body that never arrives
    client.close()
    _alive(Raw(fuzzed.address))


# ---- beanstalkd as the oracle -------------------------------------------------------------------

@pytest.fixture(scope="module")
def oracle() -> Iterator[tuple[str, int]]:
    with beanstalkd() as address:
        yield address


def _comparable(line: bytes) -> bool:
    # beanstalkd waits for more input on a line with a stray \r, and may misread a line
    # whose CRLF straddles its 224-byte buffer: those lines are not compared. Nor is a
    # malformed reserve-with-timeout: 1.12 (Debian's) reads it with strtol and waits,
    # 1.13 and sqlq answer BAD_FORMAT (beanstalkd #607).
    if line.startswith(b"reserve-with-timeout") and _rejected(line) is not None:
        return False
    return b"\r" not in line and len(line) < 200 and _sendable(line)


@FUZZ
@given(lines=st.lists(_lines.filter(_comparable), min_size=1, max_size=20))
def test_replies_match_beanstalkd(fuzzed: Running, oracle: tuple[str, int],
                                  lines: list[bytes]) -> None:
    ours, theirs = Raw(fuzzed.address), Raw(oracle)
    try:
        for line in lines:
            a, b = ours.cmd(line), theirs.cmd(line)
            if a.startswith(b"OK ") and b.startswith(b"OK "):
                continue  # stats bodies differ in values (pid, uptime...), not in kind
            assert a == b, line
    finally:
        ours.close()
        theirs.close()



# Two clients (0 and 1) take a few jobs through every state, with the replies of
# beanstalkd and sqlq compared byte for byte (YAML bodies as sets of lines).
LIFECYCLE = [
    (0, b"put 5 0 10 3\r\nabc\r\n"), (0, b"put 1 0 10 1\r\nz\r\n"), (0, b"peek-ready"),
    (0, b"use t1"), (0, b"put 0 5 10 2\r\nde\r\n"), (0, b"peek-delayed"), (0, b"kick 0"),
    (0, b"kick 1"), (0, b"peek-ready"), (0, b"use default"), (1, b"reserve-with-timeout 0"),
    (0, b"delete 2"), (0, b"release 2 1 0"), (0, b"touch 2"), (0, b"bury 2 1"), (1, b"bury 2 9"),
    (1, b"bury 2 9"), (0, b"peek-buried"), (0, b"kick-job 2"), (0, b"kick-job 2"),
    (1, b"reserve-job 2"), (0, b"reserve-job 2"), (1, b"release 2 3 1"), (0, b"kick-job 2"),
    (0, b"reserve-job 3"), (0, b"delete 3"), (1, b"delete 2"), (0, b"delete 2"),
    (0, b"watch t1"), (0, b"ignore default"), (0, b"ignore t1"), (0, b"watch default"),
    (0, b"ignore t1"), (0, b"list-tubes-watched"), (0, b"pause-tube t1 0"),
    (0, b"pause-tube t9 1"), (0, b"stats-tube t9"), (0, b"reserve-with-timeout 0"),
    (1, b"kick 5"), (0, b"put 4294967295 0 0 0\r\n\r\n"), (0, b"reserve-with-timeout 0"),
    (0, b"reserve-with-timeout 0"), (0, b"put 1 4294967295 1 0\r\n\r\n"), (0, b"stats-job 0"),
    (0, b"peek 0"), (0, b"use a"), (1, b"use b"), (0, b"list-tubes"), (0, b"pause-tube a 1"),
    (0, b"ignore default"), (1, b"put 0 0 1 2\r\nabcd"), (1, b"quit"),
]


def _play(address: tuple[str, int]) -> list[object]:
    clients = [Raw(address), Raw(address)]
    replies: list[object] = []
    for who, data in LIFECYCLE:
        client = clients[who]
        client.send(data if data.startswith(b"put") else data + b"\r\n")
        if data == b"quit":
            replies.append(client.closed_by_server())
            continue
        reply = client.reply()
        head, _, body = reply.partition(b"\r\n")
        replies.append(reply if not head.startswith(b"OK ") else _lines_of(reply))
    for client in clients:
        client.close()
    return replies


def _lines_of(reply: bytes) -> set[bytes]:
    """A stats document's lines, as a set (the order is checked by
    test_stats_documents_have_beanstalkd_112s_keys_and_quotes)."""
    return set(reply.partition(b"\r\n")[2].splitlines())


def _script(lines: list[bytes]) -> Callable[[tuple[str, int]], list[bytes]]:
    """A player that sends ``lines`` on one connection and returns the replies."""
    def play(address: tuple[str, int]) -> list[bytes]:
        client = Raw(address)
        try:
            return [client.cmd(line) for line in lines]
        finally:
            client.close()
    return play


def test_a_lifecycle_matches_beanstalkd(tmp_path: Path) -> None:
    ours, theirs = on_both(tmp_path, _play)
    for (who, data), a, b in zip(LIFECYCLE, ours, theirs, strict=True):
        assert a == b, (who, data)


def _shape(reply: bytes) -> list[tuple[str, bool]]:
    """A stats document's keys in order, each with whether its value is in quotes."""
    head, _, body = reply.partition(b"\r\n")
    assert head.startswith(b"OK "), reply
    pairs = [line.split(": ", 1) for line in body.decode().splitlines()[1:] if line]
    return [(key, value.startswith('"')) for key, value in pairs]


def test_stats_documents_have_beanstalkd_112s_keys_and_quotes(tmp_path: Path) -> None:
    """beanstalkd 1.12 quotes only ``version`` (1.13 also hostname, os, platform, name,
    tube); sqlq matches 1.12, and has exactly its keys in its order, none of its own:
    clients compare these documents whole (greenstalk's test_stats_tube does)."""
    script = [b"use jobs", b"put 0 0 10 1\r\nx", b"stats-job 1", b"stats-tube jobs", b"stats"]
    ours, theirs = on_both(tmp_path, _script(script))
    assert ours[:2] == theirs[:2] == [b"USING jobs\r\n", b"INSERTED 1\r\n"]
    assert _shape(ours[2]) == _shape(theirs[2])
    assert _shape(ours[3]) == _shape(theirs[3])
    assert _shape(ours[4]) == _shape(theirs[4])
    version = [line for line in theirs[4].split(b"\n") if line.startswith(b"version: ")]
    assert version == [b'version: "1.12"']
    assert b'\nversion: "1.12"\n' in ours[4]


def test_emptied_tube_stats_as_beanstalkd(tmp_path: Path) -> None:
    """A tube that held a job is known while a client uses it (zero counters once
    empty) and NOT_FOUND once nothing holds it, as beanstalkd deletes unused tubes."""
    script = [b"use e", b"put 0 0 10 1\r\nx", b"reserve-job 1", b"delete 1",
              b"stats-tube e", b"use default", b"stats-tube e", b"pause-tube e 1",
              b"peek-ready", b"kick 5", b"list-tubes"]
    ours, theirs = on_both(tmp_path, _script(script))
    for line, a, b in zip(script, ours, theirs, strict=True):
        # stats bodies as sets of lines: the same counters, in any order (sqlq's
        # extension keys aside: beanstalkd has none, see _lines_of)
        assert (_lines_of(a) if a.startswith(b"OK ") else a) == (
            _lines_of(b) if b.startswith(b"OK ") else b), line
    assert theirs[6] == b"NOT_FOUND\r\n" and theirs[7] == b"NOT_FOUND\r\n"


def _greenstalk_stats(address: tuple[str, int]) -> list[dict[str, object]]:
    """What greenstalk parses of stats-tube of a fresh tube, stats-job, stats-tube and
    stats after a put, as greenstalk's own test_stats_tube reads them."""
    with greenstalk.Client(address, use="jobs") as c:
        fresh = c.stats_tube("default")
        job = c.put("x")
        return [fresh, c.stats_job(job), c.stats_tube("jobs"), c.stats()]


def test_greenstalk_reads_beanstalkd_112s_stats_keys_in_its_order(tmp_path: Path) -> None:
    """Issue 34: stats-tube had a key of sqlq's own (current-jobs-waiting), which
    greenstalk's test_stats_tube, an exact comparison, failed on."""
    ours, theirs = on_both(tmp_path, _greenstalk_stats)
    assert ours[0] == theirs[0]  # greenstalk's test_stats_tube, whole
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == list(b)
    assert (ours[2]["current-jobs-ready"], ours[3]["current-jobs-ready"]) == (1, 1)
