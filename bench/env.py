"""Bootstrap (stdlib only): the bench virtualenv, beanstalkd, and machine facts.

``make bench`` runs bench/run.py with the project's .venv python; run.py calls
``ensure_venv`` and re-executes itself with ``.venv-bench/bin/python``. That venv
holds the peers (pip) and sqlq's own dependencies read from pyproject.toml; sqlq
itself is imported from the work tree through a ``.pth`` file (no build step, so
the bench always measures the checked-out code).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-bench"
VPY = VENV / "bin" / "python"
STAMP = VENV / ".bench-installed"
HONKER_NOTE = VENV / ".honker-note"
PEERS = ["greenstalk", "huey", "persist-queue", "litequeue", "matplotlib",
         # the PostgreSQL peers, their drivers, and the raw psycopg floor (pg_peers.py)
         "procrastinate", "pgqueuer", "asyncpg", "psycopg[binary]>=3.2.10"]
HONKER_TIMEOUT = 300

Log = Callable[[str], None]


def in_bench_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def sqlq_requirements() -> list[str]:
    """sqlq's runtime dependencies, read from pyproject.toml [project].dependencies."""
    text = (ROOT / "pyproject.toml").read_text()
    try:
        import tomllib

        deps = list(tomllib.loads(text).get("project", {}).get("dependencies", []))
    except ImportError:  # Python 3.10: the list is simple enough to read by hand
        block = text.split("dependencies = [", 1)[1].split("]", 1)[0]
        deps = [ln.strip().strip(",").strip('"') for ln in block.splitlines() if '"' in ln]
    if not any(d.lower().startswith("apsw") for d in deps):
        deps.append("apsw")
    return deps


def _pip(args: list[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VPY), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=timeout,
    )


def _honker_reason(out: str) -> str:
    text = out.lower()
    if "crates.io" in text or "cargo" in text or "maturin" in text:
        return ("no wheel on PyPI for this Python/platform; building the sdist needs Rust "
                "crates from crates.io, which this machine cannot reach")
    if "no matching distribution" in text:
        return "no installable distribution on the package index"
    tail = [ln for ln in out.strip().splitlines() if ln.strip() and "WARNING" not in ln]
    return "pip install honker failed: " + (tail[-1][:200] if tail else "?")


def _install_honker(log: Log) -> str:
    """'' when honker installed, else the reason it is skipped."""
    log("  trying honker (wheel first, then a source build with a timeout)...")
    r = _pip(["install", "-q", "--only-binary", ":all:", "honker"], timeout=120)
    if r.returncode == 0:
        return ""
    try:
        r = _pip(["install", "-q", "honker"], timeout=HONKER_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"pip install honker did not finish in {HONKER_TIMEOUT} s (source build)"
    return "" if r.returncode == 0 else _honker_reason(r.stdout + r.stderr)


def ensure_venv(log: Log, *, retry_honker: bool = False) -> None:
    """Create/refresh .venv-bench when the wanted package set changed."""
    reqs = sorted(PEERS + sqlq_requirements())
    want = hashlib.sha256(json.dumps(reqs).encode()).hexdigest()
    if VPY.exists() and STAMP.exists() and STAMP.read_text() == want and not retry_honker:
        return
    if not VPY.exists():
        log(f"creating {VENV.relative_to(ROOT)} (peers go there, not into .venv)")
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
    log("installing into .venv-bench: " + " ".join(reqs))
    r = _pip(["install", "-q", *reqs])
    if r.returncode != 0:
        sys.exit("pip install failed for the bench venv:\n" + (r.stderr or r.stdout)[-3000:])
    site = subprocess.run(
        [str(VPY), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    # sqlq from the work tree, without building it: a .pth line puts the repo root on sys.path.
    (Path(site) / "sqlq-worktree.pth").write_text(str(ROOT) + "\n")
    if retry_honker or not HONKER_NOTE.exists():
        HONKER_NOTE.write_text(_install_honker(log))
    STAMP.write_text(want)


def honker_note() -> str:
    return HONKER_NOTE.read_text().strip() if HONKER_NOTE.exists() else "not tried"


def reexec_in_venv(argv: list[str]) -> None:
    os.execv(str(VPY), [str(VPY), str(Path(__file__).parent / "run.py"), *argv])


# --------------------------------------------------------------------- beanstalkd


def ensure_beanstalkd(log: Log, *, install: bool = True) -> tuple[str | None, str]:
    """(path, '') when beanstalkd is usable, else (None, why it is skipped).

    Installs Debian's package when missing and the machine allows it (root + apt).
    The package's service is never started: policy-rc.d denies starts during the
    install, and the unit we just installed is disabled again (the bench starts
    its own servers on 127.0.0.1 on free ports).
    """
    path = shutil.which("beanstalkd")
    if path:
        return path, ""
    if not install:
        return None, "beanstalkd is not installed (run without --no-install to install it)"
    if os.geteuid() != 0:
        return None, "beanstalkd is not installed and installing it needs root (apt-get)"
    if not shutil.which("apt-get"):
        return None, "beanstalkd is not installed and this machine has no apt-get"
    log("installing Debian's beanstalkd (apt-get; its service is not started)...")
    policy = Path("/usr/sbin/policy-rc.d")
    made_policy = False
    if not policy.exists():
        policy.write_text("#!/bin/sh\n# sqlq bench: no service starts during install\nexit 101\n")
        policy.chmod(0o755)
        made_policy = True
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "beanstalkd"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    finally:
        if made_policy:
            policy.unlink()
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()
        return None, "apt-get install beanstalkd failed: " + (tail[-1] if tail else "?")
    if shutil.which("systemctl"):
        subprocess.run(["systemctl", "disable", "beanstalkd.service", "beanstalkd.socket"],
                       capture_output=True)
    path = shutil.which("beanstalkd")
    return (path, "") if path else (None, "beanstalkd installed but not on PATH")


# ---------------------------------------------------------------------- machine


def machine_facts() -> dict[str, str]:
    facts = {
        "cores": str(os.cpu_count()),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
        facts["memory"] = f"{int(mem) / (1 << 20):.0f} GiB"
    except (OSError, IndexError, ValueError):
        pass
    try:
        import apsw

        facts["sqlite (apsw)"] = apsw.sqlite_lib_version()
    except ImportError:
        pass
    import sqlite3

    facts["sqlite (stdlib sqlite3)"] = sqlite3.sqlite_version
    df = subprocess.run(["df", "-T", "/tmp"], capture_output=True, text=True).stdout.splitlines()
    if len(df) > 1:
        parts = df[1].split()
        facts["/tmp filesystem"] = f"{parts[1]} on {parts[0]}"
    return facts
