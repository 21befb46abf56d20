"""The documentation site documents everything users can name, and README stays inside.

The site is built by ``make docs`` (``mkdocs build --strict``: a broken link or a
docstring that does not parse is an error) and checked here: every name in
``sqlq.__all__``, every public method of Queue and Job, every error, every ``sqlq``
command with every option, and the exit codes. Without ``SQLQ_DOCS_SITE`` the test
builds the site itself when mkdocs is installed (``pip install -e '.[docs]'``) and is
skipped otherwise.
"""

from __future__ import annotations

import html
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

import sqlq
from sqlq.cli import cli
from tests.conftest import ROOT

pytestmark = pytest.mark.xdist_group("docs-site")  # one process builds the site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SQLQ_DOCS_SITE")
    if given:
        return (ROOT / given).resolve()
    if importlib.util.find_spec("mkdocs") is None:  # make test installs it: FAIL, not skip
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]' (make test does)",
                    pytrace=False)
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)], cwd=ROOT,
        capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert build.returncode == 0, build.stderr
    return out


def _page(site: Path, name: str) -> tuple[str, str]:
    """A built page's HTML, and its text without tags."""
    page = (site / name / "index.html").read_text()
    return page, html.unescape(re.sub(r"<[^>]+>", "", page))


def _documented_id(obj: object) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"  # type: ignore[attr-defined]


@pytest.mark.slow  # the site is built once per module, in seconds
def test_every_public_name_is_in_the_api_reference(site: Path) -> None:
    page, text = _page(site, "api")
    for name in sqlq.__all__:
        obj = getattr(sqlq, name)
        if isinstance(obj, str):  # __version__
            assert name in text, name
            continue
        assert f'id="{_documented_id(obj)}"' in page, name
    for cls in (sqlq.Queue, sqlq.Job, sqlq.Transaction):
        # methods and properties; Job's data attributes are listed in its docstring
        verbs = inspect.getmembers(cls, lambda m: inspect.isfunction(m) or isinstance(m, property))
        for member, _ in verbs:
            if not member.startswith("_"):
                assert f'id="{_documented_id(cls)}.{member}"' in page, (cls, member)
    for error in (sqlq.Error, *sqlq.Error.__subclasses__()):
        if error.__module__ == "sqlq.errors":
            assert f'id="{_documented_id(error)}"' in page, error


@pytest.mark.slow  # the site is built once per module, in seconds
def test_queue_verbs_say_what_they_raise_and_show_an_example(site: Path) -> None:
    for verb in ("put", "put_many", "reserve", "delete", "release", "bury", "touch", "kick",
                 "kick_job", "pause_tube", "complete", "result", "publish", "stats_job"):
        doc = inspect.getdoc(getattr(sqlq.Queue, verb)) or ""
        assert "Raises:" in doc, verb
    for verb in ("delete", "release", "bury", "touch", "complete"):
        assert "Raises:" in (inspect.getdoc(getattr(sqlq.Job, verb)) or ""), verb
    _, text = _page(site, "api")
    assert text.count("Raises:") + text.count("Raises") >= 15


def _commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        found.append((f"{prefix} {name}", command))
        if isinstance(command, click.Group):
            found.extend(_commands(command, f"{prefix} {name}"))
    return found


@pytest.mark.slow  # the site is built once per module, in seconds
def test_every_command_and_option_is_in_the_cli_reference(site: Path) -> None:
    _, text = _page(site, "cli")
    commands = _commands(cli, "sqlq")
    assert len(commands) >= 20
    for path, command in commands:
        assert f"Usage:\n{path} " in text or f"Usage: {path} " in text or path in text, path
        for param in command.params:
            if getattr(param, "hidden", False):  # internal (work --in-process)
                continue
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt in text, (path, opt)
    for code in ("0", "1", "2", "3", "4"):
        assert re.search(rf"\n{code}\n", text), code
    assert "sqlq-beanstalkd" in text and "-b DIR" in text


def test_readme_links_stay_inside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)]+)\)", readme):
        if re.match(r"[a-z]+://", target) or target.startswith("#"):
            continue
        path = (ROOT / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT), target
        assert path.exists(), target
