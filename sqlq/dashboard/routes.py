"""The dashboard's pages and actions: one method per route, each one or two Queue calls.

Pages are GETs and never change anything. Actions are POSTs to ``/actions/VERB``; the
Guard checks them (token, CSRF, read-only) before any runs, and each answers with a
redirect back to the page it came from (post/redirect/get), carrying a one-line note.
Bulk actions that destroy or move many jobs need ``confirm=yes`` (the page's script
asks the operator first); without it they change nothing.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from sqlq import limits as flow
from sqlq.durations import format_duration, now_ms, parse_duration
from sqlq.errors import Error, JobNotFound
from sqlq.model import STATE_NAMES

from . import views
from .live import History
from .security import COOKIE, AccessDenied, Guard

PAGE = 50
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".svg": "image/svg+xml"}


@dataclass
class Request:
    """What a route needs of an HTTP request (parsed by app.py)."""

    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    form: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    client: str = ""  # the peer's address, for the audit log

    def arg(self, name: str, default: str = "") -> str:
        return self.query.get(name, default)

    def field(self, name: str, default: str = "") -> str:
        values = self.form.get(name)
        return values[0] if values else default


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


def _redirect(to: str, note: str = "") -> Response:
    if note:
        to += ("&" if "?" in to else "?") + urlencode({"note": note})
    return Response(303, b"", headers={"Location": to})


def _local(path: str) -> str:
    """Only a path on this site may be redirected to: not ``//evil.example`` nor
    ``/\\evil.example`` (browsers read both as another host), and nothing that could
    end the Location header (control characters)."""
    safe = (path.startswith("/") and path[1:2] not in ("/", "\\")
            and all(" " < c != "\\" for c in path))
    return path if safe else "/"


def _job_id(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"not a job id: {text!r}")
    return int(text)


class Dashboard:
    """The routes over one Queue (shared by the server's threads: Queue calls serialise)."""

    def __init__(self, queue: Any, guard: Guard, schedules: Mapping[str, Any]) -> None:
        self.queue = queue
        self.guard = guard
        self.schedules = schedules  # periodic task name -> Schedule (sqlq dashboard --import)
        self.env = views.make_env()
        self.history = History()
        self.pages: dict[str, Callable[[Request], Response]] = {
            "/": self.overview, "/tube": self.tube, "/job": self.job,
            "/workers": self.workers, "/periodic": self.periodic, "/topics": self.topics,
            "/api/overview": self.api_overview, "/metrics": self.metrics,
            "/login": self.login,
        }
        self.actions: dict[str, Callable[[Request], str]] = {
            "kick-job": self.kick_job, "delete-job": self.delete_job,
            "kick-all": self.kick_all, "bulk": self.bulk,
            "pause": self.pause, "resume": self.resume, "limit": self.limit,
        }

    # -- dispatch ------------------------------------------------------------------------------

    def handle(self, req: Request) -> Response:
        """Check access, then run the route; errors become pages, never tracebacks."""
        try:
            if req.path == "/login":
                return self.login(req)
            if req.path.startswith("/static/"):
                return self.static(req)
            self.guard.check_request(req.headers, req.cookies)
            if req.method == "POST" and req.path.startswith("/actions/"):
                return self.act(req)
            page = self.pages.get(req.path)
            if page is None or req.method not in ("GET", "HEAD"):
                return self.error(404 if page is None else 405, "no such page")
            return page(req)
        except AccessDenied as exc:
            if exc.status == 401 and req.method == "GET" and req.path in self.pages \
                    and req.path not in ("/metrics", "/api/overview"):
                return _redirect("/login")
            return self.error(exc.status, str(exc))
        except JobNotFound as exc:
            return self.error(404, str(exc))
        except (Error, ValueError) as exc:
            return self.error(400, str(exc))
        except Exception:  # noqa: BLE001 - logged in full; the browser gets a page
            traceback.print_exc()
            return self.error(500, "internal error (the dashboard's log has the details)")

    def render(self, template: str, code: int = 200, **values: Any) -> Response:
        values.setdefault("note", "")
        html = self.env.get_template(template).render(
            read_only=self.guard.read_only, csrf=self.guard.csrf,
            guarded=self.guard.token is not None, page=template.removesuffix(".html"),
            **values)
        return Response(code, html.encode())

    def error(self, status: int, message: str) -> Response:
        return self.render("error.html", status, status=status, message=message)

    def static(self, req: Request) -> Response:
        name = req.path.removeprefix("/static/")
        kind = STATIC_TYPES.get(name[name.rfind("."):] if "." in name else "")
        if kind is None or "/" in name or name.startswith("."):
            return self.error(404, "no such file")
        try:
            data = resources.files("sqlq.dashboard").joinpath("static", name).read_bytes()
        except OSError:
            return self.error(404, "no such file")
        return Response(200, data, kind, {"Cache-Control": "max-age=3600"})

    # -- pages ---------------------------------------------------------------------------------

    def overview(self, req: Request) -> Response:
        view = self.queue.overview()
        self.history.record(view.puts_total, view.deletes_total)
        durations = {(h.tube, h.metric): h for h in self.queue.duration_histograms()}
        return self.render("overview.html", view=view, now=view.at, note=req.arg("note"),
                           workers=len(self.queue.workers()), durations=durations)

    def api_overview(self, req: Request) -> Response:
        """What the page's script polls (every 2 s while the tab is visible)."""
        view = self.queue.overview()
        self.history.record(view.puts_total, view.deletes_total)
        durations = {(h.tube, h.metric): h for h in self.queue.duration_histograms()}
        tubes = {t.name: {"ready": t.ready, "urgent": t.urgent, "reserved": t.reserved,
                          "delayed": t.delayed, "buried": t.buried, "live": t.live,
                          "oldest": views.age(t.oldest_ready_at, view.at),
                          "paused": views.until(t.paused_until, view.at)
                          if t.paused_until else "",
                          "wait": views.quantiles(durations.get((t.name, "wait"))),
                          "run": views.quantiles(durations.get((t.name, "run")))}
                 for t in view.tubes}
        data = {"at": view.at, "puts": view.puts_total, "deletes": view.deletes_total,
                "live": view.live, "tubes": tubes,
                "rates": [[p.at, round(p.puts, 2), round(p.done, 2)]
                          for p in self.history.points()]}
        return Response(200, json.dumps(data).encode(), "application/json")

    def tube(self, req: Request) -> Response:
        name = req.arg("name", "default")
        state = req.arg("state", "ready")
        if state not in STATE_NAMES:
            raise ValueError(f"no state {state!r}")
        text = req.arg("q").strip()
        summary = self.queue.tube_summary(name)
        after = None
        if req.arg("after"):
            key, _, job = req.arg("after").partition(":")
            after = (int(key), int(job))
        if text:
            jobs = self.queue.search(name, text, limit=PAGE)
        else:
            jobs = self.queue.job_page(name, state, after=after, limit=PAGE)
        more = None if text or len(jobs) < PAGE else "{}:{}".format(*jobs[-1].cursor)
        return self.render("tube.html", tube=summary, state=state, jobs=jobs, query=text,
                           more=more, paged=after is not None, note=req.arg("note"),
                           now=now_ms(), limits=self.queue.limits().get(name),
                           format_rate=flow.format_rate)

    def job(self, req: Request) -> Response:
        job_id = _job_id(req.arg("id"))
        job = self.queue.peek(job_id)
        result = self.queue.kept_result(job_id)
        if job is None and result is None:
            raise JobNotFound(f"job {job_id} not found (deleted, or its result expired)")
        return self.render("job.html", job_id=job_id, job=job, note=req.arg("note"),
                           attempts=self.queue.attempts(job_id) if job else [],
                           body=views.show_body(job.body) if job else None,
                           result=views.show_body(result) if result is not None else None,
                           now=now_ms())

    def workers(self, req: Request) -> Response:
        return self.render("workers.html", workers=self.queue.workers(),
                           now=now_ms())

    def periodic(self, req: Request) -> Response:
        now = now_ms()
        last = {slot.name: slot for slot in self.queue.periodic_slots()}
        rows = [{"name": name, "last": last.get(name),
                 "schedule": self.schedules.get(name),
                 "next": self.schedules[name].next_slot(now) if name in self.schedules
                 else None}
                for name in sorted(set(last) | set(self.schedules))]
        return self.render("periodic.html", rows=rows, now=now,
                           known=bool(self.schedules))

    def topics(self, req: Request) -> Response:
        topics: dict[str, list[str]] = {}
        for topic, tube in self.queue.subscriptions():
            topics.setdefault(topic, []).append(tube)
        return self.render("topics.html", topics=topics)

    def metrics(self, req: Request) -> Response:
        from . import metrics

        return Response(200, metrics.render(self.queue), metrics.CONTENT_TYPE)

    def login(self, req: Request) -> Response:
        if self.guard.token is None:
            return _redirect("/")
        if req.method == "POST":
            if self.guard.check_login(req.field("token")):
                cookie = (f"{COOKIE}={self.guard.session}; HttpOnly; SameSite=Strict; "
                          "Path=/")
                return Response(303, b"", headers={"Location": "/", "Set-Cookie": cookie})
            return self.render("login.html", 401, note="wrong token")
        return self.render("login.html")

    # -- actions -------------------------------------------------------------------------------

    def act(self, req: Request) -> Response:
        self.guard.check_action({"csrf": req.field("csrf")}, req.headers)
        action = self.actions.get(req.path.removeprefix("/actions/"))
        if action is None:
            return self.error(404, "no such action")
        back = _local(req.field("next", "/"))
        note = action(req)
        # The audit trail: who changed what, next to the server's request log.
        sys.stderr.write(f"sqlq dashboard: {req.client} {req.path.removeprefix('/actions/')}: "
                         f"{note}\n")
        return _redirect(back, note)

    def kick_job(self, req: Request) -> str:
        job_id = _job_id(req.field("id"))
        self.queue.kick_job(job_id)
        return f"job {job_id} kicked"

    def delete_job(self, req: Request) -> str:
        job_id = _job_id(req.field("id"))
        self.queue.delete(job_id)
        return f"job {job_id} deleted"

    def kick_all(self, req: Request) -> str:
        tube = req.field("tube")
        if req.field("confirm") != "yes":
            return "nothing kicked: confirm first"
        if not self.queue.tube_summary(tube).buried:
            return "no buried job to kick"  # kick() would kick delayed jobs instead
        return f"{self.queue.kick(2**31, tube)} jobs kicked"

    def bulk(self, req: Request) -> str:
        ids = [_job_id(i) for i in req.form.get("ids", [])]
        verb = req.field("verb")
        if verb not in ("kick", "delete"):
            raise ValueError(f"no bulk action {verb!r}")
        if req.field("confirm") != "yes":
            return f"nothing done: confirm the {verb} of {len(ids)} jobs first"
        done = 0
        for job_id in ids:
            try:
                (self.queue.kick_job if verb == "kick" else self.queue.delete)(job_id)
                done += 1
            except JobNotFound:
                continue  # gone or moved meanwhile: the note says how many were done
        past = "kicked" if verb == "kick" else "deleted"
        return f"{done} of {len(ids)} jobs {past}"

    def pause(self, req: Request) -> str:
        seconds = parse_duration(req.field("duration", "1h"))
        self.queue.pause_tube(req.field("tube"), seconds)
        return f"tube paused for {format_duration(seconds)}"

    def resume(self, req: Request) -> str:
        self.queue.pause_tube(req.field("tube"), 0)
        return "tube resumed"

    def limit(self, req: Request) -> str:
        """Set the tube's limits from the form (a field left empty: no such limit)."""
        tube = req.field("tube")
        doc = self.queue.limit(tube, concurrency=flow.parse_concurrency(req.field("concurrency")),
                               rate=flow.parse_rate_limit(req.field("rate")))
        cap, rate = doc["concurrency"], doc["rate"]
        return (f"limits of {tube}: concurrency {cap if cap is not None else 'none'}, "
                f"rate {flow.format_rate(*rate) if rate is not None else 'none'}")
