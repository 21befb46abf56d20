"""Per-tube reads of a tube with no jobs: emptied by a worker, or never used but valid.

A monitor that reads a tube's counters, peeks or kicks must not crash because a
worker just drained the tube: in the library and the CLI such a tube has all-zero
counters and nothing to peek or kick. (The beanstalkd server keeps the protocol's
NOT_FOUND for tubes it does not know: tests/integration/test_server_fuzz.py compares it with
beanstalkd.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import sqlq
from sqlq.cli import cli

pytestmark = pytest.mark.both_apis  # q and fq: as a Queue, then as an AsyncQueue

COUNTERS = ("current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
            "current-jobs-delayed", "current-jobs-buried", "pause", "pause-time-left")


def _drain(q: sqlq.Queue, tube: str) -> None:
    q.put(b"x", tube=tube)
    job = q.reserve(tubes=tube, timeout=0)
    assert job is not None
    job.delete()


@pytest.mark.parametrize("tube", ["emptied", "never-used"])
def test_library_reads_of_an_empty_tube(q: sqlq.Queue, tube: str) -> None:
    if tube == "emptied":
        _drain(q, tube)
    stats = q.stats_tube(tube)
    assert stats["name"] == tube
    assert {k: stats[k] for k in COUNTERS} == dict.fromkeys(COUNTERS, 0)
    assert stats["cmd-delete"] == (1 if tube == "emptied" else 0)
    assert (q.peek_ready(tube), q.peek_delayed(tube), q.peek_buried(tube)) == (None,) * 3
    assert q.kick(10, tube=tube) == 0
    assert tube not in q.tubes()  # a tube is listed while it holds, pauses or subscribes
    q.pause_tube(tube, 60)
    assert q.stats_tube(tube)["pause"] == 60 and tube in q.tubes()
    q.pause_tube(tube, 0)
    assert tube not in q.tubes()


@pytest.mark.face
def test_an_invalid_tube_name_is_still_an_error(q: sqlq.Queue) -> None:
    with pytest.raises(sqlq.InvalidTube, match="invalid tube"):
        q.stats_tube("-bad")


def test_cli_reads_of_an_emptied_tube(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    with sqlq.Queue(db, durability="normal") as q:
        _drain(q, "t")

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(cli, ["--db", db, *args])
        assert result.exit_code == code, (result.output, result.exception)
        return result.stdout

    stats = json.loads(run("stats", "--tube", "t", "--json"))
    assert {k: stats[k] for k in COUNTERS} == dict.fromkeys(COUNTERS, 0)
    assert "current-jobs-ready" in run("stats", "--tube", "t")
    run("peek", "--ready", "--tube", "t", code=3)  # no job to show is "not found", exit 3
    assert json.loads(run("kick", "5", "--tube", "t", "--json")) == {"kicked": 0}
    run("pause", "t", "1m")
    assert "t" in run("tubes").split()
