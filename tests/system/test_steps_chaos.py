"""Chaos for durable steps (issue 40): workers SIGKILLed while tasks run their steps.

* Five steps under SIGKILLs, both backends (``tests/step_jobs.py``): jobs of
  ``five_steps`` (each step's work appends "ran J S" to a side file, fsync'ed, and the
  task appends "kept J S" once ``step`` returned: the record committed) and of
  ``five_steps_exactly_once`` (each step's work is a row of a ``ledger`` table in the
  queue's own database, written in the step's transaction: ``step(conn=tx)``). A
  worker (``sqlq work --in-process``: the process that runs the task) is started, and
  killed at a random moment once it is at work, again and again; then one worker
  drains the queue. Proven: no job lost (every step of every
  job done, the queue empty); for the at-least-once steps, no "ran" after that step's
  "kept" (its fn never completed after its record was known committed) and no more
  repeats than kills; for the exactly-once steps, exactly one ledger row each.
* A cursor import (``import_rows``): SQLQ_STEPS_IMPORT_ROWS rows (100,000 by default;
  docs/performance.md's figure is of a run with 1,000,000), a cursor saved every 1,000,
  its worker SIGKILLed 5 times while the cursor moves. Proven: every row processed at
  least once, and each kill repeated at most the rows since the cursor last saved (at
  most 1,000).

Each prints one summary line with its counts.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import sqlq
from tests.step_jobs import FIVE, five_steps, five_steps_exactly_once, import_rows
from tests.timing import PATIENCE
from tests.workers import Work, wait_for

#: Jobs of each kind (SQLQ_STEPS_CHAOS_JOBS) and kills (SQLQ_STEPS_CHAOS_KILLS).
JOBS = int(os.environ.get("SQLQ_STEPS_CHAOS_JOBS", "6"))
KILLS = int(os.environ.get("SQLQ_STEPS_CHAOS_KILLS", "8"))
#: Rows of the cursor import, and how many between two saves of its cursor.
ROWS = int(os.environ.get("SQLQ_STEPS_IMPORT_ROWS", "100000"))
EVERY = 1000
#: Seconds each step's work takes.
PAUSE = 0.1


def _put(q: sqlq.Queue, task: object, *args: object) -> int:
    return q.put(task.message(*args), tube=task.tube, ttr=task.ttr)  # type: ignore[attr-defined]


def _worker(db_url: str, log_dir: Path) -> Work:
    return Work(db_url, "--import", "tests.step_jobs", "--tube", "chaos", "--in-process",
                "--log-level", "WARNING",
                log=log_dir / f"work-{time.monotonic_ns()}.log")


def _kill(w: Work) -> None:
    os.kill(w.pid, signal.SIGKILL)
    w.wait()


def _drain(q: sqlq.Queue, db_url: str, log_dir: Path, ids: list[int]) -> None:
    with _worker(db_url, log_dir) as w:
        wait_for(lambda: all(q.peek(jid) is None for jid in ids), timeout=PATIENCE * 4,
                 what=f"the drain of every job:\n{w.text()}")
        assert w.stop() == 0


@pytest.mark.slow
@pytest.mark.timeout(0)
@pytest.mark.pg_fresh  # it makes the ledger table
def test_five_steps_under_sigkills(db_url: str, backend: str, tmp_path: Path,
                                   summary_line: Callable[[str], None]) -> None:
    seed = int(os.environ.get("SQLQ_CHAOS_SEED", str(random.randrange(2**32))))
    rng = random.Random(seed)
    side = tmp_path / "calls"
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    with sqlq.Queue(db_url) as q:
        with q.transaction() as tx:
            tx.execute("CREATE TABLE ledger (job_id BIGINT NOT NULL, step TEXT NOT NULL)")
        plain, exact = [], []
        for _ in range(JOBS):  # interleaved: the kills fall on both kinds
            plain.append(_put(q, five_steps, str(side), PAUSE))
            exact.append(_put(q, five_steps_exactly_once, str(side), PAUSE))
        kills = 0

        def progress() -> int:
            return side.stat().st_size if side.exists() else 0

        while kills < KILLS and any(q.peek(jid) is not None for jid in plain + exact):
            # A worker at work (an interpreter takes seconds to start on a loaded
            # machine: a kill by the clock would mostly hit start-ups), killed at a
            # random moment of a step: before, during or after its work.
            at = progress()
            w = _worker(db_url, log_dir)
            wait_for(lambda at=at: progress() > at  # type: ignore[misc]
                     or all(q.peek(jid) is None for jid in plain + exact),
                     timeout=PATIENCE * 2, what=f"a worker at work:\n{w.text()}")
            time.sleep(rng.uniform(0.0, 2 * PAUSE))
            _kill(w)
            kills += 1
        _drain(q, db_url, log_dir, plain + exact)
        with q.transaction() as tx:
            ledger = collections.Counter((int(j), str(s)) for j, s in
                                         tx.execute("SELECT job_id, step FROM ledger"))
    ran: collections.Counter[tuple[int, str]] = collections.Counter()
    late = []
    kept: set[tuple[int, str]] = set()
    tried = 0
    for line in side.read_text().splitlines():
        what, job_id, step = line.split()
        key = (int(job_id), step)
        if what == "tried":
            tried += 1
        elif what == "ran":
            ran[key] += 1
            if key in kept:
                late.append(key)  # its fn completed again after its record committed
        else:
            kept.add(key)
    missing = [(j, s) for j in plain for s in FIVE if ran[(j, s)] == 0]
    missing += [(j, s) for j in exact for s in FIVE if ledger[(j, s)] == 0]
    repeats = sum(n - 1 for n in ran.values() if n > 1)
    twice = [key for key, n in ledger.items() if n > 1]
    line = (f"steps chaos: {2 * JOBS} jobs x 5 steps, {kills} SIGKILLs, "
            f"at-least-once steps run {sum(ran.values())} times for {len(ran)} steps "
            f"({repeats} repeats), exactly-once steps tried {tried} times, "
            f"{sum(ledger.values())} rows for {len(ledger)} steps ({len(twice)} twice), "
            f"{len(late)} run after their record, "
            f"{len(missing)} lost; seed={seed} ({backend})")
    summary_line(line)
    print(line)
    assert not missing and not late and not twice, line
    assert repeats <= kills, line


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_a_cursor_import_resumes_after_sigkills(db_url: str, backend: str, tmp_path: Path,
                                                summary_line: Callable[[str], None]) -> None:
    kills_wanted = 5
    out = tmp_path / "rows"
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    started = time.monotonic()
    with sqlq.Queue(db_url) as q:
        jid = _put(q, import_rows, str(out), ROWS, EVERY)
        kills = 0

        def cursor() -> int:
            try:
                cursors = q.stats_job(jid)["cursors"]
            except sqlq.JobNotFound:
                return ROWS  # done (too few rows for the kills)
            return int(cursors[0]["value"]) if cursors else 0

        while kills < kills_wanted and cursor() < ROWS:
            at = cursor()
            w = _worker(db_url, log_dir)
            wait_for(lambda at=at: cursor() > at, timeout=PATIENCE * 2,  # type: ignore[misc]
                     what=f"the cursor to move past {at}:\n{w.text()}")
            time.sleep(random.uniform(0.0, 0.1))
            _kill(w)
            kills += 1
        _drain(q, db_url, log_dir, [jid])
    seen = bytearray(ROWS)
    repeats_per_kill = []
    fragments = 0
    last = -1
    for line in out.read_bytes().split(b"\n"):
        if not line:
            continue
        if not line.endswith(b";"):
            fragments += 1  # cut by a SIGKILL mid-write: the row is written again
            continue
        n = int(line[:-1])
        if n <= last:  # a run after a kill starts again at its saved cursor
            repeats_per_kill.append(last + 1 - n)
        last = n
        seen[n] = 1
    seconds = time.monotonic() - started
    line = (f"cursor import: {ROWS} rows, {kills} SIGKILLs, every row at least once: "
            f"{all(seen)}, repeated after each kill {repeats_per_kill} (at most {EVERY}: "
            f"one save's worth), {fragments} cut lines, {seconds:.1f}s ({backend})")
    summary_line(line)
    print(line)
    assert all(seen), line
    assert kills == kills_wanted, f"the import ended before {kills_wanted} kills: {line}"
    assert all(0 <= r <= EVERY for r in repeats_per_kill), line
