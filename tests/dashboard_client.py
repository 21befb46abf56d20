"""A dashboard server in a thread of the test process, and a client that never follows
redirects (tests look at the 303s themselves)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlencode

import sqlq
from sqlq.dashboard import DashboardServer


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class Client:
    def __init__(self, base: str, server: DashboardServer) -> None:
        self.base = base.rstrip("/")
        self.server = server

    @property
    def csrf(self) -> str:
        return self.server.dashboard.guard.csrf

    def request(self, method: str, path: str, form: dict[str, object] | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        data = None if form is None else urlencode(form, doseq=True).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=headers or {})
        try:
            with _OPENER.open(req, timeout=30) as resp:
                return Reply(resp.status, dict(resp.headers.items()), resp.read().decode())
        except urllib.error.HTTPError as err:
            return Reply(err.code, dict(err.headers.items()), err.read().decode())

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        return self.request("GET", path, headers=headers)

    def post(self, path: str, form: dict[str, object],
             headers: dict[str, str] | None = None) -> Reply:
        return self.request("POST", path, form, headers)


@contextmanager
def running(queue: sqlq.Queue, **options: object) -> Iterator[Client]:
    """A dashboard over ``queue`` on a free loopback port, stopped on exit."""
    server = DashboardServer(queue, "127.0.0.1:0", **options)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    try:
        yield Client(server.url, server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
