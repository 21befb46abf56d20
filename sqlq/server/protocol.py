"""beanstalkd protocol 1.12 without I/O: command lines in, reply bytes out.

The rest of the server package owns the sockets and the Queue; this module only
knows the wire format (the stats documents are in ``yaml.py``), so
it can be tested byte by byte and fuzzed without a socket. beanstalkd's
``doc/protocol.txt`` and its parser are the reference: a client written
against beanstalkd must get the same bytes from sqlq, quirks included (verbs
are matched by prefix in beanstalkd's order, ``kick`` takes its bound the way
``strtoul`` does, a bad ``put`` line does not swallow the body). Where
beanstalkd would hang instead of answering (a line with a stray ``\\r``)
sqlq answers an error: every line gets a reply.
"""

from __future__ import annotations

import enum

# Not `typing`/`dataclasses`: sqlq-beanstalkd imports this module before it listens,
# and every millisecond counts there (see sqlq/server/__init__.py). mypy honours this idiom.

LINE_MAX = 224
"""Bytes in a command line, CRLF included (beanstalkd's LINE_BUF_SIZE)."""
TUBE_NAME_MAX = 200
BEANSTALKD_MAX_JOB_SIZE = 65535
"""The server's default ``-z``, beanstalkd's: not the library's ``model.DEFAULT_MAX_JOB_SIZE``."""
MAX_JOB_SIZE_LIMIT = 1 << 30
SAFETY_MARGIN_MS = 1000
"""The last second of a TTR: a reserve then answers DEADLINE_SOON."""
DEFAULT_PORT = 11300
DEFAULT_TUBE = "default"
"""The tube a new connection uses and watches."""
PROTOCOL_VERSION = "1.12"
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
INT_MAX = 2**31 - 1

NAME_CHARS = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()"
)
_SPACE = frozenset(b" ")
_C_SPACE = frozenset(b" \t\n\v\f\r")  # what strtoul skips
_DIGITS = frozenset(b"0123456789")


class Reply:
    """Fixed reply lines, byte for byte as beanstalkd sends them."""

    OUT_OF_MEMORY = b"OUT_OF_MEMORY\r\n"
    INTERNAL_ERROR = b"INTERNAL_ERROR\r\n"
    BAD_FORMAT = b"BAD_FORMAT\r\n"
    UNKNOWN_COMMAND = b"UNKNOWN_COMMAND\r\n"
    EXPECTED_CRLF = b"EXPECTED_CRLF\r\n"
    JOB_TOO_BIG = b"JOB_TOO_BIG\r\n"
    DRAINING = b"DRAINING\r\n"
    NOT_FOUND = b"NOT_FOUND\r\n"
    NOT_IGNORED = b"NOT_IGNORED\r\n"
    DEADLINE_SOON = b"DEADLINE_SOON\r\n"
    TIMED_OUT = b"TIMED_OUT\r\n"
    DELETED = b"DELETED\r\n"
    RELEASED = b"RELEASED\r\n"
    BURIED = b"BURIED\r\n"
    KICKED = b"KICKED\r\n"
    TOUCHED = b"TOUCHED\r\n"
    PAUSED = b"PAUSED\r\n"


ERROR_REPLIES = frozenset(
    {Reply.OUT_OF_MEMORY, Reply.INTERNAL_ERROR, Reply.BAD_FORMAT, Reply.UNKNOWN_COMMAND,
     Reply.EXPECTED_CRLF, Reply.JOB_TOO_BIG, Reply.DRAINING, Reply.NOT_FOUND,
     Reply.NOT_IGNORED, Reply.DEADLINE_SOON, Reply.TIMED_OUT}
)
"""Every reply that tells a client its command did not do what it asked."""


class Verb(enum.Enum):
    """Protocol 1.12 commands; the value is the name used in the ``cmd-*`` stats."""

    PUT = "put"
    PEEK = "peek"
    PEEK_READY = "peek-ready"
    PEEK_DELAYED = "peek-delayed"
    PEEK_BURIED = "peek-buried"
    RESERVE_WITH_TIMEOUT = "reserve-with-timeout"
    RESERVE_JOB = "reserve-job"
    RESERVE = "reserve"
    DELETE = "delete"
    RELEASE = "release"
    BURY = "bury"
    KICK = "kick"
    KICK_JOB = "kick-job"
    TOUCH = "touch"
    STATS_JOB = "stats-job"
    STATS_TUBE = "stats-tube"
    STATS = "stats"
    USE = "use"
    WATCH = "watch"
    IGNORE = "ignore"
    LIST_TUBES_WATCHED = "list-tubes-watched"
    LIST_TUBE_USED = "list-tube-used"
    LIST_TUBES = "list-tubes"
    QUIT = "quit"
    PAUSE_TUBE = "pause-tube"


class Args(enum.Enum):
    """The shapes of a command line after its verb."""

    NONE = "nothing: the line is the verb alone"
    PUT = "<pri> <delay> <ttr> <bytes>"
    ID = "<id>"
    TIMEOUT = "<seconds>, anything after it ignored"
    RELEASE = "<id> <pri> <delay>"
    BURY = "<id> <pri>"
    BOUND = "<bound>, read like strtoul"
    TUBE = "<tube>"
    PAUSE = "<tube> <delay>"
    ANY = "anything"


# beanstalkd matches a line against these prefixes in this order; the first hit
# decides the verb ("reservex" is a malformed reserve, "put" alone is unknown).
GRAMMAR: tuple[tuple[bytes, Verb, Args], ...] = (
    (b"put ", Verb.PUT, Args.PUT),
    (b"peek ", Verb.PEEK, Args.ID),
    (b"peek-ready", Verb.PEEK_READY, Args.NONE),
    (b"peek-delayed", Verb.PEEK_DELAYED, Args.NONE),
    (b"peek-buried", Verb.PEEK_BURIED, Args.NONE),
    (b"reserve-with-timeout ", Verb.RESERVE_WITH_TIMEOUT, Args.TIMEOUT),
    (b"reserve-job ", Verb.RESERVE_JOB, Args.ID),
    (b"reserve", Verb.RESERVE, Args.NONE),
    (b"delete ", Verb.DELETE, Args.ID),
    (b"release ", Verb.RELEASE, Args.RELEASE),
    (b"bury ", Verb.BURY, Args.BURY),
    (b"kick ", Verb.KICK, Args.BOUND),
    (b"kick-job ", Verb.KICK_JOB, Args.ID),
    (b"touch ", Verb.TOUCH, Args.ID),
    (b"stats-job ", Verb.STATS_JOB, Args.ID),
    (b"stats-tube ", Verb.STATS_TUBE, Args.TUBE),
    (b"stats", Verb.STATS, Args.NONE),
    (b"use ", Verb.USE, Args.TUBE),
    (b"watch ", Verb.WATCH, Args.TUBE),
    (b"ignore ", Verb.IGNORE, Args.TUBE),
    (b"list-tubes-watched", Verb.LIST_TUBES_WATCHED, Args.NONE),
    (b"list-tube-used", Verb.LIST_TUBE_USED, Args.NONE),
    (b"list-tubes", Verb.LIST_TUBES, Args.NONE),
    (b"quit", Verb.QUIT, Args.ANY),
    (b"pause-tube", Verb.PAUSE_TUBE, Args.PAUSE),
)


class Command:
    """One parsed command line: its verb, integer arguments and tube name."""

    __slots__ = ("verb", "ints", "tube")

    def __init__(self, verb: Verb, ints: tuple[int, ...] = (), tube: str = "") -> None:
        self.verb, self.ints, self.tube = verb, ints, tube

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Command) and (self.verb, self.ints, self.tube) == (
            other.verb, other.ints, other.tube)

    def __hash__(self) -> int:
        return hash((self.verb, self.ints, self.tube))

    def __repr__(self) -> str:
        return f"Command({self.verb}, {self.ints}, {self.tube!r})"


class ProtocolError(Exception):
    """A command line the server answers with an error reply instead of running it.

    Internal to the server (a reply to send, not a ``sqlq.Error`` a user can meet).

    ``verb`` is set when beanstalkd still counts the command in its ``cmd-*``
    stats; ``discard`` is how many bytes that follow the line (a too-big job's
    body and its CRLF) the server must throw away before replying.
    """

    def __init__(self, reply: bytes, verb: Verb | None = None, discard: int = 0) -> None:
        super().__init__(reply.decode("ascii").strip())
        self.reply = reply
        self.verb = verb
        self.discard = discard


def _bad(verb: Verb | None = None) -> ProtocolError:
    return ProtocolError(Reply.BAD_FORMAT, verb)


def _span(buf: bytes, start: int, chars: frozenset[int]) -> int:
    """The index just past the run of ``chars`` that begins at ``start``."""
    end = len(buf)
    while start < end and buf[start] in chars:
        start += 1
    return start


def _read_uint(buf: bytes, limit: int, final: bool) -> tuple[int, bytes]:
    """Read one unsigned decimal after optional spaces, as beanstalkd's read_u32/u64.

    A final number must end the line; otherwise the rest of the line is returned.
    """
    i = _span(buf, 0, _SPACE)
    j = _span(buf, i, _DIGITS)
    if j == i:
        raise _bad()
    value = int(buf[i:j])
    if value > limit or (final and j != len(buf)):
        raise _bad()
    return value, buf[j:]


def _read_bound(buf: bytes) -> int:
    """Read kick's bound as C's strtoul does (sign allowed, tail ignored), cut to 32 bits."""
    i = _span(buf, 0, _C_SPACE)
    negative = i < len(buf) and buf[i] == 0x2D
    if i < len(buf) and buf[i] in b"+-":
        i += 1
    j = _span(buf, i, _DIGITS)
    if j == i:
        raise _bad()
    value = int(buf[i:j])
    if value > U64_MAX:
        raise _bad()
    if negative:
        value = -value % (U64_MAX + 1)
    return value & U32_MAX


def valid_tube(name: bytes) -> bool:
    """beanstalkd's rule: 1-200 name characters, not starting with a hyphen."""
    return (
        0 < len(name) <= TUBE_NAME_MAX
        and name[0] != 0x2D
        and all(c in NAME_CHARS for c in name)
    )


def _tube(name: bytes) -> str:
    if not valid_tube(name):
        raise _bad()
    return name.decode("ascii")


def _pause_args(rest: bytes) -> tuple[str, int]:
    i = _span(rest, 0, _SPACE)
    j = _span(rest, i, NAME_CHARS)
    if j == i:
        raise _bad()
    delay, _ = _read_uint(rest[j:], U32_MAX, final=True)
    # beanstalkd counts the command before it checks the name's length and hyphen
    if not valid_tube(rest[i:j]):
        raise _bad(Verb.PAUSE_TUBE)
    return rest[i:j].decode("ascii"), delay


def parse_command(line: bytes, max_job_size: int = BEANSTALKD_MAX_JOB_SIZE) -> Command:
    """Parse one command line (without its CRLF).

    Args:
        line: the bytes before the CRLF.
        max_job_size: a put announcing a larger body fails with JOB_TOO_BIG.

    Returns:
        The command to run.

    Raises:
        ProtocolError: with the reply to send (BAD_FORMAT, UNKNOWN_COMMAND,
            JOB_TOO_BIG).
    """
    if len(line) + 2 > LINE_MAX or b"\0" in line:
        raise _bad()
    space = line.find(b" ")
    entry = _BY_WORD.get(line if space < 0 else line[:space + 1])
    if entry is None:
        for entry in GRAMMAR:
            if line.startswith(entry[0]):
                break
        else:
            raise ProtocolError(Reply.UNKNOWN_COMMAND)
    prefix, verb, shape = entry
    return _parse_args(verb, shape, line, line[len(prefix):], max_job_size)


def _first_match(word: bytes) -> tuple[bytes, Verb, Args]:
    return next(entry for entry in GRAMMAR if word.startswith(entry[0]))


# A line's first word (up to and with its first space, or the whole line) decides
# which GRAMMAR prefix matches first: no prefix has a space but at its end. So the
# scan runs once per known word here, not once per command line.
_BY_WORD = {word: _first_match(word) for prefix, _, _ in GRAMMAR
            for word in (prefix, prefix.rstrip(b" ") + b" ")}


# The shapes as module globals: an Enum member read through its class costs a
# metaclass lookup (~0.1 µs), and every command line goes through the chain below.
_PUT, _ID, _NONE, _ANY, _TUBE = Args.PUT, Args.ID, Args.NONE, Args.ANY, Args.TUBE
_TIMEOUT, _BOUND, _PAUSE, _BURY, _RELEASE = (
    Args.TIMEOUT, Args.BOUND, Args.PAUSE, Args.BURY, Args.RELEASE)


def _parse_args(verb: Verb, shape: Args, line: bytes, rest: bytes, max_job_size: int) -> Command:
    if shape is _PUT:
        return _put_args(verb, rest, max_job_size)
    if shape is _ID:
        if rest.isdigit() and int(rest) <= U64_MAX:  # the usual "<id>", no stray spaces
            return Command(verb, (int(rest),))
        job_id, _ = _read_uint(rest, U64_MAX, final=True)
        return Command(verb, (job_id,))
    if shape is _NONE:
        if rest:
            raise _bad()
        return Command(verb)
    if shape is _ANY:
        return Command(verb)
    if shape is _TUBE:
        return Command(verb, tube=_tube(rest))
    if shape is _TIMEOUT:
        # the usual "<seconds>"; a number past U32_MAX is past INT_MAX too: BAD_FORMAT
        seconds = int(rest) if rest.isdigit() else _read_uint(rest, U32_MAX, final=False)[0]
        if seconds > INT_MAX:
            raise _bad()
        return Command(verb, (seconds,))
    if shape is _BOUND:
        return Command(verb, (_read_bound(rest),))
    if shape is _PAUSE:
        tube, delay = _pause_args(rest)
        return Command(verb, (delay,), tube)
    if shape is _BURY:
        job_id, rest = _read_uint(rest, U64_MAX, final=False)
        pri, _ = _read_uint(rest, U32_MAX, final=True)
        return Command(verb, (job_id, pri))
    assert shape is _RELEASE, shape
    job_id, rest = _read_uint(rest, U64_MAX, final=False)
    pri, rest = _read_uint(rest, U32_MAX, final=False)
    delay, _ = _read_uint(rest, U32_MAX, final=True)
    return Command(verb, (job_id, pri, delay))


def _put_args(verb: Verb, rest: bytes, max_job_size: int) -> Command:
    words = rest.split(b" ")
    # the usual line, checked in C: four non-empty words of ASCII digits
    if len(words) == 4 and all(words) and b"".join(words).isdigit():
        ints = tuple(map(int, words))
        if max(ints) <= U32_MAX:
            if ints[3] > max_job_size:
                raise ProtocolError(Reply.JOB_TOO_BIG, verb, discard=ints[3] + 2)
            return Command(verb, ints)
    pri, rest = _read_uint(rest, U32_MAX, final=False)
    delay, rest = _read_uint(rest, U32_MAX, final=False)
    ttr, rest = _read_uint(rest, U32_MAX, final=False)
    size, rest = _read_uint(rest, U32_MAX, final=False)
    if size > max_job_size:
        raise ProtocolError(Reply.JOB_TOO_BIG, verb, discard=size + 2)
    if rest:
        raise _bad(verb)  # the body is not skipped: beanstalkd reads it as commands
    return Command(verb, (pri, delay, ttr, size))


# ---- replies with values ----------------------------------------------------


def inserted(job_id: int) -> bytes:
    """The reply to a successful put."""
    return b"INSERTED %d\r\n" % job_id


def job_reply(word: bytes, job_id: int, body: bytes) -> bytes:
    """``RESERVED``/``FOUND`` line and the body, in one buffer for one write."""
    return b"%s %d %d\r\n%s\r\n" % (word, job_id, len(body), body)


def reserved(job_id: int, body: bytes) -> bytes:
    """The reply to reserve, reserve-with-timeout and reserve-job."""
    return job_reply(b"RESERVED", job_id, body)


def found(job_id: int, body: bytes) -> bytes:
    """The reply to the peek commands."""
    return job_reply(b"FOUND", job_id, body)


def using(tube: str) -> bytes:
    return b"USING %s\r\n" % tube.encode("ascii")


def watching(count: int) -> bytes:
    return b"WATCHING %d\r\n" % count


def kicked(count: int) -> bytes:
    return b"KICKED %d\r\n" % count


def ok(data: bytes) -> bytes:
    """An ``OK <bytes>`` reply carrying a YAML document."""
    return b"OK %d\r\n%s\r\n" % (len(data), data)
