"""A VFS that counts SQLite's xSync calls per file (the -wal, the database, the rest),
so a test sees exactly which operations pay for an fsync."""

from __future__ import annotations

from collections import Counter

import apsw


class CountingFile(apsw.VFSFile):  # type: ignore[misc]
    def __init__(self, counts: Counter[str], name: object, flags: list[int]) -> None:
        super().__init__("", name, flags)
        path = name.filename() if isinstance(name, apsw.URIFilename) else str(name or "")
        self.kind = "wal" if path.endswith("-wal") else "db" if path.endswith(".db") else "other"
        self.counts = counts

    def xSync(self, flags: int) -> None:
        self.counts[self.kind] += 1
        super().xSync(flags)


class CountingVFS(apsw.VFS):  # type: ignore[misc]
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        super().__init__("counting", "")

    def xOpen(self, name: object, flags: list[int]) -> CountingFile:
        return CountingFile(self.counts, name, flags)
