"""A TCP relay in front of PostgreSQL that can lose a reply: the one fault a terminated
session cannot make.

``pg_terminate_backend`` cuts a session before or at its COMMIT, so nothing it ran has
committed, or the client is told so. A connection lost *after* the server committed and
before its reply arrived is what a restarting pooler or a dropped network link makes:
the client cannot know the outcome. :meth:`CutProxy.cut_after` arms the relay: the next
client message whose bytes contain ``marker`` is passed on, and the server's
ReadyForQuery that ends its transaction (status ``I``: committed, or autocommitted) is
swallowed and both sockets closed. Real sockets on 127.0.0.1; the server is real.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class CutProxy:
    """Relays every connection to ``(host, port)``; ``port`` is its own."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.marker: bytes | None = None
        self.cuts = 0  #: replies lost so far
        self.cut = threading.Event()
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str, port: int) -> str:
        """``url`` (a server's, on ``port``) made to go through the relay."""
        return url.replace(f":{port}/", f":{self.port}/", 1)

    def cut_after(self, marker: bytes) -> None:
        """Lose the reply that ends the transaction of the next message with ``marker``."""
        with self.lock:
            self.marker = marker
            self.cut.clear()

    def close(self) -> None:
        self.listener.close()
        for pair in self.pairs:
            for sock in pair:
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.pairs.append((client, server))
            armed = threading.Event()  # this connection sent the marker
            singles = [0]  # SSL/GSS requests sent: each answered by one byte, untyped
            threading.Thread(target=self._up, args=(client, server, armed, singles),
                             daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, armed, singles),
                             daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket,
            armed: threading.Event, singles: list[int]) -> None:
        """Client to server, as is; arms the connection when the marker passes."""
        while data := _recv(client):
            if data[:4] == b"\0\0\0\x08" and data[4:8] in _ENCRYPTION_REQUESTS:
                singles[0] += 1
            with self.lock:
                if self.marker is not None and self.marker in data:
                    self.marker = None
                    armed.set()
            try:
                server.sendall(data)
            except OSError:
                break
        _shut(client, server)

    def _down(self, server: socket.socket, client: socket.socket,
              armed: threading.Event, singles: list[int]) -> None:
        """Server to client, message by message (type, int32 length, body), so that an
        armed connection's idle ReadyForQuery is seen whole and not sent."""
        buffered = b""
        while data := _recv(server):
            buffered += data
            out = bytearray()
            while singles[0] and buffered:  # "N": no SSL (or GSS) here
                out += buffered[:1]
                buffered = buffered[1:]
                singles[0] -= 1
            while len(buffered) >= 5:
                size = struct.unpack("!I", buffered[1:5])[0] + 1
                if len(buffered) < size:
                    break
                message, buffered = buffered[:size], buffered[size:]
                if armed.is_set() and message[:1] == b"Z" and message[5:6] == b"I":
                    if out:
                        _send(client, bytes(out))
                    self.cuts += 1
                    self.cut.set()
                    _shut(client, server)
                    return
                out += message
            if out and not _send(client, bytes(out)):
                break
        _shut(client, server)


#: The codes of SSLRequest and GSSENCRequest (an 8-byte message without a type).
_ENCRYPTION_REQUESTS = (struct.pack("!I", 80877103), struct.pack("!I", 80877104))


@contextmanager
def cut_proxy(host: str, port: int) -> Iterator[CutProxy]:
    proxy = CutProxy(host, port)
    try:
        yield proxy
    finally:
        proxy.close()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _send(sock: socket.socket, data: bytes) -> bool:
    try:
        sock.sendall(data)
    except OSError:
        return False
    return True


def _shut(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
