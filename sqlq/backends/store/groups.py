"""Groups (issue 38): a job's group, the turns that make a tube's claims fair between its
groups, and the fair claim that honours each group's cap and rate.

A tube becomes *grouped* at its first grouped put (``sqlq_tubes.grouped``, in the same
transaction); from then on the plain claims skip it as they skip a limited tube, and the
engine claims it through ``LimitStore.claim_limited``, which uses :class:`FairClaim`.
A tube that never held a grouped job is claimed as before, at the same cost.

Fairness is start-time fair queuing over turns: a job's turn is one past the later of
its group's last turn and the tube's round (the turn just before its next claim), given
by its put, so every backlogged group has one job per turn, and a group new or idle
starts at the current round instead of behind the backlog of the others. A claim takes
the job of the lowest (priority, turn, id), one probe of ``sqlq_jobs_turns``: priority
first, then the group served longest ago, first in, first out within a group; nothing
is written but the claim itself. The tube's jobs without a group are one more group
(its ``sqlq_groups`` row is named ``''``; their ``grp`` stays NULL). A put without a
group learns which tubes are grouped from a list it reads again every
``GROUPED_STALE_MS`` (so a put into a tube that is not grouped costs nothing); a job put
meanwhile without a turn is still claimed, in its place in id order: when it heads its
tube's ready jobs, the claim takes it first.

With ``group_concurrency`` or ``group_rate`` set, the claim reads the jobs in that order
and passes over those of capped groups, for at most ``MAX_PASSED`` rows a claim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...core.allowance import allowance, spent_rate_at
from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn

#: How long (ms) a process trusts its list of grouped tubes for a put without a group.
GROUPED_STALE_MS = 2000
#: Jobs of capped groups a claim passes over before it gives up (a bound on the claim's
#: cost when nearly every group is capped: the next claim starts again from the head).
MAX_PASSED = 512
#: Rows read at a time in claim order, when groups may be capped.
_PAGE = 16

#: A fair claim's choice: (priority, id, group, turn, the group's rate time).
Pick = tuple[int, int, "str | None", int, "float | None"]


class GroupStore:
    """A put's group and turns, and the tubes known to be grouped."""

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q
        #: The tubes known grouped, and until when (ms) the list is trusted.
        self.tubes: frozenset[str] = frozenset()
        self.until = 0
        #: ``until``, or 0 while a tube is known grouped: a put without a group at or
        #: after it looks (plain_puts); before it, nothing (SQLiteStore.put inlines it).
        self.look_at = 0

    def put_in_group(self, conn: Conn, tube: str, group: str | None, ids: Sequence[int],
                     ids_param: Callable[[Sequence[int]], Any]) -> None:
        """Give the jobs just inserted (``ids``, in order) their group and turns; with a
        group, the tube is grouped from this transaction on (None: the jobs without a
        group, in a tube already grouped)."""
        row = one(conn, self.Q["tube_grouped"], {"tube": tube})
        if row is None or row[0] is None:
            if group is None:
                return
            conn.execute(self.Q["group_tube"], {"tube": tube})
            self.tubes = self.tubes | {tube}
            self.look_at = 0
        n = len(ids)
        last = int(one(conn, self.Q["group_turns"], {"tube": tube, "grp": group or "", "n": n})[0])
        conn.execute(self.Q["set_group"], {"grp": group, "first_turn": last - n + 1,
                                           "first_id": ids[0], "last_id": ids[-1],
                                           "ids": ids_param(ids)})

    def plain_puts(self, conn: Conn, now: int, tube: str, ids: Sequence[int],
                   ids_param: Callable[[Sequence[int]], Any]) -> None:
        """Give jobs just put without a group their turns, if their tube is grouped."""
        if now >= self.until:
            self.tubes = frozenset(r[0] for r in conn.execute(self.Q["grouped_tubes"]))
            self.until = now + GROUPED_STALE_MS
            self.look_at = 0 if self.tubes else self.until
        if tube in self.tubes:
            self.put_in_group(conn, tube, None, ids, ids_param)

    def busiest(self, conn: Conn, now: int, tube: str, limit: int
                ) -> list[tuple[str, int, int]]:
        """The tube's groups with the most ready and reserved jobs: (group, ready,
        reserved), the busiest first (the dashboard's)."""
        return [(r[0], int(r[1]), int(r[2])) for r in conn.execute(
            self.Q["busiest_groups"], {"tube": tube, "now": now, "limit": limit})]


class FairClaim:
    """One grouped tube's claims inside one claim_limited transaction, and what they took
    of each group's cap and rate (written back by :meth:`finish`).

    ``row`` is the tube's lock_limits row: (name, concurrency, rate, rate_ms, rate_at,
    grouped, group_concurrency, group_rate, group_rate_ms)."""

    def __init__(self, Q: dict[str, str], conn: Conn, now: int, row: Sequence[Any]) -> None:
        self.Q, self.conn, self.now = Q, conn, now
        self.tube: str = row[0]
        self.cap: int | None = row[6]
        self.rate: int | None = row[7]
        self.rate_ms: int | None = row[8]
        self.live: dict[str, int] = {}
        if self.cap is not None:
            self.live = {r[0]: int(r[1]) for r in conn.execute(
                Q["group_live"], {"tube": self.tube, "now": now})}
        #: Each group's rate time after this transaction's claims (spent, written by finish).
        self.rate_at: dict[str, float | None] = {}

    @property
    def simple(self) -> bool:
        """Whether a claim takes the first job in claim order, whatever its group (no
        group limits): one statement, claim_fair_head."""
        return self.cap is None and self.rate is None

    def _open(self, group: str | None, rate_at: float | None) -> bool:
        """Whether ``group`' may give one more job now (its cap and rate; the jobs
        without a group have neither)."""
        if group is None:
            return True
        if self.cap is not None and self.live.get(group, 0) >= self.cap:
            return False
        if self.rate is None or self.rate_ms is None:
            return True
        at = self.rate_at.get(group, rate_at)
        return allowance(None, self.rate, self.rate_ms, at, 0, self.now) > 0

    def _first_open(self) -> Pick | None:
        """The first job in claim order whose group is open."""
        after: tuple[int, int, int] = (-1, 0, 0)
        passed = 0
        while passed < MAX_PASSED:
            rows = self.conn.execute(self.Q["fair_heads"], {
                "tube": self.tube, "priority": after[0], "turn": after[1], "id": after[2],
                "n": _PAGE}).fetchall()
            for priority, job_id, group, turn, rate_at in rows:
                if self._open(group, rate_at):
                    return int(priority), int(job_id), group, int(turn), rate_at
                passed += 1
            if len(rows) < _PAGE:
                return None
            after = (int(rows[-1][0]), int(rows[-1][3]), int(rows[-1][1]))
        return None

    def pick(self) -> Pick | None:
        """The job the next claim of this tube takes, or None (no ready job of an open
        group). A job without a turn at the head of the tube's ready jobs goes first."""
        first = self._first_open()
        head = one(self.conn, self.Q["ready_head"], {"tube": self.tube})
        if head is not None and head[2] is None and (first is None or head[1] <= first[0]):
            return int(head[1]), int(head[0]), None, 0, None
        return first

    def took(self, pick: Pick) -> None:
        """The picked job was claimed (``ClaimStore.claim_fair``): its group's slot and
        token are spent."""
        group, rate_at = pick[2], pick[4]
        if group is None:
            return
        self.live[group] = self.live.get(group, 0) + 1
        if self.rate is not None and self.rate_ms is not None:
            at = self.rate_at.get(group, rate_at)
            self.rate_at[group] = spent_rate_at(self.rate, self.rate_ms, at, self.now, 1)

    def finish(self) -> None:
        """Write the groups' rates after the claims made."""
        for group, at in self.rate_at.items():
            self.conn.execute(self.Q["spend_group_rate"],
                              {"tube": self.tube, "grp": group, "rate_at": at})
