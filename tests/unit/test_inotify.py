"""sqlq/backends/sqlite/inotify.py: the kernel's inotify calls through ctypes, on this
machine's kernel (the notifier's own behaviour is tests/integration/test_wakeup.py's)."""

from __future__ import annotations

import errno
import os
import select
import struct
from pathlib import Path

import pytest

from sqlq.backends.sqlite.inotify import Flags, INotify

EVENT = struct.Struct("iIII")  # struct inotify_event before its name


def _events(ino: INotify) -> list[tuple[int, int, bytes]]:
    """(wd, mask, name) of what is queued now (waiting up to 5 s for the first)."""
    assert select.select([ino.fileno()], [], [], 5)[0], "no event"
    data, out, pos = os.read(ino.fileno(), 65536), [], 0
    while pos < len(data):
        wd, mask, _, size = EVENT.unpack_from(data, pos)
        pos += EVENT.size + size
        out.append((wd, mask, data[pos - size:pos].rstrip(b"\0")))
    return out


def test_a_watch_sees_a_write_by_name_and_stops_when_removed(tmp_path: Path) -> None:
    ino = INotify()
    try:
        wd = ino.add_watch(str(tmp_path), Flags.MODIFY | Flags.CREATE)
        (tmp_path / "x-wal").write_bytes(b"frame")
        masks = {mask for w, mask, name in _events(ino) if w == wd and name == b"x-wal"}
        assert masks >= {int(Flags.CREATE), int(Flags.MODIFY)}, masks
        ino.rm_watch(wd)
        with pytest.raises(BlockingIOError):  # non-blocking; the watch's IN_IGNORED read
            while True:
                os.read(ino.fileno(), 65536)
        (tmp_path / "x-wal").write_bytes(b"more")
        assert not select.select([ino.fileno()], [], [], 0.05)[0]
    finally:
        ino.close()


def test_the_kernels_refusals_are_oserrors_with_their_errno(tmp_path: Path) -> None:
    ino = INotify()
    try:
        with pytest.raises(FileNotFoundError):
            ino.add_watch(str(tmp_path / "absent"), Flags.MODIFY)
        with pytest.raises(OSError) as info:
            ino.rm_watch(12345)
        assert info.value.errno == errno.EINVAL
    finally:
        ino.close()
    ino.close()  # twice: nothing


def test_an_unclosed_instance_gives_its_descriptor_back_when_collected() -> None:
    ino = INotify()
    fd = ino.fileno()
    flags = os.get_inheritable(fd), os.get_blocking(fd)
    assert flags == (False, False)  # close-on-exec, non-blocking
    del ino
    with pytest.raises(OSError):
        os.fstat(fd)
