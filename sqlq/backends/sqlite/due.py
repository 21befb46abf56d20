"""SQLite's due-time cache: when a claim's ``promote_due`` can next find something, so
that claims skip it until then (``store.py``'s rule for a verb that writes a due time
says who keeps it true)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..sql import one

if TYPE_CHECKING:
    from .drivers import SqliteConn

#: Later than any time in ms: "nothing will ever be due" in DueCache.
NEVER = 2**63 - 1
#: The most tube lists DueCache remembers (a worker watches one list; the server a few).
DUE_CACHE_SIZE = 64


class DueCache:
    """When promote_due can next find something, per list of watched tubes, so that a
    claim skips it (and can run as one autocommit statement) until then.

    The time is read by queries.sql ``look_ready``, after a ``PRAGMA data_version`` that
    proves it current: by a waiting worker's look (:meth:`SQLiteClaims.has_ready_job`), so
    that the claim a wake makes right after it skips promote_due, and right after a
    claim ran promote_due outside any transaction (so that the promotion is
    committed, whatever follows). The time stays true while nothing else writes, and
    what could make it earlier is known: another connection's commit (a put with a
    delay, a claim, a release), seen as a new ``PRAGMA data_version`` (which changes
    on every other connection's commit and on none of this one's) and clearing
    everything, or a write on this connection, which goes through the store and
    lowers the time (:meth:`lower`) or clears it (:meth:`forget`). A time is only ever
    kept too early, never too late: the cost of a mistake is one promote_due that
    finds nothing. A time read inside a transaction is kept only once that very
    transaction commits (:meth:`begin` and :meth:`commit`, called by
    ``db.Database._transaction``): a promotion rolled back would leave jobs due, unseen.
    So the worker's delete-and-claim transaction, once it has promoted and looked, skips
    both on its next jobs as a claim outside a transaction does. The cache is the
    connection's (one store per backend, one connection per backend) and is used under
    its lock.
    """

    __slots__ = ("due", "pending", "version", "_look_ready")

    def __init__(self, look_ready: str) -> None:
        self._look_ready = look_ready
        self.version: int | None = None
        self.due: dict[str, int] = {}
        #: (tubes, version, time) read inside the open transaction, kept at its commit.
        self.pending: tuple[str, int, int] | None = None

    def nothing_due(self, conn: SqliteConn, now: int, tubes: str) -> bool | None:
        """True if promote_due would find nothing in tubes now; else False, or None when
        another connection committed since the last look (so a time read now could be
        stale by the next claim: not worth reading)."""
        version = conn.hot.execute("PRAGMA data_version").fetchall()[0][0]
        if version != self.version:
            self.version = version
            self.due.clear()
            return None
        due = self.due.get(tubes)
        return due is not None and now < due

    def look(self, conn: SqliteConn, now: int, tubes: str) -> bool:
        """Whether a claim in tubes would find a job now (one read); keeps when
        promote_due can next find something there, if no transaction is open."""
        # The version first: a commit after it, which the look may see, changes it
        # again before the claim reads it (a time kept is then dropped, never wrong).
        version = one(conn, "PRAGMA data_version")[0]
        ready, delayed, reserved = one(conn, self._look_ready, {"tubes": tubes, "now": now})
        times = [t for t in (delayed, reserved) if t is not None]
        if conn.get_autocommit():
            self._keep(tubes, version, min(times) if times else NEVER)
        else:
            self.pending = (tubes, version, min(times) if times else NEVER)
        return bool(ready)

    def _keep(self, tubes: str, version: int, due: int) -> None:
        if version != self.version:
            self.version = version
            self.due.clear()
        if len(self.due) >= DUE_CACHE_SIZE:
            self.due.clear()
        self.due[tubes] = due

    def begin(self) -> None:
        """A write transaction begins: a time a rolled-back one read is dropped."""
        self.pending = None

    def commit(self) -> None:
        """The write transaction committed: keep the time read inside it, if any."""
        if self.pending is not None:
            self._keep(*self.pending)
            self.pending = None

    def lower(self, when: int) -> None:
        """This connection wrote a job that becomes due at ``when`` (a delay, a TTR)."""
        for tubes, due in self.due.items():
            if when < due:
                self.due[tubes] = when
        pending = self.pending
        if pending is not None and when < pending[2]:
            self.pending = (pending[0], pending[1], when)

    def forget(self) -> None:
        """This connection wrote something the store cannot see (the application's SQL)."""
        self.due.clear()
        self.pending = None
