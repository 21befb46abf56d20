"""The HTTP server: the standard library's threading server around :class:`Dashboard`.

Why no web framework: the dashboard is a dozen routes for a few operators, and the
standard library serves that without an ASGI server or a second event loop, with
nothing to configure and nothing to keep up to date. Each request runs in its own
thread, reads the queue in one short read transaction (WAL: writers never wait for
it) and answers; the browser polls every 2 s, so no connection is held open, and
with no browser open the server sleeps in ``select`` and uses no CPU at all.
"""

from __future__ import annotations

import contextlib
import http.cookies
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .routes import Dashboard, Request, Response, utc_stamp
from .security import HEADERS, Guard, loggable, parse_listen
from .traces import check_trace_url

#: The largest form accepted (a bulk action on a page of ids is a few KiB).
MAX_FORM = 256 * 1024


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: without this, Nagle's algorithm holds the
    # body until the client's delayed ACK, 40 ms added to every keep-alive request.
    disable_nagle_algorithm = True
    # A client that stops sending (or an idle keep-alive) gives its thread back.
    timeout = 60
    server_version = "sqlq-dashboard"
    sys_version = ""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._serve("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve("HEAD")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        form: dict[str, list[str]] = {}
        if method == "POST":
            length_header = self.headers.get("Content-Length") or "0"
            length = int(length_header) if length_header.isdigit() else -1
            if not 0 <= length <= MAX_FORM:
                self.close_connection = True  # the unread body must not be taken for a request
                self._send(Response(413 if length > 0 else 400, b"bad or too large form",
                                    "text/plain"))
                return
            raw = self.rfile.read(length).decode("utf-8", "replace")
            form = parse_qs(raw, keep_blank_values=True)
        cookies = http.cookies.SimpleCookie()
        with contextlib.suppress(http.cookies.CookieError):
            cookies.load(self.headers.get("Cookie", ""))
        req = Request(method, url.path,
                      {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()},
                      form, dict(self.headers.items()),
                      {k: m.value for k, m in cookies.items()}, self.client_address[0])
        self._send(self.server.dashboard.handle(req), head=method == "HEAD")

    def _send(self, resp: Response, head: bool = False) -> None:
        self.send_response(resp.status)
        for name, value in {**HEADERS, **resp.headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(resp.body)))
        self.end_headers()
        if not head:
            self.wfile.write(resp.body)

    def log_message(self, format: str, *args: Any) -> None:
        # Stamped as the audit lines are; never a query string of an action, nor a token.
        if self.server.log:
            sys.stderr.write(f"{utc_stamp()} {self.address_string()} "
                             f"{loggable(format % args)}\n")


class DashboardServer(ThreadingHTTPServer):
    """A threading HTTP server bound to ``listen`` that serves one :class:`Dashboard`."""

    daemon_threads = True

    def __init__(self, queue: Any, listen: str = "127.0.0.1:8080", *,
                 token: str | None = None, read_only: bool = False, log: bool = False,
                 schedules: Mapping[str, Any] | None = None,
                 periodic_tubes: Mapping[str, str] | None = None,
                 trace_url: str | None = None) -> None:
        host, port = parse_listen(listen)
        guard = Guard(host, port, token=token, read_only=read_only)  # refuses before binding
        if trace_url is not None:
            check_trace_url(trace_url)
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)
        guard.port = self.server_address[1]
        self.dashboard = Dashboard(queue, guard, schedules or {}, periodic_tubes, trace_url)
        self.log = log

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), int(self.server_address[1])
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(queue: Any, listen: str, *, token: str | None = None, read_only: bool = False,
          ready: Callable[[str], None] | None = None,
          schedules: Mapping[str, Any] | None = None,
          periodic_tubes: Mapping[str, str] | None = None,
          trace_url: str | None = None) -> None:
    """Serve the dashboard until SIGTERM or Ctrl-C (``schedules``: periodic task name ->
    its ``Schedule``, for the next slots; ``periodic_tubes``: name -> the tube it enqueues
    into, to warn when no worker watches it; ``trace_url``: a link template for trace
    ids, such as ``https://jaeger.example/trace/{trace_id}``).

    Raises:
        sqlq.Error: a non-loopback address without a token; a ``trace_url`` without
            ``{trace_id}`` or not an http(s) URL.
        OSError: the address cannot be bound.
    """
    server = DashboardServer(queue, listen, token=token, read_only=read_only, log=True,
                             schedules=schedules, periodic_tubes=periodic_tubes,
                             trace_url=trace_url)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if ready is not None:
        ready(server.url)
    try:
        # No poll interval: the thread sleeps in select until a request comes (no idle CPU);
        # Ctrl-C and SIGTERM interrupt it in this, the main, thread.
        server.serve_forever(poll_interval=None)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
