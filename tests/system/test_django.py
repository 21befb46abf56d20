"""sqlq.contrib.django for real: examples/django_site served by ``manage.py runserver``,
its task run by ``manage.py sqlq work`` (a supervisor and a worker process), over real
files and a real PostgreSQL, with the queue in the site's database or in its own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import forkserver
from tests.workers import wait_for

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "examples" / "django_site"
pytestmark = pytest.mark.timeout(90)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Site:
    """The example site on a database, with its web server and its worker running."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp = tmp
        self.env = env
        self.base = f"http://127.0.0.1:{free_port()}"
        self.procs: list[subprocess.Popen[str]] = []

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        return forkserver.run([sys.executable, str(SITE / "manage.py"), *args], env=self.env,
                              cwd=self.tmp, capture_output=True, text=True, timeout=60)

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = forkserver.Popen([sys.executable, str(SITE / "manage.py"), *args], env=self.env,
                                cwd=self.tmp, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        self.procs.append(proc)
        return proc

    def __enter__(self) -> Site:
        migrated = self.manage("migrate", "--verbosity", "0")
        assert migrated.returncode == 0, migrated.stderr
        self.start("runserver", self.base.rsplit("/", 1)[1], "--noreload")
        self.worker = self.start("sqlq", "work")

        def up() -> bool:
            try:
                return httpx.get(f"{self.base}/orders/0").status_code == 404
            except httpx.HTTPError:
                return False

        wait_for(up, timeout=30, what="runserver to listen")
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        self.outputs = [proc.communicate(timeout=30)[0] for proc in self.procs]
        if exc[0] is not None:  # what the server and the worker said, for the failure
            print(*self.outputs, sep="\n--- next process ---\n")

    def post(self, path: str) -> httpx.Response:
        return httpx.post(f"{self.base}{path}", timeout=30)

    def get(self, path: str) -> Any:
        response = httpx.get(f"{self.base}{path}", timeout=30)
        return response.json() if response.status_code == 200 else response.status_code


@pytest.fixture(params=["shared", "separate"])
def site_env(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[
        dict[str, str]]:
    """The site's environment: its database (a SQLite file, or a PostgreSQL database) and
    the queue's (the same, or a second file / database)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQLQ_", "DJANGO_"))}
    env["PYTHONPATH"] = str(ROOT)
    # What a shell that followed docs/shell.md ("From the shell") has exported: the site
    # must keep to its own setting (SHOP_SQLQ_DB), not quietly use this queue.
    env["SQLQ_DB"] = str(tmp_path / "exported-for-the-sqlq-command.db")
    if backend == "postgres":
        server = request.getfixturevalue("pg_server")
        env["DJANGO_DATABASE_URL"] = request.getfixturevalue("pg_url")
        if request.param == "separate":
            name, env["SHOP_SQLQ_DB"] = server.clone(request.getfixturevalue("pg_template"))
            yield env
            server.drop_database(name)
            return
    else:
        env["DJANGO_DATABASE_URL"] = str(tmp_path / "site.db")
        if request.param == "separate":
            env["SHOP_SQLQ_DB"] = str(tmp_path / "jobs.db")
    yield env


@pytest.mark.slow
@pytest.mark.pg_fresh  # the site's own tables (Django's migrations)
def test_site_enqueues_in_its_transaction_and_the_worker_runs_it(site_env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    shared = "SHOP_SQLQ_DB" not in site_env
    with Site(tmp_path, site_env) as site:
        placed = site.post("/orders?item=pen")
        assert placed.status_code == 201, placed.text
        order, job = placed.json()["order"], placed.json()["job"]
        # Shared: the job was written in the request's transaction, its id known at once.
        # Separate: it was put after Django's commit, so the request had no id to give.
        assert isinstance(job, int) if shared else job is None
        wait_for(lambda: site.get(f"/orders/{order}")["status"] == "confirmed",
                 timeout=30, what="the worker to confirm the order")
        if shared:
            # The task's save commits on its own, before the worker completes the job: the
            # order can read "confirmed" a moment before the job reads "done".
            wait_for(lambda: site.get(f"/jobs/{job}")["state"] == "done",
                     timeout=30, what="the worker to complete the job")
            done = site.get(f"/jobs/{job}")
            assert done["result"]["item"] == "pen"
            assert done["result"]["worker"] != site.worker.pid  # run in a worker process

        # A request that raises after its put: its order and its job are rolled back.
        broken = site.post("/orders/broken?item=ghost")
        assert broken.status_code == 500
        placed = site.post("/orders?item=ink")
        later = placed.json()["order"]
        wait_for(lambda: site.get(f"/orders/{later}")["status"] == "confirmed",
                 timeout=30, what="the third order")
        stats = site.manage("sqlq", "stats", "--json")
        assert stats.returncode == 0, stats.stderr
        counts = json.loads(stats.stdout)
        # Had the broken request's job landed, the worker would have met it before the
        # third (first in, first out) and failed it for want of its order: it would now
        # wait for a retry (delayed), or lie buried.
        assert all(counts[f"current-jobs-{state}"] == 0
                   for state in ("ready", "reserved", "delayed", "buried")), counts
        assert all(site.get(f"/orders/{n}") == 404 for n in range(later + 1, later + 3))
    assert site.worker.returncode == 0, site.outputs[1]
    assert "stopped after 2 jobs" in site.outputs[1], site.outputs[1]
    assert "Traceback" not in site.outputs[1], site.outputs[1]


BAD_SETTINGS = textwrap.dedent("""
    import json, sys
    import django
    from django.conf import settings
    settings.configure(
        INSTALLED_APPS=["sqlq.contrib.django"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]},
                   "mem": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
                   "other": {"ENGINE": "django.db.backends.mysql", "NAME": "x"}},
        SQLQ={"DB": sys.argv[2]})
    django.setup()
    from django.core.exceptions import ImproperlyConfigured
    from sqlq.contrib.django import conf
    out = {}
    for name, value in json.loads(sys.argv[3]).items():
        settings.SQLQ = value
        try:
            got = conf.read()
            out[name] = [got.location, got.alias, got.queue_kwargs]
        except ImproperlyConfigured as exc:
            out[name] = str(exc)
    print(json.dumps(out))
""")


def test_settings_are_checked_with_one_line_errors(tmp_path: Path) -> None:
    site_db, jobs_db = str(tmp_path / "site.db"), str(tmp_path / "jobs.db")
    cases = {
        "not a dict": "jobs.db", "unknown key": {"DB": jobs_db, "DBB": 1},
        "both": {"DB": jobs_db, "DATABASE": "default"}, "neither": {},
        "no such alias": {"DATABASE": "nope"}, "memory": {"DATABASE": "mem"},
        "mysql": {"DATABASE": "other"}, "bad DB": {"DB": 7},
        "bad options": {"DB": jobs_db, "OPTIONS": {"durablity": "full"}},
        "bad durability": {"DB": jobs_db, "OPTIONS": {"durability": "fast"}},
        "separate": {"DB": jobs_db, "OPTIONS": {"durability": "normal"}},
        "shared": {"DATABASE": "default"},
        "DB names the site's file": {"DB": site_db},
    }
    result = forkserver.run([sys.executable, "-c", BAD_SETTINGS, site_db, jobs_db,
                             json.dumps(cases)], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    errors = {k: v for k, v in got.items() if isinstance(v, str)}
    assert set(errors) == set(cases) - {"separate", "shared", "DB names the site's file"}, got
    for message in errors.values():
        assert message.startswith("settings.SQLQ: ") and "\n" not in message
    assert "'DBB'" in errors["unknown key"] and "'nope'" in errors["no such alias"]
    assert "in-memory" in errors["memory"] and "mysql" in errors["mysql"]
    assert "'durablity'" in errors["bad options"] and "'fast'" in errors["bad durability"]
    assert got["separate"] == [jobs_db, None, {"durability": "normal"}]
    assert got["shared"] == [site_db, "default", {"driver": "sqlite3", "init": True}]
    assert got["DB names the site's file"] == got["shared"]


ADMIN_PAGE = textwrap.dedent("""
    import sys
    import django
    from django.conf import settings
    from django.urls import include, path
    settings.configure(
        SECRET_KEY="test", ROOT_URLCONF="__main__", ALLOWED_HOSTS=["testserver"],
        INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth",
                        "django.contrib.contenttypes", "django.contrib.sessions",
                        "django.contrib.messages", "sqlq.contrib.django"],
        MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware",
                    "django.contrib.auth.middleware.AuthenticationMiddleware",
                    "django.contrib.messages.middleware.MessageMiddleware"],
        TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates",
                    "APP_DIRS": True, "OPTIONS": {"context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages"]}}],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]}},
        SQLQ={"DB": sys.argv[2]})
    django.setup()
    from django.contrib import admin
    urlpatterns = [path("admin/sqlq/", include("sqlq.contrib.django.urls")),
                   path("admin/", admin.site.urls)]
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client
    from sqlq.contrib.django import queue
    call_command("migrate", verbosity=0)
    for body in (b"a", b"<script>x</script>"):
        queue.put(body, tube="mail")
        queue.reserve("mail", timeout=0).bury(reason="SMTP down")
    queue.put(b"w", tube="mail", after=queue.put(b"c", tube="mail"))
    client = Client()
    print(client.get("/admin/sqlq/").status_code)
    client.force_login(User.objects.create(username="s", is_staff=True))
    print(client.get("/admin/sqlq/").content.decode())
""")


def test_admin_page_shows_tubes_and_buried_jobs_to_staff(tmp_path: Path) -> None:
    result = forkserver.run(
        [sys.executable, "-c", ADMIN_PAGE, str(tmp_path / "site.db"), str(tmp_path / "j.db")],
        capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert result.returncode == 0, result.stderr
    anonymous, page = result.stdout.split("\n", 1)
    assert anonymous == "302"  # to the admin's login page
    assert "<td>mail</td><td>1</td><td>0</td><td>0</td><td>2</td><td>1</td>" in page, page
    assert "<th>Waiting</th>" in page
    assert page.count("SMTP down") == 2 and "&lt;script&gt;" in page and "<script>x" not in page
