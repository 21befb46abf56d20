"""Liveness of reservation holders on PostgreSQL: who holds jobs, and who is dead
(the backend's ``owner_token``, ``dead_owners``, ``reap_owners``… are :class:`Owners`').

Each process that reserves holds a session advisory lock, ``sqlq owner <token>``,
on a connection of its own, and a row in ``sqlq_owners`` (host, pid, place, and
``seen_at``, its last sign of life). The server drops the lock the moment that
session ends. That is how a SIGKILLed holder's jobs come back at once; but a
session also ends while its process lives on: a server restart or failover,
``pg_terminate_backend``, a pooler, ``idle_session_timeout``. A free lock alone
therefore proves nothing, and this module adds what does:

* the holder's **keeper**, a thread that every :data:`HEARTBEAT_S` renews
  ``seen_at`` on the owner session, and when the session is gone makes a new one
  and takes the *same* token's lock again; then it reads what it found (how many of
  its jobs a reaper handed out meanwhile: the hand-over counts them in its row) and
  says so. A keeper that ran far later than its beat warns once: a call holding the
  GIL starved it, and a holder starved for the grace while its session ends loses
  its jobs;
* the **reaper's rule**: a holder whose lock is free is dead when its process is
  seen gone on the reaper's own machine (same boot and pid namespace, no such pid:
  at once), or when its keeper has been silent for :data:`GRACE_S` (any machine),
  counted from the first reaper's look at the server as it runs now at the earliest
  (``sqlq_server_epoch``, migration 0018: not from the postmaster's start, which
  comes before a crash recovery that lets nobody in, nor from a standby's start
  before its promotion; a restart also loses unflushed heartbeats);
* the **hand-over**: the reaper gives a dead holder's jobs back in one transaction
  that holds the token's lock and checks the rule again, so a holder re-taking its
  lock either comes first (and keeps its jobs) or waits for that commit (and finds
  its jobs gone: ``JobLost``); never both;
* **no claim under a doubtful token**: :meth:`Holder.token` gives the token only
  while the keeper confirmed it within half the grace, else it waits for the keeper
  (or raises :class:`~sqlq.Disconnected`).

Through a transaction pool (pooling.py) no session can hold a lock: a holder registers
under the token's *transaction* lock (a reaper's hand-over holding it makes it wait, as
above) and holds nothing after, so every holder's lock reads free and the reaper's rule
rests on the process seen gone and the heartbeats alone: a live holder whose keeper is
silent for the grace loses its jobs (JobLost), where a session lock would keep them.

A holder on another machine that really died is noticed after the grace (at most
``GRACE_S`` plus a heartbeat); one whose host vanished without a TCP reset keeps its
lock until the server's keepalives end its session (``db.SESSION_SETTINGS``: about
25 s), then the grace.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from functools import partial

import psycopg

from ...errors import DatabaseError, Disconnected
from ..sql import one
from .db import Connection, Database, PgConn, closed_on_error, connect
from .store import PostgresStore

log = logging.getLogger("sqlq")

#: How often the keeper renews this process's sign of life (and checks its session).
HEARTBEAT_S = 1.0
#: How long a holder whose lock is free may stay silent before others judge it dead:
#: the time its keeper has to make a new session and take its lock again.
GRACE_S = 5.0
#: A token is handed to a claim only while the keeper confirmed it this recently.
CONFIRMED_S = GRACE_S / 2
#: How long a claim waits for the keeper to confirm the token again before raising.
CONFIRM_WAIT_S = 60.0
#: Pause between the keeper's attempts to make a lost session again.
RETRY_S = 0.25
#: A keeper whose beat comes this much later than HEARTBEAT_S warns (once): something
#: kept its thread from running (a call holding the GIL) for half the grace.
LATE_S = GRACE_S / 2


def place() -> str:
    """Where a pid names this process: the kernel's boot and the pid namespace; ""
    where they cannot be read (then no pid is ever judged by another process)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot} {namespace}"


def process_gone(pid: int) -> bool:
    """Whether no process with this pid runs here: none exists, or a zombie its
    parent has not waited for yet (a reused pid reads as alive: then the grace)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass  # EPERM: someone else's process
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X")  # the state, after "(comm)"


class Holder:
    """This process's registration as a holder of reservations, kept by a thread."""

    def __init__(self, url: str, location: str, store: PostgresStore, *,
                 pooled: bool = False) -> None:
        self._url = url
        self._pooled = pooled
        self._location = location
        self._store = OwnerStore(store.Q)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.place = place()
        self.token = f"{self.host}-{self.pid}-{os.urandom(6).hex()}"
        self._conn: Connection | None = None
        self._confirmed = 0.0  # monotonic, before the last heartbeat that was written
        self._closed = False
        self._warned_late = False
        self._changed = threading.Condition()
        self._register()  # the first registration fails loudly; the keeper retries later ones
        self._thread = threading.Thread(target=self._keep, name="sqlq-owner-keeper", daemon=True)
        self._thread.start()

    def token_now(self) -> str:
        """The token, if the keeper confirmed it lately; else wait for the keeper."""
        if time.monotonic() - self._confirmed < CONFIRMED_S:
            return self.token
        with self._changed:
            fresh = self._changed.wait_for(
                lambda: self._closed or time.monotonic() - self._confirmed < CONFIRMED_S,
                CONFIRM_WAIT_S)
        if not fresh or self._closed:
            raise Disconnected(f"{self._location}: the session that keeps this process's "
                               "reservations could not be made again")
        return self.token

    def _register(self) -> tuple[int | None, int]:
        """On a new session: take the token's lock, then write the row under it; (how
        many of its jobs reapers handed out since it last registered, None if it had no
        row; how many it holds now: read on a session made again only)."""
        started = time.monotonic()
        conn = connect(self._url, self._location, pooled=self._pooled)
        with closed_on_error(conn, self._location), \
                conn.transaction() if self._pooled else contextlib.nullcontext():
            if self._pooled:  # no session to hold it: the lock of this transaction only
                conn.execute(self._store.Q["lock_owner"], {"token": self.token})
            # Busy only while a reaper's hand-over holds it (one short transaction).
            while not self._pooled and not self._store.try_lock_owner(conn, self.token):
                if self._closed:
                    raise Disconnected(f"{self._location}: closed")
                time.sleep(0.02)
            handed = self._store.register_owner(conn, self.token, self.host, self.pid,
                                                self.place)
            if self._conn is None:
                # Once a process: rows of holders gone long ago.
                self._store.forget_silent_owners(conn)
                held = 0
            else:
                held = self._store.owner_jobs(conn, self.token)
        old, self._conn = self._conn, conn
        if old is not None:
            old.close()
        self._confirm(started)
        return handed, held

    def _confirm(self, started: float) -> None:
        with self._changed:
            self._confirmed = started
            self._changed.notify_all()

    def _keep(self) -> None:
        """Renew the sign of life; on any failure, make the session again, the same
        token's lock first, for as long as this process runs."""
        lost_at: float | None = None
        while True:
            waited_from = time.monotonic()
            with self._changed:
                self._changed.wait_for(lambda: self._closed, HEARTBEAT_S)
                if self._closed:
                    return
            started = time.monotonic()
            if started - waited_from > HEARTBEAT_S + LATE_S:  # no I/O in between: starved
                self._late(started - waited_from)
            try:
                if lost_at is not None:
                    self._back(time.monotonic() - lost_at, *self._register())
                    lost_at = None
                    continue
                assert self._conn is not None
                if self._store.owner_heartbeat(self._conn, self.token):
                    self._confirm(started)
                else:  # our row was forgotten (forget_silent_owners): register again
                    self._store.register_owner(self._conn, self.token, self.host, self.pid,
                                               self.place)
                    self._confirm(started)
            except (psycopg.Error, DatabaseError) as e:
                if self._closed:
                    return
                if lost_at is None:
                    lost_at = started
                    log.warning("lost the owner session of %s (%s); making it again",
                                self._location, str(e).strip().splitlines()[0] if str(e) else e)
                time.sleep(RETRY_S)

    def _back(self, after: float, handed: int | None, held: int) -> None:
        """Say what a keeper that took its lock again found: whether its reservations
        stand, checked, not presumed."""
        where = f"the owner session of {self._location} is back after {after:.1f} s"
        if handed is None:  # no row: forgotten (forget_silent_owners)
            log.warning("%s; its registration was gone: %d reservations "
                        "stand, any others were handed out (JobLost when finished)",
                        where, held)
        elif handed:
            log.warning("%s; %d of its %d reservations were handed out to other workers "
                        "while it was silent for more than %.0f s (JobLost when finished)",
                        where, handed, handed + held, GRACE_S)
        else:
            log.warning("%s; all %d of its reservations stand", where, held)

    def _late(self, gap: float) -> None:
        """The keeper's thread could not run for ``gap`` s (its wait's timeout was
        HEARTBEAT_S): warn, once."""
        if self._warned_late:
            return
        self._warned_late = True
        log.warning(
            "the thread keeping this process's reservations on %s could not run for "
            "%.1f s (its beat is every %.0f s): a call held the GIL that long (a long "
            "call into C code: a regex, "
            "NumPy, compression...), or the process was stopped. Were its owner session "
            "lost meanwhile, its jobs would go to other workers after %.0f s: run such "
            "tasks with --processes, in a subprocess, or in code that releases the GIL",
            self._location, gap, HEARTBEAT_S, GRACE_S)

    def close(self) -> None:
        """Stop the keeper, forget the row and end the session (its lock goes with it)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join(timeout=5)
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            self._store.unregister_owner(conn, self.token)
        except psycopg.Error:
            pass  # gone with the session: a reaper forgets the row
        finally:
            conn.close()


def judge(rows: Sequence[tuple[str, str | None, int | None, bool | None]], here: str
          ) -> list[tuple[str, bool]]:
    """(token, gone) for each holder the reaper's rule finds dead, of the rows of
    ``dead_owners`` (free locks): gone, its process is missing from this machine;
    else its keeper has been silent for the grace (None: not known yet, not silent)."""
    dead = []
    for token, where, pid, silent in rows:
        gone = bool(here) and where == here and pid is not None and process_gone(pid)
        if gone or silent:
            dead.append((token, gone))
    return dead


class Owners:
    """A backend's side of liveness: this process's :class:`Holder`, made on first use;
    the claims a lost connection may have committed unseen, given back before the next
    claim (db.ClaimLedger); and the reaper's judgement and hand-over."""

    def __init__(self, url: str, location: str, db: Database, store: PostgresStore) -> None:
        self._url = url
        self._location = location
        self._db = db
        self._store = store
        self._owners = OwnerStore(store.Q)
        self._lock = threading.Lock()
        self._holder: Holder | None = None
        self._place = place()

    def token(self) -> str:
        holder = self._holder
        if holder is None:
            with self._lock:
                holder = self._holder
                if holder is None:
                    holder = self._holder = Holder(self._url, self._location, self._store,
                                                   pooled=self._db.pooled())
        token = holder.token_now()
        if self._db.ledger.unseen:
            self._release_unseen_claims()
        return token

    def _release_unseen_claims(self) -> None:
        """Give back what claims cut off by a lost connection may have taken (ClaimLedger),
        before this process claims again."""
        ledger, store = self._db.ledger, self._store
        unseen = ledger.take_unseen()
        try:
            self._db.write(partial(store.claims.release_unseen_claims, unseen=unseen),
                           durable=False)
        except BaseException:
            ledger.put_back(unseen)
            raise

    def current(self) -> str | None:
        return None if self._holder is None else self._holder.token

    def _judge(self, tokens: Sequence[str], reaping: bool = False) -> list[tuple[str, bool]]:
        """The dead of tokens; a reaper (``reaping``) that finds nobody has looked at the
        server as it runs now writes that it did: the grace runs from there."""
        store = self._owners
        rows = self._db.read(partial(store.dead_owners, tokens=tokens, grace_s=GRACE_S))
        if reaping and any(silent is None for *_, silent in rows):
            self._db.write(store.note_server_epoch, durable=False)
        return judge(rows, self._place)

    def dead(self, tokens: Sequence[str]) -> list[str]:
        return [token for token, _ in self._judge(tokens)]

    def reap(self, tokens: Sequence[str]) -> int:
        """Give back the jobs of those of tokens found dead, each in a hand-over that
        checks the rule again under the token's lock; how many came back."""
        dead = self._judge(tokens, reaping=True)
        if not dead:
            return 0
        return self._db.write(partial(self._owners.release_dead_owners, dead=dead,
                                      grace_s=GRACE_S), durable=False)

    @staticmethod
    def info(token: str) -> tuple[str, int | None]:
        """(host, pid) of a token made by :class:`Holder`: "<host>-<pid>-<random>"."""
        host, _, rest = token.rpartition("-")[0].rpartition("-")
        return (host, int(rest)) if rest.isdigit() else (token, None)

    def close(self) -> None:
        if self._holder is not None:
            self._holder.close()
            self._holder = None


class OwnerStore:
    """The owners' statements (PostgreSQL's own noun), run by the holder and the reaper
    above: apart from PostgresStore, which owners.py builds on."""

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q

    def dead_owners(self, conn: PgConn, tokens: Sequence[str], grace_s: float
                    ) -> list[tuple[str, str | None, int | None, bool | None]]:
        """(token, place, pid, silent) of each token whose session lock is free: its
        holder died, or its session ended under a live process re-making it. silent is
        None while no reaper looked at the server as it runs now (note_server_epoch)."""
        return [tuple(r) for r in conn.execute(
            self.Q["dead_owners"], {"tokens": list(tokens), "grace": grace_s})]

    def note_server_epoch(self, conn: PgConn) -> None:
        """A reaper's first look at the server as it runs now: the grace runs from here."""
        conn.execute(self.Q["note_server_epoch"])

    def release_dead_owner(self, conn: PgConn, owner: str, gone: bool, grace_s: float) -> int:
        """Give back owner's reservations if, under its lock, it is still dead; how many."""
        return len(conn.execute(self.Q["release_dead_owner"],
                                {"owner": owner, "gone": gone, "grace": grace_s}).fetchall())

    def release_dead_owners(self, conn: PgConn, dead: Iterable[tuple[str, bool]],
                            grace_s: float) -> int:
        """:meth:`release_dead_owner` for each (owner, gone) of dead; how many in all."""
        return sum(self.release_dead_owner(conn, owner, gone, grace_s) for owner, gone in dead)

    def try_lock_owner(self, conn: PgConn, token: str) -> bool:
        """Take token's session lock on conn, held for as long as the session lives."""
        return bool(one(conn, self.Q["try_lock_owner"], {"token": token})[0])

    def register_owner(self, conn: PgConn, token: str, host: str, pid: int, place: str
                       ) -> int | None:
        """Register token (under its lock); how many of its jobs reapers handed out since
        it last registered (None: it had no row)."""
        handed = one(conn, self.Q["register_owner"],
                     {"token": token, "host": host, "pid": pid, "place": place})[0]
        return None if handed is None else int(handed)

    def owner_jobs(self, conn: PgConn, token: str) -> int:
        """How many reservations token holds."""
        return int(one(conn, self.Q["owner_jobs"], {"token": token})[0])

    def owner_heartbeat(self, conn: PgConn, token: str) -> bool:
        """Renew token's sign of life; False if a reaper forgot it (judged it dead)."""
        return conn.execute(self.Q["owner_heartbeat"], {"token": token}).fetchone() is not None

    def unregister_owner(self, conn: PgConn, token: str) -> None:
        conn.execute(self.Q["unregister_owner"], {"token": token})

    def forget_silent_owners(self, conn: PgConn) -> None:
        conn.execute(self.Q["forget_silent_owners"])
