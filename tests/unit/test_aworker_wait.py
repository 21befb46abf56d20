"""The async worker's wait for a running job to end, at the turn where one just ended."""
from __future__ import annotations

import asyncio

from sqlq.work.aworker import first_finished


async def _noop() -> None:
    return None


def test_a_task_that_ended_before_the_wait_started_ends_the_wait() -> None:
    """The race CI met: the set is non-empty when the worker looks, and empty one loop turn
    later when ``asyncio.wait`` starts, because the ended task's done callback removed it.
    Waiting on the set itself raised ``ValueError: Set of Tasks/Futures is empty``."""

    async def main() -> bool:
        running: set[asyncio.Task[None]] = set()
        task = asyncio.get_running_loop().create_task(_noop())
        running.add(task)
        task.add_done_callback(running.discard)
        await asyncio.sleep(0)  # the task ends; its discard is queued, not yet run
        assert task.done() and running == {task}
        waiting = asyncio.ensure_future(first_finished(running, 5.0))  # starts a turn later
        done, pending = await asyncio.wait_for(waiting, 5.0)
        return not running and done == {task} and not pending

    assert asyncio.run(main())


def test_the_wait_still_ends_on_its_timeout_while_jobs_run() -> None:
    async def main() -> tuple[int, int]:
        running = {asyncio.get_running_loop().create_task(asyncio.sleep(60))}
        done, pending = await first_finished(running, 0.01)
        for task in pending:
            task.cancel()
        return len(done), len(pending)

    assert asyncio.run(main()) == (0, 1)
