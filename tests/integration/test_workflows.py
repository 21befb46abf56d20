"""Workflows run to the end by a real ``sqlq work`` process: a chain's steps one after
another, a chord's final task after its parts, reading their results."""

from __future__ import annotations

import json
from pathlib import Path

import sqlq
from tests import flow_jobs
from tests.workers import Work


def test_a_worker_runs_a_chain_in_order_and_a_chord_to_its_final_task(
        db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    with sqlq.Queue(db_url, durability="normal") as q:
        chain = sqlq.chain(q, *(flow_jobs.step.s(str(log), name) for name in "abcd"))
        texts = ["one", "two words", "three more words", "and four more words"]
        *parts, final = sqlq.chord(q, [flow_jobs.count.s(t) for t in texts],
                                   flow_jobs.total, "words")
        assert q.stats()["current-jobs-waiting"] == 3 + 1
        # One burst worker: each step it finishes releases the next in the same commit,
        # so it finds every step ready in turn and exits only when all have run.
        with Work(db_url, "--import", "tests.flow_jobs", "--tube", "flow", "--burst") as w:
            assert w.wait() == 0, w.text()
        assert json.loads(q.result(final, timeout=0)) == "words: 10"
        assert log.read_text().split() == ["a", "b", "c", "d"]
        assert [q.peek(i) for i in chain] == [None] * 4
        assert [json.loads(q.result(i, timeout=0)) for i in parts] == [1, 2, 3, 4]
        stats = q.stats()
        assert stats["current-jobs-waiting"] == stats["current-jobs-ready"] == 0
