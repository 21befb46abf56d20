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
#: Where a statement takes a fragment's text (a block named ``_...``) in its place.
_INCLUDE = re.compile(r"^-- include: (\w+)$", re.MULTILINE)
#: A statement's pieces for compact(): a quoted string or name (kept as it is), a comment,
#: a run of blanks, a run of anything else but a quote, a blank or a dash, a dash.
_PIECE = re.compile(r"'[^']*'|\"[^\"]*\"|--[^\n]*|\s+|[^'\"\s-]+|-")
#: The characters a blank beside them can go from.
_TIGHT = frozenset("(),=")


def load_queries(path: str | os.PathLike[str], *, comments: bool = False,
                 tight: bool = False) -> dict[str, str]:
    """The named blocks of a ``queries.sql`` file ("-- name: NAME" starts one).

    Without ``comments``, the blocks' comment lines are left out: the driver's statement
    cache hashes and compares a statement's whole text on every execute, and the comments
    (which say why, for the reader of the file) were a third of the claim and delete
    statements' text: about 1k instructions of a 215k reserve+delete cycle (bench/README.md).
    ``tight``: each statement as :func:`compact` writes it, for the same reason (apsw's
    statement cache hashes 8 instructions a byte).

    A block whose name starts with ``_`` is a fragment, not a statement: a line
    ``-- include: _name`` in a statement is replaced by its text, so that a part several
    statements share (the claims' floors) is written once.
    """
    with open(path, encoding="utf-8") as f:  # not pathlib: it costs every process an import
        parts = _BLOCK.split(f.read())
    found = {name: sql.strip() for name, sql in zip(parts[1::2], parts[2::2], strict=True)}
    fragments = {name: sql for name, sql in found.items() if name.startswith("_")}

    def fragment(match: re.Match[str]) -> str:
        if match.group(1) not in fragments:
            raise ValueError(f"{path}: '-- include: {match.group(1)}', but no block is named so")
        return fragments[match.group(1)]

    blocks = {name: _INCLUDE.sub(fragment, sql) for name, sql in found.items()
              if name not in fragments}
    if comments:
        return blocks
    if tight:
        return {name: compact(sql) for name, sql in blocks.items()}
    return {name: "\n".join(line for line in sql.splitlines()
                            if not line.lstrip().startswith("--")).strip()
            for name, sql in blocks.items()}


def compact(sql: str) -> str:
    """The same statement in fewer characters: without comments, every run of blanks one
    space, and none beside ``( ) , =`` (quoted strings and names are left as they are).
    The claim's text goes from 612 characters to 470 (about 1k instructions of a claim in
    apsw's statement cache, tests/unit/test_queries.py)."""
    out: list[str] = []
    for piece in _PIECE.findall(sql):
        if piece[0].isspace() or piece.startswith("--"):
            if out and out[-1] != " " and out[-1][-1] not in _TIGHT:
                out.append(" ")
        elif out and out[-1] == " " and piece[0] in _TIGHT:
            out[-1] = piece
        else:
            out.append(piece)
    return "".join(out).strip()


def one(conn: Conn, sql: str, params: Any = None) -> Any:
    """The first row of a statement, or None (typed Any: rows are tuples of SQL values).

    The statement is always run to its end, so an autocommit write commits here,
    not whenever the cursor is collected.
    """
    rows = conn.execute(sql, {} if params is None else params).fetchall()
    return rows[0] if rows else None
