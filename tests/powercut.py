"""Power cuts, simulated: an apsw VFS that records writes, and a model of what survives.

A power cut loses what the operating system had not written to the disk yet.
The model is the per-file page cache: every write lands in the cache at once
(SQLite reads its own writes back, as it would from the kernel), and only an
``xSync`` of that file makes what it holds durable. When the power goes, each
512-byte sector written since the file's last sync holds any one of the
versions it went through (the durable one, the newest, or one in between: the
kernel may have flushed it at any moment, in any order), and a file that grew
or shrank since its last sync keeps either its durable length or its new one.
Sectors are torn independently, so a WAL frame can be half on disk.

**Record once, cut many times.** :class:`RecordingVFS` wraps SQLite's default
VFS and appends every write, truncate, sync and delete of the database and its
``-wal`` file to an event list (the ``-shm`` file is shared memory, rebuilt from
the WAL after a crash, and goes to the real file unrecorded). The workload
marks in the same list where each operation began and where it returned
(*acknowledged*), with a digest of the whole logical state after it. A cut
before event *k* is then rebuilt offline by :func:`files_at` from the events
before *k* alone, which is exactly what a machine that lost power at that
moment would have had, whatever the workload did afterwards.

:func:`verdict` reopens the rebuilt files with the ordinary VFS and holds them to
the contract: ``PRAGMA integrity_check`` is ok, and the logical state equals the
state after some operation, no earlier than the last one that must have
survived (in ``full`` mode: the last acknowledged put, delete, bury, kick or
pause that changed something, which fsync before returning, and with them
everything committed before; in both modes: anything acknowledged before a
completed sync, since a checkpoint syncs the WAL first) and no later than the
operation in flight at the cut.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

SECTOR = 512

# Event kinds in the recording.
WRITE, TRUNCATE, SYNC, DELETE, BEGIN, ACK = "write", "truncate", "sync", "delete", "begin", "ack"


@dataclass
class Recording:
    """Everything that happened to one database file, in order."""

    db_path: str
    initial: dict[str, bytes]  # "db" / "wal" -> content when recording started
    events: list[tuple[Any, ...]] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)  # state after 0, 1, 2 ... operations
    durable: list[bool] = field(default_factory=list)  # operation i must survive once acked
    names: list[str] = field(default_factory=list)  # operation i's name, for messages

    def begin(self, name: str, durable: bool) -> int:
        self.names.append(name)
        self.durable.append(durable)
        index = len(self.names) - 1
        self.events.append((BEGIN, index))
        return index

    def ack(self, index: int, digest: str) -> None:
        self.digests.append(digest)
        self.events.append((ACK, index))


class RecordingFile(apsw.VFSFile):
    def __init__(self, recording: Recording, key: str, base: str, name: Any, flags: Any,
                 sync_s: float) -> None:
        super().__init__(base, name, flags)
        self._recording = recording
        self._key = key
        self._sync_s = sync_s

    def xWrite(self, data: bytes, offset: int) -> None:
        self._recording.events.append((WRITE, self._key, offset, bytes(data)))
        super().xWrite(data, offset)

    def xTruncate(self, newsize: int) -> None:
        self._recording.events.append((TRUNCATE, self._key, newsize))
        super().xTruncate(newsize)

    def xSync(self, flags: int) -> None:
        super().xSync(flags)
        if self._sync_s:
            time.sleep(self._sync_s)
        self._recording.events.append((SYNC, self._key))  # durable only once it returned


class RecordingVFS(apsw.VFS):
    """SQLite's default VFS, recording what happens to one database and its WAL.

    ``sync_s``: each sync takes at least this long, as on a disk, wherever the files are
    (the suite's are in RAM, where a sync returns at once): what shares commits needs
    writers that wait for a sync."""

    def __init__(self, name: str, recording: Recording, sync_s: float = 0.0) -> None:
        super().__init__(name, "")
        self.recording = recording
        self.sync_s = sync_s
        self._keys = {recording.db_path: "db", recording.db_path + "-wal": "wal"}

    def _key(self, name: Any) -> str | None:
        filename = name.filename() if hasattr(name, "filename") else name
        return None if filename is None else self._keys.get(os.path.abspath(filename))

    def xOpen(self, name: Any, flags: Any) -> apsw.VFSFile:
        key = self._key(name)
        if key is None:
            return apsw.VFSFile("", name, flags)
        return RecordingFile(self.recording, key, "", name, flags, self.sync_s)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        key = self._key(filename)
        if key is not None:
            self.recording.events.append((DELETE, key))
        super().xDelete(filename, syncdir)


def state_digest(conn: apsw.Connection) -> str:
    """A hash of every row of every table: the logical state, whatever the pages hold."""
    h = hashlib.sha256()
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    for table in tables:
        quoted = '"' + table.replace('"', '""') + '"'
        rows = sorted(repr(tuple(row)) for row in conn.execute(f"SELECT * FROM {quoted}"))
        h.update(f"{table}:{len(rows)}\n".encode())
        for row in rows:
            h.update(row.encode())
    return h.hexdigest()


# -- rebuilding the disk at a cut ----------------------------------------------------------


class _FileModel:
    """One file's durable bytes, its page cache, and the sector versions in between."""

    def __init__(self, content: bytes | None) -> None:
        self.exists = content is not None
        self.durable = bytearray(content or b"")
        self.current = bytearray(content or b"")
        self.versions: dict[int, list[bytes]] = {}  # sector -> versions since the last sync

    def write(self, offset: int, data: bytes) -> None:
        self.exists = True
        end = offset + len(data)
        if end > len(self.current):
            self.current.extend(bytes(end - len(self.current)))
        self.current[offset:end] = data
        for sector in range(offset // SECTOR, (end - 1) // SECTOR + 1):
            self.versions.setdefault(sector, []).append(
                bytes(self.current[sector * SECTOR:(sector + 1) * SECTOR]))

    def truncate(self, size: int) -> None:
        for sector in range(size // SECTOR, len(self.current) // SECTOR + 1):
            self.versions.setdefault(sector, [])
        del self.current[size:]

    def sync(self) -> None:
        self.durable = bytearray(self.current)
        self.versions.clear()

    def delete(self) -> None:
        # Unlinking is treated as durable at once (SQLite deletes the WAL only
        # after a checkpoint has made its content durable in the database).
        self.__init__(None)  # type: ignore[misc]

    def after_cut(self, rng: random.Random, tear: str) -> bytes | None:
        if not self.exists:
            return None
        if tear == "lose-all" or not self.versions:
            return bytes(self.durable)
        length = len(self.current)
        if length != len(self.durable) and rng.random() < 0.5:
            length = len(self.durable)
        out = bytearray(self.durable[:length])
        out.extend(bytes(length - len(out)))
        for sector, versions in self.versions.items():
            start = sector * SECTOR
            if start >= length:
                continue
            if tear == "keep-most":
                keep = rng.random() < 0.9
                chosen = versions[-1] if keep and versions else None
            else:  # "any": the durable version or any one written since
                pick = rng.randrange(len(versions) + 1)
                chosen = versions[pick - 1] if pick else None
            if chosen is None:
                chosen = bytes(self.durable[start:start + SECTOR])
            chunk = chosen[:max(0, length - start)]
            out[start:start + len(chunk)] = chunk
            if len(chunk) < min(SECTOR, length - start):  # durable version was shorter
                end = start + len(chunk)
                out[end:min(start + SECTOR, length)] = bytes(min(start + SECTOR, length) - end)
        return bytes(out)


@dataclass
class Cut:
    """A power cut before event ``index``, and what the disk held afterwards."""

    index: int
    tear: str
    files: dict[str, bytes | None]
    low: int   # the state must be at least the one after this many operations
    high: int  # ... and at most this many (the operation in flight may have committed)


TEARS = ("lose-all", "any", "keep-most")


def cuts(recording: Recording, points: int, rng: random.Random) -> list[Cut]:
    """``points`` random cuts over the recording, rebuilt in one pass over its events."""
    storage = [i for i, e in enumerate(recording.events) if e[0] in (WRITE, TRUNCATE, SYNC)]
    syncs = [i for i, e in enumerate(recording.events) if e[0] == SYNC]
    # Half the cuts anywhere, half just before a sync: everything written, nothing durable.
    chosen = sorted(rng.choice(storage) if rng.random() < 0.5 else rng.choice(syncs)
                    for _ in range(points))
    files = {key: _FileModel(content) for key, content in recording.initial.items()}
    acked = 0            # operations acknowledged so far
    begun = 0            # operations begun so far
    low_sync = 0         # operations acknowledged before the latest completed sync
    low_durable = 0      # operations up to the latest acknowledged durable one
    out: list[Cut] = []
    next_cut = 0
    for i, event in enumerate(recording.events):
        while next_cut < len(chosen) and chosen[next_cut] == i:
            tear = rng.choice(TEARS)
            out.append(Cut(i, tear, {k: f.after_cut(rng, tear) for k, f in files.items()},
                           max(low_sync, low_durable), begun))
            next_cut += 1
        kind = event[0]
        if kind == WRITE:
            files[event[1]].write(event[2], event[3])
        elif kind == TRUNCATE:
            files[event[1]].truncate(event[2])
        elif kind == SYNC:
            files[event[1]].sync()
            low_sync = acked
        elif kind == DELETE:
            files[event[1]].delete()
        elif kind == BEGIN:
            begun = event[1] + 1
        elif kind == ACK:
            acked = event[1] + 1
            # A durable operation that changed nothing (a kick with nothing to kick)
            # commits nothing and syncs nothing: it promises nothing either.
            if recording.durable[event[1]] and \
                    recording.digests[acked] != recording.digests[acked - 1]:
                low_durable = acked
    return out


@dataclass
class Verdict:
    ok: bool
    state: int | None  # the number of operations whose state was recovered
    problem: str = ""


def verdict(recording: Recording, cut: Cut, directory: Path,
            reopen: Callable[[str], None] | None = None) -> Verdict:
    """Write the cut's files to directory, reopen them and judge what survived."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "q.db"
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass
    for key, content in cut.files.items():
        if content is not None:
            (directory / ("q.db" if key == "db" else "q.db-wal")).write_bytes(content)
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            digest = state_digest(conn)
        finally:
            conn.close()
    except apsw.Error as e:
        return Verdict(False, None, f"cannot read the file: {type(e).__name__}: {e}")
    if check != ["ok"]:
        return Verdict(False, None, f"integrity_check: {check[:3]}")
    candidates = [n for n in range(cut.low, cut.high + 1) if recording.digests[n] == digest]
    if not candidates:
        earlier = [n for n in range(cut.low) if recording.digests[n] == digest]
        if earlier:
            lost = recording.names[earlier[-1]:cut.low]
            return Verdict(False, earlier[-1], f"acknowledged operations lost: {lost}")
        return Verdict(False, None, "the state matches no state the workload went through")
    if reopen is not None:
        try:
            reopen(str(path))
        except Exception as e:  # noqa: BLE001 - any failure to reopen is the finding
            return Verdict(False, candidates[-1], f"sqlq cannot use the file: {e!r}")
    return Verdict(True, candidates[-1])
