"""What the commands share: option decorators, checked parameter types, the Queue of an
invocation (:func:`queue_from_ctx`) and the body of a put (:func:`read_body`) or the
bodies of a put-many (:func:`read_bodies`)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

import sqlq
from sqlq import backends
from sqlq.core.durations import parse_duration
from sqlq.errors import JobTooBig
from sqlq.model import check_tube

F = TypeVar("F", bound=Callable[..., Any])

#: ``ctx.obj`` key: the command runs as a process of its own (the console script,
#: ``python -m sqlq``), not inside another program (``manage.py sqlq``, a test's
#: CliRunner): ``sqlq work``'s supervisor and ``sqlq serve --processes``' parent may then
#: fork their children (core/forking.py).
OWN_PROCESS = "own_process"


def may_fork(ctx: click.Context) -> bool:
    """Whether this command's children may be forks of its process: it runs as a process
    of its own (:data:`OWN_PROCESS`), and no thread but the main one runs."""
    from sqlq.core import forking

    root = ctx.find_root()
    return bool(root.obj and root.obj.get(OWN_PROCESS)) and forking.sound()

DEFAULT_DB = "sqlq.db"


if TYPE_CHECKING:  # click >= 8.3 makes ParamType generic; older clicks cannot subscript it
    _ParamType = click.ParamType[Any, Any]
else:
    _ParamType = click.ParamType


class Checked(_ParamType):
    """A value checked by one of sqlq's own rules, so a bad one is a usage error (exit 2)
    whose message names the option (``Invalid value for '--delay': '5x' is not a
    duration``): the library's check and message, the command line's exit code."""

    def __init__(self, name: str, check: Callable[[Any], Any]) -> None:
        self.name = name
        self._check = check

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        """The checked value, or a usage error with the check's own message."""
        try:
            return self._check(value)
        except (ValueError, TypeError) as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        """``TUBE``, ``DURATION``: the group's help explains them."""
        return self.name.upper()


def _prefetch(value: object) -> int | None:
    from sqlq.work.prefetch import parse_prefetch  # the worker's modules load on first use

    return parse_prefetch(value)


TUBE = Checked("tube", check_tube)
DURATION = Checked("duration", parse_duration)
PREFETCH = Checked("n|auto", _prefetch)

#: --db PATH, else $SQLQ_DB, else ./sqlq.db (an option of the group, before the command).
db_option = click.option("--db", "db_path", envvar="SQLQ_DB", default=DEFAULT_DB,
                         show_default=True, metavar="PATH",
                         help="The database: a SQLite file, or a postgresql:// URL ($SQLQ_DB).")
#: --tube T: the one tube a command acts on.
tube_option = click.option("--tube", "-t", type=TUBE, default="default", show_default=True,
                           help="The tube to use.")
#: --tube T, repeatable: the tubes to watch (reserve, work).
tubes_option = click.option("--tube", "-t", "tubes", type=TUBE, multiple=True,
                            help="A tube to watch; repeat for several.  [default: default]")
#: --json: output for scripts, one object per line for lists.
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print JSON (one object per line for lists).")
#: --raw: a job's body, byte for byte, and nothing else.
raw_option = click.option("--raw", is_flag=True,
                          help="Write only the body, byte for byte, with no newline added.")
#: --delay DURATION before a job is ready.
delay_option = click.option("--delay", "-d", type=DURATION, default=0.0,
                            help="Wait this long before it is ready.")
#: --ttr DURATION: how long a reservation lasts.
ttr_option = click.option("--ttr", type=DURATION, default="60s", show_default=True,
                          help="Time to run: a reservation lasts this long (at least 1s).")
def _job_id(value: object) -> int:
    """A job id from the command line: ASCII digits, at least 1 (``int()`` alone would take
    ``١`` or ``1_0`` for ids 1 and 10: a by-id verb such as ``cancel`` must not act on a
    job the user did not name). An id past any job's is not found (exit 3), as before."""
    if isinstance(value, int):
        return value
    text = str(value)
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValueError(f"{text!r} is not a job id (a whole number, 1 or more)")
    return int(text)


#: The ID argument of by-id commands.
job_id_argument = click.argument("job_id", metavar="ID", type=Checked("id", _job_id))


def _job_ids(value: object) -> tuple[int, ...]:
    """One --after value: job ids separated by commas or spaces (``3,4`` or ``"3 4"``, as
    ``$(sqlq put-many ...)`` prints them), each a positive integer."""
    if isinstance(value, tuple):
        return value
    words = str(value).replace(",", " ").split()
    if not words or not all(w.isascii() and w.isdigit() and 0 < int(w) < 2**63 for w in words):
        raise ValueError(f"{value!r} is not a list of job ids")
    return tuple(int(w) for w in words)


#: --after ID, repeatable (each may list several ids): the jobs a put waits for.
after_option = click.option(
    "--after", "-a", "after", type=Checked("id", _job_ids), multiple=True,
    help="Wait until job ID is gone (deleted or completed) before it is ready; repeat, or "
         "separate ids with commas, for several.")

#: --replace: with --unique-key, the put replaces the key's live job (on_conflict="replace").
replace_option = click.option(
    "--replace", is_flag=True,
    help="With --unique-key: a waiting, ready or delayed job holding the key takes this "
         "body and these options (debounce); a running or buried one is followed by a new "
         "job that waits for it.")


def on_conflict(replace: bool) -> str:
    """Queue.put's on_conflict for the --replace flag."""
    return "replace" if replace else "keep"


group_option = click.option(
    "--group", "group", default=None,
    help="The jobs' group: claims take a tube's groups in turn, and sqlq limit "
         "--group-concurrency/--group-rate cap each (1 to 200 characters).")


def priority_option(default: int | None) -> Callable[[F], F]:
    """``--priority N``; a None default means "keep the job's own" (release, bury)."""
    return click.option("--priority", "-p", type=click.IntRange(0, 2**32 - 1), default=default,
                        show_default=default is not None, metavar="N",
                        help="0 is the most urgent, 4294967295 the least.")


def put_options(f: F) -> F:
    """The options every producing command shares: tube, priority, delay, ttr."""
    for decorate in (ttr_option, delay_option, priority_option(1024), tube_option):
        f = decorate(f)
    return f


def queue_from_ctx(ctx: click.Context, *, create: bool = True, **options: Any) -> sqlq.Queue:
    """The Queue of this invocation, opened once and closed when the command ends.

    Args:
        ctx: any click context of the invocation.
        create: False for commands that only look at or act on existing jobs, so that a
            typo in ``--db`` is an error instead of a new, empty database.
        options: keywords for ``sqlq.Queue`` (``max_job_size=``, ``durability=`` ...).
    """
    root = ctx.find_root()
    root.ensure_object(dict)
    queue: sqlq.Queue | None = root.obj.get("queue")
    if queue is None:
        path = db_location(ctx)
        if not create and not backends.exists(path):
            raise sqlq.Error(f"no database at {path} (use --db PATH or $SQLQ_DB)")
        queue = root.obj["queue"] = sqlq.Queue(path, **options)
        root.call_on_close(queue.close)
        # A server that cannot be reached is said at once (one line, exit 1), as psql
        # does: a Queue itself waits for it, up to a minute, on first use.
        queue.backend.connect()
    return queue


def db_location(ctx: click.Context) -> str:
    """The database this invocation names (``--db``, $SQLQ_DB, or the default): a path, or
    a URL with its password (a process serving the same queue opens it again)."""
    path: str = ctx.find_root().params.get("db_path") or DEFAULT_DB
    return path


def read_body(body: str | None) -> bytes:
    """The body from the argument (exact argv bytes) or, for ``-`` or none, from stdin."""
    if body is not None and body != "-":
        return os.fsencode(body)  # undoes the surrogateescape of non-UTF-8 argv bytes
    if body is None and sys.stdin.isatty():
        raise click.UsageError("give the BODY as an argument, or '-' to read it from stdin")
    return sys.stdin.buffer.read()


#: How much of put-many's input is read, split and put at a time.
CHUNK = 1 << 20
#: How much of a pipe's input put-many keeps in memory; the rest goes to a temporary file.
SPOOLED = 8 << 20


def read_bodies(file: IO[bytes], sep: bytes, max_size: int
                ) -> Iterator[tuple[list[bytes], int]]:
    """``put-many``'s input a chunk at a time, never whole: (the bodies that ended in
    it, empty ones skipped; bytes read so far). A body longer than ``max_size`` is
    refused as soon as that many bytes of it are read (JobTooBig)."""
    carry, read = b"", 0
    while chunk := file.read(CHUNK):
        read += len(chunk)
        bodies = (carry + chunk).split(sep)
        carry = bodies.pop()
        if len(carry) > max_size:
            raise JobTooBig(f"a job body is more than the maximum of {max_size} bytes")
        yield [b for b in bodies if b], read
    if carry:
        yield [carry], read


def spool(file: IO[bytes]) -> tuple[IO[bytes], int]:
    """A pipe's whole input, read before any put: kept in memory up to SPOOLED bytes and
    in a temporary file past them; (it, from its start, and its size). put-many's one
    transaction then lasts as long as its puts, not as long as the pipe's writer takes
    (on a file, a transaction open that long would hold back every worker's writes)."""
    spooled: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOLED)  # noqa: SIM115
    shutil.copyfileobj(file, spooled, CHUNK)
    size = spooled.tell()
    spooled.seek(0)
    return spooled, size


def input_size(file: IO[bytes]) -> int | None:
    """The bytes left in ``file`` when it is a regular file (a path, or stdin redirected
    from one); None for a pipe or a terminal, whose end is not known beforehand."""
    try:
        info = os.fstat(file.fileno())
        return info.st_size - file.tell() if stat.S_ISREG(info.st_mode) else None
    except (OSError, ValueError):  # no descriptor (a test's BytesIO), or not seekable
        return None
