"""The PostgreSQL half of :mod:`sqlq.horizon`: who holds this database's xmin horizon.

One read (``horizon_holders``, then ``table_health`` for the dead rows, both in
``queries.sql``) lists every holder oldest first, by transaction ids: an open
transaction or a long statement of this database (``pg_stat_activity``), a
prepared transaction (``pg_prepared_xacts``), a replication slot's xmin, a
standby's ``hot_standby_feedback`` through its walsender. Its age in seconds is
the server's where the server knows it (a transaction's start, a prepared one's,
an inactive slot's since PostgreSQL 17); otherwise, and for another role's session
whose transaction start is hidden from this one (without ``pg_read_all_stats``),
it counts from when this process first saw that holder at that xmin.
"""

from __future__ import annotations

from collections.abc import Hashable

from ...horizon import FirstSeen, Holder, Horizon
from .db import PgConn
from .store import PostgresStore, Q


class XminWatch:
    """Reads this database's horizon holders; remembers holders of unknown age."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self._seen = FirstSeen()

    def look(self, conn: PgConn, now: int) -> Horizon:
        """The holders, oldest first, and the dead rows of sqlq's tables, as of ``now``."""
        holders = []
        keys: set[Hashable] = set()
        hidden = 0
        for kind, name, xmin, xid_age, seconds, detail, visible in conn.execute(
                Q["horizon_holders"]):
            name, detail = bytes(name).decode(errors="replace"), bytes(detail).decode(
                errors="replace")
            observed = seconds is None
            if observed:
                key = (kind, name, xmin)
                keys.add(key)
                seconds = self._seen.age(key, now)
            hidden += not visible
            if not visible:
                detail = (f"{detail.split(',')[0]}; its transaction is hidden from this role: "
                          "grant it pg_read_all_stats")
            holders.append(Holder(kind, name, max(float(seconds), 0.0), int(xid_age), detail,
                                  bool(visible), observed))
        self._seen.keep(keys)
        dead = {table: int(dead) for table, _, dead, _ in
                conn.execute(Q["table_health"])}
        first = holders[0] if holders else None
        return Horizon("postgres", now, first.seconds if first else 0.0, first, holders,
                       hidden, dead)
