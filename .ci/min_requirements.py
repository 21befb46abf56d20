"""Print pyproject.toml's dependencies pinned to their lower bounds (``pkg==floor``).

``make test-min`` installs these into a venv of their own and runs the fast tests,
so a floor in pyproject.toml is a version the suite has passed with, not a guess
(a floor below ``tenacity.wait_exponential_jitter(multiplier=)`` once made every
``@q.task`` a TypeError). With ``--check`` it instead checks that the running
interpreter has exactly those versions installed, so the run cannot silently test
newer ones.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# name, optional extras, ">=" floor, optional environment marker
_REQ = re.compile(r"^\s*([A-Za-z0-9._-]+)(\[[^\]]*\])?\s*>=\s*([0-9][^,;\s]*)[^;]*(;.*)?$")


#: Optional extras whose floors are tested too (their tests are among make test-min's).
EXTRAS = ("django", "flask")


def dependencies() -> list[str]:
    """The ``[project] dependencies`` strings of pyproject.toml, and those of EXTRAS."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: CI's interpreter is newer, this is a fallback
        text = (ROOT / "pyproject.toml").read_text()
        blocks = [text.split("dependencies = [", 1)[1].split("]", 1)[0]]
        blocks += [text.split(f"\n{extra} = [", 1)[1].split("]", 1)[0] for extra in EXTRAS]
        return [req for block in blocks for req in re.findall(r'"([^"]+)"', block)]
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    extras = project["optional-dependencies"]
    return list(project["dependencies"]) + [req for extra in EXTRAS for req in extras[extra]]


def pins() -> list[tuple[str, str, str]]:
    """(name, floor, marker) for every dependency; each must have a ``>=`` floor."""
    found = []
    for req in dependencies():
        match = _REQ.match(req)
        if match is None:
            sys.exit(f"min_requirements: {req!r} has no '>=' lower bound")
        name, _extras, floor, marker = match.groups()
        found.append((name, floor, (marker or "").strip()))
    return found


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        wrong = []
        for name, floor, marker in pins():
            if marker and not _marker_holds(marker[1:]):
                continue
            installed = metadata.version(name)
            if installed != floor:
                wrong.append(f"{name} {installed} (floor {floor})")
        if wrong:
            print("not at the floor: " + ", ".join(wrong), file=sys.stderr)
            return 1
        print("dependencies at their floors: " + ", ".join(f"{n}=={f}" for n, f, _ in pins()))
        return 0
    for name, floor, marker in pins():
        print(f"{name}=={floor}{' ' + marker if marker else ''}")
    return 0


def _marker_holds(marker: str) -> bool:
    # Only the markers pyproject uses: sys_platform == '...', python_version < 'X.Y'.
    match = re.fullmatch(r"\s*sys_platform\s*==\s*['\"]([^'\"]+)['\"]\s*", marker)
    if match is not None:
        return sys.platform == match.group(1)
    match = re.fullmatch(r"\s*python_version\s*<\s*['\"](\d+)\.(\d+)['\"]\s*", marker)
    if match is not None:
        return sys.version_info[:2] < (int(match.group(1)), int(match.group(2)))
    sys.exit(f"min_requirements: cannot evaluate marker {marker!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
