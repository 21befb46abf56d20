"""A ``postgresql://`` URL where psycopg is not installed (it is an extra: ``sqlq-jobs``
alone brings only SQLite): one line that names the extra, never a raw ImportError.

Each test runs a real interpreter in which importing psycopg fails as it does where
it is not installed: a finder first on ``sys.meta_path`` raises ModuleNotFoundError
for it. Nothing of sqlq is replaced.
"""

from __future__ import annotations

import pytest

from tests.conftest import spawn

#: Where psycopg is missing. The password must not reach any message.
URL = "postgresql://app:s3cret@127.0.0.1:1/app"
HINT = ("pip install '.[postgres]' in a checkout of sqlq "
        "(pip install 'sqlq-jobs[postgres]' once it is on PyPI)")

WITHOUT_PSYCOPG = """
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("psycopg", "psycopg_binary", "psycopg_c"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""


def _run(code: str, *args: str) -> tuple[int, str, str]:
    proc = spawn(WITHOUT_PSYCOPG + code, *args, cold=True)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_the_library_raises_a_sqlq_error_naming_the_extra() -> None:
    code, out, err = _run("""
import sqlq
try:
    sqlq.Queue(sys.argv[1])
except sqlq.DatabaseError as e:
    print(str(e))
assert "psycopg" not in sys.modules  # the import really failed
""", URL)
    assert code == 0, err
    assert out.strip() == ("a postgresql:// database needs psycopg 3 (No module named "
                           f"'psycopg'): {HINT}"), out


def test_the_async_queue_raises_it_too() -> None:
    code, out, err = _run("""
import asyncio, sqlq

async def main():
    async with sqlq.AsyncQueue(sys.argv[1]) as aq:
        await aq.put(b"x")

try:
    asyncio.run(main())
except sqlq.DatabaseError as e:
    print(str(e))
""", URL)
    assert code == 0, err
    assert HINT in out and out.count("\n") == 1, out


@pytest.mark.parametrize("command", [["stats"], ["put", "hello"], ["reserve", "--timeout", "0"]])
def test_the_cli_prints_one_line_and_exits_1(command: list[str]) -> None:
    code, out, err = _run("""
from sqlq.cli import main
sys.argv = ["sqlq", *sys.argv[1:]]
main()
""", "--db", URL, *command)
    assert (code, out) == (1, ""), (code, out, err)
    assert err == ("sqlq: a postgresql:// database needs psycopg 3 (No module named "
                   f"'psycopg'): {HINT}\n"), err
    assert "s3cret" not in err
