"""Fan-out: ``publish`` puts one copy of a job into every tube subscribed to a topic.

Subscriptions are rows in the database, not live connections, so fan-out is pull:
a subscriber that was down finds every message waiting in its tube. Topic
names follow the tube-name rules.
"""

from __future__ import annotations

from collections.abc import Callable

from .backends import Backend
from .backends.base import Conn
from .model import check_tube


def subscribe(backend: Backend, topic: str, tube: str) -> None:
    """Make publish(topic) fill tube; subscribing twice changes nothing."""
    check_tube(topic, "topic")
    check_tube(tube)
    backend.write(lambda c: backend.store.subscribe(c, topic, tube))


def unsubscribe(backend: Backend, topic: str, tube: str) -> bool:
    """Stop filling tube from topic; True if it was subscribed. Jobs already put stay."""
    check_tube(topic, "topic")
    check_tube(tube)
    return backend.write(lambda c: backend.store.unsubscribe(c, topic, tube))


def subscriptions(backend: Backend, topic: str | None) -> list[tuple[str, str]]:
    """(topic, tube) pairs, sorted; only topic's when given."""
    if topic is not None:
        check_tube(topic, "topic")
    return backend.read(lambda c: backend.store.list_subscriptions(c, topic))


def publish(backend: Backend, clock: Callable[[], int], topic: str, body: bytes, *,
            priority: int, delay_ms: int, ttr_ms: int, unique_key: str | None
            ) -> list[tuple[str, int]]:
    """Put one copy of body into each tube subscribed to topic, all in one transaction.

    Returns (tube, id) in tube-name order (with unique_key, a tube that holds a
    live job with that key contributes that job's id). No subscriber: [].
    """
    store = backend.store

    def fill(c: Conn) -> list[tuple[str, int]]:
        now = clock()
        return [(tube, store.insert_job(c, now, tube, priority, delay_ms, ttr_ms, body,
                                        unique_key))
                for tube in store.topic_tubes(c, topic)]

    return backend.write_shared(fill)
