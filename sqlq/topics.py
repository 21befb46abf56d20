"""Fan-out: ``publish`` puts one copy of a job into every tube subscribed to a topic.

Subscriptions are rows in the database, not live connections, so fan-out is pull:
a subscriber that was down finds every message waiting in its tube. Topic
names follow the tube-name rules. The publish itself is a put (``Verbs.publish``,
``Store.publish``): under tracing, one PRODUCER span whose context every copy carries.
"""

from __future__ import annotations

from .backends import Backend
from .model import check_tube


def subscribe(backend: Backend, topic: str, tube: str) -> None:
    """Make publish(topic) fill tube; subscribing twice changes nothing."""
    check_tube(topic, "topic")
    check_tube(tube)
    backend.write(lambda c: backend.store.topics.subscribe(c, topic, tube))


def unsubscribe(backend: Backend, topic: str, tube: str) -> bool:
    """Stop filling tube from topic; True if it was subscribed. Jobs already put stay."""
    check_tube(topic, "topic")
    check_tube(tube)
    return backend.write(lambda c: backend.store.topics.unsubscribe(c, topic, tube))


def subscriptions(backend: Backend, topic: str | None) -> list[tuple[str, str]]:
    """(topic, tube) pairs, sorted; only topic's when given."""
    if topic is not None:
        check_tube(topic, "topic")
    return backend.read(lambda c: backend.store.topics.list_subscriptions(c, topic))
