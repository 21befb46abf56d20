"""Limits (sqlq/limits.py): a tube's concurrency cap and rate, the claim that honours
them, and a tube's pause."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from ...allowance import allowance, spent_rate_at
from ...model import ClaimRow
from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn
    from .claims import ClaimStore


class LimitStore(abc.ABC):
    """A dialect's limits; ``claims`` makes the claims a limit allows."""

    def __init__(self, Q: dict[str, str], claims: ClaimStore) -> None:
        self.Q = Q
        self.claims = claims

    @abc.abstractmethod
    def tubes_of(self, tubes: Any) -> list[str]:
        """The tube names of a :tubes parameter (tubes_param's inverse)."""

    def limits_stamp(self) -> object:
        """A value that stays the same while no other connection commits (so no limit can
        have been set elsewhere), read by the last claim at no cost; None if the backend
        has none (the engine then reads limited_tubes after every claim that found
        nothing)."""
        return None

    def empty_claim_limited(self) -> bool | None:
        """Whether this thread's last ``ClaimStore.claim`` that found nothing also found
        that a watched tube has limits, if the claim said so itself (then no read is
        needed); None if it did not (or was not the last thing asked). Asking forgets it."""
        return None

    def limited_tubes(self, conn: Conn, tubes: Any) -> bool:
        """Whether any of these tubes has limits (a read; the engine remembers it)."""
        return one(conn, self.Q["limited_tubes"], {"tubes": tubes}) is not None

    def claim_limited(self, conn: Conn, now: int, tubes: Any, owner: str | None, n: int
                      ) -> tuple[list[ClaimRow], bool]:
        """claim_many for tubes some of which have limits, inside the caller's write
        transaction: up to n jobs, the best first across the tubes, none beyond a limited
        tube's free slots or tokens, whose tokens are then spent. Returns the claim rows
        and whether any of the tubes had limits (if none, a plain claim was made).

        The limited tubes' rows are read first (PostgreSQL locks them: claims of a
        limited tube are serialised across sessions, each seeing the last one's commit;
        SQLite's write lock already serialises every claim)."""
        claims = self.claims
        limits = [tuple(r) for r in conn.execute(self.Q["lock_limits"], {"tubes": tubes})]
        if not limits:
            if n == 1:
                row = claims.claim(conn, now, tubes, owner)
                self.empty_claim_limited()  # the engine learns from this call's answer
                return ([] if row is None else [row]), False
            return claims.claim_many(conn, now, tubes, owner, n), False
        live = {r[0]: int(r[1]) for r in conn.execute(self.Q["live_reservations"], {
            "tubes": claims.tubes_param([r[0] for r in limits]), "now": now})}
        left = {name: allowance(cap, rate, rate_ms, rate_at, live.get(name, 0), now)
                for name, cap, rate, rate_ms, rate_at in limits}
        watched = self.tubes_of(tubes)
        rows: list[ClaimRow] = []
        while len(rows) < n:
            open_tubes = [t for t in watched if left.get(t, 1) > 0]
            row = claims.claim_capped(conn, now, claims.tubes_param(open_tubes), owner) \
                if open_tubes else None
            if row is None:
                break
            rows.append(row)
            if row.tube in left:
                left[row.tube] -= 1
        for name, _cap, rate, rate_ms, rate_at in limits:
            taken = sum(1 for r in rows if r.tube == name)
            if rate is not None and taken:
                conn.execute(self.Q["spend_rate"], {
                    "tube": name, "rate_at": spent_rate_at(rate, rate_ms, rate_at, now, taken)})
        capped = {name for name, cap, _rate, _ms, _at in limits if cap is not None}
        held = [r.id for r in rows if r.tube in capped]
        if held:
            self.mark_capped(conn, held)
        return rows, True

    def mark_capped(self, conn: Conn, ids: list[int]) -> None:  # noqa: B027 - most need none
        """Mark jobs claim_limited just took under a concurrency cap, if the backend's
        waiters need it: a backend whose worker deletes wake nobody (PostgreSQL) makes
        their deletes wake the waiters the cap holds back. Nothing by default: every
        commit wakes SQLite's."""

    def list_limits(self, conn: Conn, tube: str | None
                    ) -> list[tuple[str, int | None, int | None, int | None]]:
        """(tube, concurrency, rate, rate_ms) of every tube with limits, or of ``tube``."""
        return [(r[0], r[1], r[2], r[3])
                for r in conn.execute(self.Q["list_limits"], {"tube": tube})]

    def set_limits(self, conn: Conn, tube: str, concurrency: int | None, rate: int | None,
                   rate_ms: int | None) -> None:
        """Write the tube's limits, whole (None: none); a rate set anew starts full."""
        conn.execute(self.Q["set_limits"], {"tube": tube, "concurrency": concurrency,
                                            "rate": rate, "rate_ms": rate_ms}).fetchall()
        if concurrency is None and rate is None:
            conn.execute(self.Q["drop_limits_row"], {"tube": tube})

    def pause_tube(self, conn: Conn, now: int, tube: str, pause_ms: int) -> None:
        """Reserve nothing from tube until now + pause_ms."""
        conn.execute(self.Q["pause_tube"], {"tube": tube, "now": now, "pause_ms": pause_ms})

    def tube_pause(self, conn: Conn, tube: str) -> tuple[int, int] | None:
        """(paused_until, pause_ms) of the tube's last pause, or None."""
        row = one(conn, self.Q["tube_pause"], {"tube": tube})
        return (int(row[0]), int(row[1])) if row else None
