"""The PostgreSQL systems: procrastinate, pgqueuer, a raw psycopg floor, and sqlq-pg.

Same interface as systems.py (``System`` / ``Client``). Each system gets its own
throwaway PostgreSQL server (``tests/pgserver.py``), started on first use and
stopped when the bench exits, with **durable** settings (fsync, synchronous
commit and full-page writes on): these rows measure real commits, as the ``full``
SQLite rows do. Every run gets a fresh database on that server (created, then
CHECKPOINTed so that no earlier run's dirty pages are written during this one,
and dropped afterwards). One server per system keeps the idle workload honest:
the server CPU charged to a system is that of its own server only.

procrastinate and pgqueuer are asyncio libraries; their clients run their
coroutines on an event loop of their own (``AsyncClient``), one call at a time,
so the workloads stay the same synchronous loops as for every other system.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import select
import sys
import time
import uuid
from collections import deque
from collections.abc import Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from systems import TUBE, Client, SqlqClient, System, _dist_version, sqlq_missing

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
POLL_CAP_S = 5.0  # the raw floor's fallback look when no notification came


def _pgserver() -> Any:
    """tests/pgserver.py, loaded by path: the bench venv has no ``tests`` package of ours."""
    mod = sys.modules.get("sqlq_tests_pgserver")
    if mod is None:
        spec = importlib.util.spec_from_file_location("sqlq_tests_pgserver",
                                                      ROOT / "tests" / "pgserver.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


class PgSystem(System):
    """A system on its own durable PostgreSQL server; each run gets a fresh database."""

    durability = "pg"
    needs: tuple[str, ...] = ("psycopg",)  # the Python packages it imports: library, driver
    version_note = ""
    _db_names = itertools.count(1)

    def __init__(self) -> None:
        self.server: Any = None
        self.db = ""
        self.url = ""

    def unavailable(self) -> str | None:
        for dist in self.needs:
            if importlib.util.find_spec(dist) is None:
                return f"{dist} is not installed in .venv-bench"
        pg = _pgserver()
        try:
            pg.find_bindir()
        except pg.PgUnavailable as exc:
            return str(exc)
        return None

    def version(self) -> str:
        """The library via its driver, and the server: "pgqueuer 1.6.0 via asyncpg 0.32.0 (…)"."""
        libs = " via ".join(f"{dist} {_dist_version(dist)}" for dist in self.needs)
        return f"{libs}{self.version_note} ({self.server_version()})"

    def server_version(self) -> str:
        pg = _pgserver()
        return str(pg.PgServer().version()) if self.server is None else str(self.server.version())

    def start(self, workdir: Path) -> None:
        super().start(workdir)
        if self.server is None:
            self.server = _pgserver().PgServer(durable=True).start()
        self.db = f"bench_{next(self._db_names)}"
        self.url = self.server.create_database(self.db)
        self.install(self.url)
        self.server.psql("CHECKPOINT")

    def install(self, url: str) -> None:
        """Create the system's schema in the fresh database."""

    def stop(self) -> None:
        if self.server is not None and self.db:
            self.server.drop_database(self.db)
            self.db = ""

    def server_pids(self) -> list[int]:
        return list(self.server.pids()) if self.server is not None else []


class AsyncClient(Client):
    """Runs an asyncio library's coroutines on a private loop, one call at a time.

    The loop only runs inside ``run()``; notifications that arrive in between wait
    in the socket and are handled at the next call, as in any single-threaded
    asyncio worker that is busy with a job.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    async def wait_event(self, event: asyncio.Event, timeout: float) -> bool:
        """True when ``event`` was set within ``timeout`` seconds."""
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    def close(self) -> None:
        for task in asyncio.all_tasks(self.loop):
            task.cancel()
            try:
                self.loop.run_until_complete(task)
            except BaseException:  # noqa: BLE001 - a cancelled side task: nothing to report
                pass
        self.loop.close()


# ------------------------------------------------------------------ procrastinate


class ProcrastinateClient(AsyncClient):
    """procrastinate's JobManager: the calls its worker makes for every job.

    put = ``task.defer_async``, put_many = ``task.batch_defer_async`` (one INSERT,
    its trigger notifies); take = ``finish_job(prev, succeeded, delete_job=True)``
    (the worker's ``delete_jobs="successful"``, so finished rows leave the table as
    in sqlq) then ``fetch_job``. A blocked consumer waits as its worker does: the
    listener on its queue's channel (``listen_for_jobs``) or the 5 s poll.
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        import procrastinate
        from procrastinate import jobs, worker

        self.status_ok = jobs.Status.SUCCEEDED
        self.poll_s = worker.FETCH_JOB_POLLING_INTERVAL
        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
        self.task = self.app.task(name="bench", queue=TUBE)(_noop)
        self.jm = self.app.job_manager
        self.run(self.app.open_async())
        self.worker_id = self.run(self.jm.register_worker())
        self.new_job: asyncio.Event | None = None

    def put(self, body: bytes) -> None:
        self.run(self.task.defer_async(b=body.decode("ascii")))

    def put_many(self, bodies: list[bytes]) -> None:
        self.run(self.task.batch_defer_async(*({"b": b.decode("ascii")} for b in bodies)))

    async def _on_notification(self, *, channel: str, notification: Any) -> None:
        if notification.get("type") == "job_inserted" and self.new_job is not None:
            self.new_job.set()

    def take(self, prev: object, timeout: float) -> object | None:
        if prev is not None:
            self.finish(prev)
        if self.new_job is not None:
            self.new_job.clear()
        job = self.run(self.jm.fetch_job(queues=[TUBE], worker_id=self.worker_id))
        if job is not None or timeout <= 0:
            return job
        if self.new_job is None:
            self.new_job = asyncio.Event()
            self.loop.create_task(self.jm.listen_for_jobs(on_notification=self._on_notification,
                                                          queues=[TUBE]))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.run(self.wait_event(self.new_job, min(left, self.poll_s)))
            self.new_job.clear()
            job = self.run(self.jm.fetch_job(queues=[TUBE], worker_id=self.worker_id))
            if job is not None:
                return job
        return None

    def finish(self, handle: object) -> None:
        self.run(self.jm.finish_job(handle, status=self.status_ok, delete_job=True))

    def body(self, handle: object) -> bytes:
        return handle.task_kwargs["b"].encode("ascii")  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self.run(self.jm.unregister_worker(self.worker_id))
        self.run(self.app.close_async())
        super().close()


def _noop(b: str) -> None:
    """The task procrastinate's jobs name; never run (the bench takes jobs itself)."""


class Procrastinate(PgSystem):
    family = "procrastinate"
    name = "procrastinate"
    needs = ("procrastinate", "psycopg")
    wait = "LISTEN on its queue channel (listen_for_jobs), or a fetch every 5 s"

    def install(self, url: str) -> None:
        import procrastinate

        async def apply() -> None:
            app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
            await app.open_async()
            try:
                await app.schema_manager.apply_schema_async()
            finally:
                await app.close_async()

        asyncio.run(apply())

    def client(self, *, setup: bool = False) -> Client:
        return ProcrastinateClient(self.url)


# ----------------------------------------------------------------------- pgqueuer


class PgqueuerClient(AsyncClient):
    """pgqueuer's Queries on one asyncpg connection, batched as its QueueManager runs.

    Its QueueManager picks ``batch_size`` (10) jobs per dequeue and logs finished
    jobs in batches of the same size (``log_jobs``: deleted from the queue table,
    a row in its log table); take hands out the picked jobs one by one and does
    the same. A blocked consumer waits as its QueueManager does: on its NOTIFY
    channel (a statement trigger on the queue table), or its 30 s dequeue timeout.
    """

    BATCH = 10
    DEQUEUE_TIMEOUT_S = 30.0

    def __init__(self, url: str) -> None:
        super().__init__()
        import asyncpg
        from pgqueuer.core import listeners
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.domain.settings import db_settings
        from pgqueuer.ports.repository import EntrypointExecutionParameter
        from pgqueuer.queries import Queries

        self.listeners = listeners
        self.channel = db_settings().channel
        self.conn = self.run(asyncpg.connect(url))
        self.driver = AsyncpgDriver(self.conn)
        self.q = Queries(self.driver)
        self.entrypoints = {TUBE: EntrypointExecutionParameter(concurrency_limit=0)}
        self.qm_id = uuid.uuid4()
        self.picked: deque[Any] = deque()
        self.done: list[tuple[Any, str, None]] = []
        self.events: Any = None

    def put(self, body: bytes) -> None:
        self.run(self.q.enqueue(TUBE, body))

    def put_many(self, bodies: list[bytes]) -> None:
        self.run(self.q.enqueue([TUBE] * len(bodies), list(bodies), [0] * len(bodies)))

    def _flush(self) -> None:
        if self.done:
            self.run(self.q.log_jobs(self.done))  # type: ignore[arg-type]
            self.done = []

    def _dequeue(self) -> Any | None:
        if not self.picked:
            self._flush()
            self.picked.extend(self.run(self.q.dequeue(
                batch_size=self.BATCH, entrypoints=self.entrypoints,  # type: ignore[arg-type]
                queue_manager_id=self.qm_id, global_concurrency_limit=None,
                heartbeat_timeout=timedelta(seconds=30))))
        return self.picked.popleft() if self.picked else None

    def take(self, prev: object, timeout: float) -> object | None:
        if prev is not None:
            self.done.append((prev, "successful", None))
            if len(self.done) >= self.BATCH:
                self._flush()
        job = self._dequeue()
        if job is not None or timeout <= 0:
            return job
        if self.events is None:
            self.events = self.listeners.PGNoticeEventListener()
            router = self.listeners.default_event_router(
                notice_event_queue=self.events, canceled={}, pending_health_check={})
            self.run(self.listeners.initialize_notice_event_listener(
                self.driver, self.channel, router))
            job = self._dequeue()  # a put between the first look and the LISTEN
            if job is not None:
                return job
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.run(self._next_event(min(left, self.DEQUEUE_TIMEOUT_S)))
            job = self._dequeue()
            if job is not None:
                return job
        return None

    async def _next_event(self, timeout: float) -> None:
        """Wait for one table-changed event, then drop the ones queued behind it."""
        try:
            await asyncio.wait_for(self.events.get(), timeout)
        except asyncio.TimeoutError:
            return
        while not self.events.empty():
            self.events.get_nowait()

    def finish(self, handle: object) -> None:
        self.done.append((handle, "successful", None))
        self._flush()

    def body(self, handle: object) -> bytes:
        return bytes(handle.payload)  # type: ignore[attr-defined]

    def close(self) -> None:
        self._flush()
        self.run(self.conn.close())
        super().close()


class Pgqueuer(PgSystem):
    family = "pgqueuer"
    name = "pgqueuer"
    needs = ("pgqueuer", "asyncpg")
    version_note = f", batch {PgqueuerClient.BATCH}"
    wait = "LISTEN on its channel (statement trigger), or its 30 s dequeue timeout"

    def install(self, url: str) -> None:
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        async def apply() -> None:
            conn = await asyncpg.connect(url)
            try:
                await Queries(AsyncpgDriver(conn)).install()
            finally:
                await conn.close()

        asyncio.run(apply())

    def client(self, *, setup: bool = False) -> Client:
        return PgqueuerClient(self.url)


# ------------------------------------------------------------------ raw psycopg floor

# The least a PostgreSQL queue with reservations must do: one table, a partial
# index on the ready set, a claim in one fenced statement.
RAW_PG_SCHEMA = """
CREATE TABLE jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tube text NOT NULL,
    priority integer NOT NULL DEFAULT 1024,
    state smallint NOT NULL DEFAULT 0,
    reserved_until timestamptz,
    body bytea NOT NULL);
CREATE INDEX jobs_ready ON jobs (tube, priority, id) WHERE state = 0;
"""
CHANNEL = "raw_pg_jobs"
# The NOTIFY rides the putting transaction (a rolled-back put wakes nobody), as
# issue 11 asks of sqlq's backend; one statement, so one round trip and one commit.
RAW_PG_PUT = (f"WITH n AS (SELECT pg_notify('{CHANNEL}', %(tube)s))"
              " INSERT INTO jobs (tube, body) SELECT %(tube)s, %(body)s FROM n")
RAW_PG_PUT_MANY = (f"WITH n AS (SELECT pg_notify('{CHANNEL}', %(tube)s))"
                   " INSERT INTO jobs (tube, body) SELECT %(tube)s, b FROM n,"
                   " unnest(%(bodies)s::bytea[]) AS b")
# The worker's fast path: delete the finished job and claim the next in one
# statement (one round trip, one commit). The scalar subquery is the fence: it
# locks exactly one ready row, skipping rows other workers hold.
RAW_PG_TAKE = """
WITH done AS (DELETE FROM jobs WHERE id = %(prev)s),
claimed AS (
    UPDATE jobs SET state = 1, reserved_until = now() + interval '60 seconds'
     WHERE id = (SELECT id FROM jobs WHERE state = 0 AND tube = %(tube)s
                  ORDER BY priority, id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING id, body)
SELECT id, body FROM claimed
"""
RAW_PG_DELETE = "DELETE FROM jobs WHERE id = %s"


class RawPgClient(Client):
    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.listening = False

    def put(self, body: bytes) -> None:
        self.conn.execute(RAW_PG_PUT, {"tube": TUBE, "body": body})

    def put_many(self, bodies: list[bytes]) -> None:
        self.conn.execute(RAW_PG_PUT_MANY, {"tube": TUBE, "bodies": bodies})

    def _claim(self, prev: object) -> object | None:
        prev_id = prev[0] if prev is not None else None  # type: ignore[index]
        return self.conn.execute(RAW_PG_TAKE, {"prev": prev_id, "tube": TUBE}).fetchone()

    def take(self, prev: object, timeout: float) -> object | None:
        row = self._claim(prev)
        if row is not None or timeout <= 0:
            return row
        if not self.listening:
            self.conn.execute(f"LISTEN {CHANNEL}")
            self.listening = True
            row = self._claim(None)  # a put between the first look and the LISTEN
            if row is not None:
                return row
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self._wait_notify(min(left, POLL_CAP_S))
            row = self._claim(None)
            if row is not None:
                return row
        return None

    def _wait_notify(self, timeout: float) -> None:
        """Sleep in select() on the socket until a notification (or timeout) comes.

        Not ``conn.notifies(timeout=…)``: psycopg's wait wakes every 100 ms (its
        interval for noticing Ctrl-C), which costs a blocked worker CPU. A
        notification that arrived during the last claim is already buffered: then
        look again at once, since its put may have committed after that claim's
        snapshot.
        """
        if any(True for _ in self.conn.notifies(timeout=0)):
            return
        ready, _, _ = select.select([self.conn.fileno()], [], [], timeout)
        if ready:
            for _ in self.conn.notifies(timeout=0):
                pass

    def finish(self, handle: object) -> None:
        self.conn.execute(RAW_PG_DELETE, (handle[0],))  # type: ignore[index]

    def body(self, handle: object) -> bytes:
        return bytes(handle[1])  # type: ignore[index]

    def close(self) -> None:
        self.conn.close()


class RawPg(PgSystem):
    family = "raw-pg"
    name = "raw-pg"
    wait = f"LISTEN (NOTIFY in the put), or a look every {POLL_CAP_S:.0f} s"

    def install(self, url: str) -> None:
        self.server.psql(RAW_PG_SCHEMA, self.db)

    def client(self, *, setup: bool = False) -> Client:
        return RawPgClient(self.url)


# ------------------------------------------------------------------------ sqlq-pg


class SqlqPg(PgSystem):
    """The lead's slot: sqlq's public API on a ``postgresql://`` URL.

    Off by default until the PostgreSQL backend lands: name it in ``--systems``
    (``--systems sqlq-pg,procrastinate,pgqueuer,raw-pg``) to run it. It uses
    exactly what the SQLite rows use (``SqlqClient``: put, put_many,
    ``reserve(delete=prev)``), so it needs no change once ``sqlq.Queue(url)`` works.
    The backend creates its own schema on first open, like the SQLite file.
    """

    family = "sqlq"
    name = "sqlq-pg"
    default = False
    wait = "sqlq's PostgreSQL backend (LISTEN/NOTIFY)"

    def unavailable(self) -> str | None:
        return sqlq_missing() or super().unavailable()

    def version(self) -> str:
        import sqlq

        return f"sqlq {getattr(sqlq, '__version__', '?')} ({self.server_version()})"

    def client(self, *, setup: bool = False) -> Client:
        # fills run at durability normal, as for the SQLite rows; measured clients at the default
        return SqlqClient(self.url, "normal" if setup else None)
