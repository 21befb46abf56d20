"""The chaos test's checker: what the logs of killed processes prove about the file.

    python tests/chaos_checker.py DB LOGDIR     # prints the summary line, exit 1 on a failure

Inputs: the database file and the logs written by tests/chaos_agent.py (see its
docstring for the line format). Only complete lines count: a process killed
while writing leaves at most one torn line at the end of its log.

What it proves, and how each claim is defined:

* **No acknowledged job is lost.** A job is acknowledged when ``put`` returned
  its id to the producer (``P`` line, written right after). Every acknowledged
  id must be (a) still in the file, or (b) completed (``C`` line), or (c) the
  subject of a *dangling* delete: a ``D`` line that is the last complete line of
  a worker killed during the delete, which may have committed before the kill.
  Anything else is a lost job.
* **No job is completed under two live leases.** Completing means a
  successful delete, and only the holder of the job's live lease can delete it
  (the delete is ``DELETE ... WHERE lease = ? AND reserved_until > now``). So two
  ``C`` lines for the same id (ids are never reused) mean two workers both
  believed, rightly, that they finished the job: a duplicate. A ``C`` line must
  also carry the lease of the reservation (``R`` line) it came from, and a
  completed job must be gone from the file.
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
    integrity_ok: bool = True
    problems: list[str] = field(default_factory=list)


def read_file(db: Path) -> tuple[bool, dict[int, str], list[str]]:
    """(integrity ok, id -> tag of every job in the file, integrity messages)."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.set_busy_timeout(10_000)
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        jobs = {job_id: bytes(body).split(b" ", 1)[0].decode("utf-8", "replace")
                for job_id, body in conn.execute("SELECT id, body FROM sqlq_jobs")}
    except apsw.CorruptError as e:
        return False, {}, [f"{type(e).__name__}: {e}"]
    finally:
        conn.close()
    return rows == ["ok"], jobs, [] if rows == ["ok"] else rows[:5]


def check(db: Path, log_dir: Path) -> Verdict:
    verdict = Verdict()
    integrity_ok, in_file, messages = read_file(db)
    verdict.integrity_ok = integrity_ok
    verdict.problems += [f"integrity_check: {m}" for m in messages]
    verdict.in_file = len(in_file)

    acked: dict[int, str] = {}
    completions: Counter[int] = Counter()
    dangling: set[int] = set()
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
                if job_id in acked and acked[job_id] != tag:
                    verdict.problems.append(f"{log.name}: job {job_id} has body {tag}, "
                                            f"put as {acked[job_id]}")
            elif kind == "F":
                verdict.refused += 1
            elif kind == "C":
                job_id, lease = int(rec[1]), rec[2]
                completions[job_id] += 1
                if reserved.get(job_id) != lease:
                    verdict.problems.append(f"{log.name}: job {job_id} completed under lease "
                                            f"{lease}, not the one it reserved")
        if records and records[-1][0] == "D":
            dangling.add(int(records[-1][1]))

    # P lines are read from every log before tags in the file are compared.
    for job_id, tag in in_file.items():
        if job_id in acked and acked[job_id] != tag:
            verdict.problems.append(f"job {job_id} in the file has body {tag}, "
                                    f"put as {acked[job_id]}")
    verdict.acknowledged = len(acked)
    verdict.completed = len(completions)
    verdict.duplicates = sorted(j for j, n in completions.items() if n > 1)
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
        self.integrity_failures += not verdict.integrity_ok
        if verdict.lost:
            self.problems.append(f"round {self.rounds}: lost {verdict.lost[:10]}")
        if verdict.duplicates:
            self.problems.append(f"round {self.rounds}: completed twice "
                                 f"{verdict.duplicates[:10]}")
        self.problems += [f"round {self.rounds}: {p}" for p in verdict.problems]

    def line(self, seconds: float) -> str:
        return (f"chaos: {seconds:.0f}s rounds={self.rounds} kills={self.kills} "
                f"jobs-acknowledged={self.acknowledged} completed={self.completed} "
                f"left-in-file={self.in_file} stale-leases-refused={self.refused} "
                f"jobs-lost={self.lost} "
                f"duplicates-under-live-leases={self.duplicates} "
                f"integrity-failures={self.integrity_failures}")

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.integrity_failures or self.problems)


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
