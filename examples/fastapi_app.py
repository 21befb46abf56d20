"""A FastAPI app that enqueues a task on each request and awaits its result.

    pip install /path/to/sqlq fastapi uvicorn   # a checkout of sqlq (not on PyPI yet)
    export SQLQ_DB=$PWD/fastapi_app.db
    sqlq work --import fastapi_app --concurrency 50 &      # the workers (async def tasks)
    uvicorn fastapi_app:app                                # the web app
    curl -X POST 'localhost:8000/thumbnails?url=https://example.com/cat.jpg'

The lifespan hook opens one AsyncQueue for the app and closes it at shutdown.
Handlers await it: a put runs in the AsyncQueue's thread, and ``result`` waits on
the file's wakeup notifications without holding a thread, however many requests
wait at once. The same module declares the task, so that ``sqlq work --import
fastapi_app`` finds it (the worker never starts the web app).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request

import sqlq

q = sqlq.Queue(os.environ.setdefault("SQLQ_DB", os.path.abspath("fastapi_app.db")))


@q.task(tube="thumbnails", ttr=30, retries=2)
async def make_thumbnail(url: str) -> dict[str, str]:
    """The work a request hands off: here a pretend download and resize."""
    await asyncio.sleep(0.01)
    return {"url": url, "thumbnail": url.rsplit("/", 1)[-1] + ".thumb.jpg"}


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with sqlq.AsyncQueue(q) as aq:  # opened at startup, closed at shutdown
        app.state.aq = aq
        yield


app = FastAPI(lifespan=lifespan)


@app.post("/thumbnails")
async def thumbnail(url: str, request: Request) -> dict[str, object]:
    """Enqueue the work, then wait (without a thread) for a worker's result."""
    aq: sqlq.AsyncQueue = request.app.state.aq
    job_id = await aq.put_task(make_thumbnail, url)
    try:
        result = await aq.result(job_id, timeout=10)
    except sqlq.Timeout:
        raise HTTPException(504, f"job {job_id} is still queued") from None
    except sqlq.JobBuried as exc:
        raise HTTPException(502, f"job {job_id} failed: {exc.reason}") from None
    return {"job": job_id, **json.loads(result)}


@app.post("/thumbnails/later")
async def thumbnail_later(url: str, request: Request) -> dict[str, int]:
    """Enqueue only: the client asks for the result later."""
    return {"job": await request.app.state.aq.put_task(make_thumbnail, url)}


@app.get("/jobs/{job_id}")
async def job_result(job_id: int, request: Request) -> dict[str, object]:
    """The result if there is one yet (``timeout=0`` only looks)."""
    try:
        result = await request.app.state.aq.result(job_id, timeout=0)
    except sqlq.Timeout:
        return {"job": job_id, "state": "pending"}
    except sqlq.JobNotFound:
        raise HTTPException(404, f"no job {job_id}") from None
    return {"job": job_id, "state": "done", **json.loads(result)}
