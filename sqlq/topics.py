"""Fan-out: ``publish`` puts one copy of a job into every tube subscribed to a topic.

Subscriptions are rows in the file, not live connections, so fan-out is pull:
a subscriber that was down finds every message waiting in its tube. Topic
names follow the tube-name rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import apsw

from . import store
from .model import (
    check_body,
    check_put_options,
    check_tube,
)

if TYPE_CHECKING:
    from .queue import Queue


def subscribe(queue: Queue, topic: str, tube: str) -> None:
    """Make publish(topic) fill tube; subscribing twice changes nothing."""
    check_tube(topic, "topic")
    check_tube(tube)
    queue._db.write(lambda c: store.subscribe(c, topic, tube))


def unsubscribe(queue: Queue, topic: str, tube: str) -> bool:
    """Stop filling tube from topic; True if it was subscribed. Jobs already put stay."""
    check_tube(topic, "topic")
    check_tube(tube)
    return queue._db.write(lambda c: store.unsubscribe(c, topic, tube))


def subscriptions(queue: Queue, topic: str | None) -> list[tuple[str, str]]:
    """(topic, tube) pairs, sorted; only topic's when given."""
    if topic is not None:
        check_tube(topic, "topic")
    return queue._db.read(lambda c: store.list_subscriptions(c, topic))


def publish(queue: Queue, topic: str, body: bytes | str, *, priority: int, delay: float,
            ttr: float, unique_key: str | None) -> list[int]:
    """Put one copy of body into each tube subscribed to topic, all in one transaction.

    Returns the new ids in tube-name order (with unique_key, a tube that holds a
    live job with that key contributes that job's id). No subscriber: [].
    """
    check_tube(topic, "topic")
    data = check_body(body, queue.max_job_size)
    delay_ms, ttr_ms = check_put_options(priority, delay, ttr, unique_key)
    clock = queue._clock

    def fill(c: apsw.Connection) -> list[tuple[str, int]]:
        now = clock()
        return [(tube, store.insert_job(c, now, tube, priority, delay_ms, ttr_ms, data,
                                        unique_key))
                for tube in store.topic_tubes(c, topic)]

    put = queue._db.write(fill)
    for tube, _ in put:
        queue._counts["total-jobs", tube] += 1
    return [job_id for _, job_id in put]
