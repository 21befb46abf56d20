"""Job dependencies on the command line (issue 24): ``put``/``put-many --after``, what
``peek`` shows of a waiting job and of its parents, ``stats`` with current-jobs-waiting;
in-process through click's CliRunner, on both backends."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner, Result

import sqlq
from sqlq.cli import cli


def run(db: str, *args: str, input: str | None = None, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["--db", db, *args], input=input)
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    if code:
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result


def put(db: str, *args: str) -> int:
    return int(run(db, "put", *args).stdout)


def state(db: str, job_id: int) -> str:
    return str(json.loads(run(db, "stats", "--job", str(job_id), "--json").stdout)["state"])


def test_put_after_repeated_and_comma_lists_waits_for_every_parent(db_url: str) -> None:
    a, b, c = (put(db_url, x) for x in "abc")
    child = put(db_url, "child", "--after", str(a), "--after", f"{b},{c}")
    assert state(db_url, child) == "waiting"
    with sqlq.Queue(db_url) as q:
        assert q.links(child).parents == [a, b, c]
    for parent in (a, b):
        run(db_url, "delete", str(parent))
    assert state(db_url, child) == "waiting"
    run(db_url, "delete", str(c))
    assert state(db_url, child) == "ready"


def test_put_after_an_id_never_issued_exits_3_and_puts_nothing(db_url: str) -> None:
    a = put(db_url, "a")
    result = run(db_url, "put", "orphan", "--after", str(a), "--after", "99", code=3)
    assert "99" in result.stderr
    result = run(db_url, "put-many", "--after", "77", input="x\ny\n", code=3)
    assert "77" in result.stderr
    stats = json.loads(run(db_url, "stats", "--json").stdout)
    assert stats["total-jobs"] == 1 and stats["current-jobs-waiting"] == 0


@pytest.mark.face
@pytest.mark.parametrize("bad", ["0", "x", "1,,y", "-3", ""])
def test_put_after_a_malformed_id_is_a_usage_error(db_url: str, bad: str) -> None:
    result = run(db_url, "put", "x", "--after", bad, code=2)
    assert "--after" in result.stderr


def test_put_many_after_makes_every_job_wait_for_the_same_parents(db_url: str) -> None:
    a, b = put(db_url, "a"), put(db_url, "b")
    out = run(db_url, "put-many", "--tube", "kids", "--after", f"{a} {b}", input="1\n2\n3\n")
    ids = [int(i) for i in out.stdout.split()]
    assert [state(db_url, i) for i in ids] == ["waiting"] * 3
    stats = json.loads(run(db_url, "stats", "--tube", "kids", "--json").stdout)
    assert stats["current-jobs-waiting"] == 3 and stats["current-jobs-ready"] == 0
    text = run(db_url, "stats", "--tube", "kids").stdout
    assert "current-jobs-waiting:" in text
    run(db_url, "delete", str(a))
    run(db_url, "delete", str(b))
    assert [state(db_url, i) for i in ids] == ["ready"] * 3


def test_peek_shows_a_waiting_job_its_parents_and_a_parent_its_children(db_url: str) -> None:
    a, b = put(db_url, "a"), put(db_url, "b")
    child = put(db_url, "child", "--after", f"{a},{b}")
    record = json.loads(run(db_url, "peek", str(child), "--json").stdout)
    assert record["state"] == "waiting"
    assert (record["parents"], record["children"]) == ([a, b], [])
    parent = json.loads(run(db_url, "peek", str(a), "--json").stdout)
    assert (parent["state"], parent["parents"], parent["children"]) == ("ready", [], [child])
    text = run(db_url, "peek", str(child)).stdout
    assert "state:" in text and "waiting" in text
    assert re.search(rf"^waits for: +{a} {b}$", text, re.M) and "waited on by" not in text
    assert re.search(rf"^waited on by: +{child}$", run(db_url, "peek", str(a)).stdout, re.M)
    plain = run(db_url, "peek", str(put(db_url, "plain"))).stdout
    assert "waits for" not in plain and "waited on by" not in plain


def test_peek_lists_many_children_in_full_only_in_json(db_url: str) -> None:
    a = put(db_url, "a")
    ids = [int(i) for i in run(db_url, "put-many", "--after", str(a),
                               input="\n".join(map(str, range(25)))).stdout.split()]
    assert json.loads(run(db_url, "peek", str(a), "--json").stdout)["children"] == ids
    text = run(db_url, "peek", str(a)).stdout
    assert " ".join(map(str, ids[:20])) + " ... (5 more)" in text
