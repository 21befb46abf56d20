"""The chaos test's checker: what the logs of killed processes prove about the file.

    python tests/chaos_checker.py DB LOGDIR     # prints the summary line, exit 1 on a failure

Inputs: the database file and the logs written by tests/chaos_agent.py (see its
docstring for the line format). Only complete lines count: a process killed
while writing leaves at most one torn line at the end of its log.

What it proves, and how each claim is defined:

* **No acknowledged job is lost.** A job is acknowledged when ``put`` returned
  its id to the producer (``P`` line, written right after). Every acknowledged
  id must be (a) still in the file, or (b) completed (``C`` line), or (c) the
  subject of a *dangling* delete: a ``D`` line among the last complete lines of
  a worker killed during the delete (a prefetching worker deletes a batch in one
  commit: all its trailing ``D`` lines), which may have committed before the kill.
  Anything else is a lost job.
* **No job is completed under two live leases.** Completing means a
  successful delete, and only the holder of the job's live lease can delete it
  (the delete is ``DELETE ... WHERE lease = ? AND reserved_until > now``). So two
  ``C`` lines for the same id (ids are never reused) mean two workers both
  believed, rightly, that they finished the job: a duplicate. A ``C`` line must
  also carry the lease of the reservation (``R`` line) it came from, and a
  completed job must be gone from the file.
* **No job is given to a second worker while its holder lives.** Each ``R`` line
  carries the reservation's deadline and the time reserve returned; the test
  driver writes the time of every kill to ``kills.txt`` *before* it sends the
  signal. A job reserved by B at a time before A's deadline and before A was
  killed, while A had not released or buried it, was taken from a live holder
  (deleting the ``<db>-sqlq`` sidecar once caused exactly that).
  On PostgreSQL neither a terminated session nor a server restart is a reason:
  a holder whose session ends keeps its jobs while its process lives. A verb cut
  off by a lost connection (``U`` line) may have committed: a release or bury so
  cut off lets the job go, a delete so cut off may have completed it.
* **The file is sound.** ``PRAGMA integrity_check`` answers ``ok``.
* Bodies are not mixed up: the tag a worker read from a body (``R``) and the one
  found in the file match the tag the producer put under that id.

Jobs put with ``after=`` (the ``P`` line's parents field; issue 24), the *children*:

* **No child released early.** A child is claimable only once each of its parents is
  gone, and a parent goes only by a delete, which a worker logs (``D``, with the time)
  *before* it starts. So a reservation of a child that returned (``R``'s ``at``) before
  the first delete of one of its parents began, or of a child one of whose parents was
  never deleted at all, was released early.
* **No child released twice; none stranded.** In the quiet file (every agent killed)
  the links must add up: a job's ``waiting_on`` is the number of its edges, each edge
  joins two jobs still in the file, a job waits (state 4) exactly when ``waiting_on``
  is above 0, and ``dependents`` is at least its edges as parent. A release made twice
  would leave a counter below its edges (or a child early); a release lost would leave a
  child waiting with none of its logged parents in the file: *stranded*. A child, once
  released, runs once like any job: the rules above (two completions, reserved again
  while its holder lived) hold for it as for every job.

Cancels (the canceller's ``S``/``Q``/``N``/``Y`` lines; issue 25). A cancel is
*acknowledged* when ``q.cancel`` returned (``Q``, with the time); ``N`` (JobNotFound)
cancelled nothing; ``Y`` (cut off) or a trailing ``S`` (killed during the call) may
have cancelled, and is counted apart (``uncertain``).

* **A cancelled job is never handed out again.** No reservation of it was claimed after
  the acknowledgement: the claim's own clock reading (``R``'s deadline less its TTR,
  read before its commit) is after the ``Q`` time.
* **... nor completed, nor left in the file.** A job whose cancel was acknowledged has no
  ``C`` line (a delete that committed first makes the cancel JobNotFound) and is gone.
* **Its holder is told.** A holder's verb after the cancel fails (``F``), with
  JobCancelled (``F ... cancelled``) or JobLost (a batch delete names a cancelled job
  lost; a lease that ran out before the cancel): counted. The library worker's own
  verbs (``worker``) on a lease still live at the acknowledgement must get
  JobCancelled; and no job that was never cancelled is refused as cancelled.
* **Nothing else is lost.** The loss rule above holds with exactly the acknowledged (and
  the uncertain) cancels left out; the children of a cancelled parent may run from the
  cancel's start (``S``), as from a delete's ``D``.

What an immediate restart of PostgreSQL may undo (``restarts.txt``, written by the
driver: mode, start and end in ms). It is a crash of the server: commits whose WAL
record had not left the server's memory are gone. That is every commit that did not
wait for the flush (``synchronous_commit`` off): all of a ``durability="normal"``
agent's (``agents.txt``: log name, role, durability; its cancels too) and every agent's
claims, which
sqlq makes without waiting in either mode (a lost claim makes the job ready again).
The walwriter writes such commits within 3 x ``wal_writer_delay`` (0.6 s), and every
``full`` commit writes all WAL before it; so only commits made from
:data:`CRASH_WINDOW_MS` before an immediate restart's start to its end are excused, and
counted apart (``undone-by-crash``): a ``normal`` put acknowledged and then missing
(its id may then be issued again), a ``normal`` delete whose job is back, a claim whose
job a second worker reserved after the restart. Fast restarts excuse nothing.

A tube's concurrency cap (``limits.txt``, written by the driver: tube, K; issue 25).

* **Never more than K jobs of the tube held under live leases at once.** Each worker's
  reservation of a job of the tube (``R``, whose tube field names it) is a *hold*, taken
  as an interval that surely lies within the real one, so that an overlap of more than K
  is a real excess: it starts when reserve returned (``R``'s ``at``: after the claim's
  commit) and ends at the earliest of: the lease's deadline (``until``: an expired lease
  does not count); a delete's start (``D``'s ``at``, before its commit); a release's or
  bury's start (``X``/``B``/``U``'s ``before``; the reservation's own start for a line
  without it: generous); for a holder killed, its kill (``kills.txt``, before the
  signal: a dead holder's jobs count until reaped, later, which the logs cannot pin, so
  the kill is the generous end); a cancel of the job that may have committed after the
  claim, i.e. not acknowledged (``Q``) before the claim's clock reading (its ``S``, not
  later than its commit; the hold's start if the cancel began before it); and on
  PostgreSQL, for a claim an immediate restart may have undone, the restart's start. A
  touch lengthens a lease and is not counted (the hold is then shorter than the real
  one: generous). The drain (after every agent died, its clock ahead) is left out.
  Reported: the most holds at once (``max-held``) and the claims of the tube.

What a kill costs: for every SIGKILL sent during a round (``kills.txt``: log name, ms,
``step``; the kills that end a round say ``end``) of an agent holding jobs whose TTR
had not run out, the time from the kill to the next reservation of each such job by
another agent (``holder-recovery``: p50 and max). A job not reserved again before the
round ended waits for the next round's agents and is counted apart (``left``).
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import apsw

#: How long before an immediate restart a commit that did not wait for the WAL flush
#: may still be only in the server's memory (3 x wal_writer_delay, and a loaded machine).
CRASH_WINDOW_MS = 2000


def complete_lines(path: Path) -> list[list[str]]:
    """The log's records; a last line without its newline (torn by SIGKILL) is dropped."""
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
    return [line.split() for line in data.decode("utf-8", "replace").splitlines() if line]


@dataclass
class Verdict:
    """What one look at the file and the logs found."""

    acknowledged: int = 0
    completed: int = 0
    in_file: int = 0
    refused: int = 0  #: deletes refused because the lease was no longer live (F lines)
    lost: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    stolen: list[int] = field(default_factory=list)  #: reserved again while the holder lived
    #: what an immediate restart undid, as it may (see the module's docstring), by kind
    undone_by_crash: Counter[str] = field(default_factory=Counter)
    #: ms from the SIGKILL of a holder to the next reservation of its job elsewhere
    recoveries: list[int] = field(default_factory=list)
    left: int = 0  #: jobs of killed holders not reserved again before the round ended
    integrity_ok: bool = True
    problems: list[str] = field(default_factory=list)
    deps: DependencyVerdict = field(default_factory=lambda: DependencyVerdict())
    cancels: CancelVerdict = field(default_factory=lambda: CancelVerdict())
    limits: LimitVerdict = field(default_factory=lambda: LimitVerdict())


@dataclass
class LimitVerdict:
    """What the look found about the capped tube (see the module's docstring)."""

    tube: str = ""  #: the tube with a cap ("" : none in this run)
    cap: int = 0
    max_held: int = 0  #: the most holds at once
    claims: int = 0  #: reservations of the tube (R lines)
    #: moments with more than ``cap`` holds: "at <ms>: <n> held <ids>"
    over: list[str] = field(default_factory=list)


@dataclass
class CancelVerdict:
    """What the look found about cancels (see the module's docstring)."""

    acknowledged: int = 0  #: Q lines: jobs cancelled
    not_found: int = 0  #: N lines: nothing cancelled
    uncertain: int = 0  #: Y lines and trailing S lines: may have cancelled
    holders_cancelled: int = 0  #: a holder's verb refused with JobCancelled
    holders_lost: int = 0  #: ... with JobLost (its lease ran out before the cancel)
    reserved_after: list[int] = field(default_factory=list)  #: claimed after the cancel
    completed_after: list[int] = field(default_factory=list)  #: completed, cancelled too
    left_in_file: list[int] = field(default_factory=list)  #: still in the file after it
    #: JobCancelled for a job no cancel named
    cancelled_uncalled: list[int] = field(default_factory=list)
    #: a holder whose lease was live at the cancel told JobLost, not JobCancelled (only
    #: for the library worker's own verbs: a batch delete names a cancelled job lost)
    told_lost: list[int] = field(default_factory=list)


@dataclass
class DependencyVerdict:
    """What the look found about jobs put with ``after=`` (see the module's docstring)."""

    children: int = 0  #: acknowledged puts with parents
    fan_in: int = 0  #: ... with two parents or more
    chained: int = 0  #: ... with a parent that is itself a child
    reserved: int = 0  #: children reserved at least once
    completed: int = 0  #: children completed
    waiting: int = 0  #: jobs waiting in the file (state 4) at the look
    early: list[int] = field(default_factory=list)  #: children reserved before a parent went
    stranded: list[int] = field(default_factory=list)  #: waiting with no parent left
    twice: list[int] = field(default_factory=list)  #: children completed twice
    broken_links: list[str] = field(default_factory=list)  #: counters that do not add up


@dataclass(frozen=True)
class Reservation:
    log: str
    lease: str
    until_ms: int
    at_ms: int


def read_kills(log_dir: Path) -> dict[str, int]:
    """Log name -> the time (ms) just before its process was sent SIGKILL."""
    return {name: at for name, at, _ in read_kill_records(log_dir)}


def read_kill_records(log_dir: Path) -> list[tuple[str, int, str]]:
    """(log name, ms, why: ``step`` during a round, ``end`` at its end) of every kill."""
    path = log_dir / "kills.txt"
    if not path.exists():
        return []
    return [(rec[0], int(rec[1]), rec[2] if len(rec) > 2 else "step")
            for rec in complete_lines(path) if len(rec) >= 2]


@dataclass(frozen=True)
class Restart:
    mode: str
    start_ms: int
    end_ms: int


def read_restarts(log_dir: Path) -> list[Restart]:
    path = log_dir / "restarts.txt"
    if not path.exists():
        return []
    return [Restart(rec[0], int(rec[1]), int(rec[2]))
            for rec in complete_lines(path) if len(rec) == 3]


def read_roles(log_dir: Path) -> dict[str, str]:
    """Log name -> its agent's role (``agents.txt``)."""
    path = log_dir / "agents.txt"
    if not path.exists():
        return {}
    return {rec[0]: rec[1] for rec in complete_lines(path) if len(rec) == 3}


def read_durabilities(log_dir: Path) -> dict[str, str]:
    """Log name -> the durability its agent ran with (``agents.txt``)."""
    path = log_dir / "agents.txt"
    if not path.exists():
        return {}
    return {rec[0]: rec[2] for rec in complete_lines(path) if len(rec) == 3}


class CrashWindows:
    """The times at which a commit made without waiting for the flush may have been
    undone by an immediate restart."""

    def __init__(self, restarts: list[Restart]) -> None:
        self.windows = [(r.start_ms - CRASH_WINDOW_MS, r.start_ms, r.end_ms)
                        for r in restarts if r.mode == "immediate"]

    def crash_after(self, at_ms: int | None) -> int | None:
        """The start of the immediate restart that may have undone a commit made at
        ``at_ms`` (None: none may have; or the time is unknown)."""
        if at_ms is None:
            return None
        for low, start, end in self.windows:
            if low <= at_ms <= end:
                return start
        return None


def stolen_from_live_holders(reservations: dict[int, list[Reservation]],
                             let_go: set[tuple[str, int, str]], kills: dict[str, int],
                             crashes: CrashWindows | None = None,
                             undone: Counter[str] | None = None) -> list[int]:
    """Jobs reserved by a second process before the first one's deadline, while the first
    was neither killed yet nor had released or buried the job (see the module's docstring).
    A claim an immediate restart may have undone is counted in ``undone`` instead."""
    stolen = []
    for job_id, seen in reservations.items():
        seen.sort(key=lambda r: r.at_ms)
        for first, second in zip(seen, seen[1:], strict=False):
            if first.log == second.log or (first.log, job_id, first.lease) in let_go:
                continue
            alive_until = kills.get(first.log, 2**63)
            if second.at_ms < first.until_ms and second.at_ms < alive_until:
                crash = crashes.crash_after(first.at_ms) if crashes else None
                if crash is not None and second.at_ms > crash:
                    if undone is not None:
                        undone["claims"] += 1
                    continue
                stolen.append(job_id)
                break
    return sorted(stolen)


def recovery_times(records: dict[str, list[list[str]]],
                   reservations: dict[int, list[Reservation]],
                   kills: list[tuple[str, int, str]]) -> tuple[list[int], int]:
    """(ms from each SIGKILL of a holder to the next reservation elsewhere of each job it
    held within its TTR, the number of such jobs not reserved again before its round
    ended); see the module's docstring."""
    ends = sorted(at for _, at, why in kills if why == "end")
    times: list[int] = []
    left = 0
    for name, killed_at, why in kills:
        if why != "step" or name not in records:
            continue
        held: dict[int, int] = {}  # id -> reserved_until of what the agent held
        for rec in records[name]:
            if rec[0] == "R" and len(rec) >= 6:
                held[int(rec[1])] = int(rec[4])
            elif rec[0] in ("C", "F", "X", "B", "U", "D") and len(rec) > 1:
                held.pop(int(rec[1]), None)  # done, gone, or perhaps deleted (D)
        round_end = next((at for at in ends if at >= killed_at), 2**63)
        for job_id, until in held.items():
            if until <= killed_at:
                continue  # its TTR had run out: not the kill's doing
            nxt = min((r.at_ms for r in reservations.get(job_id, ())
                       if r.log != name and r.at_ms >= killed_at), default=None)
            if nxt is None or nxt > round_end:
                left += 1
            else:
                times.append(nxt - killed_at)
    return times, left


def read_caps(log_dir: Path) -> dict[str, int]:
    """Tube -> its concurrency cap (``limits.txt``)."""
    path = log_dir / "limits.txt"
    if not path.exists():
        return {}
    return {rec[0]: int(rec[1]) for rec in complete_lines(path) if len(rec) == 2}


@dataclass
class Hold:
    start: int  #: reserve returned (after the claim's commit)
    end: int
    claimed: int  #: the claim's clock reading (before its commit)


def check_cap(tube: str, cap: int, records: dict[str, list[list[str]]],
              kills: dict[str, int], crashes: CrashWindows) -> LimitVerdict:
    """The cap rule (see the module's docstring): the holds of ``tube``'s jobs, each
    shortened to what the logs prove, never more than ``cap`` at once."""
    v = LimitVerdict(tube=tube, cap=cap)
    cancels: dict[int, list[tuple[int, int | None]]] = {}  # id -> (S ms, Q ms or None)
    for recs in records.values():
        started: dict[int, int] = {}
        for rec in recs:
            if rec[0] == "S":
                started[int(rec[1])] = int(rec[2])
            elif rec[0] in ("Q", "Y") and int(rec[1]) in started:
                job_id = int(rec[1])
                cancels.setdefault(job_id, []).append(
                    (started.pop(job_id), int(rec[2]) if rec[0] == "Q" else None))
            elif rec[0] == "N":
                started.pop(int(rec[1]), None)  # cancelled nothing
        for job_id, at in started.items():  # killed during the call: it may have committed
            cancels.setdefault(job_id, []).append((at, None))
    holds: list[tuple[int, Hold]] = []
    for name, recs in records.items():
        if name.startswith("zz-"):
            continue  # the drain: every agent dead, its clock ahead
        mine: dict[tuple[int, str], Hold] = {}
        for rec in recs:
            kind = rec[0]
            if kind == "R" and len(rec) >= 8 and rec[7] == tube:
                v.claims += 1
                hold = Hold(int(rec[5]), int(rec[4]), int(rec[4]) - int(rec[6]))
                mine[int(rec[1]), rec[2]] = hold
                holds.append((int(rec[1]), hold))
            elif kind in ("D", "X", "B", "U") and len(rec) > 2:
                hold = mine.get((int(rec[1]), rec[2]))
                if hold is None:
                    continue
                index = {"D": 3, "X": 3, "B": 3, "U": 4}[kind]
                if kind == "U" and rec[3] == "delete":
                    continue  # its D came first
                # The verb began at this time; without one, at the hold's start (generous).
                hold.end = min(hold.end, int(rec[index]) if len(rec) > index else hold.start)
        killed = kills.get(name)
        if killed is not None:
            for hold in mine.values():
                hold.end = min(hold.end, killed)  # then dead until reaped: unknown, later
    for job_id, hold in holds:
        for s_at, q_at in cancels.get(job_id, ()):
            if q_at is not None and q_at < hold.claimed:
                continue  # committed before the claim (which is then a cancel rule's case)
            hold.end = min(hold.end, max(hold.start, s_at))
        crash = crashes.crash_after(hold.start)
        if crash is not None:  # an immediate restart may have undone the claim
            hold.end = min(hold.end, max(hold.start, crash))
    # A sweep over [start, end) intervals: an end at the same ms as a start comes first.
    events = sorted([(h.start, 1, j) for j, h in holds if h.end > h.start]
                    + [(h.end, -1, j) for j, h in holds if h.end > h.start])
    held: Counter[int] = Counter()
    for at, step, job_id in events:
        held[job_id] += step
        if not held[job_id]:
            del held[job_id]
        count = sum(held.values())
        v.max_held = max(v.max_held, count)
        if count > cap and len(v.over) < 10:
            v.over.append(f"at {at}: {count} held {sorted(held)}")
    return v


def read_file(db: str | Path) -> tuple[bool, dict[int, str], list[str]]:
    """(integrity ok, id -> tag of every job in the database, integrity messages)."""
    if "://" in str(db):  # PostgreSQL: the jobs; the server answers for its own files
        import psycopg

        with psycopg.connect(str(db)) as pg:
            return True, {job_id: _tag(body)
                          for job_id, body in pg.execute("SELECT id, body FROM sqlq_jobs")}, []
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.set_busy_timeout(10_000)
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        jobs = {job_id: _tag(body)
                for job_id, body in conn.execute("SELECT id, body FROM sqlq_jobs")}
    except apsw.CorruptError as e:
        return False, {}, [f"{type(e).__name__}: {e}"]
    finally:
        conn.close()
    return rows == ["ok"], jobs, [] if rows == ["ok"] else rows[:5]


@dataclass(frozen=True)
class Links:
    """The dependency columns of the quiet file: (state, waiting_on, dependents) by id,
    and the edges (parent, child)."""

    jobs: dict[int, tuple[int, int, int]]
    edges: list[tuple[int, int]]


def read_links(db: str | Path) -> Links:
    """Both tables from one snapshot: on PostgreSQL a statement a killed agent sent just
    before its death may still commit while the checker reads."""
    jobs_sql = "SELECT id, state, waiting_on, dependents FROM sqlq_jobs"
    edges_sql = "SELECT parent, child FROM sqlq_edges"
    if "://" in str(db):
        import psycopg

        with psycopg.connect(str(db)) as pg:
            pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return Links({r[0]: (r[1], r[2], r[3]) for r in pg.execute(jobs_sql)},
                         [(r[0], r[1]) for r in pg.execute(edges_sql)])
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.set_busy_timeout(10_000)
        with conn:
            return Links({r[0]: (r[1], r[2], r[3]) for r in conn.execute(jobs_sql)},
                         [(r[0], r[1]) for r in conn.execute(edges_sql)])
    finally:
        conn.close()


#: The counts migration 0005 keeps per (tube, state, urgent), and the same from the rows.
_KEPT_COUNTS = """SELECT tube, state, urgent, sum(n) FROM sqlq_job_counts
                   GROUP BY tube, state, urgent HAVING sum(n) <> 0"""
_REAL_COUNTS = """SELECT tube, state, state = 0 AND priority < 1024, count(*) FROM sqlq_jobs
                   WHERE state IN (0, 1, 3) GROUP BY 1, 2, 3"""


def broken_job_counts(db: str | Path) -> list[str]:
    """Where the kept counts of the quiet file (migration 0005) differ from a COUNT(*) of
    its rows, both read in one snapshot: each difference as a problem line."""
    if "://" in str(db):
        import psycopg

        with psycopg.connect(str(db)) as pg:
            pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            kept, real = (list(pg.execute(_KEPT_COUNTS)), list(pg.execute(_REAL_COUNTS)))
    else:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.set_busy_timeout(10_000)
            with conn:
                kept, real = (list(conn.execute(_KEPT_COUNTS)), list(conn.execute(_REAL_COUNTS)))
        finally:
            conn.close()
    as_dict = [{(t, int(s), int(u)): int(n) for t, s, u, n in rows} for rows in (kept, real)]
    return [f"kept count of {key} is {as_dict[0].get(key, 0)}, COUNT(*) {as_dict[1].get(key, 0)}"
            for key in sorted(as_dict[0].keys() | as_dict[1].keys())
            if as_dict[0].get(key, 0) != as_dict[1].get(key, 0)]


def broken_links(links: Links) -> list[str]:
    """Where the counters of the quiet file do not add up (see the module's docstring)."""
    as_child: Counter[int] = Counter(child for _, child in links.edges)
    as_parent: Counter[int] = Counter(parent for parent, _ in links.edges)
    out = [f"edge {p}->{c} names a job gone" for p, c in links.edges
           if p not in links.jobs or c not in links.jobs]
    for job_id, (state, waiting_on, dependents) in links.jobs.items():
        if waiting_on != as_child[job_id]:
            out.append(f"job {job_id} waits on {waiting_on} parents, has {as_child[job_id]} "
                       "edges")
        if (state == 4) != (waiting_on > 0):
            out.append(f"job {job_id} in state {state} with waiting_on {waiting_on}")
        if dependents < as_parent[job_id]:
            out.append(f"job {job_id} counts {dependents} dependents, has "
                       f"{as_parent[job_id]} edges")
    return out


def check_dependencies(links: Links, parents: dict[int, list[int]],
                       reservations: dict[int, list[Reservation]],
                       delete_started: dict[int, int], completions: Counter[int],
                       duplicates: list[int]) -> DependencyVerdict:
    """The rules for children (see the module's docstring)."""
    v = DependencyVerdict(children=len(parents))
    v.fan_in = sum(1 for ps in parents.values() if len(ps) > 1)
    v.chained = sum(1 for ps in parents.values() if any(p in parents for p in ps))
    v.reserved = sum(1 for c in parents if reservations.get(c))
    v.completed = sum(1 for c in parents if completions[c])
    v.waiting = sum(1 for state, _, _ in links.jobs.values() if state == 4)
    for child, ps in sorted(parents.items()):
        seen = reservations.get(child)
        if seen:
            first = min(r.at_ms for r in seen)
            if any(first < delete_started.get(p, 2**63) for p in ps):
                v.early.append(child)
        row = links.jobs.get(child)
        if row is not None and row[0] == 4 and not any(p in links.jobs for p in ps):
            v.stranded.append(child)
    live_parent = {c for p, c in links.edges if p in links.jobs}
    v.stranded = sorted(set(v.stranded) | {j for j, (state, _, _) in links.jobs.items()
                                           if state == 4 and j not in live_parent})
    v.twice = sorted(set(duplicates) & parents.keys())
    v.broken_links = broken_links(links)
    return v


def check_cancels(cancelled: dict[int, tuple[int, bool]], maybe: set[int], not_found: int,
                  claims: dict[int, list[int]], completions: Counter[int],
                  in_file: dict[int, str], refusals: list[tuple[int, bool]],
                  started: dict[int, int], crashes: CrashWindows,
                  undone: Counter[str]) -> CancelVerdict:
    """The rules for cancels (see the module's docstring). A ``normal`` canceller's cancel
    an immediate restart may have undone is counted in ``undone`` when undone."""
    v = CancelVerdict(acknowledged=len(cancelled), not_found=not_found, uncertain=len(maybe))
    for job_id, (at, normal) in sorted(cancelled.items()):
        after = any(claim > at for claim in claims.get(job_id, ()))
        done = completions[job_id] > 0
        there = job_id in in_file
        # An immediate restart may undo a normal cancel: its job is then live again, and
        # claimed anew, left in the file, or completed by the holder it had (which is
        # told nothing: its lease holds again).
        if (after or there or done) and normal and crashes.crash_after(at) is not None:
            undone["cancels"] += 1
            continue
        if after:
            v.reserved_after.append(job_id)
        if done:
            v.completed_after.append(job_id)
        if there:
            v.left_in_file.append(job_id)
    for job_id, was_cancelled in refusals:
        if job_id in cancelled:
            v.holders_cancelled += was_cancelled
            v.holders_lost += not was_cancelled
        elif was_cancelled and job_id not in started:
            v.cancelled_uncalled.append(job_id)
    return v


def _at(rec: list[str], index: int) -> int | None:
    """The time field of a record, if it has one (older logs' lines do not)."""
    return int(rec[index]) if len(rec) > index else None


def _tag(body: bytes) -> str:
    return bytes(body).split(b" ", 1)[0].decode("utf-8", "replace")


def check(db: str | Path, log_dir: Path) -> Verdict:
    verdict = Verdict()
    integrity_ok, in_file, messages = read_file(db)
    verdict.integrity_ok = integrity_ok
    verdict.problems += [f"integrity_check: {m}" for m in messages]
    verdict.in_file = len(in_file)

    crashes = CrashWindows(read_restarts(log_dir))
    durability = read_durabilities(log_dir)
    acked: dict[int, str] = {}
    reserved_tags: list[tuple[str, int, str]] = []  # (log, id, body tag) of every R
    put_tags: dict[int, set[str]] = {}  # id -> the tag of every put acknowledged with it
    acked_at: dict[int, int | None] = {}  # id -> when the put acked[id] names was acknowledged
    fragile_puts: set[int] = set()  # normal puts an immediate restart may have undone
    put_at: dict[int, int] = {}  # id -> when its put was acknowledged (P, ms)
    completions: Counter[int] = Counter()
    fragile_completions: Counter[int] = Counter()  # likewise, normal deletes
    dangling: set[int] = set()
    parents: dict[int, list[int]] = {}  # child -> the parents its put named (after=)
    reissued: set[int] = set()  # ids put twice (a crash undid the first): whose parents?
    delete_started: dict[int, int] = {}  # id -> when its first delete began (D, ms)
    reservations: dict[int, list[Reservation]] = {}
    let_go: set[tuple[str, int, str]] = set()  # (log, id, lease) released or buried
    all_records: dict[str, list[list[str]]] = {}
    cancel_started: dict[int, int] = {}  # id -> when its first cancel began (S, ms)
    cancelled: dict[int, tuple[int, bool]] = {}  # id -> (Q's ms, a normal canceller's)
    maybe_cancelled: set[int] = set()  # Y, or a trailing S
    refusals: list[tuple[int, bool]] = []  # (id, with JobCancelled) of every F
    roles = read_roles(log_dir)
    direct: list[tuple[int, str]] = []  # (id, lease) of a plain F of the worker's own verb
    claims: dict[int, list[int]] = {}  # id -> each claim's clock reading (R's until - ttr)
    for log in sorted(log_dir.glob("*.log")):
        records = all_records[log.name] = complete_lines(log)
        normal = durability.get(log.name) == "normal"
        reserved: dict[int, str] = {}  # id -> lease of this worker's latest reservation
        for rec in records:
            kind = rec[0]
            if kind == "P":
                job_id, tag = int(rec[1]), rec[2]
                fragile = normal and crashes.crash_after(_at(rec, 3)) is not None
                if len(rec) > 3:
                    put_at.setdefault(job_id, int(rec[3]))
                put_tags.setdefault(job_id, set()).add(tag)
                if acked.get(job_id, tag) == tag:
                    acked[job_id] = tag
                    acked_at.setdefault(job_id, _at(rec, 3))
                    if fragile:
                        fragile_puts.add(job_id)
                elif fragile or job_id in fragile_puts:
                    reissued.add(job_id)
                    # one of the two puts was undone by a crash, and its id issued again:
                    # the earlier one (an id goes out again only once a crash has undone
                    # its first put), so the later is what the file may hold, even when
                    # both were acknowledged in the crash's window (the second one between
                    # the server's return and the restart's end: ci, seed 1534449017)
                    verdict.undone_by_crash["ids"] += 1
                    at, before = _at(rec, 3), acked_at.get(job_id)
                    if not fragile or (at is not None and before is not None and at > before):
                        acked[job_id], acked_at[job_id] = tag, at
                        if fragile:
                            fragile_puts.add(job_id)
                        else:
                            fragile_puts.discard(job_id)
                else:
                    verdict.problems.append(f"id {job_id} acknowledged twice "
                                            f"({acked[job_id]}, {tag}): an id was reused")
                if len(rec) > 4:
                    parents[job_id] = [int(p) for p in rec[4].split(",")]
            elif kind == "D" and len(rec) > 3:
                job_id = int(rec[1])
                delete_started[job_id] = min(int(rec[3]), delete_started.get(job_id, 2**63))
            elif kind == "R":
                job_id, lease, tag = int(rec[1]), rec[2], rec[3]
                reserved[job_id] = lease
                if len(rec) >= 6:
                    reservations.setdefault(job_id, []).append(
                        Reservation(log.name, lease, int(rec[4]), int(rec[5])))
                if len(rec) >= 7:
                    claims.setdefault(job_id, []).append(int(rec[4]) - int(rec[6]))
                reserved_tags.append((log.name, job_id, tag))
            elif kind in ("X", "B"):
                let_go.add((log.name, int(rec[1]), rec[2]))
            elif kind == "U":  # a verb cut off by a lost connection: it may have committed
                if rec[3] == "delete":
                    dangling.add(int(rec[1]))
                else:
                    let_go.add((log.name, int(rec[1]), rec[2]))
            elif kind == "F":
                verdict.refused += 1
                refusals.append((int(rec[1]), rec[3:4] == ["cancelled"]))
                if roles.get(log.name) == "worker" and rec[3:4] != ["cancelled"]:
                    direct.append((int(rec[1]), rec[2]))
            elif kind == "S":
                job_id = int(rec[1])
                cancel_started[job_id] = min(int(rec[2]), cancel_started.get(job_id, 2**63))
            elif kind == "Q":
                cancelled[int(rec[1])] = (int(rec[2]), normal)
            elif kind == "N":
                verdict.cancels.not_found += 1
            elif kind == "Y":
                maybe_cancelled.add(int(rec[1]))
            elif kind == "C":
                job_id, lease = int(rec[1]), rec[2]
                completions[job_id] += 1
                if normal and crashes.crash_after(_at(rec, 3)) is not None:
                    fragile_completions[job_id] += 1
                if reserved.get(job_id) != lease:
                    verdict.problems.append(f"{log.name}: job {job_id} completed under lease "
                                            f"{lease}, not the one it reserved")
        # A worker killed during its last delete (or a prefetching one during the
        # commit that deletes its batch) ends with D lines: each may have committed.
        # So does one killed after that commit, while it wrote the batch's C (or F)
        # lines one by one: its log ends with D lines, then some of their C lines.
        if records and records[-1][0] == "S":  # killed during a cancel: it may have committed
            maybe_cancelled.add(int(records[-1][1]))
        refused_at_end: set[int] = set()  # an F says that delete did not commit
        for rec in reversed(records):
            if rec[0] not in ("D", "C", "F"):
                break
            if rec[0] == "F":
                refused_at_end.add(int(rec[1]))
            elif rec[0] == "D" and int(rec[1]) not in refused_at_end:
                dangling.add(int(rec[1]))

    # P lines are read from every log before tags are compared (a reissued id's later
    # put may be in a log read after the reservation's). A reservation may have been of
    # either put of a reissued id (of the first, before the crash undid it).
    for name, job_id, tag in reserved_tags:
        if job_id in acked and tag not in put_tags[job_id]:
            verdict.problems.append(f"{name}: job {job_id} has body {tag}, "
                                    f"put as {acked[job_id]}")
    for job_id, tag in in_file.items():
        if job_id in acked and acked[job_id] != tag:
            verdict.problems.append(f"job {job_id} in the file has body {tag}, "
                                    f"put as {acked[job_id]}")
    verdict.acknowledged = len(acked)
    verdict.completed = len(completions)
    # A completion an immediate restart may have undone leaves the job to be done again.
    verdict.undone_by_crash["deletes"] += sum(
        1 for j, n in fragile_completions.items() if completions[j] > 1 or j in in_file)
    verdict.duplicates = sorted(j for j, n in completions.items()
                                if n - fragile_completions[j] > 1)
    kills = read_kill_records(log_dir)
    verdict.stolen = stolen_from_live_holders(reservations, let_go,
                                              {name: at for name, at, _ in kills},
                                              crashes, verdict.undone_by_crash)
    verdict.recoveries, verdict.left = recovery_times(all_records, reservations, kills)
    maybe_cancelled -= cancelled.keys()
    missing = [j for j in acked
               if j not in in_file and j not in completions and j not in dangling
               and j not in cancelled and j not in maybe_cancelled]
    verdict.lost = sorted(j for j in missing if j not in fragile_puts)
    for job_id in missing:
        # A put the restart undid is gone from the restart's start: a later put naming it
        # in after= finds it gone (finished), and its child may run at once.
        crash = crashes.crash_after(put_at.get(job_id))
        if job_id in fragile_puts and crash is not None:
            delete_started[job_id] = min(crash, delete_started.get(job_id, 2**63))
    verdict.undone_by_crash["puts"] += len(missing) - len(verdict.lost)
    resurrected = sorted(j for j in completions if j in in_file and not fragile_completions[j])
    if resurrected:
        verdict.problems.append(f"jobs deleted successfully but still in the file: "
                                f"{resurrected[:10]}")
    verdict.cancels = check_cancels(cancelled, maybe_cancelled, verdict.cancels.not_found,
                                    claims, completions - fragile_completions, in_file,
                                    refusals, cancel_started,
                                    crashes, verdict.undone_by_crash)
    for job_id, lease in direct:
        if job_id in cancelled and any(
                r.lease == lease and r.until_ms > cancelled[job_id][0]
                for r in reservations.get(job_id, ())):
            verdict.cancels.told_lost.append(job_id)
    # A child may run once a parent's cancel began, as once its delete began.
    for job_id in cancelled.keys() | maybe_cancelled:
        if job_id in cancel_started:
            delete_started[job_id] = min(cancel_started[job_id],
                                         delete_started.get(job_id, 2**63))
    for job_id in reissued:
        parents.pop(job_id, None)
    for tube, cap in read_caps(log_dir).items():  # one capped tube a run
        verdict.limits = check_cap(tube, cap, all_records, {n: at for n, at, _ in kills},
                                   crashes)
    if verdict.integrity_ok:
        verdict.problems += broken_job_counts(db)
        verdict.deps = check_dependencies(read_links(db), parents, reservations,
                                          delete_started, completions, verdict.duplicates)
    return verdict


@dataclass
class Summary:
    """The figures the chaos test prints, accumulated over its rounds."""

    rounds: int = 0
    kills: int = 0
    acknowledged: int = 0
    completed: int = 0
    in_file: int = 0
    refused: int = 0
    lost: int = 0
    duplicates: int = 0
    stolen: int = 0
    sidecar_removals: int = 0
    integrity_failures: int = 0
    #: PostgreSQL: server restarts by mode, and sessions ended by pg_terminate_backend
    restarts: Counter[str] = field(default_factory=Counter)
    sessions_terminated: int = 0
    terminations: Counter[str] = field(default_factory=Counter)  #: "owner"/"all" of an agent
    undone_by_crash: Counter[str] = field(default_factory=Counter)
    recoveries: list[int] = field(default_factory=list)
    left: int = 0
    deps: DependencyVerdict = field(default_factory=DependencyVerdict)
    #: the worst of any look: children released early, twice, stranded; broken counters
    early: int = 0
    waiting_max: int = 0  #: the most jobs waiting at any look: children really waited
    twice: int = 0
    stranded: int = 0
    broken_links: int = 0
    cancels: CancelVerdict = field(default_factory=CancelVerdict)
    #: the worst of any look: cancelled jobs claimed, completed or left after the cancel
    cancel_violations: int = 0
    limits: LimitVerdict = field(default_factory=LimitVerdict)
    #: the worst of any look: moments with more holds than the cap
    cap_violations: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        self.rounds += 1
        # The logs accumulate over rounds: the latest look has the totals.
        self.acknowledged = verdict.acknowledged
        self.completed = verdict.completed
        self.in_file = verdict.in_file
        self.refused = verdict.refused
        self.undone_by_crash = verdict.undone_by_crash
        self.recoveries, self.left = verdict.recoveries, verdict.left
        self.lost = max(self.lost, len(verdict.lost))
        self.duplicates = max(self.duplicates, len(verdict.duplicates))
        self.stolen = max(self.stolen, len(verdict.stolen))
        self.integrity_failures += not verdict.integrity_ok
        if verdict.lost:
            self.problems.append(f"round {self.rounds}: lost {verdict.lost[:10]}")
        if verdict.stolen:
            self.problems.append(f"round {self.rounds}: reserved again while the holder "
                                 f"lived {verdict.stolen[:10]}")
        if verdict.duplicates:
            self.problems.append(f"round {self.rounds}: completed twice "
                                 f"{verdict.duplicates[:10]}")
        self.problems += [f"round {self.rounds}: {p}" for p in verdict.problems]
        deps = self.deps = verdict.deps
        self.early = max(self.early, len(deps.early))
        self.waiting_max = max(self.waiting_max, deps.waiting)
        self.twice = max(self.twice, len(deps.twice))
        self.stranded = max(self.stranded, len(deps.stranded))
        self.broken_links = max(self.broken_links, len(deps.broken_links))
        c = self.cancels = verdict.cancels
        self.cancel_violations = max(self.cancel_violations, len(c.reserved_after)
                                     + len(c.completed_after) + len(c.left_in_file)
                                     + len(c.cancelled_uncalled) + len(c.told_lost))
        lim = self.limits = verdict.limits
        self.cap_violations = max(self.cap_violations, len(lim.over))
        if lim.over:
            self.problems.append(f"round {self.rounds}: more than {lim.cap} jobs of "
                                 f"{lim.tube} held at once: {lim.over[:5]}")
        for what, ids in (("cancelled jobs claimed after the cancel", c.reserved_after),
                          ("cancelled jobs completed", c.completed_after),
                          ("cancelled jobs still in the file", c.left_in_file),
                          ("JobCancelled for jobs never cancelled", c.cancelled_uncalled),
                          ("holders told JobLost, not JobCancelled", c.told_lost),
                          ("children reserved before a parent went", deps.early),
                          ("children completed twice", deps.twice),
                          ("children waiting with no parent left", deps.stranded),
                          ("dependency counters", deps.broken_links)):
            if ids:
                self.problems.append(f"round {self.rounds}: {what}: {ids[:10]}")

    def line(self, seconds: float) -> str:
        text = (f"chaos: {seconds:.0f}s rounds={self.rounds} kills={self.kills} "
                f"sidecar-removals={self.sidecar_removals} "
                f"jobs-acknowledged={self.acknowledged} completed={self.completed} "
                f"left-in-file={self.in_file} stale-leases-refused={self.refused} "
                f"jobs-lost={self.lost} "
                f"duplicates-under-live-leases={self.duplicates} "
                f"stolen-from-live-holders={self.stolen} "
                f"integrity-failures={self.integrity_failures}")
        if self.restarts or self.sessions_terminated:
            undone = ",".join(f"{k}:{n}" for k, n in sorted(self.undone_by_crash.items()) if n)
            pooled = self.restarts["pgbouncer"] or self.terminations["pooled"]
            text += (f" restarts=fast:{self.restarts['fast']}"
                     f"/immediate:{self.restarts['immediate']}"
                     + (f"/pgbouncer:{self.restarts['pgbouncer']}" if pooled else "")
                     + f" sessions-terminated={self.sessions_terminated}"
                     f" (owner-only:{self.terminations['owner']}"
                     f",all-of-an-agent:{self.terminations['all']}"
                     + (f",pooled:{self.terminations['pooled']}" if pooled else "") + ")"
                     f" undone-by-crash={undone or 0}")
        return (text + " " + self.cancelling() + " " + self.capping() + " "
                + self.dependencies() + " " + self.recovery())

    def capping(self) -> str:
        """The capped tube: its cap, the most holds seen at once, its claims."""
        lim = self.limits
        if not lim.tube:
            return "limited-tube=none"
        return (f"limited-tube={lim.tube} cap={lim.cap} max-held={lim.max_held} "
                f"claims={lim.claims} cap-violations={self.cap_violations}")

    def cancelling(self) -> str:
        """The cancels, what their holders were told, and what the rules found."""
        c = self.cancels
        return (f"cancels-acknowledged={c.acknowledged} not-found={c.not_found} "
                f"uncertain={c.uncertain} holders-told=cancelled:{c.holders_cancelled}"
                f",lost:{c.holders_lost} cancel-violations={self.cancel_violations}")

    def dependencies(self) -> str:
        """The children (jobs put with after=) and what the rules found about them."""
        d = self.deps
        return (f"children={d.children} (fan-in:{d.fan_in},chained:{d.chained}) "
                f"children-reserved={d.reserved} children-completed={d.completed} "
                f"waiting-at-a-look={self.waiting_max} waiting-left={d.waiting} "
                f"released-early={self.early} "
                f"released-twice={self.twice} stranded={self.stranded} "
                f"broken-links={self.broken_links}")

    def recovery(self) -> str:
        """The time from a holder's SIGKILL to its jobs' next reservation: p50, max."""
        if not self.recoveries:
            return f"holder-recovery=none left={self.left}"
        times = sorted(self.recoveries)
        return (f"holder-recovery p50={statistics.median(times) / 1000:.2f}s "
                f"max={times[-1] / 1000:.2f}s n={len(times)} left={self.left}")

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.stolen or self.integrity_failures
                    or self.early or self.twice or self.stranded or self.broken_links
                    or self.cancel_violations or self.cap_violations
                    or self.problems)


def main() -> int:
    db, log_dir = Path(sys.argv[1]), Path(sys.argv[2])
    summary = Summary()
    summary.add(check(db, log_dir))
    print(summary.line(0))
    for problem in summary.problems:
        print(problem)
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
