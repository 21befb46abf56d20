"""``make release-check``: the distributions checked the way PyPI and a new user will.

1. ``python -m build``: an sdist, and a wheel built from that sdist (as pip does from
   PyPI's sdist); ``python -m build --wheel``: a wheel built from the tree. The two
   wheels must hold the same files.
2. ``twine check --strict`` on all three (the metadata and README PyPI renders) and
   ``check-wheel-contents`` on both wheels; ``dist_check.py``: the migrations and the
   dashboard's assets are inside.
3. Each wheel installed (with the ``postgres`` and ``dashboard`` extras) into a fresh
   venv outside the checkout, and run from an empty directory there: ``sqlq --version``
   (whose schema numbers must match the migrations in the checkout), the migrations the
   installed package reads (its own) and the schema they give a new database of each
   dialect (exactly ``migrations/<dialect>/schema.sql``), the demo, a
   put/reserve and a ``sqlq work --burst`` on a new SQLite file and on a new database of
   a throwaway PostgreSQL server (``tests/pgserver.py``), whose schema versions must
   then be the wheel's latest, and ``sqlq metrics`` and ``sqlq dashboard`` (its extra).

Releasing VERSION (the steps around this check): give VERSION its heading in
CHANGELOG.md, run ``python migrations/generate.py --freeze VERSION`` and
``python -m tests.fixtures.make_release_fixture VERSION`` (the release's upgrade
fixture, ``tests/fixtures/<VERSION>/``, made by the release's own code, which every later
release's tests/integration/test_release_upgrade.py opens), commit them together, then
run this.

Run by the ``release`` extra's venv (build, twine, check-wheel-contents); prints each
step and its time; exits 1 at the first failure, naming it.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
sys.path.insert(0, str(ROOT))

from tests.pgserver import PgServer, free_port  # noqa: E402  (stdlib only: no sqlq here)


class Failed(Exception):
    """A check that did not pass: its one-line reason."""


@contextmanager
def step(title: str) -> Iterator[None]:
    started = time.monotonic()
    print(f"release-check: {title} ...", flush=True)
    yield
    print(f"release-check: {title}: ok ({time.monotonic() - started:.1f} s)", flush=True)


def run(cmd: Sequence[str | Path], *, cwd: Path = ROOT, env: dict[str, str] | None = None,
        check: bool = True) -> str:
    """Run a command; its output, or Failed with the end of it."""
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    if check and done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise Failed(f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{tail}")
    return done.stdout


def latest(dialect: str) -> int:
    """The schema version the checkout's migrations of ``dialect`` bring a database to."""
    folder = ROOT / "migrations" / dialect
    return len([p for p in folder.glob("[0-9][0-9][0-9][0-9]_*.sql")])


def build() -> tuple[Path, Path]:
    """The wheel built from the sdist and the one built from the tree."""
    shutil.rmtree(DIST, ignore_errors=True)
    run([sys.executable, "-m", "build", "--outdir", DIST, "."])
    run([sys.executable, "-m", "build", "--wheel", "--outdir", DIST / "tree", "."])
    from_sdist, = DIST.glob("*.whl")
    from_tree, = (DIST / "tree").glob("*.whl")
    names = [sorted(n for n in zipfile.ZipFile(w).namelist() if not n.endswith("RECORD"))
             for w in (from_sdist, from_tree)]
    if names[0] != names[1]:
        only = sorted(set(names[0]) ^ set(names[1]))
        raise Failed(f"the wheel built from the sdist and the one from the tree differ: {only}")
    return from_sdist, from_tree


def check_metadata(wheels: Sequence[Path]) -> None:
    bindir = Path(sys.executable).parent
    sdist, = DIST.glob("*.tar.gz")
    print(run([bindir / "twine", "check", "--strict", sdist, *wheels]).strip())
    print(run([bindir / "check-wheel-contents", *wheels]).strip())
    for wheel in wheels:
        run([sys.executable, ROOT / ".ci" / "dist_check.py", wheel])


def user_env(venv: Path) -> dict[str, str]:
    """A new user's environment: the venv's bin first, nothing of the checkout or sqlq's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SQLQ_", "PYTHON", "VIRTUAL_ENV", "PIP_REQUIRE"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def serve_dashboard(db: str, work: Path, env: dict[str, str], label: str) -> None:
    """``sqlq dashboard`` (the dashboard extra) answers its overview page, then stops."""
    port = free_port()
    proc = subprocess.Popen(["sqlq", "--db", db, "dashboard", "--listen", f"127.0.0.1:{port}"],
                            cwd=work, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        started = proc.stderr.readline()  # "sqlq dashboard: ... on http://...": listening
        if "sqlq dashboard:" not in started:
            raise Failed(f"{label}: sqlq dashboard did not start: {started.strip()}")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as page:
            if page.status != 200 or b"sqlq" not in page.read():
                raise Failed(f"{label}: the dashboard's overview answered {page.status}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def check_own_migrations(venv: Path, work: Path, env: dict[str, str], pg: PgServer,
                         label: str) -> None:
    """The installed sqlq reads the migrations inside its own package (not the checkout's)
    and a new database of each dialect it makes has exactly migrations/<dialect>/schema.sql."""
    shipped = run(["python", "-c", "import os; from sqlq.backends.migrations import directory; "
                   "print(os.path.dirname(directory('sqlite')))"], cwd=work, env=env).strip()
    if not shipped.startswith(str(venv)) or not shipped.endswith("_migrations"):
        raise Failed(f"{label}: the installed sqlq reads its migrations from {shipped}")
    database = f"release_{label}_fresh"
    pg.drop_database(database)
    for dialect, target in (("sqlite", str(work / "fresh.db")),
                            ("postgres", pg.create_database(database))):
        run(["python", "-c", "import sqlq, sys; sqlq.Queue(sys.argv[1]).close()", target],
            cwd=work, env=env)  # a new database, migrated by the installed sqlq
        dump = run(["python", ROOT / "migrations" / "generate.py", "--dump", dialect, target,
                    pg._bin("pg_dump")], cwd=work, env=env)
        if dump != (ROOT / "migrations" / dialect / "schema.sql").read_text():
            raise Failed(f"{label}: the wheel's migrations made a {dialect} schema other than "
                         f"migrations/{dialect}/schema.sql")
        print(f"  {label} on {dialect}: the wheel's own migrations made schema.sql exactly")
    pg.drop_database(database)


def try_wheel(wheel: Path, pg: PgServer, label: str, version: str) -> None:
    """Install ``wheel`` into a fresh venv in a temporary directory and use it there."""
    home = Path(tempfile.mkdtemp(prefix=f"sqlq-release-{label}-"))
    try:
        venv = home / "venv"
        run([sys.executable, "-m", "venv", venv])
        run([venv / "bin" / "pip", "install", "-q", "--disable-pip-version-check",
             f"{wheel}[postgres,dashboard]"], cwd=home)
        work = home / "work"
        work.mkdir()
        env = user_env(venv)

        def sqlq(*args: str) -> str:
            return run(["sqlq", *args], cwd=work, env=env).strip()

        where = run(["python", "-c", "import sqlq; print(sqlq.__file__)"], cwd=work, env=env)
        if not where.startswith(str(venv)):
            raise Failed(f"{label}: sqlq imported from {where.strip()}, not the venv")
        check_own_migrations(venv, work, env, pg, label)
        sqlite_v, postgres_v = latest("sqlite"), latest("postgres")
        expected = f"sqlq, version {version} (schema: SQLite {sqlite_v}, PostgreSQL {postgres_v})"
        if (said := sqlq("--version")) != expected:
            raise Failed(f"{label}: sqlq --version said {said!r}, not {expected!r}")
        print(f"  {label}: {said}")
        demo = run(["python", "-m", "sqlq.demo", "demo/demo.db"], cwd=work, env=env)
        if "total-jobs 40" not in demo:
            raise Failed(f"{label}: the demo did not put its 40 jobs:\n{demo[-500:]}")
        database = f"release_{label}"
        pg.drop_database(database)
        targets = [("sqlite", str(work / "q.db"), sqlite_v),
                   ("postgres", pg.create_database(database), postgres_v)]
        for backend, db, want in targets:
            first = sqlq("--db", db, "put", "hello")
            reserved = sqlq("--db", db, "reserve", "--id-only", "--timeout", "5s")
            sqlq("--db", db, "delete", reserved)
            sqlq("--db", db, "put", "again")
            sqlq("--db", db, "work", "--burst", "--", "true")
            left = sqlq("--db", db, "stats", "--json")
            if not re.search(r'"current-jobs-ready": 0\b', left) or first != reserved:
                raise Failed(f"{label} on {backend}: put {first}, reserved {reserved}; {left}")
            if "sqlq_jobs_" not in sqlq("--db", db, "metrics"):
                raise Failed(f"{label} on {backend}: sqlq metrics printed no sqlq_jobs_ metric")
            serve_dashboard(db, work, env, f"{label} on {backend}")
            if backend == "sqlite":
                with sqlite3.connect(db) as conn:
                    got = conn.execute("SELECT max(version) FROM sqlq_schema").fetchone()[0]
            else:
                got = int(pg.psql("SELECT max(version) FROM sqlq_schema", database).strip())
            if got != want:
                raise Failed(f"{label} on {backend}: schema version {got}, not {want}")
            print(f"  {label} on {backend}: put/reserve/work/metrics/dashboard ok, schema {got}")
        pg.drop_database(database)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    started = time.monotonic()
    version = re.search(r'__version__ = "([^"]+)"',
                        (ROOT / "sqlq" / "version.py").read_text())
    try:
        assert version is not None, "no __version__ in sqlq/version.py"
        with step("python -m build: an sdist, a wheel from it, a wheel from the tree"):
            from_sdist, from_tree = build()
        with step("twine check --strict, check-wheel-contents, dist_check.py"):
            check_metadata([from_sdist, from_tree])
        with step("a throwaway PostgreSQL server"):
            pg = PgServer().start()
        with pg:
            for label, wheel in (("sdist-wheel", from_sdist), ("tree-wheel", from_tree)):
                with step(f"{wheel.name} ({label}) in a fresh venv, outside the checkout"):
                    try_wheel(wheel, pg, label.replace("-", "_"), version.group(1))
    except Failed as e:
        print(f"release-check: FAILED: {e}", file=sys.stderr)
        return 1
    print(f"release-check: all ok in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
