"""beanstalkd protocol 1.12 without I/O: command lines in, reply bytes out.

The server (``server.py``) owns the sockets and the Queue; this module only
knows the wire format, so it can be tested byte by byte and fuzzed without a
socket. beanstalkd's ``doc/protocol.txt`` and its parser are the reference: a
client written against beanstalkd must get the same bytes from sqlq, quirks
included (verbs are matched by prefix in beanstalkd's order, ``kick`` takes its
bound the way ``strtoul`` does, a bad ``put`` line does not swallow the body).
Where beanstalkd would hang instead of answering (a line with a stray ``\\r``)
sqlq answers an error: every line gets a reply.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from sqlq.errors import Error

# Not `typing`/`dataclasses`: sqlq-beanstalkd imports this module before it listens,
# and every millisecond counts there (see server.py). mypy honours this idiom.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

LINE_MAX = 224
"""Bytes in a command line, CRLF included (beanstalkd's LINE_BUF_SIZE)."""
TUBE_NAME_MAX = 200
DEFAULT_MAX_JOB_SIZE = 65535
MAX_JOB_SIZE_LIMIT = 1 << 30
URGENT_PRIORITY = 1024
"""Ready jobs with a priority below this count as urgent in stats."""
SAFETY_MARGIN_MS = 1000
"""The last second of a TTR: a reserve then answers DEADLINE_SOON."""
DEFAULT_PORT = 11300
PROTOCOL_VERSION = "1.12"
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
INT_MAX = 2**31 - 1

NAME_CHARS = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()"
)
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


class ProtocolError(Error):
    """A command line the server answers with an error reply instead of running it.

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


def _read_uint(buf: bytes, limit: int, final: bool) -> tuple[int, bytes]:
    """Read one unsigned decimal after optional spaces, as beanstalkd's read_u32/u64.

    A final number must end the line; otherwise the rest of the line is returned.
    """
    i = 0
    while i < len(buf) and buf[i] == 0x20:
        i += 1
    j = i
    while j < len(buf) and buf[j] in _DIGITS:
        j += 1
    if j == i:
        raise _bad()
    value = int(buf[i:j])
    if value > limit or (final and j != len(buf)):
        raise _bad()
    return value, buf[j:]


def _read_bound(buf: bytes) -> int:
    """Read kick's bound as C's strtoul does (sign allowed, tail ignored), cut to 32 bits."""
    i = 0
    while i < len(buf) and buf[i] in _C_SPACE:
        i += 1
    negative = i < len(buf) and buf[i] == 0x2D
    if i < len(buf) and buf[i] in b"+-":
        i += 1
    j = i
    while j < len(buf) and buf[j] in _DIGITS:
        j += 1
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
    i = 0
    while i < len(rest) and rest[i] == 0x20:
        i += 1
    j = i
    while j < len(rest) and rest[j] in NAME_CHARS:
        j += 1
    if j == i:
        raise _bad()
    delay, _ = _read_uint(rest[j:], U32_MAX, final=True)
    # beanstalkd counts the command before it checks the name's length and hyphen
    if not valid_tube(rest[i:j]):
        raise _bad(Verb.PAUSE_TUBE)
    return rest[i:j].decode("ascii"), delay


def parse_command(line: bytes, max_job_size: int = DEFAULT_MAX_JOB_SIZE) -> Command:
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
    for prefix, verb, shape in GRAMMAR:
        if line.startswith(prefix):
            return _parse_args(verb, shape, line, line[len(prefix):], max_job_size)
    raise ProtocolError(Reply.UNKNOWN_COMMAND)


def _parse_args(verb: Verb, shape: Args, line: bytes, rest: bytes, max_job_size: int) -> Command:
    if shape is Args.NONE:
        if rest:
            raise _bad()
        return Command(verb)
    if shape is Args.ANY:
        return Command(verb)
    if shape is Args.ID:
        job_id, _ = _read_uint(rest, U64_MAX, final=True)
        return Command(verb, (job_id,))
    if shape is Args.TUBE:
        return Command(verb, tube=_tube(rest))
    if shape is Args.TIMEOUT:
        seconds, _ = _read_uint(rest, U32_MAX, final=False)
        if seconds > INT_MAX:
            raise _bad()
        return Command(verb, (seconds,))
    if shape is Args.BOUND:
        return Command(verb, (_read_bound(rest),))
    if shape is Args.PAUSE:
        tube, delay = _pause_args(rest)
        return Command(verb, (delay,), tube)
    if shape is Args.BURY:
        job_id, rest = _read_uint(rest, U64_MAX, final=False)
        pri, _ = _read_uint(rest, U32_MAX, final=True)
        return Command(verb, (job_id, pri))
    if shape is Args.RELEASE:
        job_id, rest = _read_uint(rest, U64_MAX, final=False)
        pri, rest = _read_uint(rest, U32_MAX, final=False)
        delay, _ = _read_uint(rest, U32_MAX, final=True)
        return Command(verb, (job_id, pri, delay))
    assert shape is Args.PUT, shape
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


# ---- YAML, as beanstalkd writes it ------------------------------------------

STATS_KEYS = (
    "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
    "current-jobs-delayed", "current-jobs-buried", "cmd-put", "cmd-peek", "cmd-peek-ready",
    "cmd-peek-delayed", "cmd-peek-buried", "cmd-reserve", "cmd-reserve-with-timeout",
    "cmd-delete", "cmd-release", "cmd-use", "cmd-watch", "cmd-ignore", "cmd-bury", "cmd-kick",
    "cmd-touch", "cmd-stats", "cmd-stats-job", "cmd-stats-tube", "cmd-list-tubes",
    "cmd-list-tube-used", "cmd-list-tubes-watched", "cmd-pause-tube", "job-timeouts",
    "total-jobs", "max-job-size", "current-tubes", "current-connections", "current-producers",
    "current-workers", "current-waiting", "total-connections", "pid", "version",
    "rusage-utime", "rusage-stime", "uptime", "binlog-oldest-index", "binlog-current-index",
    "binlog-records-migrated", "binlog-records-written", "binlog-max-size", "draining", "id",
    "hostname", "os", "platform",
)
STATS_TUBE_KEYS = (
    "name", "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
    "current-jobs-delayed", "current-jobs-buried", "total-jobs", "current-using",
    "current-watching", "current-waiting", "cmd-delete", "cmd-pause-tube", "pause",
    "pause-time-left",
)
STATS_JOB_KEYS = (
    "id", "tube", "state", "pri", "age", "delay", "ttr", "time-left", "file", "reserves",
    "timeouts", "releases", "buries", "kicks",
)
QUOTED_KEYS = frozenset({"name", "tube", "version", "hostname", "os", "platform"})
"""Keys whose string values beanstalkd writes in double quotes."""

Scalar = int | float | str | bool


def _scalar(key: str, value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6f}"
    if isinstance(value, str) and key in QUOTED_KEYS:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def yaml_dict(keys: Iterable[str], values: Mapping[str, Scalar]) -> bytes:
    """A stats document: ``---`` then ``key: value`` lines in ``keys`` order."""
    lines = ["---"] + [f"{k}: {_scalar(k, values[k])}" for k in keys]
    return ("\n".join(lines) + "\n").encode("utf-8", "replace")


def yaml_list(names: Iterable[str]) -> bytes:
    """A list-tubes document: ``---`` then ``- name`` lines."""
    return ("---\n" + "".join(f"- {n}\n" for n in names)).encode("ascii")


# ---- the beanstalkd binary's flags -------------------------------------------

USAGE = """\
Use: sqlq-beanstalkd [OPTIONS]

A drop-in beanstalkd (protocol 1.12) that keeps its jobs in one SQLite file.
The protocol has no authentication: anyone who can connect can read and
delete every job. It listens on loopback unless -l says otherwise.

Options:
 -b DIR   keep the SQLite file (sqlq.db) in DIR; without it, a fresh
          temporary directory is used and removed at exit
 -f MS    fsync at most once every MS milliseconds; -f0 fsyncs every commit
          (durability "full"), any other value means durability "normal"
 -F       never fsync (durability "normal")
 -l ADDR  listen on address (default is 127.0.0.1), or unix:PATH
 -p PORT  listen on port (default is 11300)
 -u USER  accepted for compatibility, ignored (sqlq never changes user)
 -z BYTES set the maximum job size in bytes (default is 65535);
          max allowed is 1073741824 bytes
 -s BYTES accepted for compatibility, ignored (there is no binlog)
 -v       show version information
 -V       increase verbosity
 -h       show this help
"""

_TAKES_VALUE = frozenset("plzsfub")


class UsageError(Error):
    """Bad command line flags."""


class Flags:
    """beanstalkd's command line, as ``sqlq-beanstalkd`` understands it."""

    def __init__(self) -> None:
        self.address = "127.0.0.1"
        self.port = DEFAULT_PORT
        self.binlog_dir: str | None = None
        self.max_job_size = DEFAULT_MAX_JOB_SIZE
        self.fsync_ms: int | None = None
        self.never_fsync = False
        self.verbose = 0
        self.show_version = False
        self.show_help = False

    @property
    def listen(self) -> str:
        """The address in ``serve()``'s form: ``HOST:PORT`` or ``unix:PATH``."""
        if self.address.startswith("unix:"):
            return self.address
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"

    @property
    def durability(self) -> Literal["full", "normal"]:
        """``-f 0`` asks for an fsync per commit; beanstalkd's default (-f 50), -F: normal."""
        return "full" if self.fsync_ms == 0 and not self.never_fsync else "normal"


def _size(flag: str, text: str) -> int:
    if not text.isdigit():
        raise UsageError(f"invalid size for -{flag}: {text}")
    return int(text)


def parse_flags(argv: list[str]) -> Flags:
    """Parse beanstalkd's flags the way beanstalkd does: ``-VV``, ``-f0``, ``-p 11300``.

    Raises:
        UsageError: an unknown flag, a missing or bad value, a stray argument.
    """
    flags = Flags()
    args = iter(argv)
    for arg in args:
        if not arg.startswith("-") or arg == "-":
            raise UsageError(f"unknown argument: {arg}")
        rest = arg[1:]
        while rest:
            flag, rest = rest[0], rest[1:]
            value = ""
            if flag in _TAKES_VALUE:
                value, rest = rest, ""
                if not value:
                    value = next(args, "")
                    if not value:
                        raise UsageError(f"flag requires an argument: -{flag}")
            _apply(flags, flag, value)
    return flags


def _apply(flags: Flags, flag: str, value: str) -> None:
    if flag == "p":
        flags.port = _size(flag, value)
        if flags.port > 65535:
            raise UsageError(f"invalid port: {value}")
    elif flag == "l":
        flags.address = value
    elif flag == "z":
        flags.max_job_size = min(_size(flag, value), MAX_JOB_SIZE_LIMIT)
    elif flag == "f":
        flags.fsync_ms = _size(flag, value)
        flags.never_fsync = False
    elif flag == "F":
        flags.never_fsync = True
    elif flag == "b":
        flags.binlog_dir = value
    elif flag == "s":
        _size(flag, value)
    elif flag in "ucn":  # -u USER, and -c/-n that beanstalkd still accepts after removing them
        pass
    elif flag == "V":
        flags.verbose += 1
    elif flag == "v":
        flags.show_version = True
    elif flag == "h":
        flags.show_help = True
    else:
        raise UsageError(f"unknown flag: -{flag}")
