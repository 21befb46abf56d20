"""Where a SQLite file lives: a network filesystem (NFS, SMB, sshfs) cannot hold it safely.

SQLite's WAL mode needs the -shm file mapped by every process and working POSIX locks;
neither holds across machines, and the file can be corrupted. Opening one there is
warned about (advice, not a refusal: a single-machine mount may be fine).
"""

from __future__ import annotations

import os
import re

from ...core.logger import logger

#: Filesystem types on which SQLite's WAL (shared memory, POSIX locks) is not safe.
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb", "smb3", "smbfs", "fuse.sshfs", "sshfs", "afs", "ceph",
    "glusterfs", "fuse.glusterfs", "lustre", "gpfs", "9p", "ncpfs", "davfs", "fuse.rclone",
})

_warned_network: set[str] = set()


def _unescape_mount(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def network_filesystem(path: str, mounts: str = "/proc/mounts") -> str | None:
    """The filesystem type holding path if it is a network filesystem, else None.

    SQLite's WAL mode needs the -shm file mapped by every process and working
    POSIX locks; neither holds across machines on NFS, SMB or sshfs, where the
    file can be corrupted. The longest mount point that contains path wins, as
    the kernel resolves it. Without a readable mount table (macOS, BSD) we
    cannot tell and say nothing.
    """
    try:
        with open(mounts, encoding="utf-8", errors="replace") as f:
            table = f.read().splitlines()
    except OSError:
        return None
    target = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    best, best_type = "", ""
    for line in table:
        fields = line.split()
        if len(fields) < 3:
            continue
        point, fstype = _unescape_mount(fields[1]), fields[2]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, best_type = point, fstype
    return best_type if best_type in NETWORK_FILESYSTEMS else None


def warn_if_network_filesystem(path: str, mounts: str = "/proc/mounts") -> str | None:
    """Log a warning (once per file per process) when path is on a network filesystem."""
    fstype = network_filesystem(path, mounts)
    key = os.path.abspath(path)
    if fstype is not None and key not in _warned_network:
        _warned_network.add(key)
        logger().warning("%s is on a network filesystem (%s): SQLite's WAL mode needs a local "
                    "disk, the file may be corrupted; keep it on a local filesystem",
                    path, fstype)
    return fstype
