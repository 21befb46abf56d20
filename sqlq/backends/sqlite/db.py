"""The database connection, through either SQLite library (``drivers.py``).

Everything about talking to SQLite lives here: creating the file (atomically,
mode 0600), pragmas, write transactions with the durability each one needs,
waiting out SQLITE_BUSY, and turning driver errors into sqlq's one-line errors.
The driver only opens connections and names its errors' SQLite result codes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ...errors import DatabaseError, Error, Locked, SchemaError
from ..base import Durability
from . import drivers, migrate, mounts, sidecar
from .drivers import Driver, immediate
from .wakeup import NOTIFY_NAME

T = TypeVar("T")

#: How long one attempt waits for the write lock before tenacity steps in.
BUSY_TIMEOUT_S = 5.0
#: How long a write may keep retrying before SQLITE_BUSY reaches the caller as an error.
BUSY_GIVE_UP_S = 120.0
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
#: The page size of the files sqlq creates (a file keeps the one it was made with). A
#: commit writes every page it changed, whole, to the -wal, and a job's rows are a few
#: hundred bytes: a reserve+delete changes 8 pages. At 2,048 bytes a commit writes, and
#: checksums, and a checkpoint copies back, half of what SQLite's default 4,096 costs:
#: about 5% of the instructions of a reserve+delete (225k to 214k, bench_callgrind.py)
#: and 10-25% of its time in ``normal`` durability. Bodies over about 2 KB pay an
#: overflow page more (docs/performance.md, "Page size").
PAGE_SIZE = 2048
#: No SQLite database is shorter than one page, and pages are at least this long.
MIN_DATABASE_SIZE = 512
#: In ``normal`` durability, check the -wal file is still ours once per this many commits.
WAL_CHECK_EVERY = 64
#: A directory whose last change is this much older than now is "settled": any later
#: change gets a later time stamp, even from the kernel's coarse (per-tick) clock, so an
#: unchanged (mtime, ctime) proves no entry was removed or replaced since (``_check_wal_dir``).
DIR_SETTLED_NS = 50_000_000

_pread = os.pread  # looked up once: _published runs on every durable commit


def _nothing() -> None:
    """Database.began/committed until the backend sets them."""


# SQLite's primary result codes that get a message of their own.
_READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 8, 10, 11, 13, 14, 26


def translate(path: str, error: Exception, driver: Driver = drivers.DRIVERS["apsw"]) -> Error:
    """The sqlq error, with a one-line message naming the file, for a driver's error."""
    code = driver.code(error)
    if code == _NOTADB:
        return SchemaError(f"{path}: not a SQLite database")
    if code == _CORRUPT:
        return DatabaseError(f"{path}: the database file is corrupt ({error})")
    if code == _FULL or driver.extended_code(error) == drivers.SQLITE_IOERR_SHMSIZE:
        return DatabaseError(f"{path}: disk full, nothing was written")
    if code == _READONLY:
        return DatabaseError(f"{path}: read-only (check the file's and directory's permissions)")
    if code == _CANTOPEN:
        parent = os.path.dirname(os.path.abspath(path))
        if os.path.exists(path) and not os.access(parent, os.W_OK):
            return DatabaseError(f"{path}: cannot open the database: its directory is read-only "
                                 "and SQLite's WAL mode keeps its -wal and -shm files there")
        return DatabaseError(f"{path}: cannot open the database ({error})")
    if code == drivers.SQLITE_BUSY:
        return Locked(f"{path}: database is locked by another process for too long")
    if code == _IOERR:
        return DatabaseError(f"{path}: I/O error ({error})")
    return DatabaseError(f"{path}: {error}")


@contextlib.contextmanager
def translate_errors(path: str, driver: Driver = drivers.DRIVERS["apsw"]) -> Iterator[None]:
    """Turn the driver's exceptions raised in the block into sqlq errors."""
    try:
        yield
    except driver.Error as e:
        raise translate(path, e, driver) from e


def _create_file(path: str, now_ms: int, vfs: str | None = None,
                 driver: Driver = drivers.DRIVERS["apsw"]) -> None:
    """Create a new, fully migrated database file at path, or do nothing if one appears.

    The schema is built in a private file which is then linked into place, so no
    process ever sees a half-initialised database, and the file is 0600 from its
    first byte (SQLite gives the -wal and -shm files the database file's mode).

    The migrations run in SQLite's rollback-journal mode, each commit written into the
    file itself, and only then is the file switched to WAL: built in WAL mode, the
    schema would sit in the private -wal until the close's checkpoint, which fails
    silently on a full disk, and the -wal is deleted below with the rest of the private
    files: the linked file would be malformed. A full disk now fails a commit, loudly.
    """
    tmp = f"{path}.sqlq-init-{os.urandom(4).hex()}"
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as e:
        raise DatabaseError(f"{path}: cannot create the database ({e.strerror})") from e
    os.close(fd)
    try:
        conn = driver.connect(tmp, create=True, vfs=vfs)
        try:
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}").fetchall()  # before any table
            migrate.migrate(conn, now_ms)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchall()[0][0]
            if mode != "wal":
                raise DatabaseError(f"{path}: cannot create the database in WAL mode "
                                    f"(journal mode {mode})")
            conn.execute("SELECT 1 FROM sqlite_master").fetchall()  # the -shm: no room fails here
        finally:
            conn.close()
        try:
            os.link(tmp, path)  # fails if another process created the file first
        except FileExistsError:
            pass
        except OSError:
            # A filesystem without hard links: rename, still atomic, and race-free
            # enough here since the loser of a race only replaces an empty queue.
            if not os.path.exists(path):
                os.rename(tmp, path)
        _fsync_directory(path)
    finally:
        for leftover in (tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _fsync_directory(path: str) -> None:
    """Make the new file's directory entry durable: a put acknowledged in
    ``full`` mode must not vanish with the file on power loss."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; nothing more we can do
    finally:
        os.close(fd)


# Files this process has open through sqlq, by ((st_dev, st_ino), driver name).
_open_here: Counter[tuple[tuple[int, int], str]] = Counter()
_open_here_lock = threading.Lock()


def _file_key(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def open_through_sqlq(path: str, driver: str = "apsw") -> bool:
    """True if this process has a sqlq Queue open on the file at path through that driver."""
    key = _file_key(path)
    return key is not None and _open_here[key, driver] > 0


def _open_by_another_library(key: tuple[int, int], driver: Driver) -> bool:
    """Whether the database file is already open in this process through another
    SQLite library than the driver's.

    A Queue of the other driver is a sure mix. For apsw, any other descriptor on
    the file is one too (the application's sqlite3, most likely); for sqlite3 it
    is the application's own connections, through the same library: allowed.
    apsw carries its own copy of SQLite. Two copies in one process do not see each
    other's POSIX locks (locks never conflict within a process, and each copy
    tracks only its own), so both could write at once, and one closing its
    descriptor drops the other's locks: the corruption SQLite's "how to corrupt"
    page warns of. Looking costs a stat per open descriptor, once per Queue.
    """
    if any(_open_here[key, other] for other in drivers.DRIVERS if other != driver.name):
        return True
    fd_dir = "/proc/self/fd"
    if driver.name != "apsw" or _open_here[key, driver.name] or not os.path.isdir(fd_dir):
        return False
    for name in os.listdir(fd_dir):
        try:
            st = os.stat(os.path.join(fd_dir, name))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == key:
            return True
    return False


class Database:
    """One connection to a sqlq file, through either driver, safe to share between threads.

    Writes go through :meth:`write`, which runs a function inside ``BEGIN
    IMMEDIATE`` and retries it whole when the lock cannot be had. In ``full``
    durability only writes that must survive a power cut pay for an fsync;
    the others (a claim, a touch, a release) commit with synchronous=NORMAL:
    lost on power loss, such a write leaves a job that simply becomes ready
    again, which TTR semantics allow.
    """

    def __init__(self, path: str, *, durability: Durability = "full", init: bool = False,
                 clock: Callable[[], int], vfs: str | None = None,
                 driver: str | None = None) -> None:
        self.driver = drivers.get(driver)
        if durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', not {durability!r}")
        self.path = path
        self.durability = durability
        self._full = durability == "full"
        self._lock = threading.RLock()
        self._busy_since = 0.0
        #: Seconds a write waits for another process's lock before raising Locked at
        #: once; None: BUSY_TIMEOUT_S, then tenacity's retries until BUSY_GIVE_UP_S.
        self.lock_wait: float | None = None
        #: Called before _transaction's BEGIN and after its COMMIT (store.DueCache's need).
        self.began = self.committed = _nothing
        with translate_errors(path, self.driver):
            self._check_file(init)
            mounts.warn_if_network_filesystem(path)
            if not os.path.exists(path):
                _create_file(path, clock(), vfs, self.driver)
            # Resolved once, as SQLite resolves it: the sidecar and the watched -wal
            # are beside the real file, whatever name each process opened it by.
            self.real_path = sidecar.real_path(path)
            self._key = _file_key(path)
            with _open_here_lock:
                if self._key and _open_by_another_library(self._key, self.driver):
                    other = "apsw" if self.driver.name != "apsw" else "Python's sqlite3?"
                    raise DatabaseError(
                        f"{path}: already open in this process through another SQLite library "
                        f"({other}); two SQLite copies in one process ignore each other's "
                        "locks and can corrupt the file. An application that uses sqlite3 "
                        "opens its Queue with driver='sqlite3'")
                if self._key:
                    _open_here[self._key, self.driver.name] += 1
            self.conn = self.driver.connect(path, vfs=vfs)
            try:
                self.conn.set_busy_handler(self._busy_handler)
                try:
                    migrate.migrate(self.conn, clock(), allow_foreign=init)
                except SchemaError as e:  # one line that names the file, as every other error
                    raise SchemaError(f"{path}: {e}") from None
                mode = self.conn.execute("PRAGMA journal_mode").fetchall()[0][0]
                if mode != "wal":
                    self.conn.execute("PRAGMA journal_mode = WAL")
                self.conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
                self.conn.execute("PRAGMA temp_store = MEMORY")
                self._durable_now = True
                self._set_sync(durable=True)
                self._notify_fd = self._open_notify()
                self._wal_key = _file_key(self.real_path + "-wal")
                self._wal_dir = os.path.dirname(self.real_path) or "."
                self._wal_dir_seen: tuple[int, int, int] | None = None
                self._commits = 0
                self._broken: str | None = None
            except BaseException:
                self.conn.close()
                self._forget()
                raise
    @functools.cached_property
    def _retrying(self) -> Any:
        """tenacity's retry loop for a write lock held past BUSY_TIMEOUT_S, made (and
        imported) only when first needed: most processes never need it, and every
        `sqlq` command pays for what it imports."""
        from tenacity import (
            Retrying,
            retry_if_exception,
            stop_after_delay,
            wait_random_exponential,
        )
        return Retrying(
            retry=retry_if_exception(self.driver.busy),
            wait=wait_random_exponential(multiplier=0.002, max=0.25),
            stop=stop_after_delay(BUSY_GIVE_UP_S),
            reraise=True,
        )

    def _check_file(self, init: bool) -> None:
        """Refuse, before SQLite touches it, a path that cannot be a sqlq database."""
        if os.path.isdir(self.path):
            raise DatabaseError(f"{self.path}: is a directory")
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise DatabaseError(f"{self.path}: directory {parent} does not exist")
        if init or not os.path.exists(self.path):
            return
        size = os.path.getsize(self.path)
        if size == 0:
            raise SchemaError(f"{self.path}: empty file, not a sqlq database (init=True adopts it)")
        if size < MIN_DATABASE_SIZE:
            # SQLite reads a file shorter than its 100-byte header as empty and would
            # make a new database of it (a 1-byte file, ids starting again at 1).
            raise SchemaError(f"{self.path}: not a SQLite database ({size} bytes, shorter than "
                              "any database; init=True adopts it)")

    def _busy_handler(self, attempts: int) -> bool:
        # SQLite's own handler sleeps 1 ms and more, so a waiting process keeps
        # losing the lock to one that commits every 100 µs. Short jittered sleeps
        # give every process a fair turn; tenacity takes over after the timeout.
        now = time.monotonic()
        if attempts == 0:
            self._busy_since = now
        elif now - self._busy_since > (BUSY_TIMEOUT_S if self.lock_wait is None
                                        else self.lock_wait):
            return False
        import random  # only under contention

        time.sleep(min(0.00005 * 2 ** min(attempts, 7), 0.005) * random.uniform(0.5, 1.5))
        return True

    def _set_sync(self, durable: bool) -> None:
        # In normal durability every transaction is "durable" as far as it goes.
        level = "FULL" if durable and self.durability == "full" else "NORMAL"
        self.conn.execute(f"PRAGMA synchronous = {level}")
        self._durable_now = durable

    def write(self, fn: Callable[[Any], T], *, durable: bool = True,
              single: bool = False) -> T:
        """Run fn(conn) in one write transaction and commit; retried whole on SQLITE_BUSY.

        ``single=True`` promises that fn writes with one statement (reads after it
        are fine): it then runs as SQLite's own autocommit transaction, which takes
        the write lock when the statement starts, as BEGIN IMMEDIATE would, and
        commits when it ends, saving two statements on the hot path of a put.
        Inside a transaction already open on this connection (Queue.transaction),
        fn simply joins it. Written flat, without context-manager helpers.
        """
        with self._lock:
            if self._broken is not None:
                raise DatabaseError(self._broken)
            conn = self.conn
            try:
                if not conn.get_autocommit():
                    return fn(conn)
                try:
                    if single and (durable is self._durable_now or not self._full):
                        # The hot path (a put, a delete, a claim), _transaction's
                        # first branch without its call: one autocommit statement.
                        value = fn(conn)
                        if durable:
                            self._published()
                        return value
                    return self._transaction(fn, durable, single)
                except self.driver.Error as e:
                    if self.lock_wait is not None or not self.driver.busy(e):
                        raise
                    result: T = self._retrying(self._transaction, fn, durable, single)
                    return result
            except self.driver.Error as e:
                raise translate(self.path, e, self.driver) from e
            except BaseException:  # between a statement and its rows (KeyboardInterrupt)
                drivers.end_hot(conn)
                raise

    def _transaction(self, fn: Callable[[Any], T], durable: bool,
                     single: bool = False) -> T:
        conn = self.conn
        if self._full and durable is not self._durable_now:
            self._set_sync(durable)
        if single:
            result = fn(conn)
            if durable:
                self._published()
            return result
        # drivers.immediate(conn), written out: this is a worker's delete-and-claim
        # transaction, once a job, and the context manager cost 3k instructions more
        # (callgrind, about 1% of the cycle).
        self.began()
        hot = conn.hot  # drivers.ApswConnection: BEGIN and COMMIT make no cursor
        hot.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            hot.execute("COMMIT")
        except BaseException:
            if not conn.get_autocommit():
                conn.execute("ROLLBACK")
            raise
        self.committed()
        if durable:
            self._published()
        return result

    def _published(self) -> None:
        """Tell waiters that a commit is now visible (see wakeup.py).

        A commit's -wal write wakes waiters before SQLite publishes the commit,
        and with synchronous=FULL an fsync, which a busy disk can stretch past a
        second, sits in between. Reading one byte of ``<db>-sqlq/notify`` after
        COMMIT returns raises an inotify IN_ACCESS event when the commit is surely
        visible, and writes nothing to disk (utime on the -wal, tried first, cost a
        journal commit per put). Even without an fsync the gap is real (the writer
        can be preempted in it), and at about a microsecond per durable commit
        the event is cheaper than the waiters' re-checks it spares. Claims,
        touches and releases publish at once and need no signal of their own.
        """
        fd = self._notify_fd
        if fd is not None:
            _pread(fd, 1, 0)
        commits = self._commits = self._commits + 1
        if self._full:
            self._check_wal_dir()
        elif not commits % WAL_CHECK_EVERY:
            self.check_wal()

    def _check_wal_dir(self) -> None:
        """:meth:`check_wal` after every fsync'd commit, through the directory.

        Deleting or replacing the -wal changes its directory's entries, and so the
        directory's mtime and ctime: while those are what a full check last saw (and
        were settled then, DIR_SETTLED_NS old), the -wal is still ours, and a stat of
        the directory proves it. A stat of the -wal itself, even an fstat, made each
        fsync'd put about 60 us slower in wall time on ext4 (bench_single, 7a: 0.69x
        of the bare loop with it, 0.9-1.0x without; the syscall itself takes 3 us: the
        cost shows up in the commits around it), and a stat of the directory does not.
        """
        now = time.time_ns()  # before the stat: a change after it is stamped later than this
        try:
            st = os.stat(self._wal_dir)
        except OSError:
            self._wal_dir_seen = None
            self.check_wal()
            return
        seen = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        if seen == self._wal_dir_seen:
            return
        self.check_wal()
        settled = now - max(st.st_mtime_ns, st.st_ctime_ns) > DIR_SETTLED_NS
        self._wal_dir_seen = seen if settled else None

    def check_wal(self) -> None:
        """Stop if the -wal file was deleted or replaced under this open connection.

        SQLite would go on committing into the deleted file, and every commit since
        would vanish when this process closes it (other processes meanwhile get
        "disk I/O error"). The path is stat'ed, never opened (CONTRIBUTING: opening
        and closing it would drop this process's POSIX locks).

        Raises:
            DatabaseError: it happened; this Database refuses every write from now on.
        """
        if self._broken is not None:
            raise DatabaseError(self._broken)
        if self._wal_key is None:
            return
        if _file_key(self.real_path + "-wal") != self._wal_key:
            self._broken = (
                f"{self.path}: its -wal file was deleted or replaced while this process had "
                "the database open; commits made since then are lost when it closes. Stop "
                "every process using the file (and never delete a database's -wal or -shm)")
            raise DatabaseError(self._broken)

    def outside_transaction(self, fn: Callable[[Any], T]) -> T:
        """Run fn(conn) with no transaction open (a checkpoint cannot run inside one)."""
        with self._lock, translate_errors(self.path, self.driver):
            return fn(self.conn)

    def read(self, fn: Callable[[Any], T], *, single: bool = False) -> T:
        """Run fn(conn) in one read transaction: a consistent snapshot, no lock taken.

        ``single=True`` promises that fn reads with one statement, which SQLite runs
        as its own read transaction: no BEGIN and COMMIT around it. Written flat, as
        write() is: translate_errors' generator cost 1.5 us a read (a waiter's look).
        """
        with self._lock:
            conn = self.conn
            try:
                if single or not conn.get_autocommit():
                    return fn(conn)
                conn.execute("BEGIN")
                try:
                    return fn(conn)
                finally:
                    if not conn.get_autocommit():
                        conn.execute("COMMIT")
            except self.driver.Error as e:
                raise translate(self.path, e, self.driver) from e

    @contextlib.contextmanager
    def transaction(self, durable: bool = True) -> Iterator[Any]:
        """A write transaction the caller fills; nested use takes a savepoint.

        With ``lock_wait`` set, BEGIN waits that long for another process's lock and
        raises Locked, as write() does (an event loop must not sit in the retries).
        """
        with self._lock, translate_errors(self.path, self.driver):
            conn = self.conn
            if not conn.get_autocommit():
                # One name serves every depth: ROLLBACK TO and RELEASE act on the
                # innermost savepoint of that name, which is this block's.
                conn.execute("SAVEPOINT sqlq_nested")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK TO sqlq_nested")
                    conn.execute("RELEASE sqlq_nested")
                    raise
                conn.execute("RELEASE sqlq_nested")
                return
            if self._full and durable is not self._durable_now:
                self._set_sync(durable)
            with immediate(conn, begin=None if self.lock_wait is not None
                           else lambda: self._retrying(conn.execute, "BEGIN IMMEDIATE")):
                yield conn
            if durable:
                self._published()

    def in_transaction(self) -> bool:
        """Whether this thread holds the connection inside an open transaction."""
        # The lock is reentrant: taken at once by its holder, or by anyone when free
        # (and then no transaction is open); refused only while another thread has it.
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return not self.conn.get_autocommit()
        finally:
            self._lock.release()

    def _open_notify(self) -> int | None:
        """The descriptor _published reads, or None where the sidecar cannot be made
        (waiters then rely on their re-checks). It is not a database file, so
        opening and closing it cannot disturb SQLite's locks."""
        try:
            directory = sidecar.ensure(self.path, self.real_path)
            fd = sidecar.open_file(self.path, self.real_path,
                                   os.path.join(directory, NOTIFY_NAME), os.O_RDWR | os.O_CREAT)
        except sidecar.UntrustedSidecar:
            raise  # another user could write there: refuse the file, in one line
        except (OSError, DatabaseError):
            return None
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_size == 0:
                os.write(fd, b"\n")  # IN_ACCESS needs a byte to read
        return fd

    def _forget(self) -> None:
        with _open_here_lock:
            if self._key and _open_here[self._key, self.driver.name] > 0:
                _open_here[self._key, self.driver.name] -= 1
            self._key = None

    def close(self) -> None:
        with self._lock:
            self.conn.close()
            if self._notify_fd is not None:
                os.close(self._notify_fd)
                self._notify_fd = None
            self._forget()
