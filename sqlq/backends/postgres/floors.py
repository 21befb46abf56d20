"""Claim floors: where each band's fresh jobs begin, so that a claim does not walk the
rows a held snapshot keeps (sqlq_floors, migrations/postgres/0001_initial.sql;
docs/internals.md, "Claims under a held snapshot").

While any transaction on the server holds an old snapshot (a report in REPEATABLE
READ, ``pg_dump``, a replication slot, a standby's ``hot_standby_feedback``),
PostgreSQL keeps every row deleted since, and their index entries stay at the head of
each (tube, priority) band of ``sqlq_jobs_ready``, where claims start. A claim that
walked them all cost O(jobs done since the snapshot): 0.11-0.32x of the first rate by
the end of a 20,000-job drain.

A fresh job is one put once and never made ready again. Ids grow with puts, so a
band's fresh jobs only arrive above the ids already taken from it. This process keeps,
per band, a *floor*: an id below which the band has no fresh ready job. A claim reads
each band from its floor, and every other priority of the tube (the gaps between
known bands) from the start. A job made ready again under an old id (release, kick,
a dependency's release, a dead holder's jobs) is marked ``again``: below a floor it
is found through its own index, read whole by every claim; above one, with the fresh
jobs, in order.

A floor only moves up to a *candidate*, the id of a job a claim took from the band,
once the database proves it (``sqlq_floors``, in the claim's own statement): every
transaction open at that claim has ended (a put still in flight cannot hold an id
below it), and a plain read finds no ready job between floor and candidate (a claim
that rolled back would show its job there). What could still slip below a
floor (a put whose transaction stalled between taking its id and writing its row, a
put held open longer than :data:`PATIENCE_MS`, a database restored from a copy) is
found by a claim that reads every band from its start: at least every
:data:`RESCAN_S` seconds, and after a claim that found nothing (at most every
:data:`EMPTY_RESCAN_S`). Floors are hints about the data, never a reason to refuse
a job: a wrong one costs time until the next full read, and a claim that takes a
fresh job below its band's floor drops the band's floor at once.

A claim with nothing to prove (no ripe candidate, no look for expired leases: all but
one claim in tens) does not call ``sqlq_floors``: its statement answers what the function
would, from the arguments.

Expired reservations are found from a moving start, too: a claim asks for the
earliest one at least every :data:`EXPIRED_EVERY_MS` (and after one that found
nothing), and claims take them from there while there are any; when none are left,
the next look starts :data:`SKEW_MS` before this one (other hosts' clocks).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from ...model import ClaimRow

#: Every band is read from its start at least this often (seconds).
RESCAN_S = 30.0
#: After a claim that found nothing, the next reads every band from its start, if the
#: last such read is older than this (seconds): an idle queue pays one full read a second.
EMPTY_RESCAN_S = 1.0
#: A candidate floor is put to the database this long after the claim that found it (ms),
#: never sooner: the instant between a put taking its id and writing its row.
RIPE_MS = 20
#: After this long (ms) a candidate is proved without waiting for transactions that were
#: open at its claim: one idle in transaction for hours must not stop every floor.
PATIENCE_MS = 10_000
#: Floors kept per tube: each is one more index probe per claim. A tube whose jobs use
#: many priorities (a deadline as priority) keeps those it claimed from most recently;
#: the others are read from their start, as before.
MAX_BANDS = 8
#: How often (ms) a busy claimer looks for expired reservations.
EXPIRED_EVERY_MS = 250
#: How far (ms) before a look that found none the next look starts: a lease taken on a
#: host whose clock is behind this one's may expire before this host's "now".
SKEW_MS = 1_000

_LOWEST = -(2**63)
_HIGHEST = 2**63 - 1
# The status sqlq_floors gives a candidate (migrations/postgres/0001_initial.sql).
_PROVED, _WAITING = 1, 2
#: A claim statement's row: ClaimRow's columns, then again, limited, status,
#: expired_from, xmax (claim_job in queries.sql).
CLAIM_COLUMNS = len(ClaimRow._fields)
AGAIN, LIMITED, STATUS, EXPIRED_FROM, XMAX = range(CLAIM_COLUMNS, CLAIM_COLUMNS + 5)
#: The floors of a statement that claims nothing (a delete_many).
NO_SCAN: dict[str, Any] = {"scan_tube": [], "scan_lo": [], "scan_hi": [], "scan_from": [],
                           "scan_cand": [], "scan_xmax": [], "expired_from": None,
                           "expired_check": False, "prove": False}


class _Band:
    """One (tube, priority): its floor, and the candidate waiting to become it."""

    __slots__ = ("floor", "cand", "cand_xmax", "cand_at", "used_at")

    def __init__(self) -> None:
        self.used_at = 0  # ms: the band of a tube claimed from least recently goes first
        self.floor = 0
        self.cand: int | None = None
        self.cand_xmax: str | None = None
        self.cand_at = 0


class Scan:
    """The arguments of one claim's statement, and what to learn from its answer."""

    __slots__ = ("params", "bands", "full", "expired_check", "expiry")

    def __init__(self, params: dict[str, Any], bands: list[_Band | None], full: bool,
                 expired_check: bool, expiry: _Expiry) -> None:
        self.params, self.bands, self.full = params, bands, full
        self.expired_check = expired_check
        self.expiry = expiry


class _Expiry:
    """Where the looks for expired leases of one list of tubes stand. Per list: a look
    made for other tubes says nothing of these (a claim on tube a moving the start past
    an expired lease of tube b would leave that job reserved until the next full read)."""

    __slots__ = ("start", "any", "look_at")

    def __init__(self) -> None:
        self.start = _LOWEST  # where the next look for expired leases starts
        self.any = True  # the last look found one (or there was none yet)
        self.look_at = 0  # ms, the claims' clock


#: Lists of tubes whose expiry looks are remembered; past it, all start again from 0.
MAX_EXPIRY_LISTS = 256


class ClaimFloors:
    """This process's floors for one database (a PostgresStore's), shared by its threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bands: dict[tuple[str, int], _Band] = {}
        self._full_at = 0.0  # monotonic time of the last claim that read every band whole
        self._empty = False  # the last claim found nothing
        self._expiry: dict[tuple[str, ...], _Expiry] = {}

    def scan(self, tubes: Sequence[str], now: int) -> Scan:
        """The floors to claim with from ``tubes`` at ``now``: a :class:`Scan` whose
        ``params`` go into the claim's statement, then to :meth:`learn`."""
        mono = time.monotonic()
        with self._lock:
            full = (mono - self._full_at >= RESCAN_S
                    or (self._empty and mono - self._full_at >= EMPTY_RESCAN_S))
            if full:
                self._full_at = mono
            scan_tube: list[str] = []
            lo: list[int] = []
            hi: list[int] = []
            start: list[int] = []
            cand: list[int | None] = []
            xmax: list[str | None] = []
            bands: list[_Band | None] = []

            def add(tube: str, low: int, high: int, band: _Band | None) -> None:
                scan_tube.append(tube)
                lo.append(low)
                hi.append(high)
                bands.append(band)
                ripe = band is not None and band.cand is not None and now - band.cand_at >= RIPE_MS
                start.append(band.floor if band is not None and not full else 0)
                cand.append(band.cand if ripe and not full and band is not None else None)
                patient = ripe and band is not None and now - band.cand_at >= PATIENCE_MS
                xmax.append(None if patient or band is None else band.cand_xmax)

            for tube in dict.fromkeys(tubes):
                low = _LOWEST
                for priority in sorted(p for t, p in self._bands if t == tube):
                    if priority > low:
                        add(tube, low, priority - 1, None)
                    add(tube, priority, priority, self._bands[tube, priority])
                    low = priority + 1
                if low <= _HIGHEST:
                    add(tube, low, _HIGHEST, None)
            key = tuple(tubes)
            expiry = self._expiry.get(key)
            if expiry is None:
                if len(self._expiry) >= MAX_EXPIRY_LISTS:
                    self._expiry.clear()
                expiry = self._expiry[key] = _Expiry()
            look = full or self._empty or now - expiry.look_at >= EXPIRED_EVERY_MS
            if look:
                expiry.look_at = now
            expired_from: int | None = _LOWEST if full else expiry.start
            if not look and not expiry.any:
                expired_from = None  # none at the last look: the claim skips them
        # sqlq_floors runs only when it has something to decide (queries.sql _claim_floors):
        # a ripe candidate, or a look for expired leases.
        prove = look or any(c is not None for c in cand)
        params = {"scan_tube": scan_tube, "scan_lo": lo, "scan_hi": hi, "scan_from": start,
                  "scan_cand": cand, "scan_xmax": xmax, "expired_from": expired_from,
                  "expired_check": look, "prove": prove}
        return Scan(params, bands, full, look, expiry)

    def learn(self, scan: Scan, rows: Sequence[Any], now: int) -> None:
        """What a claim's statement said: the floors it proved, the expired leases it
        saw, and the jobs it took (each the next candidate of its band)."""
        with self._lock:
            self._empty = not rows or rows[0][0] is None
            if not rows:
                return  # a batch claim that took nothing says nothing: ask again next time
            first = rows[0]
            for band, status, cand in zip(scan.bands, first[STATUS],
                                          scan.params["scan_cand"], strict=True):
                if band is None or cand is None or band.cand != cand:
                    continue
                if status == _PROVED:
                    band.floor, band.cand = cand, None
                elif status != _WAITING:
                    band.cand = None  # refused: a ready job below it; the next take proposes
            if scan.expired_check:
                found = first[EXPIRED_FROM]
                scan.expiry.any = found is not None
                # None found: the next look starts where a lease taken since could be.
                scan.expiry.start = found if found is not None else now - SKEW_MS
            for row in rows:
                if row[0] is None or row[1] is None:
                    continue
                band = self._bands.get((row[1], row[2]))
                if band is None:
                    band = self._bands[row[1], row[2]] = _Band()
                    band.used_at = now
                    self._forget_old_bands(row[1])
                band.used_at = now
                if row[0] < band.floor and not row[AGAIN]:
                    # A fresh job below the floor: a put that slipped past it, or another
                    # database under the same URL. Start this band again from 0.
                    band.floor, band.cand = 0, None
                elif band.cand is None and row[0] > band.floor:
                    band.cand, band.cand_xmax, band.cand_at = row[0], first[XMAX], now

    def _forget_old_bands(self, tube: str) -> None:
        mine = [(band.used_at, priority) for (t, priority), band in self._bands.items()
                if t == tube]
        if len(mine) > MAX_BANDS:  # the band just made is the newest: never this one
            del self._bands[tube, min(mine)[1]]
