"""Commands on topics: publish a job to every subscribed tube, and the subscriptions."""

from __future__ import annotations

import click

import sqlq

from .group import cli
from .options import (
    TUBE,
    delay_option,
    json_option,
    on_conflict,
    priority_option,
    queue_from_ctx,
    read_body,
    replace_option,
    ttr_option,
)
from .output import emit


@cli.command()
@click.argument("topic", type=TUBE, metavar="TOPIC")
@click.argument("body", required=False)
@priority_option(1024)
@delay_option
@ttr_option
@click.option("--unique-key", "-u", help="A tube holding a live job with this key gets no copy.")
@replace_option
@json_option
@click.pass_context
def publish(ctx: click.Context, topic: str, body: str | None, priority: int, delay: float,
            ttr: float, unique_key: str | None, replace: bool, as_json: bool) -> None:
    """Put a copy of a job into every tube subscribed to TOPIC; print the ids.

    All copies are put in one transaction. No subscriber: nothing is put, and nothing
    printed. BODY '-' (or none, with a pipe on stdin) reads it from stdin.

    Example:

    \b
        sqlq subscribe orders emails && sqlq publish orders '{"order": 7}'
    """
    ids = queue_from_ctx(ctx).publish(topic, read_body(body), priority=priority, delay=delay,
                                      ttr=ttr, unique_key=unique_key,
                                      on_conflict=on_conflict(replace))
    emit([{"id": i} for i in ids], as_json, text="\n".join(map(str, ids)) if ids else None)


@cli.command()
@click.argument("topic", type=TUBE, metavar="TOPIC")
@click.argument("tube", type=TUBE)
@json_option
@click.pass_context
def subscribe(ctx: click.Context, topic: str, tube: str, as_json: bool) -> None:
    """Subscribe TUBE to TOPIC: every publish to TOPIC puts a copy into TUBE.

    Subscriptions live in the file: the tube fills while its workers are down.

    Example:

    \b
        sqlq subscribe orders audit
    """
    queue_from_ctx(ctx).subscribe(topic, tube)
    emit({"topic": topic, "tube": tube, "subscribed": True}, as_json,
         text=f"subscribed tube {tube} to topic {topic}")


@cli.command()
@click.argument("topic", type=TUBE, metavar="TOPIC")
@click.argument("tube", type=TUBE)
@json_option
@click.pass_context
def unsubscribe(ctx: click.Context, topic: str, tube: str, as_json: bool) -> None:
    """Stop copying TOPIC into TUBE (exit 3 if it was not subscribed).

    Jobs already in the tube stay there.

    Example:

    \b
        sqlq unsubscribe orders audit
    """
    if not queue_from_ctx(ctx, create=False).unsubscribe(topic, tube):
        raise sqlq.JobNotFound(f"tube {tube} is not subscribed to topic {topic}")
    emit({"topic": topic, "tube": tube, "subscribed": False}, as_json,
         text=f"unsubscribed tube {tube} from topic {topic}")


@cli.command()
@click.argument("topic", type=TUBE, required=False, metavar="[TOPIC]")
@json_option
@click.pass_context
def subscriptions(ctx: click.Context, topic: str | None, as_json: bool) -> None:
    """List subscriptions as "TOPIC TUBE" lines (only TOPIC's when given).

    Example:

    \b
        sqlq subscriptions orders --json
    """
    pairs = queue_from_ctx(ctx, create=False).subscriptions(topic)
    emit([{"topic": t, "tube": u} for t, u in pairs], as_json,
         text="\n".join(f"{t} {u}" for t, u in pairs) or None)
