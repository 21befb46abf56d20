"""The dashboard's pages and actions: one method per route, each one or two Queue calls.

Pages are GETs and never change anything. Actions are POSTs to ``/actions/VERB``; the
Guard checks them (token, CSRF, read-only) before any runs, and each answers with a
redirect back to the page it came from (post/redirect/get), carrying a one-line note.
Bulk actions that destroy or move many jobs need ``confirm=yes`` (the page's script
asks the operator first); without it they change nothing. Each action writes one audit
line on stderr: when (UTC), the client, the action, its note, and the tubes and job ids
it acted on (:class:`Done`). ``/login`` returns to ``next``, a path on this site only;
``POST /logout`` (with the CSRF token) ends the browser's session.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from sqlq import failures
from sqlq.core import limits as flow
from sqlq.core.durations import format_duration, now_ms, parse_duration
from sqlq.errors import Error, JobNotFound
from sqlq.finished import OUTCOMES, Finished
from sqlq.horizon import DOCS_PAGE, Thresholds, alarms, format_size
from sqlq.model import STATE_NAMES

from . import views
from .live import History
from .security import COOKIE, AccessDenied, Guard
from .traces import TraceRef, trace_ref

PAGE = 50
#: Groups listed on a tube's page (the busiest; /metrics has none per group).
GROUPS = 10
#: Parents or children of a job its page links to (a parent may have thousands).
SHOWN_LINKS = 100
#: Jobs of a failed-jobs group retried or deleted per request, at most.
GROUP_STEP = 1000
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


@dataclass
class Done:
    """What an action did: the note shown to the operator, and for the audit log the
    tubes and the job ids it acted on."""

    note: str
    tubes: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    unlisted: int = 0  # jobs acted on beyond ``ids`` (a kick of a whole tube)

    def audit(self) -> str:
        """The audit log's account: the note, then the tubes and ids acted on."""
        parts = [self.note]
        if self.tubes:
            parts.append("tube " + ",".join(sorted(set(self.tubes))))
        if self.ids:
            more = f" and {self.unlisted} more" if self.unlisted else ""
            parts.append("jobs " + ",".join(map(str, self.ids)) + more)
        return "; ".join(parts)


def utc_stamp() -> str:
    """Now in UTC to the second, as the audit and request log lines begin."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


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


def _login_url(req: Request) -> str:
    """/login, with the page asked for as ``next`` (the overview needs none)."""
    asked = req.path + ("?" + urlencode(req.query) if req.query else "")
    return "/login" if asked == "/" else "/login?" + urlencode({"next": asked})


def _job_id(text: str) -> int:
    # ASCII only: int() reads "١" or "１" as 1, and cancel-job must act on no job not named.
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"not a job id: {text!r}")
    return int(text)


class Dashboard:
    """The routes over one Queue (shared by the server's threads: Queue calls serialise)."""

    def __init__(self, queue: Any, guard: Guard, schedules: Mapping[str, Any],
                 periodic_tubes: Mapping[str, str] | None = None,
                 trace_url: str | None = None) -> None:
        self.queue = queue
        self.guard = guard
        self.schedules = schedules  # periodic task name -> Schedule (sqlq dashboard --import)
        self.periodic_tubes = periodic_tubes or {}  # and -> the tube it enqueues into
        self.trace_url = trace_url  # checked by traces.check_trace_url
        self.env = views.make_env()
        self.history = History()
        #: When the overview warns that cleanup is held back ($SQLQ_WARN_HORIZON_AGE, ...).
        self.thresholds = Thresholds.from_env()
        self.pages: dict[str, Callable[[Request], Response]] = {
            "/": self.overview, "/tube": self.tube, "/job": self.job,
            "/workers": self.workers, "/failed": self.failed, "/periodic": self.periodic,
            "/topics": self.topics, "/horizon": self.horizon,
            "/api/overview": self.api_overview, "/metrics": self.metrics,
            "/login": self.login,
        }
        self.actions: dict[str, Callable[[Request], Done]] = {
            "kick-job": self.kick_job, "delete-job": self.delete_job,
            "cancel-job": self.cancel_job,
            "kick-all": self.kick_all, "bulk": self.bulk, "group": self.group,
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
            if req.method == "POST" and req.path == "/logout":
                return self.logout(req)
            page = self.pages.get(req.path)
            if page is None or req.method not in ("GET", "HEAD"):
                return self.error(404 if page is None else 405, "no such page")
            return page(req)
        except AccessDenied as exc:
            if exc.status == 401 and req.method == "GET" and req.path in self.pages \
                    and req.path not in ("/metrics", "/api/overview"):
                return _redirect(_login_url(req))
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
        view = self.queue.views.overview()
        self.history.record(view.puts_total, view.deletes_total)
        durations = {(h.tube, h.metric): h for h in self.queue.views.duration_histograms()}
        try:
            alerts = alarms(self.queue.views.horizon(), self.thresholds)
        except Error:  # the overview must show even if the horizon cannot be read
            alerts = {}
        return self.render("overview.html", view=view, now=view.at, note=req.arg("note"),
                           alerts=alerts,
                           workers=sum(1 for w in self.queue.views.workers()
                                       if w.alive and w.token),
                           durations=durations,
                           day=views.day_chart(self.queue.throughput(), view.at))

    def api_overview(self, req: Request) -> Response:
        """What the page's script polls (every 2 s while the tab is visible)."""
        view = self.queue.views.overview()
        self.history.record(view.puts_total, view.deletes_total)
        durations = {(h.tube, h.metric): h for h in self.queue.views.duration_histograms()}
        tubes = {t.name: {"ready": t.ready, "urgent": t.urgent, "reserved": t.reserved,
                          "delayed": t.delayed, "buried": t.buried, "waiting": t.waiting,
                          "live": t.live,
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
        if state not in STATE_NAMES and state not in OUTCOMES:
            raise ValueError(f"no state {state!r}")
        text = req.arg("q").strip()
        summary = self.queue.views.tube_summary(name)
        after = None
        if req.arg("after"):
            key, _, job = req.arg("after").partition(":")
            after = (int(key), int(job))
        jobs: list[Any] = []
        ended: list[Finished] = []
        if state in OUTCOMES:  # the Done, Cancelled and Deleted lists: the records
            if text:
                ended = self.queue.views.search_finished(name, state, text, limit=PAGE)
            else:
                ended = self.queue.views.finished_page(name, state, after=after, limit=PAGE)
            more = (None if text or len(ended) < PAGE
                    else f"{ended[-1].ended_at}:{ended[-1].id}")
        elif text:
            jobs = self.queue.views.search(name, text, limit=PAGE)
            more = None
        else:
            jobs = self.queue.views.job_page(name, state, after=after, limit=PAGE)
            more = None if len(jobs) < PAGE else "{}:{}".format(*jobs[-1].cursor)
        return self.render("tube.html", tube=summary, state=state, jobs=jobs, ended=ended,
                           outcomes=OUTCOMES, query=text,
                           more=more, paged=after is not None, note=req.arg("note"),
                           now=now_ms(), limits=self.queue.limits().get(name),
                           groups=self.queue.views.tube_groups(name, limit=GROUPS),
                           format_rate=flow.format_rate)

    def job(self, req: Request) -> Response:
        job_id = _job_id(req.arg("id"))
        job = self.queue.peek(job_id)
        result = self.queue.views.kept_result(job_id)
        ended = self.queue.finished(job_id) if job is None else None
        if job is None and result is None and ended is None:
            raise JobNotFound(f"job {job_id} not found (never put, or its record pruned)")
        return self.render("job.html", job_id=job_id, job=job, note=req.arg("note"),
                           ended=ended,
                           head=views.show_body(ended.body) if ended is not None else None,
                           trace=self._trace(self.queue.views.job_trace(job_id)) if job else None,
                           trace_of=self._trace,
                           links=self._links(job_id) if job else None,
                           shown_links=SHOWN_LINKS,
                           progress=views.progress(self.queue, job_id) if job else None,
                           attempts=self.queue.attempts(job_id) if job else [],
                           steps=views.steps(self.queue, job_id) if job else
                           views.shown_steps(ended.steps, ended.cursors) if ended else None,
                           body=views.show_body(job.body) if job else None,
                           result=views.show_body(result) if result is not None else None,
                           now=now_ms())

    def _trace(self, context: str | None) -> TraceRef | None:
        return trace_ref(context, self.trace_url)

    def _links(self, job_id: int) -> Any:
        """The job's parents and children (none if it went since it was peeked)."""
        try:
            return self.queue.links(job_id)
        except JobNotFound:
            return None

    def failed(self, req: Request) -> Response:
        """Buried jobs of every tube, grouped by error (newest first), a page at a time."""
        page = int(req.arg("page", "1")) if req.arg("page", "1").isdigit() else 1
        page = max(page, 1)
        groups = self.queue.views.failed_groups(limit=PAGE + 1, offset=(page - 1) * PAGE)
        buried = sum(t.buried for t in self.queue.views.overview().tubes)
        return self.render("failed.html", groups=groups[:PAGE], number=page,
                           more=len(groups) > PAGE, buried=buried, depth=failures.DEPTH,
                           note=req.arg("note"), key=views.group_key)

    def workers(self, req: Request) -> Response:
        return self.render("workers.html", workers=self.queue.views.workers(),
                           now=now_ms())

    def periodic(self, req: Request) -> Response:
        """Each periodic task's last and next slot and, with ``--import``, its tube, with a
        warning when no running ``sqlq work`` watches it (its jobs would pile up unseen)."""
        now = now_ms()
        last = {slot.name: slot for slot in self.queue.views.periodic_slots()}
        watched = {tube for w in self.queue.views.workers() if w.registered and w.alive
                   for tube in w.tubes}
        rows = []
        for name in sorted(set(last) | set(self.schedules)):
            tube = self.periodic_tubes.get(name)
            rows.append({"name": name, "last": last.get(name), "tube": tube,
                         "schedule": self.schedules.get(name),
                         "next": self.schedules[name].next_slot(now) if name in self.schedules
                         else None,
                         "unwatched": tube is not None and tube not in watched,
                         "ready": self.queue.views.tube_summary(tube).ready
                         if tube is not None and tube not in watched else 0})
        return self.render("periodic.html", rows=rows, now=now,
                           known=bool(self.schedules))

    def topics(self, req: Request) -> Response:
        topics: dict[str, list[str]] = {}
        for topic, tube in self.queue.subscriptions():
            topics.setdefault(topic, []).append(tube)
        return self.render("topics.html", topics=topics)

    def horizon(self, req: Request) -> Response:
        """What holds back the cleanup of deleted jobs: every holder, the WAL, dead rows."""
        horizon = self.queue.views.horizon()
        return self.render("horizon.html", horizon=horizon, thresholds=self.thresholds,
                           alerts=alarms(horizon, self.thresholds), docs=DOCS_PAGE,
                           size=format_size, duration=format_duration)

    def metrics(self, req: Request) -> Response:
        from . import metrics

        return Response(200, metrics.render(self.queue), metrics.CONTENT_TYPE)

    def login(self, req: Request) -> Response:
        """The token form; on success a session cookie and a redirect to ``next``, the
        page that asked for a login (a path on this site only: no open redirect)."""
        if self.guard.token is None:
            return _redirect("/")
        if req.method == "POST":
            back = _local(req.field("next", "/"))
            if self.guard.check_login(req.field("token")):
                cookie = (f"{COOKIE}={self.guard.new_session()}; HttpOnly; SameSite=Strict; "
                          "Path=/")
                return Response(303, b"", headers={"Location": back, "Set-Cookie": cookie})
            return self.render("login.html", 401, note="wrong token", next=back)
        return self.render("login.html", next=_local(req.arg("next", "/")))

    def logout(self, req: Request) -> Response:
        """End this browser's session (a POST from our pages) and clear its cookie."""
        self.guard.check_form({"csrf": req.field("csrf")}, req.headers)
        self.guard.end_session(req.cookies.get(COOKIE, ""))
        cookie = f"{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
        return Response(303, b"", headers={"Location": "/login" if self.guard.token else "/",
                                           "Set-Cookie": cookie})

    # -- actions -------------------------------------------------------------------------------

    def act(self, req: Request) -> Response:
        self.guard.check_action({"csrf": req.field("csrf")}, req.headers)
        verb = req.path.removeprefix("/actions/")
        action = self.actions.get(verb)
        if action is None:
            return self.error(404, "no such action")
        done = action(req)
        back = self._back(_local(req.field("next", "/")), done)
        # The audit trail: when, who changed what (tubes, job ids), beside the request log.
        sys.stderr.write(f"sqlq dashboard: {utc_stamp()} {req.client} {verb}: "
                         f"{done.audit()}\n")
        return _redirect(back, done.note)

    def _back(self, back: str, done: Done) -> str:
        """Where to return after an action: ``back``, unless it is the page of a job the
        action made go (a cancel, a delete: it would answer 404); then its tube's page."""
        url = urlsplit(back)
        try:
            job_id = _job_id(parse_qs(url.query).get("id", [""])[0])
        except ValueError:
            return back
        if url.path != "/job" or job_id not in done.ids:
            return back
        if self.queue.peek(job_id) is not None or self.queue.views.kept_result(job_id) is not None:
            return back
        return views.tube_url(done.tubes[0]) if done.tubes else "/"

    def _tube_of(self, job_id: int) -> list[str]:
        job = self.queue.peek(job_id)
        return [] if job is None else [job.tube]

    def kick_job(self, req: Request) -> Done:
        job_id = _job_id(req.field("id"))
        tubes = self._tube_of(job_id)
        self.queue.kick_job(job_id)
        return Done(f"job {job_id} kicked", tubes, [job_id])

    def delete_job(self, req: Request) -> Done:
        job_id = _job_id(req.field("id"))
        tubes = self._tube_of(job_id)
        self.queue.delete(job_id, by="dashboard")
        return Done(f"job {job_id} deleted", tubes, [job_id])

    def cancel_job(self, req: Request) -> Done:
        job_id = _job_id(req.field("id"))
        tubes = self._tube_of(job_id)
        # A running one: its worker stops it within a second.
        self.queue.cancel(job_id, by="dashboard")
        return Done(f"job {job_id} cancelled", tubes, [job_id])

    def kick_all(self, req: Request) -> Done:
        tube = req.field("tube")
        if req.field("confirm") != "yes":
            return Done("nothing kicked: confirm first", [tube])
        if not self.queue.views.tube_summary(tube).buried:
            return Done("no buried job to kick", [tube])  # kick() would kick delayed jobs
        # kick() moves the oldest buried jobs first: the ids, read just before, are theirs
        # (a job buried meanwhile may be kicked too; the count says how many were). The
        # audit lists the first page of them and counts the rest.
        ids = [j.id for j in self.queue.views.job_page(tube, "buried", limit=500)]
        kicked = self.queue.kick(2**31, tube)
        return Done(f"{kicked} jobs kicked", [tube], ids[:kicked], max(kicked - len(ids), 0))

    def bulk(self, req: Request) -> Done:
        ids = [_job_id(i) for i in req.form.get("ids", [])]
        verb = req.field("verb")
        if verb not in ("kick", "delete"):
            raise ValueError(f"no bulk action {verb!r}")
        if req.field("confirm") != "yes":
            return Done(f"nothing done: confirm the {verb} of {len(ids)} jobs first")
        return self._each(verb, [(job_id, "") for job_id in ids])

    def _each(self, verb: str, jobs: list[tuple[int, str]], buried_only: bool = False) -> Done:
        """Kick or delete each job by id; one gone or moved meanwhile is skipped (with
        ``buried_only``, one no longer buried too: a group's delete must not take a job
        kicked and reserved since). A tube not given ("") is read from the job, for the
        audit log."""
        acted: list[int] = []
        tubes: list[str] = []
        for job_id, known in jobs:
            if buried_only or not known:
                job = self.queue.peek(job_id)
                if job is None or (buried_only and job.state != "buried"):
                    continue
                known = job.tube
            try:
                if verb == "kick":
                    self.queue.kick_job(job_id)
                else:
                    self.queue.delete(job_id, by="dashboard")
            except JobNotFound:
                continue  # gone or moved meanwhile: the note says how many were done
            acted.append(job_id)
            tubes.append(known)
        past = "kicked" if verb == "kick" else "deleted"
        return Done(f"{len(acted)} of {len(jobs)} jobs {past}", tubes, acted)

    def group(self, req: Request) -> Done:
        """Retry (kick) or delete the buried jobs of one group of the Failed page, the
        oldest :data:`GROUP_STEP` at most per request (one commit each: a request must
        end in seconds); the note says how many are left for the next click."""
        error, reason, location = views.group_from_key(req.field("key"))
        verb = req.field("verb")
        if verb not in ("kick", "delete"):
            raise ValueError(f"no group action {verb!r}")
        jobs = self.queue.views.failed_group_jobs(error, reason, location)
        if req.field("confirm") != "yes":
            return Done(f"nothing done: confirm the {verb} of {len(jobs)} jobs first")
        done = self._each(verb, jobs[:GROUP_STEP], buried_only=verb == "delete")
        if len(jobs) > GROUP_STEP:
            done.note += f" ({len(jobs) - GROUP_STEP} more in this group: again for the next)"
        return done

    def pause(self, req: Request) -> Done:
        seconds = parse_duration(req.field("duration", "1h"))
        tube = req.field("tube")
        self.queue.pause_tube(tube, seconds)
        return Done(f"tube paused for {format_duration(seconds)}", [tube])

    def resume(self, req: Request) -> Done:
        tube = req.field("tube")
        self.queue.pause_tube(tube, 0)
        return Done("tube resumed", [tube])

    def limit(self, req: Request) -> Done:
        """Set the tube's limits from the form (a field left empty: no such limit)."""
        tube = req.field("tube")
        doc = self.queue.limit(tube, concurrency=flow.parse_concurrency(req.field("concurrency")),
                               rate=flow.parse_rate_limit(req.field("rate")))
        cap, rate = doc["concurrency"], doc["rate"]
        return Done(f"limits of {tube}: concurrency {cap if cap is not None else 'none'}, "
                    f"rate {flow.format_rate(*rate) if rate is not None else 'none'}", [tube])
