"""bench/'s issue 12 rows: the ratio taken per run, the verdict, the README's block, and the
pieces they measure with (the floors on sqlq's own schema, ``sqlq work`` timed by its
tasks, K greenstalk clients against sqlq-beanstalkd), on real files and processes."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from pathlib import Path

import pytest

import sqlq
from sqlq.backends.sqlite.db import PAGE_SIZE

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import readme_block  # noqa: E402
import targets  # noqa: E402
import workloads as wl  # noqa: E402
from peers import SqlqBeanstalkd  # noqa: E402
from systems import Raw, RawMinimal, Sqlq  # noqa: E402
from targets import Goal  # noqa: E402


def test_a_ratio_is_taken_per_run_then_its_median_range_and_verdict() -> None:
    goals = [
        ("g", Goal("1a", "drain", "≥ 2×", "a", "b", 2.0)),
        ("g", Goal("8a", "wake p50", "≤ 0.5 ms", "p50", None, 0.5, False, " ms")),
        ("g", Goal("7e", "schema", "(reported)", "a", "b", None)),
        ("other", Goal("9", "absent group", "≥ 1×", "x", "y", 1.0)),
    ]
    values: dict[str, list[float | None]] = {
        # run 4 failed on one side: that run gives no ratio
        "g|a": [10.0, 30.0, 20.0, None], "g|b": [5.0, 10.0, 12.0, 4.0],
        "g|p50": [0.4, 0.6, 0.45],
    }
    lines = {ln.row: ln for ln in targets.lines(goals, values, {})}
    assert set(lines) == {"1a", "8a", "7e"}
    drain = lines["1a"]
    # ratios 2, 3, 1.67: the median of the ratios (2.00), not the ratio of the medians (2.67)
    assert (drain.measured, drain.spread, drain.runs) == ("2.00×", "1.67–3.00", 3)
    assert drain.verdict == "met (not in every run)"
    assert lines["8a"].measured == "0.45 ms" and lines["8a"].verdict == "met (not in every run)"
    assert lines["7e"].verdict == "—"
    missed = targets.lines([("g", Goal("1b", "drain", "≥ 4×", "a", "b", 4.0))], values, {})
    assert missed[0].verdict == "MISSED"


def test_every_goal_names_sides_its_group_measures() -> None:
    sizes = dict.fromkeys(("t_work_n", "t_pause_n", "t_lib_n", "t_put_n", "t_drain_n",
                           "t_server_n", "t_pg_n", "wake_samples", "wake_budget"), 1)
    groups = targets.plan(sizes, {})
    assert [g.key for g in groups] == targets.GROUP_KEYS
    rows = [goal.row for g in groups for goal in g.goals]
    assert len(rows) == len(set(rows))
    for g in groups:
        assert g.sides and g.goals, g.key


def test_the_readme_block_is_replaced_and_nothing_else(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\nbefore\n{readme_block.BEGIN}\nold 1,234\n{readme_block.END}\nafter\n")
    data = {"rows": [{"metric": "put, 1 per tx", "system": "sqlq-full", "values": [3.0, 5.0, 4.0]},
                     {"metric": "put, 1 per tx", "system": "raw-full", "values": [8.0]}],
            "facts": {"sqlq source": "abc1234", "cores": 2}, "command": "make bench",
            "date": "2026-11-23T23:00:00", "elapsed_s": 600.0}
    line = targets.lines([("g", Goal("4", "put, 8 threads", "≥ 3×", "a", "b", 3.0))],
                         {"g|a": [9.0], "g|b": [2.0]}, {})
    assert readme_block.update(readme, readme_block.render(data, line))
    text = readme.read_text()
    assert text.startswith("# x\nbefore\n") and text.endswith(f"{readme_block.END}\nafter\n")
    assert "old 1,234" not in text and "abc1234" in text
    assert "| put, one per transaction (jobs/s) | 4 | – | 8 / – |" in text
    assert "| 4 | put, 8 threads | 4.50× | 4.50–4.50 | ≥ 3× | met |" in text
    plain = tmp_path / "plain.md"
    plain.write_text("no markers\n")
    assert not readme_block.update(plain, "x") and plain.read_text() == "no markers\n"


@pytest.mark.parametrize("floor", [Raw("normal"), RawMinimal("normal")], ids=lambda s: s.name)
def test_the_floors_put_and_drain(floor: Raw, tmp_path: Path) -> None:
    floor.start(tmp_path)
    c = floor.client()
    c.put(wl.body(0))
    c.put_many([wl.body(i) for i in range(1, 5)])
    c.close()
    # the floors' files have sqlq's pages: a ratio to them measures the code and schema
    with contextlib.closing(sqlite3.connect(floor.path)) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE
    if isinstance(floor, RawMinimal):
        assert floor.path.name == "minimal.db"
    else:
        # the floor writes sqlq's own rows: sqlq sees its jobs
        with sqlq.Queue(str(floor.path)) as q:
            assert q.stats_tube("bench")["current-jobs-ready"] == 5
    c = floor.client()
    seen, prev = [], None
    while (prev := c.take(prev, 0)) is not None:
        seen.append(wl.seq_of(c.body(prev)))
    c.close()
    assert seen == [0, 1, 2, 3, 4]


def test_sqlq_work_is_timed_by_its_tasks_over_every_job() -> None:
    [s] = wl.run_sqlq_work(Sqlq("normal"), 200, 2, 0.0)
    assert s.value is not None and s.value > 0
    assert s.extra["left"] == 0 and s.notes.startswith("calls 200,"), s.notes


def test_k_clients_put_then_drain_sqlq_beanstalkd_exactly_once() -> None:
    put, drain = wl.run_clients(SqlqBeanstalkd("f50"), 120, 3)
    assert put.value and put.metric == "put, 3 clients"
    assert drain.value and drain.extra["dup"] == 0 and drain.extra["lost"] == 0, drain.notes


def test_the_bench_measures_a_snapshot_that_opens_a_queue(tmp_path: Path) -> None:
    """run.py measures a copy of the source (so that edits meanwhile do not mix versions):
    the copy must be whole, migrations included, or every row fails (as it did once they
    moved to the top level). A new interpreter, as the bench's own processes are."""
    import subprocess
    code = f"""
import sys
sys.path.insert(0, {str(BENCH)!r})
import run
run.snapshot_sqlq()
import sqlq
assert sqlq.__file__.startswith(sys.path[0]), (sqlq.__file__, sys.path[0])
with sqlq.Queue(sys.argv[1]) as q:
    print(q.put(b"x"), q.reserve(timeout=0).body.decode())
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "q.db")],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (out.returncode, out.stdout.split()) == (0, ["1", "x"]), out.stderr
