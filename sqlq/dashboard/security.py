"""Who may see the dashboard and who may act through it.

The rules, all enforced here so the routes cannot forget one:

* It listens on loopback unless told otherwise, and refuses any other address unless
  a token guards it (``--token`` or ``--token-file``): a queue's bodies are often
  private, and its delete button is a weapon.
* With a token, every request needs it: ``Authorization: Bearer TOKEN`` (scrapers,
  curl) or the session cookie that ``/login`` sets (browsers; HttpOnly, SameSite=Strict).
  Each login makes a random session of its own (never derived from the token), kept
  in this process; ``/logout`` (a POST with the CSRF token) ends it, so a copied cookie
  stops working too. At most :data:`MAX_SESSIONS` live at once (the oldest go first).
* Every action is a POST carrying the CSRF token printed in the page's forms; the token
  is random per process and compared in constant time. A cross-site form cannot read it.
* On loopback without a token, the ``Host`` header must name loopback: a loopback
  address literal, ``localhost`` or the host listened on. A DNS-rebinding page
  (evil.example, or 127.evil.example, resolving to 127.0.0.1) would otherwise be
  same-origin with us and could read the CSRF token.
* Every response forbids inline scripts, framing and sniffing (CSP), so a value that
  escaping somehow missed still could not run.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import socket
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlq.errors import Error

COOKIE = "sqlq_dashboard"
#: Browser sessions kept at once: past this, a new login ends the oldest session.
MAX_SESSIONS = 1000

#: Sent with every response. No inline script or style anywhere in the dashboard.
HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self'; connect-src 'self'; form-action 'self'; "
                                "base-uri 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class AccessDenied(Error):
    """Not allowed here."""

    def __init__(self, message: str | None = None, status: int = 403) -> None:
        super().__init__(message)
        self.status = status


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) as (host, port); ValueError if malformed."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--listen must be HOST:PORT, not {listen!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """True if every address ``host`` resolves to is a loopback one."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)


def host_name(host_header: str) -> str | None:
    """The host of a ``Host`` header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``),
    lower-cased; None if the header is malformed."""
    header = host_header.strip().lower()
    if header.startswith("["):
        name, sep, rest = header[1:].partition("]")
        if not sep or ":" not in name:
            return None
    else:
        name, sep, rest = header.partition(":")
        rest = sep + rest
    if rest and not (rest[0] == ":" and rest[1:].isdigit()):
        return None
    return name or None


@dataclass
class Guard:
    """The dashboard's access rules for one process (see the module docstring).

    Args:
        host: the address listened on.
        port: the port listened on (the Host header check needs it).
        token: required of every request when set.
        read_only: refuse every action.
    """

    host: str
    port: int
    token: str | None = None
    read_only: bool = False
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    _sessions: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < 16:
            raise Error("the dashboard token must be at least 16 characters")
        if self.token is None and not is_loopback(self.host):
            raise Error(f"refusing to listen on {self.host} without --token or --token-file: "
                        "anyone who can reach it could read and delete jobs")

    def new_session(self) -> str:
        """A new session for a browser that gave the token: the cookie's value (random,
        never derived from the token), valid until :meth:`end_session` or this
        process ends."""
        session = secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[_digest(session)] = None
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session

    def end_session(self, session: str) -> None:
        """Log out: the session is no longer accepted (nothing if it was not one)."""
        with self._lock:
            self._sessions.pop(_digest(session), None)

    def _has_session(self, session: str) -> bool:
        # Looked up by its digest: the dictionary's timing says nothing of the value.
        with self._lock:
            return bool(session) and _digest(session) in self._sessions

    def check_request(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> None:
        """Raise AccessDenied unless this request may see the dashboard at all."""
        if self.token is None:
            self._check_host(headers.get("Host", ""))
            return
        auth = headers.get("Authorization", "")
        if auth.startswith("Bearer ") and hmac.compare_digest(
                auth[7:].strip().encode(), self.token.encode()):
            return
        if self._has_session(cookies.get(COOKIE, "")):
            return
        raise AccessDenied("log in with the dashboard token", status=401)

    def _check_host(self, host_header: str) -> None:
        if not self.host_allowed(host_header):
            raise AccessDenied(f"Host {host_header!r} is not this dashboard's address")

    def host_allowed(self, host_header: str) -> bool:
        """True if ``host_header`` names this dashboard: a loopback address literal
        (127.0.0.0/8, ``[::1]``), ``localhost`` or the host listened on, with or without
        a port. A name is compared whole, never by prefix: ``127.evil.example`` is a
        name an attacker's DNS can point at 127.0.0.1 (DNS rebinding)."""
        name = host_name(host_header)
        if name is None:
            return False
        if name in ("localhost", self.host.lower().strip("[]")):
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def check_login(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(),
                                                              self.token.encode())

    def check_action(self, form: Mapping[str, str], headers: Mapping[str, str]) -> None:
        """Raise AccessDenied unless this POST may change the queue."""
        if self.read_only:
            raise AccessDenied("this dashboard is read-only")
        self.check_form(form, headers)

    def check_form(self, form: Mapping[str, str], headers: Mapping[str, str]) -> None:
        """Raise AccessDenied unless this POST comes from one of our pages (same origin,
        the CSRF token): every action, and logging out (allowed when read-only too)."""
        origin = headers.get("Origin")
        if origin not in (None, "null") and origin.split("://", 1)[-1] != headers.get("Host"):
            raise AccessDenied("cross-origin request refused")
        if not hmac.compare_digest(form.get("csrf", "").encode(), self.csrf.encode()):
            raise AccessDenied("missing or wrong CSRF token (reload the page)")


#: A query string after an action's path; a ``csrf=`` or ``token=`` value anywhere.
_ACTION_QUERY = re.compile(r"(/(?:actions/[^?\s\"']*|logout))\?[^\s\"']*")
_SECRET_VALUE = re.compile(r"\b(csrf|token)=[^&\s\"']*", re.IGNORECASE)


def loggable(line: str) -> str:
    """A request-log line without secrets: an action (a POST; a GET of one is refused) logs
    no query string, and any ``csrf=``/``token=`` value is redacted, so the log never
    holds what would let its reader act (the CSRF token is the process's own)."""
    return _SECRET_VALUE.sub(r"\1=[redacted]", _ACTION_QUERY.sub(r"\1", line))


def _digest(session: str) -> str:
    return hashlib.sha256(session.encode()).hexdigest()
