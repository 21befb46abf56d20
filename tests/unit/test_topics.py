"""Fan-out: publish puts one copy per subscribed tube, atomically; subscribers pull."""

from __future__ import annotations

import json

import pytest

import sqlq

pytestmark = pytest.mark.both_apis  # q and fq: as a Queue, then as an AsyncQueue


def drain(q: sqlq.Queue, tube: str) -> list[bytes]:
    bodies = []
    while (job := q.reserve(tube, timeout=0)) is not None:
        bodies.append(job.body)
        job.delete()
    return bodies


def test_publish_to_two_subscribed_tubes(q: sqlq.Queue) -> None:
    q.subscribe("orders", "emails")
    q.subscribe("orders", "audit")
    ids = q.publish("orders", b"order 7 placed", priority=10, ttr=30)
    assert len(ids) == 2 and len(set(ids)) == 2
    audit, emails = (q.peek(i) for i in ids)  # ids follow tube-name order
    assert audit is not None and emails is not None
    assert (audit.tube, emails.tube) == ("audit", "emails")
    assert audit.body == emails.body == b"order 7 placed"
    assert (emails.priority, emails.ttr) == (10, 30.0)
    assert drain(q, "emails") == [b"order 7 placed"]
    assert drain(q, "audit") == [b"order 7 placed"]


def test_publish_without_subscribers_puts_nothing(q: sqlq.Queue) -> None:
    assert q.publish("nobody-listens", b"x") == []
    assert q.stats()["total-jobs"] == 0


def test_publish_is_one_transaction(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal", max_job_size=4) as q:
        q.subscribe("t", "a")
        q.subscribe("t", "b")
        with pytest.raises(sqlq.JobTooBig):
            q.publish("t", b"too big")
        assert q.stats()["total-jobs"] == 0
        with pytest.raises(ValueError):
            q.publish("t", b"x", delay=-1)
        assert q.stats()["total-jobs"] == 0


def test_subscribe_is_idempotent_and_unsubscribe_says_if_it_was(q: sqlq.Queue) -> None:
    q.subscribe("orders", "emails")
    q.subscribe("orders", "emails")
    q.subscribe("orders", "audit")
    q.subscribe("refunds", "audit")
    assert q.subscriptions() == [("orders", "audit"), ("orders", "emails"), ("refunds", "audit")]
    assert q.subscriptions("orders") == [("orders", "audit"), ("orders", "emails")]
    assert q.unsubscribe("orders", "emails") is True
    assert q.unsubscribe("orders", "emails") is False
    assert q.publish("orders", b"x") != [] and len(q.publish("orders", b"y")) == 1


def test_unsubscribe_keeps_jobs_already_published(q: sqlq.Queue) -> None:
    q.subscribe("orders", "emails")
    q.publish("orders", b"before")
    q.unsubscribe("orders", "emails")
    q.publish("orders", b"after")
    assert drain(q, "emails") == [b"before"]


def test_subscribed_tubes_are_listed_and_counted(q: sqlq.Queue) -> None:
    assert q.stats()["current-topics"] == 0
    q.subscribe("orders", "emails")
    q.subscribe("orders", "audit")
    q.subscribe("refunds", "audit")
    assert q.tubes() == ["audit", "default", "emails"]  # listed while still empty
    stats = q.stats()
    assert stats["current-topics"] == 2 and stats["current-tubes"] == 3
    assert q.stats_tube("emails")["current-jobs-ready"] == 0
    q.publish("refunds", b"r")
    assert q.stats_tube("audit")["current-jobs-ready"] == 1


def test_topic_names_follow_tube_rules(q: sqlq.Queue) -> None:
    with pytest.raises(sqlq.InvalidTube, match="topic"):
        q.subscribe("-bad", "emails")
    with pytest.raises(sqlq.InvalidTube, match="topic"):
        q.publish("has space", b"x")
    with pytest.raises(sqlq.InvalidTube, match="tube"):
        q.subscribe("orders", "")
    with pytest.raises(TypeError, match="topic"):
        q.subscriptions(7)  # type: ignore[arg-type]


def test_publish_with_unique_key_is_idempotent_per_tube(q: sqlq.Queue) -> None:
    q.subscribe("orders", "emails")
    q.subscribe("orders", "audit")
    first = q.publish("orders", b"order 7", unique_key="order-7")
    assert q.publish("orders", b"order 7 again", unique_key="order-7") == first
    assert q.stats()["total-jobs"] == 2


def test_delayed_publish(fq: sqlq.Queue) -> None:
    fq.subscribe("t", "a")
    (jid,) = fq.publish("t", b"later", delay=30)
    job = fq.peek(jid)
    assert job is not None and job.state == "delayed"


def test_cli_subscribe_publish_unsubscribe(db_url: str) -> None:
    from click.testing import CliRunner

    from sqlq.cli import cli

    def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
        r = CliRunner().invoke(cli, ["--db", db_url, *args], input=input)
        return r.exit_code, r.stdout, r.stderr

    assert run("publish", "orders", "nobody")[:2] == (0, "")
    assert run("subscribe", "orders", "emails")[0] == 0
    assert run("subscribe", "orders", "audit")[0] == 0
    code, out, _ = run("publish", "orders", "order 7", "--priority", "5")
    assert code == 0 and len(out.split()) == 2
    code, out, _ = run("publish", "orders", "-", "--json", input="from stdin")
    assert code == 0 and [set(json.loads(line)) for line in out.splitlines()] == [{"id"}] * 2
    assert run("subscriptions")[1] == "orders audit\norders emails\n"
    assert run("tubes")[1] == "audit\ndefault\nemails\n"
    assert run("unsubscribe", "orders", "audit")[0] == 0
    code, _, err = run("unsubscribe", "orders", "audit")
    assert code == 3 and "not subscribed" in err
    assert run("subscribe", "-bad", "emails")[0] == 2
    with sqlq.Queue(db_url) as q:
        assert drain(q, "emails") == [b"order 7", b"from stdin"]
        assert drain(q, "audit") == [b"order 7", b"from stdin"]
