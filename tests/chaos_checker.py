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
* **The file is sound.** ``PRAGMA integrity_check`` answers ``ok``.
* Bodies are not mixed up: the tag a worker read from a body (``R``) and the one
  found in the file match the tag the producer put under that id.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import apsw


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
    integrity_ok: bool = True
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Reservation:
    log: str
    lease: str
    until_ms: int
    at_ms: int


def read_kills(log_dir: Path) -> dict[str, int]:
    """Log name -> the time (ms) just before its process was sent SIGKILL."""
    path = log_dir / "kills.txt"
    if not path.exists():
        return {}
    return {rec[0]: int(rec[1]) for rec in complete_lines(path) if len(rec) == 2}


def stolen_from_live_holders(reservations: dict[int, list[Reservation]],
                             let_go: set[tuple[str, int, str]], kills: dict[str, int]
                             ) -> list[int]:
    """Jobs reserved by a second process before the first one's deadline, while the first
    was neither killed yet nor had released or buried the job (see the module's docstring)."""
    stolen = []
    for job_id, seen in reservations.items():
        seen.sort(key=lambda r: r.at_ms)
        for first, second in zip(seen, seen[1:], strict=False):
            if first.log == second.log or (first.log, job_id, first.lease) in let_go:
                continue
            alive_until = kills.get(first.log, 2**63)
            if second.at_ms < first.until_ms and second.at_ms < alive_until:
                stolen.append(job_id)
                break
    return sorted(stolen)


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


def _tag(body: bytes) -> str:
    return bytes(body).split(b" ", 1)[0].decode("utf-8", "replace")


def check(db: str | Path, log_dir: Path) -> Verdict:
    verdict = Verdict()
    integrity_ok, in_file, messages = read_file(db)
    verdict.integrity_ok = integrity_ok
    verdict.problems += [f"integrity_check: {m}" for m in messages]
    verdict.in_file = len(in_file)

    acked: dict[int, str] = {}
    completions: Counter[int] = Counter()
    dangling: set[int] = set()
    reservations: dict[int, list[Reservation]] = {}
    let_go: set[tuple[str, int, str]] = set()  # (log, id, lease) released or buried
    for log in sorted(log_dir.glob("*.log")):
        records = complete_lines(log)
        reserved: dict[int, str] = {}  # id -> lease of this worker's latest reservation
        for rec in records:
            kind = rec[0]
            if kind == "P":
                job_id, tag = int(rec[1]), rec[2]
                if acked.setdefault(job_id, tag) != tag:
                    verdict.problems.append(f"id {job_id} acknowledged twice "
                                            f"({acked[job_id]}, {tag}): an id was reused")
            elif kind == "R":
                job_id, lease, tag = int(rec[1]), rec[2], rec[3]
                reserved[job_id] = lease
                if len(rec) >= 6:
                    reservations.setdefault(job_id, []).append(
                        Reservation(log.name, lease, int(rec[4]), int(rec[5])))
                if job_id in acked and acked[job_id] != tag:
                    verdict.problems.append(f"{log.name}: job {job_id} has body {tag}, "
                                            f"put as {acked[job_id]}")
            elif kind in ("X", "B"):
                let_go.add((log.name, int(rec[1]), rec[2]))
            elif kind == "F":
                verdict.refused += 1
            elif kind == "C":
                job_id, lease = int(rec[1]), rec[2]
                completions[job_id] += 1
                if reserved.get(job_id) != lease:
                    verdict.problems.append(f"{log.name}: job {job_id} completed under lease "
                                            f"{lease}, not the one it reserved")
        # A worker killed during its last delete (or a prefetching one during the
        # commit that deletes its batch) ends with D lines: each may have committed.
        for rec in reversed(records):
            if rec[0] != "D":
                break
            dangling.add(int(rec[1]))

    # P lines are read from every log before tags in the file are compared.
    for job_id, tag in in_file.items():
        if job_id in acked and acked[job_id] != tag:
            verdict.problems.append(f"job {job_id} in the file has body {tag}, "
                                    f"put as {acked[job_id]}")
    verdict.acknowledged = len(acked)
    verdict.completed = len(completions)
    verdict.duplicates = sorted(j for j, n in completions.items() if n > 1)
    verdict.stolen = stolen_from_live_holders(reservations, let_go, read_kills(log_dir))
    verdict.lost = sorted(j for j in acked
                          if j not in in_file and j not in completions and j not in dangling)
    resurrected = sorted(j for j in completions if j in in_file)
    if resurrected:
        verdict.problems.append(f"jobs deleted successfully but still in the file: "
                                f"{resurrected[:10]}")
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
    problems: list[str] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        self.rounds += 1
        # The logs accumulate over rounds: the latest look has the totals.
        self.acknowledged = verdict.acknowledged
        self.completed = verdict.completed
        self.in_file = verdict.in_file
        self.refused = verdict.refused
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

    def line(self, seconds: float) -> str:
        return (f"chaos: {seconds:.0f}s rounds={self.rounds} kills={self.kills} "
                f"sidecar-removals={self.sidecar_removals} "
                f"jobs-acknowledged={self.acknowledged} completed={self.completed} "
                f"left-in-file={self.in_file} stale-leases-refused={self.refused} "
                f"jobs-lost={self.lost} "
                f"duplicates-under-live-leases={self.duplicates} "
                f"stolen-from-live-holders={self.stolen} "
                f"integrity-failures={self.integrity_failures}")

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.stolen or self.integrity_failures
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
