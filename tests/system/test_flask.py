"""sqlq.contrib.flask for real: examples/flask_app served by Flask's test client over real
files (or a real PostgreSQL), ``flask sqlq work`` as a real subprocess running its task,
the queue in the app's own database (puts join the request's transaction) or in a
separate file (puts follow its commit); forks, savepoints and bad configurations."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

import sqlq
from sqlq.contrib.flask import Sqlq
from sqlq.contrib.flask._cli import with_init, with_task_modules
from tests import forkserver
from tests.conftest import ASCII_BACKEND, ROOT, is_postgres
from tests.workers import wait_for

EXAMPLES = ROOT / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))

from flask_app import create_app  # noqa: E402
from flask_app.extensions import db, jobs  # noqa: E402

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The extension sets SQLQ_SQLITE_DRIVER (a shared file) and `flask sqlq` FLASK_APP
    for the processes they start: neither may leak into the next test."""
    for name in ("SQLQ_SQLITE_DRIVER", "FLASK_APP", "FLASK_SQLQ_DB",
                 "FLASK_SQLALCHEMY_DATABASE_URI"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    yield


def _close(app: Flask, ext: Sqlq, database: SQLAlchemy) -> None:
    ext.close()
    with app.app_context():
        database.engine.dispose()


def _live_jobs(app: Flask) -> int:
    """Jobs in the queue (not total-jobs: PostgreSQL's id sequence ignores rollbacks)."""
    stats = jobs.queue_of(app).stats()
    return sum(int(stats[f"current-jobs-{s}"]) for s in ("ready", "reserved", "delayed",
                                                         "buried"))


@pytest.mark.sql_ascii
@pytest.mark.parametrize("queue_in", ["app-database", "separate-file"])
@pytest.mark.pg_fresh  # the app's own table (word)
def test_example_app_enqueues_in_the_request_transaction(
        backend: str, db_url: str, queue_in: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # backend: where the app's database lives; the queue shares it or has a file of its own.
    app_uri = (db_url.replace("postgresql://", "postgresql+psycopg://", 1)
               if is_postgres(backend) else f"sqlite:///{tmp_path / 'words.db'}")
    if backend == ASCII_BACKEND:
        # SQLAlchemy itself needs text as str (it reads the server's version at connect);
        # the queue, named without that, asks for UTF8 itself (F8)
        app_uri += "?client_encoding=utf8"
        monkeypatch.setenv("FLASK_SQLQ_DB", db_url)
    monkeypatch.setenv("FLASK_SQLALCHEMY_DATABASE_URI", app_uri)
    if queue_in == "separate-file":
        monkeypatch.setenv("FLASK_SQLQ_DB", str(tmp_path / "jobs.db"))
    app = create_app()
    try:
        client = app.test_client()
        with app.app_context():
            assert jobs.settings().shared is (queue_in == "app-database")

        added = client.post("/words/hello")
        assert added.status_code == 201, added.text
        word = added.json["id"]
        # Joined: the id is known at once; deferred: the job is put by the commit.
        assert (added.json["job"] is None) is (queue_in == "separate-file")
        assert _live_jobs(app) == 1
        assert client.get(f"/words/{word}").json == {"text": "hello", "letters": None}

        # A request that raises after enqueueing leaves neither its row nor its job.
        failed = client.post("/words/oops/fail")
        assert failed.status_code == 500
        assert _live_jobs(app) == 1
        assert client.get(f"/words/{word + 1}").status_code == 404

        # `flask sqlq work` (a supervisor and its worker process) runs the task.
        env = dict(os.environ, PYTHONPATH=f"{EXAMPLES}{os.pathsep}{ROOT}")
        worker = forkserver.run(
            [sys.executable, "-m", "flask", "--app", "flask_app", "sqlq", "work", "--burst"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert worker.returncode == 0, worker.stderr
        assert "flask_app.tasks.count_letters done" in worker.stderr, worker.stderr
        assert client.get(f"/words/{word}").json == {"text": "hello", "letters": 5}
        assert _live_jobs(app) == 0
    finally:
        _close(app, jobs, db)


@pytest.mark.slow
@pytest.mark.sqlite_only
@pytest.mark.parametrize("queue_in", ["app-database", "separate-file"])
def test_the_worker_started_first_on_a_fresh_database_runs_the_jobs(
        queue_in: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's docstring order: `flask sqlq work &` before the app has served a
    request, on a words.db (and jobs.db) that does not exist yet."""
    monkeypatch.setenv("FLASK_SQLALCHEMY_DATABASE_URI", f"sqlite:///{tmp_path / 'words.db'}")
    if queue_in == "separate-file":
        monkeypatch.setenv("FLASK_SQLQ_DB", str(tmp_path / "jobs.db"))
    env = dict(os.environ, PYTHONPATH=f"{EXAMPLES}{os.pathsep}{ROOT}")
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = forkserver.Popen(
            [sys.executable, "-m", "flask", "--app", "flask_app", "sqlq", "work"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "watching" in log.read_text(), what=f"the worker:\n{log.read_text()}")
        app = create_app()
        try:
            added = app.test_client().post("/words/hello")
            assert added.status_code == 201, added.text
            wait_for(lambda: app.test_client().get(f"/words/{added.json['id']}").json
                     == {"text": "hello", "letters": 5}, what=f"the task:\n{log.read_text()}")
        finally:
            _close(app, jobs, db)
        worker.terminate()
        assert worker.wait(timeout=30) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    text = log.read_text()
    assert "restarting" not in text and "init=True" not in text, text


def _separate_app(tmp_path: Path) -> tuple[Flask, Sqlq, SQLAlchemy]:
    app = Flask("separate")
    app.config.update(SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'app.db'}",
                      SQLQ_DB=str(tmp_path / "jobs.db"))
    database, ext = SQLAlchemy(), Sqlq()
    database.init_app(app)
    ext.init_app(app)
    return app, ext, database


@pytest.mark.sqlite_only
def test_deferred_puts_follow_commits_rollbacks_and_savepoints(tmp_path: Path) -> None:
    app, ext, database = _separate_app(tmp_path)
    try:
        with app.app_context():
            queue = ext.queue
            session = database.session
            assert ext.put(b"outside a transaction") == 1  # put at once

            session.execute(database.text("SELECT 1"))  # a transaction is under way
            assert ext.put(b"kept") is None
            with session.begin_nested():
                assert ext.put(b"kept too") is None
                assert ext.put(b"and this", tube="other") is None
            savepoint = session.begin_nested()
            ext.put(b"rolled back with its savepoint")
            with session.begin_nested():
                ext.put(b"inside the rolled-back savepoint")
            savepoint.rollback()
            # Bad arguments fail now, in the request, not at commit.
            with pytest.raises(sqlq.InvalidTube):
                ext.put(b"x", tube="-bad")
            with pytest.raises(sqlq.JobTooBig):
                ext.put(b"x" * (queue.max_job_size + 1))
            assert queue.stats()["total-jobs"] == 1
            session.commit()
            bodies = [queue.reserve(["default", "other"], timeout=0) for _ in range(4)]
            assert [j.body for j in bodies if j] == [b"outside a transaction", b"kept",
                                                     b"kept too", b"and this"]

            session.execute(database.text("SELECT 1"))
            ext.put(b"rolled back")
            session.rollback()
            session.execute(database.text("SELECT 1"))
            ext.put(b"closed without a commit")
            session.close()
            assert queue.stats()["total-jobs"] == 4
    finally:
        _close(app, ext, database)


@pytest.mark.sqlite_only
def test_a_forked_process_opens_its_own_queue(tmp_path: Path) -> None:
    app, ext, database = _separate_app(tmp_path)
    try:
        parent_queue = ext.queue_of(app)
        parent_queue.put(b"from the parent")
        pid = os.fork()
        if pid == 0:  # the child: a new Queue, the parent's left alone
            code = 1
            try:
                child_queue = ext.queue_of(app)
                if child_queue is not parent_queue:
                    child_queue.put(b"from the child")
                    ext.close()
                    code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert ext.queue_of(app) is parent_queue
        parent_queue.put(b"the parent's queue still works")
        assert parent_queue.stats()["total-jobs"] == 3
    finally:
        _close(app, ext, database)


@pytest.mark.sqlite_only
def test_flask_sqlq_is_the_sqlq_command_on_the_apps_queue(tmp_path: Path) -> None:
    app, ext, database = _separate_app(tmp_path)
    try:
        ext.queue_of(app).put(b"hello", tube="mail")
        runner = app.test_cli_runner()
        stats = runner.invoke(args=["sqlq", "stats", "--tube", "mail"])
        assert stats.exit_code == 0, stats.output
        assert "current-jobs-ready:     1" in stats.output
        missing = runner.invoke(args=["sqlq", "peek", "999"])
        assert missing.exit_code == 3  # sqlq's own exit codes
        assert runner.invoke(args=["sqlq", "--help"]).output.count("work") >= 1
    finally:
        _close(app, ext, database)


def test_work_imports_the_task_modules_unless_told_otherwise() -> None:
    mods = ["app.tasks"]
    assert with_task_modules(["work", "--burst"], mods) == [
        "work", "--import", "app.tasks", "--burst"]
    assert with_task_modules(["--db", "x", "work"], mods) == [
        "--db", "x", "work", "--import", "app.tasks"]
    for args in (["work", "-i", "other"], ["work", "--import=other"],
                 ["work", "--", "./run.sh"], ["stats"], []):
        assert with_task_modules(args, mods) == args
    assert with_init(["--db", "x", "work", "--burst"]) == ["--db", "x", "work", "--init",
                                                           "--burst"]
    assert with_init(["work", "--", "cmd", "--init"]) == ["work", "--init", "--", "cmd",
                                                          "--init"]
    for args in (["work", "--init"], ["stats"], []):
        assert with_init(args) == args


@pytest.mark.parametrize(("config", "message"), [
    ({"SQLALCHEMY_DATABASE_URI": "sqlite://"}, "set SQLQ_DB"),
    ({}, "set SQLQ_DB"),
])
def test_configurations_sqlq_cannot_use_are_refused_in_one_line(
        config: dict[str, Any], message: str, tmp_path: Path) -> None:
    app = Flask("bad")
    app.config.update(config)
    if config:
        SQLAlchemy().init_app(app)
    ext = Sqlq(app)
    with app.app_context(), pytest.raises(sqlq.Error) as raised:
        ext.queue  # noqa: B018
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_a_shared_database_needs_a_driver_sqlq_can_write_through() -> None:
    from sqlalchemy import create_engine

    from sqlq.contrib.flask._database import resolve

    # Engines are made, never connected: the URL alone is refused.
    for url, wanted in (("postgresql+psycopg2://u@127.0.0.1/app", "postgresql+psycopg"),
                        ("sqlite+pysqlcipher:////srv/app.db", "sqlite+pysqlite")):
        try:
            engine = create_engine(url)
        except ImportError:  # no such DB-API here: a stand-in with the same URL
            engine = type("Engine", (), {"url": create_engine("sqlite://").url.set(
                drivername=url.split(":", 1)[0], database="/srv/app.db")})()
        with pytest.raises(sqlq.Error, match=f"use {re.escape(wanted)},"):
            resolve({}, engine)


def test_sqlq_db_naming_the_apps_database_however_spelled_is_shared(
        db_url: str, backend: str, tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    from sqlq.contrib.flask._database import resolve

    if backend == "postgres":
        engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
        same = db_url.replace("@127.0.0.1:", "@localhost:", 1)
        other = db_url.rsplit("/", 1)[0] + "/postgres"
    else:
        engine = create_engine(f"sqlite:///{db_url}")
        os.symlink(db_url, tmp_path / "link.db")
        same, other = str(tmp_path / "link.db"), str(tmp_path / "other.db")
    sqlq.Queue(db_url).close()
    try:
        assert resolve({"SQLQ_DB": same}, engine).shared
        assert not resolve({"SQLQ_DB": other}, engine).shared
    finally:
        engine.dispose()


@pytest.mark.sqlite_only
def test_tasks_run_in_the_callers_app_context_or_one_of_their_own(tmp_path: Path) -> None:
    import asyncio

    from flask import current_app, g

    app, ext, database = _separate_app(tmp_path)

    @ext.task(name="test_flask.where")
    def where() -> tuple[str, object]:
        return current_app.name, g.get("marker")

    @ext.task(name="test_flask.awhere")
    async def awhere() -> tuple[str, object]:
        return current_app.name, g.get("marker")

    @ext.periodic(every=60, name="test_flask.tick")
    def tick() -> None:
        """Nothing."""

    try:
        # As a worker calls them (task.fn): no context, so a new one per call.
        assert where.fn() == ("separate", None)
        assert asyncio.run(awhere.fn()) == ("separate", None)
        # Called in a request: the request's own context.
        with app.test_request_context():
            g.marker = "request"
            assert where() == ("separate", "request")
            assert where.fn() == ("separate", "request")
        assert tick.schedule is not None and tick.queue is ext.tasks_queue
        assert where.queue.path == str(tmp_path / "jobs.db")
    finally:
        _close(app, ext, database)
