"""``sqlq-beanstalkd``'s command line: beanstalkd's flags, parsed the way beanstalkd does.

Kept apart from the protocol (``protocol.py``): only the drop-in binary reads
flags; ``sqlq serve`` has its own click options.
"""

from __future__ import annotations

from sqlq.server.protocol import BEANSTALKD_MAX_JOB_SIZE, DEFAULT_PORT, MAX_JOB_SIZE_LIMIT

# Not `typing`: sqlq-beanstalkd imports this module before it listens (see server/).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

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
 -P N, --processes N
          serve the port from N processes (default 1), for more than one
          core; each connection stays in one process, and stats counts
          that process's connections and commands (and its pid)
 -v       show version information
 -V       increase verbosity
 -h       show this help
"""

_TAKES_VALUE = frozenset("plzsfubP")
MAX_PROCESSES = 256
"""A ceiling on ``-P``, so that a typo does not start thousands of interpreters."""


class UsageError(Exception):
    """Bad command line flags (``sqlq-beanstalkd`` prints it and exits 1; not a ``sqlq.Error``)."""


class Flags:
    """beanstalkd's command line, as ``sqlq-beanstalkd`` understands it."""

    def __init__(self) -> None:
        self.address = "127.0.0.1"
        self.port = DEFAULT_PORT
        self.binlog_dir: str | None = None
        self.max_job_size = BEANSTALKD_MAX_JOB_SIZE
        self.fsync_ms: int | None = None
        self.never_fsync = False
        self.verbose = 0
        self.show_version = False
        self.show_help = False
        self.processes = 1

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
        if arg == "--processes" or arg.startswith("--processes="):
            value = arg.partition("=")[2] if "=" in arg else next(args, "")
            if not value:
                raise UsageError("flag requires an argument: --processes")
            _apply(flags, "P", value)
            continue
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
    elif flag == "P":
        flags.processes = _size(flag, value)
        if not 1 <= flags.processes <= MAX_PROCESSES:
            raise UsageError(f"invalid process count: {value} (1 to {MAX_PROCESSES})")
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
