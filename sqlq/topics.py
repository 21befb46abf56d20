"""Fan-out: ``publish`` puts one copy of a job into every tube subscribed to a topic.

Subscriptions are rows in the database, not live connections, so fan-out is pull:
a subscriber that was down finds every message waiting in its tube. Topic
names follow the tube-name rules. Under tracing, a publish is one PRODUCER span whose
context every copy carries (:func:`sqlq.tracing.publish`).
"""

from __future__ import annotations

from collections.abc import Callable

from . import tracing
from .backends import Backend
from .backends.base import Conn
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


def publish(backend: Backend, clock: Callable[[], int], topic: str, body: bytes, *,
            priority: int, delay_ms: int, ttr_ms: int, unique_key: str | None
            ) -> list[tuple[str, int]]:
    """Put one copy of body into each tube subscribed to topic, all in one transaction.

    Returns (tube, id) in tube-name order (with unique_key, a tube that holds a
    live job with that key contributes that job's id). No subscriber: [].
    """
    store = backend.store

    def fill(c: Conn, header: str | None = None) -> list[tuple[str, int]]:
        now = clock()
        put, fresh = [], []
        for tube in store.topics.topic_tubes(c, topic):
            # A tube holding a live job with unique_key gives its id: that job keeps its
            # own trace (the header goes only on copies this publish inserts).
            held = header is not None and unique_key is not None \
                and store.jobs.unique_job_id(c, tube, unique_key) is not None
            job_id = store.jobs.insert_job(c, now, tube, priority, delay_ms, ttr_ms, body,
                                      unique_key)
            put.append((tube, job_id))
            if header is not None and not held:
                fresh.append(job_id)
        if fresh:
            assert header is not None
            store.jobs.set_trace(c, fresh, header)
        return put

    if tracing.INSTALLED and tracing.active():  # one span, its trace on every copy
        return tracing.publish(backend.write_shared, fill, topic, priority, len(body))
    return backend.write_shared(fill)
