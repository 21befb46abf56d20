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
* A cursor import (``import_rows``): SQLQ_STEPS_IMPORT_ROWS rows (30,000 by default;
  docs/performance.md's figure is of a run with 1,000,000), a cursor saved every 1,000,
  its worker SIGKILLed 5 times while the cursor moves. Each run stops at a gate (a
  file naming a row, inside the batch after its first save) and is killed there or a
  random moment after the gate moved on, short of the end: an event, not the clock,
  so the kills land before the import ends however late the test gets a core on a
  loaded machine (the clock let a run finish it first). Proven: every
  row processed at least once, and each kill repeated at most the rows since the
  cursor last saved (at most 1,000).

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
ROWS = int(os.environ.get("SQLQ_STEPS_IMPORT_ROWS", "30000"))
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
    """One worker runs what is left (the others were killed): a job still there is run
    by it, so it was at work (its SIGTERM handler in place) before it is stopped. With
    nothing left, none: a SIGTERM while it starts would kill it (status -15)."""
    if all(q.peek(jid) is None for jid in ids):
        return
    with _worker(db_url, log_dir) as w:
        wait_for(lambda: all(q.peek(jid) is None for jid in ids), timeout=PATIENCE * 4,
                 what=f"the drain of every job:\n{w.text()}")
        assert w.stop() == 0


def _set_gate(gate: Path, row: int) -> None:
    """Let the import go up to ``row`` (excluded); the file replaced whole, never read half."""
    part = gate.with_suffix(".part")
    part.write_text(str(row))
    part.replace(gate)


def _last_row(path: Path) -> int:
    """The last whole row an import wrote (from the file's tail)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 32))
            whole = [line for line in f.read().split(b"\n") if line.endswith(b";")]
    except FileNotFoundError:
        return -1
    return int(whole[-1][:-1]) if whole else -1


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
    seed = int(os.environ.get("SQLQ_CHAOS_SEED", str(random.randrange(2**32))))
    rng = random.Random(seed)
    # Each run may go up to a random row at most one span past its start: after the
    # last kill the cursor is still short of ROWS, so every kill hits a running import.
    span = ROWS // (kills_wanted + 1)
    assert span >= 3 * EVERY, f"SQLQ_STEPS_IMPORT_ROWS={ROWS}: too few for {kills_wanted} kills"
    out = tmp_path / "rows"
    gate = tmp_path / "gate"
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    started = time.monotonic()
    with sqlq.Queue(db_url) as q:
        jid = _put(q, import_rows, str(out), ROWS, EVERY, str(gate))

        def cursor() -> int:
            cursors = q.stats_job(jid)["cursors"]
            return int(cursors[0]["value"]) if cursors else 0

        running = 0  # kills that fell while the import ran (the rest: waiting at its gate)
        for _ in range(kills_wanted):
            # A worker at work: past one save, waiting at a gate inside the next batch
            # (an event however late the test gets a core), then killed either there
            # or a random moment after the gate moved on (while it runs, mostly).
            at = cursor()
            limit = at + EVERY + rng.randint(1, EVERY - 1)
            _set_gate(gate, limit)
            w = _worker(db_url, log_dir)
            wait_for(lambda limit=limit: _last_row(out) + 1 >= limit,  # type: ignore[misc]
                     timeout=PATIENCE * 2, what=f"the import to reach row {limit}:\n{w.text()}")
            if rng.random() < 0.5:
                limit += rng.randint(EVERY, span - 2 * EVERY)
                _set_gate(gate, limit)
                time.sleep(rng.uniform(0.0, 0.02))
            _kill(w)
            running += _last_row(out) + 1 != limit
        kills = kills_wanted
        gate.unlink()  # the rest in one run
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
    line = (f"cursor import: {ROWS} rows, {kills} SIGKILLs ({running} while it ran), "
            f"every row at least once: {all(seen)}, repeated after each kill "
            f"{repeats_per_kill} (at most {EVERY}: one save's worth), {fragments} cut "
            f"lines, {seconds:.1f}s; seed={seed} ({backend})")
    summary_line(line)
    print(line)
    assert all(seen), line
    assert Path(f"{out}.done").exists(), line
    assert all(0 <= r <= EVERY for r in repeats_per_kill), line
    assert len(repeats_per_kill) <= kills, line
