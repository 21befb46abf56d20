"""Text safe to show: a job's body, a bury reason or a traceback, escaped for a terminal
or a page (the CLI's plain output, the Django admin's list of buried jobs)."""

from __future__ import annotations

BODY_PREVIEW = 2000  # characters of a body that plain output shows; --raw writes all


def display_text(value: str | bytes, limit: int | None = BODY_PREVIEW) -> str:
    """Text safe for a terminal: printable characters pass, others become ``\\xNN``.

    Escaping control characters (ESC above all) keeps a hostile or binary body from
    moving the cursor or retitling the terminal. ``limit`` caps the characters shown.
    """
    text = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value
    out: list[str] = []
    size = 0
    for ch in text:
        if ch.isprintable() or ch in "\n\t":
            piece = ch
        else:
            piece = f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"
        size += len(piece)
        if limit is not None and size > limit:
            out.append(f"... ({len(value)} bytes in all; --raw writes them)")
            break
        out.append(piece)
    return "".join(out)
