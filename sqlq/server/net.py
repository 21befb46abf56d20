"""Listening sockets: ``--listen`` addresses in, bound non-blocking sockets out."""

from __future__ import annotations

import os
import socket

from sqlq.server.protocol import DEFAULT_PORT

DEFAULT_LISTEN = "127.0.0.1:11300"
"""Loopback only: the protocol has no authentication."""


def bind(listen: str, *, reuse_port: bool = False, listening: bool = True) -> socket.socket:
    """A non-blocking listening socket for ``HOST:PORT``, ``[V6]:PORT``, ``HOST`` or ``unix:PATH``.

    ``reuse_port``: bound with SO_REUSEPORT, so that other such sockets of the same
    user can bind the same port and the kernel spreads connections over them (TCP on
    Linux; processes.py). ``listening=False``: bound only, to hold the port.

    Raises:
        ValueError: ``listen`` is not of one of those forms.
        OSError: the address cannot be bound.
    """
    if listen.startswith("unix:"):
        path = listen[5:]
        if not path:
            raise ValueError("listen: unix: needs a path")
        try:
            if os.path.exists(path) and not os.path.isfile(path):
                os.unlink(path)  # a stale socket of an earlier run, as beanstalkd does
        except OSError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _bind_private(sock, path)
    else:
        host, port = _host_port(listen)
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr)
    if listening:
        sock.listen(1024)
    sock.setblocking(False)
    return sock


SOCKET_MODE = 0o600
"""A unix socket's mode, whatever the umask: connecting needs write permission on
it, and the protocol has no authentication, so only the server's user may drive it."""


def _bind_private(sock: socket.socket, path: str) -> None:
    """Bind ``sock`` at ``path``, the socket file created SOCKET_MODE from its first instant.

    The umask is narrowed around ``bind`` (which creates the file) rather than a chmod
    after it: a chmod goes by name, and a local user who can write in the directory
    could swap the name for a symlink in between. The umask is the process's, so this
    runs where the servers bind, before they start threads.
    """
    old = os.umask(0o777 & ~SOCKET_MODE)
    try:
        sock.bind(path)
    finally:
        os.umask(old)


def _host_port(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or "]" in port:
        host, port = listen, str(DEFAULT_PORT)
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"listen must be HOST:PORT or unix:PATH, not {listen!r}")
    return host, int(port)


def shares_port(listen: str) -> bool:
    """Whether processes can each listen on ``listen`` with a socket of their own that
    the kernel balances (SO_REUSEPORT): TCP on Linux. Elsewhere SO_REUSEPORT either does
    not exist, does not apply (unix sockets) or hands every connection to the last
    socket bound (BSD, macOS)."""
    import sys

    return (sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")
            and not listen.startswith("unix:"))


def address_of(sock: socket.socket) -> str:
    """The bound address in ``--listen`` form (the real port when 0 was asked for)."""
    name = sock.getsockname()
    if sock.family == socket.AF_UNIX:
        return f"unix:{name}"
    host = f"[{name[0]}]" if sock.family == socket.AF_INET6 else name[0]
    return f"{host}:{name[1]}"


def unlink_unix(sock: socket.socket) -> None:
    """Remove a unix listener's socket file (the listener is closing)."""
    if sock.family == socket.AF_UNIX:
        try:
            os.unlink(sock.getsockname())
        except OSError:
            pass


def raise_fd_limit() -> None:
    """One descriptor per client: allow as many as the hard limit does (often 1024 by default)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
