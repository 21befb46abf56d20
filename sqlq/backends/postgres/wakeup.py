"""Wakeups on PostgreSQL: one LISTEN connection per process, shared by its waiters.

Writes that may make a job ready (or a result final, or free a slot of a tube's
concurrency cap: migration 0016) send ``NOTIFY sqlq`` in their own transaction,
so a rolled-back put wakes nobody and a notification always means a visible
commit: there is no publish race to re-check for. A
thread per process reads the listening connection and wakes every waiting
notifier through its own pipe (a descriptor an event loop can poll).

NOTIFY is a hint, never the mechanism: notifications are lost while the
listening connection is down, so after every reconnect all notifiers get a
"look again", and a waiter looks by itself at least every :data:`MAX_SLEEP`
seconds.

Through a transaction pool LISTEN would hear nothing (the server session that ran it
goes to another client): the listening connection is made on the URL's
``listen_url`` (a direct one, checked), or there is none and the thread wakes every
waiter every :data:`pooling.POLL_S` seconds instead (a bounded poll).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from ...errors import DatabaseError, Disconnected
from ..base import Events
from ..locations import redact
from . import pooling
from .db import CONNECT_OPTIONS, connect, set_session, translate

#: A waiter looks by itself at least this often, whatever it heard.
MAX_SLEEP = 10.0
#: The listening thread checks its connection when it heard nothing for this long.
HEALTH_INTERVAL = 10.0

log = logging.getLogger("sqlq")


class Listener:
    """The process's listening connection for one database, and its reader thread; with
    no URL (a transaction pool, no listen_url), the thread that wakes waiters to poll."""

    def __init__(self, url: str | None, location: str) -> None:
        self.url, self.location = url, location
        self._lock = threading.Lock()
        self._notifiers: set[PgNotifier] = set()
        self._stopping = False
        self._stop_r, self._stop_w = os.pipe()  # a byte here ends the reader thread
        # The first connection fails loudly if the server refuses us (a password, a
        # missing database); one that cannot reach it yet is retried by the thread.
        self._conn: psycopg.Connection[Any] | None = None
        try:
            if url is not None:
                self._conn = self._listen()
        except Disconnected as e:
            log.warning("%s; listening as soon as it can be reached", e)
        self._thread = threading.Thread(target=self._run, name="sqlq-listen", daemon=True)
        self._thread.start()

    def _listen(self) -> psycopg.Connection[Any]:
        assert self.url is not None
        conn = connect(self.url, self.location, pooled=True)
        try:
            if pooling.detect(conn, self.url, CONNECT_OPTIONS) == "transaction":
                conn.close()
                raise DatabaseError(
                    f"{self.location}: listen_url {redact(self.url)} goes through a "
                    "transaction pool, where LISTEN hears nothing: give a direct URL (or a "
                    "session pool's)")
            set_session(conn)
            conn.execute("LISTEN sqlq")
        except psycopg.Error as e:
            # The server went between the connect and the LISTEN (a restart): the
            # same one-line error as a failed connect (Disconnected), not psycopg's.
            error = translate(self.location, e, conn)
            with contextlib.suppress(psycopg.Error):
                conn.close()
            raise error from e
        return conn

    def add(self, notifier: PgNotifier) -> None:
        with self._lock:
            self._notifiers.add(notifier)

    def remove(self, notifier: PgNotifier) -> bool:
        """Forget notifier; True if it was the last one (the listener may stop)."""
        with self._lock:
            self._notifiers.discard(notifier)
            return not self._notifiers

    def _wake_all(self) -> None:
        with self._lock:
            notifiers = list(self._notifiers)
        for notifier in notifiers:
            notifier.poke()

    def _run(self) -> None:
        """Sleep in select() on the connection's socket (psycopg's own wait wakes every
        100 ms: CPU for nothing), then take what arrived without blocking."""
        if self.url is None:
            self._poll()
            return
        while not self._stopping:
            if self._conn is None:
                self._reconnect()
                continue
            try:
                ready, _, _ = select.select([self._conn.fileno(), self._stop_r], [], [],
                                            HEALTH_INTERVAL)
                if self._stop_r in ready:
                    return
                if not ready:
                    self._conn.execute("SELECT 1")  # heard nothing for a while: still there?
                    continue
                if any(True for _ in self._conn.notifies(timeout=0)):
                    self._wake_all()
            except (psycopg.Error, OSError):
                if self._stopping:
                    return
                self._reconnect()

    def _poll(self) -> None:
        """No LISTEN: every waiter looks every POLL_S seconds."""
        while not self._stopping:
            ready, _, _ = select.select([self._stop_r], [], [], pooling.POLL_S)
            if ready:
                return
            self._wake_all()

    def _reconnect(self) -> None:
        """Listen again, with back-off; then everyone looks (notifications were lost)."""
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
        delay = 0.05
        while not self._stopping:
            try:
                self._conn = self._listen()
                break
            except DatabaseError as e:
                log.warning("%s; listening again in %.1f s", e, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        self._wake_all()

    def stop(self) -> None:
        """End the reader thread and close the listening connection."""
        self._stopping = True
        os.write(self._stop_w, b"x")
        self._thread.join(timeout=5)
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
        os.close(self._stop_r)
        os.close(self._stop_w)


class PgNotifier:
    """One waiter's wakeup source: a pipe the listener writes a byte to."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        listener.add(self)

    def poke(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):  # full: it is readable already
            os.write(self._w, b"!")

    def resume(self) -> None:
        pass  # listening costs writers nothing: no need to stop while nobody waits

    def pause(self) -> None:
        self.drain()

    def fileno(self) -> int | None:
        return self._r

    def recheck_delays(self, first: bool) -> Sequence[float]:
        return ()  # a notification is sent at commit: what it announces is visible

    def drain(self) -> Events:
        heard = False
        with contextlib.suppress(BlockingIOError):
            while os.read(self._r, 4096):
                heard = True
        # A poll's tick (no LISTEN) may follow a holder's death as well as a commit: the
        # waiter looks for dead holders too, as the liveness poll would have made it.
        return Events(commit=heard, owner=heard and self._listener.url is None)

    def wait(self, timeout: float | None) -> Events:
        timeout = MAX_SLEEP if timeout is None else min(max(timeout, 0.0), MAX_SLEEP)
        ready, _, _ = select.select([self._r], [], [], timeout)
        if ready:
            return self.drain()
        # A look of its own every MAX_SLEEP seconds: a lost notification costs that, at most.
        return Events(commit=timeout >= MAX_SLEEP)

    def close(self) -> None:
        self._listener.remove(self)
        os.close(self._r)
        os.close(self._w)
