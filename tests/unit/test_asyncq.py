"""AsyncQueue beyond the Queue's semantics (those run through tests/asyncbridge.py): waiting
without threads or CPU, cancellation, the loop never blocked, transactions, the iterator."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

import sqlq
from sqlq import AsyncQueue, Queue
from tests.timing import PATIENCE, soon

T = TypeVar("T")


def run(db_url: str, body: Callable[[AsyncQueue], Awaitable[T]], **options: Any) -> T:
    """Run ``body(aq)`` on a fresh event loop with an AsyncQueue on db_url."""
    async def main() -> T:
        async with AsyncQueue(db_url, durability="normal", **options) as aq:
            return await body(aq)

    return asyncio.run(main())


# -- waiting -----------------------------------------------------------------------------------


def test_waiters_of_other_tubes_and_results_are_served_in_one_pass(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        a = asyncio.create_task(aq.reserve("a", timeout=10))
        b = asyncio.create_task(aq.reserve("b", timeout=10))
        jid = await aq.put(b"x", tube="c")
        result = asyncio.create_task(aq.result(jid, timeout=10))
        await asyncio.sleep(0.1)
        await aq.put(b"b", tube="b")
        got_b = await b
        assert got_b is not None and got_b.body == b"b" and not a.done()
        job = await aq.reserve("c", timeout=0)
        assert job is not None
        await job.complete(b"done")
        assert await result == b"done"
        started = time.monotonic()
        await aq.put(b"a", tube="a", delay=0.3)  # a timer, not a commit, makes it ready
        got_a = await a
        assert got_a is not None and got_a.body == b"a"
        assert 0.25 < time.monotonic() - started < soon(0.3)

    run(db_url, body)


def test_a_burial_elsewhere_raises_in_the_waiting_result(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        jid = await aq.put(b"x", tube="t")
        waiting = asyncio.create_task(aq.result(jid, timeout=10))
        await asyncio.sleep(0.05)
        with Queue(db_url) as other:  # another connection: only its commit tells us
            job = other.reserve("t", timeout=0)
            assert job is not None
            job.bury(reason="corrupt image")
        with pytest.raises(sqlq.JobBuried, match="corrupt image"):
            await waiting

    run(db_url, body)


def test_reserve_timeout_and_result_timeout(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        started = time.monotonic()
        assert await aq.reserve("t", timeout=0.2) is None
        assert 0.15 < time.monotonic() - started < soon(0.2)
        jid = await aq.put(b"x", tube="t")
        with pytest.raises(sqlq.Timeout):
            await aq.result(jid, timeout=0.1)
        with pytest.raises(sqlq.JobNotFound):
            await aq.result(jid + 1, timeout=5)  # never issued: at once, not after 5 s

    run(db_url, body)


# -- cancellation ------------------------------------------------------------------------------


async def cancel_all(waiters: list[asyncio.Task[T]]) -> list[T]:
    """Cancel the waiters; what those that had already finished returned."""
    for w in waiters:
        w.cancel()
    done: list[T] = []
    for w in waiters:
        try:
            done.append(await w)
        except asyncio.CancelledError:
            continue
    return done


async def no_lease_left(aq: AsyncQueue, tube: str) -> bool:
    """Whether the tube's reservations all end within PATIENCE: a cancelled reserve
    releases its job in the AsyncQueue's thread, which a busy machine may run late. A
    lease truly left behind lasts its TTR (60 s), far past that."""
    deadline = time.monotonic() + PATIENCE
    while (await aq.stats_tube(tube))["current-jobs-reserved"]:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def test_cancelled_reserve_leaves_no_lease(db_url: str) -> None:
    """Cancel waiting reserves at every moment around a put: every job is either in a
    returned handle or ready again; none stays reserved by nobody."""
    async def body(aq: AsyncQueue) -> None:
        other = Queue(db_url, durability="normal")
        loop = asyncio.get_running_loop()
        returned = 0
        for i in range(60):
            waiters = [asyncio.create_task(aq.reserve("t", timeout=10)) for _ in range(3)]
            await asyncio.sleep(0.01)
            await loop.run_in_executor(None, lambda: other.put(b"x", tube="t"))
            await asyncio.sleep(i % 6 * 0.0005)
            for job in await cancel_all(waiters):
                if job is not None:
                    returned += 1
                    await job.delete()
            assert await no_lease_left(aq, "t"), f"round {i}: a lease was left behind"
            job = await aq.reserve("t", timeout=0)
            if job is not None:
                await job.delete()
        other.close()
        print(f"\n{returned} of 60 jobs were returned to a cancelled reserve's caller")

    run(db_url, body)


def test_reserve_cancelled_during_its_first_claim_gives_the_job_back(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        for _ in range(20):
            jid = await aq.put(b"x", tube="t")
            claiming = asyncio.create_task(aq.reserve("t", timeout=10))
            await asyncio.sleep(0)  # the claim is running in the AsyncQueue's thread
            claiming.cancel()
            with pytest.raises(asyncio.CancelledError):
                await claiming
            await aq.stats()  # queued behind the claim and its release: both are done
            job = await aq.peek(jid)
            assert job is not None and job.state == "ready"
            assert (job.reserves, job.releases) == (1, 1)
            await aq.delete(jid)

    run(db_url, body)


def test_cancelled_reserve_many_leaves_no_lease(db_url: str) -> None:
    """reserve_many cancelled during its first claim, or while waiting around a put:
    each batch is in a returned list or ready again, never reserved by nobody."""
    async def body(aq: AsyncQueue) -> None:
        other = Queue(db_url, durability="normal")
        loop = asyncio.get_running_loop()
        for i in range(30):
            if i % 2:
                await aq.put_many([b"x"] * 3, tube="t")
                waiters = [asyncio.create_task(aq.reserve_many(5, "t", timeout=10))]
                await asyncio.sleep(0)  # the claim is running in the AsyncQueue's thread
            else:
                waiters = [asyncio.create_task(aq.reserve_many(5, "t", timeout=10))
                           for _ in range(2)]
                await asyncio.sleep(0.01)
                await loop.run_in_executor(
                    None, lambda: other.put_many([b"x"] * 3, tube="t"))
                await asyncio.sleep(i % 6 * 0.0005)
            for jobs in await cancel_all(waiters):
                await aq.delete_many(jobs)
            assert await no_lease_left(aq, "t"), f"round {i}: a lease was left behind"
            await aq.delete_many(await aq.reserve_many(10, "t", timeout=0))
        other.close()

    run(db_url, body)


def test_cancelled_waiter_hands_its_job_to_the_next_one(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        first = asyncio.create_task(aq.reserve("t", timeout=10))
        second = asyncio.create_task(aq.reserve("t", timeout=10))
        await asyncio.sleep(0.05)
        jid = await aq.put(b"x", tube="t")
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        job = await second
        assert job is not None and job.id == jid
        assert job.reserves == 1 and job.releases == 0  # handed over, not released

    run(db_url, body)


# -- the loop is never blocked -----------------------------------------------------------------


# -- transactions and the iterator ---------------------------------------------------------------

@pytest.mark.pg_fresh  # the application's orders table
def test_transaction_commits_or_rolls_back_rows_and_jobs(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        async with aq.transaction() as tx:
            await tx.execute("CREATE TABLE orders (id INTEGER)")
        async with aq.transaction() as tx:
            await tx.execute("INSERT INTO orders VALUES (1)")
            await tx.put(b"one", tube="orders")
            await aq.put(b"joins it too", tube="orders")  # this task's calls join it
        with pytest.raises(RuntimeError):
            async with aq.transaction() as tx:
                await tx.execute("INSERT INTO orders VALUES (2)")
                await tx.put(b"two", tube="orders")
                raise RuntimeError("rolled back")
        stats = await aq.stats_tube("orders")
        assert stats["current-jobs-ready"] == 2
        async with aq.transaction() as tx:
            assert await tx.execute("SELECT id FROM orders") == [(1,)]

    run(db_url, body)


def test_other_tasks_wait_for_the_commit(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        order: list[str] = []

        async def outsider() -> None:
            await aq.put(b"outside", tube="t")
            order.append("outsider put")

        async with aq.transaction() as tx:
            await tx.put(b"inside", tube="t")
            task = asyncio.create_task(outsider())
            await asyncio.sleep(0.1)
            order.append("commit")
        await task
        assert order == ["commit", "outsider put"]

    run(db_url, body)


def test_jobs_iterator_releases_the_job_it_was_closed_on(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        await aq.put_many([b"1", b"2", b"3"], tube="t")
        seen = []
        async with contextlib.aclosing(aq.jobs(tubes="t", timeout=0)) as jobs:
            async for job in jobs:
                seen.append(job.body)
                if job.body == b"2":
                    break
                await job.delete()
        assert seen == [b"1", b"2"]
        stats = await aq.stats_tube("t")
        assert (stats["current-jobs-ready"], stats["current-jobs-reserved"]) == (2, 0)
        bodies = [job.body async for job in aq.jobs(tubes="t", timeout=0.05)
                  if await job.delete() is None]
        assert sorted(bodies) == [b"2", b"3"]

    run(db_url, body)


def test_wraps_an_open_queue_and_leaves_it_open(db_url: str) -> None:
    with Queue(db_url, durability="normal") as q:
        async def main() -> None:
            async with AsyncQueue(q) as aq:
                assert aq.queue is q
                await aq.put(b"x")
        asyncio.run(main())
        assert q.stats()["current-jobs-ready"] == 1


def test_errors_are_the_queues(db_url: str) -> None:
    async def body(aq: AsyncQueue) -> None:
        with pytest.raises(sqlq.InvalidTube):
            await aq.put(b"x", tube="-bad")
        with pytest.raises(TypeError, match="timeout"):
            await aq.reserve("t", timeout="soon")  # type: ignore[arg-type]
        with pytest.raises(sqlq.JobNotFound):
            await aq.delete(12345)

    run(db_url, body)


def test_close_ends_waiters_with_an_error(db_url: str) -> None:
    async def main() -> None:
        aq = AsyncQueue(db_url)
        waiting = asyncio.create_task(aq.reserve("t", timeout=30))
        await asyncio.sleep(0.1)
        await aq.close()
        with pytest.raises(sqlq.Error, match="closed"):
            await waiting

    asyncio.run(main())


def test_median_latency_in_process(db_url: str) -> None:
    """A put through the same AsyncQueue wakes its waiter without hearing the commit."""
    async def body(aq: AsyncQueue) -> list[float]:
        out = []
        for _ in range(50):
            waiting = asyncio.create_task(aq.reserve("t", timeout=5))
            await asyncio.sleep(0.002)
            started = time.monotonic()
            await aq.put(b"x", tube="t")
            job = await waiting
            out.append(time.monotonic() - started)
            assert job is not None
            await job.delete()
        return out

    lat = run(db_url, body)
    print(f"\nin-process put -> reserve: median {statistics.median(lat) * 1000:.2f} ms")
    assert statistics.median(lat) < 0.05
