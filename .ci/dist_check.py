"""Check the wheel in dist/ ships what an installed sqlq reads from its package.

``make release-check`` (``.ci/release_check.py``) runs this on each wheel it builds (the
wheel given as the argument, else the first in dist/). The migrations
(``sqlq/_migrations/<dialect>/*.sql``, from the top-level ``migrations/``) and the
dashboard's templates and static files are package data: a wheel without them installs
cleanly and fails on first use.
Prints what it found; exits 1 if something is missing.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Files the check names: one of each kind that must be there.
REQUIRED = ("sqlq/dashboard/static/dashboard.js", "sqlq/dashboard/templates/overview.html")


def main() -> int:
    wheels = [Path(a) for a in sys.argv[1:2]] or sorted((ROOT / "dist").glob("*.whl"))
    if not wheels:
        print("dist-check: no wheel in dist/", file=sys.stderr)
        return 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    migrations = [n for n in names if n.startswith("sqlq/_migrations/") and n.endswith(".sql")]
    assets = [n for n in names if n.startswith("sqlq/dashboard/")
              and n.endswith((".html", ".css", ".js", ".svg"))]
    print("\n".join(migrations + assets))
    missing = [n for n in REQUIRED if n not in assets]
    missing += [f"sqlq/_migrations/{d}/0001_initial.sql" for d in ("sqlite", "postgres")
                if f"sqlq/_migrations/{d}/0001_initial.sql" not in migrations]
    if missing:
        print(f"dist-check: {wheels[0].name} lacks {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
