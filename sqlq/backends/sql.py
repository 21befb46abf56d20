"""A dialect's statements: the named blocks of its ``queries.sql``, and the one helper
every store uses to run one for its first row. Apart from store.py so that the store's
mixins (views.py) can use them without importing the store."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .conn import Conn

_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)


def load_queries(path: str | os.PathLike[str], *, comments: bool = False) -> dict[str, str]:
    """The named blocks of a ``queries.sql`` file ("-- name: NAME" starts one).

    Without ``comments``, the blocks' comment lines are left out: the driver's statement
    cache hashes and compares a statement's whole text on every execute, and the comments
    (which say why, for the reader of the file) were a third of the claim and delete
    statements' text: about 1k instructions of a 215k reserve+delete cycle (bench/README.md).
    """
    with open(path, encoding="utf-8") as f:  # not pathlib: it costs every process an import
        parts = _BLOCK.split(f.read())
    blocks = {name: sql.strip() for name, sql in zip(parts[1::2], parts[2::2], strict=True)}
    if comments:
        return blocks
    return {name: "\n".join(line for line in sql.splitlines()
                            if not line.lstrip().startswith("--")).strip()
            for name, sql in blocks.items()}


def one(conn: Conn, sql: str, params: Any = None) -> Any:
    """The first row of a statement, or None (typed Any: rows are tuples of SQL values).

    The statement is always run to its end, so an autocommit write commits here,
    not whenever the cursor is collected.
    """
    rows = conn.execute(sql, {} if params is None else params).fetchall()
    return rows[0] if rows else None
