"""The workers registry (sqlq/core/registry.py) and who holds reservations now."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..conn import Conn


class WorkerStore:
    """Workers' rows, written by their heartbeats, and reservations by owner."""

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q

    def beat_worker(self, conn: Conn, params: dict[str, Any]) -> None:
        """Write a worker's row (``registry.Presence.params()``), whether or not it has one."""
        conn.execute(self.Q["beat_worker"], params)

    def forget_worker(self, conn: Conn, token: str) -> None:
        conn.execute(self.Q["forget_worker"], {"token": token})

    def forget_workers(self, conn: Conn, tokens: list[str]) -> None:
        """Delete the rows of these workers (the registry's sweep of dead ones)."""
        for token in tokens:
            self.forget_worker(conn, token)

    def list_workers(self, conn: Conn) -> list[tuple[Any, ...]]:
        """Every registered worker's row, the oldest first (rows of ``list_workers``)."""
        return [tuple(r) for r in conn.execute(self.Q["list_workers"])]

    def owner_reservations(self, conn: Conn, now: int) -> list[tuple[Any, ...]]:
        """(owner or None, jobs held, earliest reservation start, tubes) per owner."""
        return [tuple(r) for r in conn.execute(self.Q["owner_reservations"], {"now": now})]
