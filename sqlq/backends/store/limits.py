"""Limits (sqlq/core/limits.py): a tube's concurrency cap and rate, the claim that honours
them, and a tube's pause."""

from __future__ import annotations

import abc
import threading
from typing import TYPE_CHECKING, Any, Generic

from ...core.allowance import allowance, spent_rate_at
from ...model import ClaimRow
from ..conn import ConnT
from ..sql import one
from .groups import FairClaim

if TYPE_CHECKING:
    from .claims import ClaimStore


#: A tube's limits as list_limits gives them: (tube, concurrency, rate, rate_ms,
#: group_concurrency, group_rate, group_rate_ms).
LimitRow = tuple[str, int | None, int | None, int | None, int | None, int | None, int | None]


class _FairAlone(threading.local):
    """What this thread's last claim_limited found: a grouped tube watched alone without
    limits (its name), or None."""

    alone: str | None = None


class LimitStore(abc.ABC, Generic[ConnT]):
    """A dialect's limits; ``claims`` makes the claims a limit allows."""

    def __init__(self, Q: dict[str, str], claims: ClaimStore[ConnT]) -> None:
        self.Q = Q
        self.claims = claims
        self._fair = _FairAlone()

    def fair_alone(self) -> str | None:
        """The tube, if this thread's last claim_limited watched one grouped tube alone
        with no limits: the engine then claims it through ``Store.settle_and_claim_fair``
        (one statement, its row probed in it) until that finds nothing. Asking forgets it."""
        alone, self._fair.alone = self._fair.alone, None
        return alone

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

    def limited_tubes(self, conn: ConnT, tubes: Any) -> bool:
        """Whether any of these tubes has limits (a read; the engine remembers it)."""
        return one(conn, self.Q["limited_tubes"], {"tubes": tubes}) is not None

    def claim_limited(self, conn: ConnT, now: int, tubes: Any, owner: str | None, n: int
                      ) -> tuple[list[ClaimRow], bool]:
        """claim_many for tubes some of which have limits, inside the caller's write
        transaction: up to n jobs, the best first across the tubes, none beyond a limited
        tube's free slots or tokens, whose tokens are then spent. Returns the claim rows
        and whether any of the tubes had limits (if none, a plain claim was made).

        The limited tubes' rows are read first (PostgreSQL locks them: claims of a
        limited tube are serialised across sessions, each seeing the last one's commit;
        SQLite's write lock already serialises every claim). A grouped tube (groups.py) is
        claimed fairly between its groups, within each group's cap and rate."""
        claims = self.claims
        limits = [tuple(r) for r in conn.execute(self.Q["lock_limits"], {"tubes": tubes})]
        if not limits:
            if n == 1:
                row = claims.claim(conn, now, tubes, owner)
                self.empty_claim_limited()  # the engine learns from this call's answer
                return ([] if row is None else [row]), False
            return claims.claim_many(conn, now, tubes, owner, n), False
        capped = [r[0] for r in limits if r[1] is not None]
        live = {r[0]: int(r[1]) for r in conn.execute(self.Q["live_reservations"], {
            "tubes": claims.tubes_param(capped), "now": now})} if capped else {}
        left = {r[0]: 0 if r[9] > now else allowance(r[1], r[2], r[3], r[4], live.get(r[0], 0), now)
                for r in limits}
        fair = {r[0]: FairClaim(self.Q, conn, now, r) for r in limits if r[5] is not None}
        watched = self.tubes_of(tubes)
        alone = limits[0] if len(watched) == 1 and len(limits) == 1 else None
        self._fair.alone = alone[0] if alone is not None and alone[5] is not None and \
            alone[1] is None and alone[2] is None and alone[6] is None and alone[7] is None \
            else None
        if fair:
            claims.promote_fair(conn, now, tubes if len(fair) == len(watched)
                                else claims.tubes_param(list(fair)))
        rows: list[ClaimRow] = []
        while len(rows) < n:
            open_tubes = [t for t in watched if left.get(t, 1) > 0]
            row = self._claim_one(conn, now, open_tubes, fair, owner)
            if row is None:
                break
            rows.append(row)
            if row.tube in left:
                left[row.tube] -= 1
        for each in fair.values():
            each.finish()
        for name, _cap, rate, rate_ms, rate_at, *_groups in limits:
            taken = sum(1 for r in rows if r.tube == name)
            if rate is not None and taken:
                conn.execute(self.Q["spend_rate"], {
                    "tube": name, "rate_at": spent_rate_at(rate, rate_ms, rate_at, now, taken)})
        marked = {r[0] for r in limits if r[1] is not None or r[6] is not None}
        held = [r.id for r in rows if r.tube in marked]
        if held:
            self.mark_capped(conn, held)
        return rows, True

    def _claim_one(self, conn: ConnT, now: int, open_tubes: list[str],
                   fair: dict[str, FairClaim], owner: str | None) -> ClaimRow | None:
        """One claim of claim_limited's: the most urgent job of the open tubes, a grouped
        tube's the one its FairClaim picks (a plain tube wins a tie of priority only if
        listed first); a grouped tube watched alone without group limits, in one
        statement (claim_fair_head)."""
        claims = self.claims
        plain = [t for t in open_tubes if t not in fair]
        if len(open_tubes) == 1 and not plain and fair[open_tubes[0]].simple:
            return claims.claim_fair_head(conn, now, open_tubes[0], owner, True)
        while True:
            picks = [(pick, fair[t]) for t in open_tubes if t in fair
                     if (pick := fair[t].pick()) is not None]
            if not picks:
                return claims.claim_capped(conn, now, claims.tubes_param(plain), owner) \
                    if plain else None
            pick, claim = min(picks, key=lambda p: p[0][0])
            if plain:
                best = [int(h[1]) for t in plain
                        if (h := one(conn, self.Q["ready_head"], {"tube": t}))]
                if best and min(best) < pick[0]:
                    row = claims.claim_capped(conn, now, claims.tubes_param(plain), owner)
                    if row is not None:
                        return row
            row = claims.claim_fair(conn, now, claim, pick, owner)
            if row is not None:
                return row

    def mark_capped(self, conn: ConnT, ids: list[int]) -> None:  # noqa: B027 - most need none
        """Mark jobs claim_limited just took under a concurrency cap, if the backend's
        waiters need it: a backend whose worker deletes wake nobody (PostgreSQL) makes
        their deletes wake the waiters the cap holds back. Nothing by default: every
        commit wakes SQLite's."""

    def list_limits(self, conn: ConnT, tube: str | None) -> list[LimitRow]:
        """(tube, concurrency, rate, rate_ms, group_concurrency, group_rate, group_rate_ms)
        of every tube with limits, or of ``tube``."""
        return [(r[0], r[1], r[2], r[3], r[4], r[5], r[6])
                for r in conn.execute(self.Q["list_limits"], {"tube": tube})]

    def set_limits(self, conn: ConnT, tube: str, concurrency: int | None, rate: int | None,
                   rate_ms: int | None, group_concurrency: int | None = None,
                   group_rate: int | None = None, group_rate_ms: int | None = None) -> None:
        """Write the tube's limits, whole (None: none); a rate set anew starts full."""
        conn.execute(self.Q["set_limits"], {
            "tube": tube, "concurrency": concurrency, "rate": rate, "rate_ms": rate_ms,
            "group_concurrency": group_concurrency, "group_rate": group_rate,
            "group_rate_ms": group_rate_ms}).fetchall()
        if concurrency is None and rate is None and group_concurrency is None \
                and group_rate is None:
            conn.execute(self.Q["drop_limits_row"], {"tube": tube})

    def change_limits(self, conn: ConnT, tube: str, new: dict[str, Any]) -> list[LimitRow]:
        """Set the tube's limits ``new`` names (``concurrency``, ``rate`` as (N, ms),
        ``group_concurrency``, ``group_rate`` as (N, ms); None: none), the others kept as
        they are; the tube's limits after, as :meth:`list_limits` gives them. Nothing is
        written when nothing changes: a rate's bucket is not refilled by setting it again;
        a group rate set anew refills every group's."""
        old = self.list_limits(conn, tube)
        had = old[0] if old else (tube, None, None, None, None, None, None)
        cap = new.get("concurrency", had[1])
        n, ms = (had[2], had[3]) if "rate" not in new else (new["rate"] or (None, None))
        group_cap = new.get("group_concurrency", had[4])
        group_n, group_ms = (had[5], had[6]) if "group_rate" not in new \
            else (new["group_rate"] or (None, None))
        after = (cap, n, ms, group_cap, group_n, group_ms)
        if after == had[1:]:
            return old
        self.set_limits(conn, tube, *after)
        if (group_n, group_ms) != had[5:]:
            conn.execute(self.Q["forget_group_rates"], {"tube": tube})
        return self.list_limits(conn, tube)

    def pause_tube(self, conn: ConnT, now: int, tube: str, pause_ms: int) -> None:
        """Reserve nothing from tube until now + pause_ms."""
        conn.execute(self.Q["pause_tube"], {"tube": tube, "now": now, "pause_ms": pause_ms})

    def tube_pause(self, conn: ConnT, tube: str) -> tuple[int, int] | None:
        """(paused_until, pause_ms) of the tube's last pause, or None."""
        row = one(conn, self.Q["tube_pause"], {"tube": tube})
        return (int(row[0]), int(row[1])) if row else None
