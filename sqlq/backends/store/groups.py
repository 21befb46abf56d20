"""Groups (issue 38): a job's group, the turns that make a tube's claims fair between its
groups, and the fair claim that honours each group's cap and rate.

A tube becomes *grouped* at its first grouped put (``sqlq_tubes.turn`` set, in the same
transaction); from then on the plain claims skip it as they skip a limited tube, and the
engine claims it through ``LimitStore.claim_limited``, which calls :class:`FairClaim`.
A tube that never held a grouped job is claimed as before, at the same cost.

Fairness is start-time fair queuing over turns: a grouped job's turn is one past the
later of its group's last turn and the tube's round (the turn of its last claim), so
every backlogged group has one job per turn, and a group new or idle starts at the
current round instead of behind the backlog of the others. The claim takes, in the
most urgent band of priority, the job of the lowest turn (then id): the group served
longest ago first, first in, first out within a group. The tube's jobs without a
group are one more group (its row in ``sqlq_groups`` is named ``''``; their ``grp``
stays NULL), given turns by their put (``plain_puts``). A put without a group learns
which tubes are grouped from a list it reads again every ``GROUPED_STALE_MS``; a job
put meanwhile without a turn is still claimed, in the next turn, once it heads its
tube's ready jobs (``ready_head``).

Each step is one index probe (``sqlq_jobs_ready`` for the band, ``sqlq_jobs_turns`` for
the turns, the groups' primary key), whatever the number of groups: a group capped by
``group_concurrency`` or ``group_rate`` is passed over, row by row, for at most
``MAX_PASSED`` rows a claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...allowance import allowance, spent_rate_at
from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn

#: How long (ms) a process trusts its list of grouped tubes for a put without a group.
GROUPED_STALE_MS = 2000
#: Grouped jobs of capped groups a claim passes over in one band before it gives up on
#: the band (a bound on the claim's cost when nearly every group is capped).
MAX_PASSED = 512
#: Rows read at a time from a band's turns.
_PAGE = 16


class GroupStore:
    """A put's group and turns, and the tubes known to be grouped."""

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q
        #: The tubes known grouped, and until when (ms) the list is trusted: a put
        #: without a group looks only when one of them is true (SQLiteStore.put inlines it).
        self.tubes: frozenset[str] = frozenset()
        self.until = 0

    def put_in_group(self, conn: Conn, tube: str, group: str | None, ids: Sequence[int],
                     ids_param: Any) -> None:
        """Give the jobs just inserted (``ids``, in order) their group and turns; with a
        group, the tube is grouped from this transaction on (None: the jobs without a
        group, in a tube already grouped)."""
        row = one(conn, self.Q["tube_turn"], {"tube": tube})
        turn = None if row is None else row[0]
        if turn is None:
            if group is None:
                return
            conn.execute(self.Q["group_tube"], {"tube": tube})
            turn = 0
            self.tubes = self.tubes | {tube}
        n = len(ids)
        last = int(one(conn, self.Q["group_turns"],
                       {"tube": tube, "grp": group or "", "round": turn, "n": n})[0])
        conn.execute(self.Q["set_group"], {"grp": group, "first_turn": last - n + 1,
                                           "first_id": ids[0], "last_id": ids[-1],
                                           "ids": ids_param})

    def plain_puts(self, conn: Conn, now: int, tube: str, ids: Sequence[int],
                   ids_param: Any) -> None:
        """Give jobs just put without a group their turns, if their tube is grouped."""
        if now >= self.until:
            self.tubes = frozenset(r[0] for r in conn.execute(self.Q["grouped_tubes"]))
            self.until = now + GROUPED_STALE_MS
        if tube in self.tubes:
            self.put_in_group(conn, tube, None, ids, ids_param)

    def busiest(self, conn: Conn, now: int, tube: str, limit: int
                ) -> list[tuple[str, int, int]]:
        """The tube's groups with the most ready and reserved jobs: (group, ready,
        reserved), the busiest first (the dashboard's)."""
        return [(r[0], int(r[1]), int(r[2])) for r in conn.execute(
            self.Q["busiest_groups"], {"tube": tube, "now": now, "limit": limit})]


class FairClaim:
    """One grouped tube's claims inside one claim_limited transaction: what it took so far
    (turns, live reservations and rates per group), written back by :meth:`finish`.

    ``row`` is the tube's lock_limits row: (name, concurrency, rate, rate_ms, rate_at,
    turn, group_concurrency, group_rate, group_rate_ms)."""

    def __init__(self, Q: dict[str, str], conn: Conn, now: int, row: Sequence[Any]) -> None:
        self.Q, self.conn, self.now = Q, conn, now
        self.tube: str = row[0]
        self.round = int(row[5] or 0)
        self.cap: int | None = row[6]
        self.rate: int | None = row[7]
        self.rate_ms: int | None = row[8]
        self.live: dict[str, int] = {}
        if self.cap is not None:
            self.live = {r[0]: int(r[1]) for r in conn.execute(
                Q["group_live"], {"tube": self.tube, "now": now})}
        #: Each group's rate time after this transaction's claims (spent, written by finish).
        self.rate_at: dict[str, float | None] = {}
        self.changed = False

    def _open(self, group: str | None, rate_at: float | None) -> bool:
        """Whether ``group`` may give one more job now (its cap and rate; the jobs
        without a group have neither)."""
        if group is None:
            return True
        if self.cap is not None and self.live.get(group, 0) >= self.cap:
            return False
        if self.rate is None or self.rate_ms is None:
            return True
        at = self.rate_at.get(group, rate_at)
        return allowance(None, self.rate, self.rate_ms, at, 0, self.now) > 0

    def _group_head(self, priority: int) -> tuple[int, str | None, int, float | None] | None:
        """The band's job of the lowest turn (then id) whose group is open."""
        after_turn, after_id, passed = 0, 0, 0
        while passed < MAX_PASSED:
            rows = self.conn.execute(self.Q["group_heads"], {
                "tube": self.tube, "priority": priority, "turn": after_turn, "id": after_id,
                "n": _PAGE}).fetchall()
            for job_id, group, turn, rate_at in rows:
                if self._open(group, rate_at):
                    return int(job_id), group, int(turn), rate_at
                passed += 1
            if len(rows) < _PAGE:
                return None
            after_turn, after_id = int(rows[-1][2]), int(rows[-1][0])
        return None

    def pick(self) -> tuple[int, int, str | None, int, float | None] | None:
        """The job the next claim of this tube takes: (priority, id, group, turn, the
        group's rate time), or None (no ready job of an open group)."""
        Q, conn, lo = self.Q, self.conn, 0
        while True:
            head = one(conn, Q["ready_head"], {"tube": self.tube, "lo": lo})
            if head is None:
                return None
            head_id, priority, head_turn = int(head[0]), int(head[1]), head[2]
            grouped = self._group_head(priority)
            if head_turn is None and (grouped is None or self.round + 1 < grouped[2]):
                # put before its put knew the tube grouped: taken in the next turn
                return priority, head_id, None, self.round + 1, None
            if grouped is not None:
                return priority, grouped[0], grouped[1], grouped[2], grouped[3]
            if priority >= 2**32 - 1:
                return None
            lo = priority + 1  # every group of this band is capped: a less urgent band

    def took(self, pick: tuple[int, int, str | None, int, float | None]) -> None:
        """The picked job was claimed (``ClaimStore.claim_fair``): its turn, and its
        group's slot and token, are spent."""
        _priority, _job_id, group, turn, rate_at = pick
        self.changed = True
        self.round = max(self.round, turn)
        if group is not None:
            self.live[group] = self.live.get(group, 0) + 1
            if self.rate is not None and self.rate_ms is not None:
                at = self.rate_at.get(group, rate_at)
                self.rate_at[group] = spent_rate_at(self.rate, self.rate_ms, at, self.now, 1)

    def finish(self) -> None:
        """Write the tube's round and the groups' rates after the claims made."""
        if not self.changed:
            return
        self.conn.execute(self.Q["spend_turns"], {"tube": self.tube, "turn": self.round})
        for group, at in self.rate_at.items():
            self.conn.execute(self.Q["spend_group_rate"],
                              {"tube": self.tube, "grp": group, "rate_at": at})
