"""The protocol module alone: command lines in, replies out, no sockets."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sqlq.server import protocol as bs
from sqlq.server.flags import UsageError, parse_flags
from sqlq.server.protocol import (
    GRAMMAR,
    LINE_MAX,
    Args,
    Command,
    ProtocolError,
    Reply,
    Verb,
    found,
    ok,
    parse_command,
    reserved,
    valid_tube,
)
from sqlq.server.yaml import STATS_JOB_KEYS, yaml_dict, yaml_list


def err(line: bytes, max_job_size: int = 65535) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        parse_command(line, max_job_size)
    return info.value


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"put 1 2 3 4", Command(Verb.PUT, (1, 2, 3, 4))),
        (b"put  0   0 0 0", Command(Verb.PUT, (0, 0, 0, 0))),
        (b"put 4294967295 0 1 5", Command(Verb.PUT, (2**32 - 1, 0, 1, 5))),
        (b"peek 18446744073709551615", Command(Verb.PEEK, (2**64 - 1,))),
        (b"peek-ready", Command(Verb.PEEK_READY)),
        (b"peek-delayed", Command(Verb.PEEK_DELAYED)),
        (b"peek-buried", Command(Verb.PEEK_BURIED)),
        (b"reserve", Command(Verb.RESERVE)),
        (b"reserve-with-timeout 0", Command(Verb.RESERVE_WITH_TIMEOUT, (0,))),
        (b"reserve-with-timeout 5 whatever", Command(Verb.RESERVE_WITH_TIMEOUT, (5,))),
        (b"reserve-job 7", Command(Verb.RESERVE_JOB, (7,))),
        (b"delete 9", Command(Verb.DELETE, (9,))),
        (b"release 9 10 11", Command(Verb.RELEASE, (9, 10, 11))),
        (b"bury 9 10", Command(Verb.BURY, (9, 10))),
        (b"kick 10", Command(Verb.KICK, (10,))),
        (b"kick +3x", Command(Verb.KICK, (3,))),
        (b"kick -1", Command(Verb.KICK, (2**32 - 1,))),
        (b"kick-job 3", Command(Verb.KICK_JOB, (3,))),
        (b"touch 3", Command(Verb.TOUCH, (3,))),
        (b"stats-job 3", Command(Verb.STATS_JOB, (3,))),
        (b"stats-tube a-b", Command(Verb.STATS_TUBE, tube="a-b")),
        (b"stats", Command(Verb.STATS)),
        (b"use foo", Command(Verb.USE, tube="foo")),
        (b"watch ()$;+/._", Command(Verb.WATCH, tube="()$;+/._")),
        (b"ignore x", Command(Verb.IGNORE, tube="x")),
        (b"list-tubes", Command(Verb.LIST_TUBES)),
        (b"list-tube-used", Command(Verb.LIST_TUBE_USED)),
        (b"list-tubes-watched", Command(Verb.LIST_TUBES_WATCHED)),
        (b"quit", Command(Verb.QUIT)),
        (b"pause-tube foo 30", Command(Verb.PAUSE_TUBE, (30,), "foo")),
        (b"use " + b"a" * 200, Command(Verb.USE, tube="a" * 200)),
    ],
)
def test_parse_valid_lines(line: bytes, expected: Command) -> None:
    assert parse_command(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        b"put 1 2 3",
        b"put 1 2 3 4 ",
        b"put 1 2 3 4x",
        b"put -1 2 3 4",
        b"put 4294967296 0 0 1",
        b"peek x",
        b"peek 1 ",
        b"peek 18446744073709551616",
        b"peek-ready ",
        b"reservex",
        b"reserve ",
        b"reserve-with-timeout x",
        b"reserve-with-timeout 2147483648",
        b"reserve-with-timeout -1",
        b"release 1 2",
        b"release 1 2 3 4",
        b"bury 1",
        b"kick x",
        b"kick -",
        b"kick 99999999999999999999",
        b"stats ",
        b"stats-job",  # a malformed "stats", as beanstalkd matches by prefix
        b"use ",
        b"use  foo",
        b"use foo bar",
        b"use -foo",
        b"use " + b"a" * 201,
        b"use caf\xc3\xa9",
        b"watch a\rb",
        b"ignore \t",
        b"pause-tube foo",
        b"pause-tube -foo 1",
        b"pause-tube foo 1 2",
        b"list-tubes x",
        b"stats\0",
        b"x" * (LINE_MAX - 1),
    ],
)
def test_malformed_lines_get_an_error(line: bytes) -> None:
    assert err(line).reply == Reply.BAD_FORMAT


@pytest.mark.parametrize(
    "line",
    [b"", b"PUT 1 2 3 4", b"put", b"peek", b"delete", b"foo", b" stats", b"\xff", b"pause", b"q"],
)
def test_unknown_commands(line: bytes) -> None:
    assert err(line).reply == Reply.UNKNOWN_COMMAND


def test_line_limit_counts_the_crlf() -> None:
    name = b"a" * 200
    line = b"stats-tube " + name
    assert len(line) + 2 < LINE_MAX
    assert parse_command(line).tube == name.decode()
    assert err(b"use " + b" " * (LINE_MAX - 6) + b"x").reply == Reply.BAD_FORMAT
    assert parse_command(b"reserve-with-timeout " + b" " * 199 + b"1").ints == (1,)


def test_put_too_big_is_checked_before_trailing_garbage() -> None:
    e = err(b"put 0 0 1 65536 junk")
    assert (e.reply, e.discard, e.verb) == (Reply.JOB_TOO_BIG, 65538, Verb.PUT)
    assert err(b"put 0 0 1 11", max_job_size=10).reply == Reply.JOB_TOO_BIG
    assert parse_command(b"put 0 0 1 10", max_job_size=10).ints[3] == 10
    assert err(b"put 0 0 1 1 junk").verb is Verb.PUT
    assert err(b"put 0 0 x 1").verb is None


def test_quit_matches_as_a_prefix_like_beanstalkd() -> None:
    assert parse_command(b"quit now").verb is Verb.QUIT


def test_grammar_covers_every_verb_once() -> None:
    assert sorted(v.value for _, v, _ in GRAMMAR) == sorted(v.value for v in Verb)


def test_valid_tube() -> None:
    assert valid_tube(b"default")
    assert valid_tube(b"a-")
    assert not valid_tube(b"-a")
    assert not valid_tube(b"")
    assert not valid_tube(b"a b")
    assert not valid_tube(b"a" * 201)


def test_job_replies() -> None:
    assert reserved(5, b"hi") == b"RESERVED 5 2\r\nhi\r\n"
    assert found(1, b"") == b"FOUND 1 0\r\n\r\n"
    assert ok(b"---\n") == b"OK 4\r\n---\n\r\n"


def test_yaml_matches_beanstalkds_layout() -> None:
    values = {k: 0 for k in STATS_JOB_KEYS} | {"tube": "default", "state": "ready", "id": 1}
    doc = yaml_dict(STATS_JOB_KEYS, values)
    assert doc.startswith(b"---\nid: 1\ntube: default\nstate: ready\npri: 0\n")  # 1.12: unquoted
    assert doc.endswith(b"kicks: 0\n")
    assert yaml_dict(["version", "hostname"], {"version": "1.12", "hostname": "h"}) == (
        b'---\nversion: "1.12"\nhostname: h\n')  # only version is quoted in 1.12
    assert yaml_dict(["draining", "rusage-utime"], {"draining": False, "rusage-utime": 0.5}) == (
        b"---\ndraining: false\nrusage-utime: 0.500000\n"
    )
    assert yaml_list(["default", "a"]) == b"---\n- default\n- a\n"


def test_flags_like_beanstalkd() -> None:
    f = parse_flags(["-l", "127.0.0.2", "-p", "4444", "-z", "100", "-VV", "-f0"])
    assert (f.address, f.port, f.max_job_size, f.verbose, f.fsync_ms) == (
        "127.0.0.2", 4444, 100, 2, 0
    )
    assert f.listen == "127.0.0.2:4444"
    assert f.durability == "full"
    assert parse_flags(["-F"]).durability == "normal"
    assert parse_flags([]).durability == "normal"
    assert parse_flags(["-l", "unix:/tmp/x.sock"]).listen == "unix:/tmp/x.sock"
    assert parse_flags(["-l", "::1"]).listen == "[::1]:11300"
    assert parse_flags(["-z", "9999999999999"]).max_job_size == 1 << 30
    assert parse_flags(["-bdata"]).binlog_dir == "data"
    assert parse_flags(["-v"]).show_version
    assert parse_flags(["-h"]).show_help
    assert parse_flags(["-c", "-n", "-u", "nobody", "-s", "10485760"]).port == 11300
    for bad in (["-p"], ["-x"], ["stray"], ["-z", "ten"], ["-p", "70000"]):
        with pytest.raises(UsageError):
            parse_flags(bad)


def test_processes_flag_short_and_long() -> None:
    assert parse_flags([]).processes == 1
    assert parse_flags(["-P", "4"]).processes == 4
    assert parse_flags(["-P2", "-V"]).processes == 2
    assert parse_flags(["--processes", "3", "-p", "1"]).processes == 3
    assert parse_flags(["--processes=5"]).processes == 5
    for bad in (["-P"], ["-P", "0"], ["-P", "two"], ["--processes"], ["--processes=257"],
                ["--process=2"]):
        with pytest.raises(UsageError):
            parse_flags(bad)


def _reference_parse(line: bytes, max_job_size: int) -> Command:
    """parse_command without its shortcuts: the GRAMMAR scan on every line, and
    the put and id arguments read number by number, as beanstalkd reads them."""
    if len(line) + 2 > LINE_MAX or b"\0" in line:
        raise ProtocolError(Reply.BAD_FORMAT)
    for prefix, verb, shape in GRAMMAR:
        if line.startswith(prefix):
            rest = line[len(prefix):]
            if shape is Args.ID:
                job_id, _ = bs._read_uint(rest, bs.U64_MAX, final=True)
                return Command(verb, (job_id,))
            if shape is Args.PUT:
                ints = []
                for _ in range(4):
                    value, rest = bs._read_uint(rest, bs.U32_MAX, final=False)
                    ints.append(value)
                if ints[3] > max_job_size:
                    raise ProtocolError(Reply.JOB_TOO_BIG, verb, discard=ints[3] + 2)
                if rest:
                    raise ProtocolError(Reply.BAD_FORMAT, verb)
                return Command(verb, tuple(ints))
            return bs._parse_args(verb, shape, line, rest, max_job_size)
    raise ProtocolError(Reply.UNKNOWN_COMMAND)


def _outcome(parse: Callable[[bytes, int], Command], line: bytes) -> object:
    try:
        return parse(line, 100)
    except ProtocolError as e:
        return (e.reply, e.verb, e.discard)


_WORDS = [p for p, _, _ in GRAMMAR] + [p.rstrip(b" ") for p, _, _ in GRAMMAR] + [b"peek-", b"x"]


@pytest.mark.slow
@given(st.sampled_from(_WORDS), st.lists(st.sampled_from(
    [b" ", b"  ", b"0", b"7", b"100", b"4294967296", b"18446744073709551616", b"-", b"+",
     b"a", b"\t", b"\r", b"ready", b"tube"]), max_size=10))
@settings(max_examples=2000, deadline=None)
def test_parse_shortcuts_agree_with_the_plain_scan(word: bytes, tail: list[bytes]) -> None:
    line = word + b"".join(tail)
    assert _outcome(parse_command, line) == _outcome(_reference_parse, line)


_NUMBER = st.one_of(st.sampled_from([0, 99, 100, 101, 2**32 - 1, 2**32, 2**64 - 1, 2**64]),
                    st.integers(0, 2**65)).map(lambda n: b"%d" % n)


@pytest.mark.slow
@given(st.sampled_from([b"put ", b"put  ", b"delete ", b"peek ", b"release ", b"bury "]),
       st.lists(_NUMBER, min_size=0, max_size=5), st.sampled_from([b" ", b"  ", b"\t"]),
       st.sampled_from([b"", b" ", b"x"]))
@example(b"put ", [b"0", b"0", b"0", b"100"], b" ", b"")
@example(b"put ", [b"0", b"0", b"0", b"101"], b" ", b"")
@example(b"put ", [b"4294967296", b"0", b"0", b"101"], b" ", b"")
@example(b"delete ", [b"18446744073709551616"], b" ", b"")
@settings(max_examples=2000, deadline=None)
def test_number_shortcuts_agree_with_the_plain_scan(word: bytes, numbers: list[bytes],
                                                    sep: bytes, end: bytes) -> None:
    line = word + sep.join(numbers) + end
    assert _outcome(parse_command, line) == _outcome(_reference_parse, line)
