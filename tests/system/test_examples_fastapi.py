"""examples/fastapi_app.py for real: uvicorn serving it, ``sqlq work`` running its task,
HTTP requests from outside, the lifespan hook opening and closing the AsyncQueue."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests import forkserver
from tests.conftest import ROOT
from tests.servers import free_port
from tests.workers import wait_for

pytestmark = pytest.mark.timeout(90)


@pytest.mark.slow
def test_fastapi_app_enqueues_and_awaits_results(tmp_path: Path) -> None:
    env = dict(os.environ, SQLQ_DB=str(tmp_path / "app.db"),
               PYTHONPATH=f"{ROOT / 'examples'}{os.pathsep}{ROOT}")
    port = free_port()
    web = forkserver.Popen(
        [sys.executable, "-m", "uvicorn", "fastapi_app:app", "--port", str(port),
         "--log-level", "info", "--no-access-log"], env=env, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    worker = forkserver.Popen(
        [sys.executable, "-m", "sqlq", "work", "--import", "fastapi_app", "--concurrency", "20"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            try:
                return httpx.get(f"{base}/jobs/1").status_code in (404, 200)
            except httpx.HTTPError:
                return False

        wait_for(up, timeout=30, what="uvicorn to listen")
        r = httpx.post(f"{base}/thumbnails", params={"url": "https://x.test/cat.jpg"},
                       timeout=15)
        assert r.status_code == 200, r.text
        assert r.json()["thumbnail"] == "cat.jpg.thumb.jpg"

        # Many requests waiting at once: each gets its own result.
        def ask(i: int) -> str:
            got = httpx.post(f"{base}/thumbnails", params={"url": f"https://x.test/{i}.jpg"},
                             timeout=30)
            assert got.status_code == 200, got.text
            return str(got.json()["thumbnail"])

        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            thumbs = list(pool.map(ask, range(64)))
        assert thumbs == [f"{i}.jpg.thumb.jpg" for i in range(64)]

        later = httpx.post(f"{base}/thumbnails/later", params={"url": "https://x.test/d.jpg"})
        job = later.json()["job"]
        wait_for(lambda: httpx.get(f"{base}/jobs/{job}").json()["state"] == "done",
                 what="the later job")
    finally:
        for proc in (web, worker):
            proc.send_signal(signal.SIGTERM)
        outputs = [proc.communicate(timeout=20)[0] for proc in (web, worker)]
    # uvicorn re-raises the signal once it has shut down: -SIGTERM is its clean exit.
    assert web.returncode in (0, -signal.SIGTERM), outputs[0]
    assert "Application shutdown complete" in outputs[0], outputs[0]  # the lifespan hook ran
    assert "Traceback" not in outputs[0], outputs[0]
    assert worker.returncode == 0, outputs[1]
