"""Facts about file versions that spare a later command some work, kept in the user's cache
folder ($XDG_CACHE_HOME/traceql, ~/.cache/traceql without it), one small text file per kind:
workspace versions found clean of shadowing macros (traceql.store.guard), the SHA-256 of source
exports (traceql.sources.digest).

A version is what the kernel tells of a file: device, inode, size, modification and change
times in ns. Every write or rename gives a new change time, which no user can set back, so a
fact recorded for a version holds as long as the file is that version. A record is trusted only
when this user owns it and its folder and no one else can write them; versions whose change
time is a whole second (a file system with coarse times, where two writes could share one) are
not recorded. The cache folder itself is never created: without one nothing is written into
HOME, and every command does the work.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def version(path, st: os.stat_result | None = None) -> tuple | None:
    """PATH's version (device, inode, size, mtime and ctime in ns); None when it cannot be read.
    st: its os.stat() taken already (of an open file: fstat)."""
    try:
        st = st or os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def key(versions: tuple | None) -> str | None:
    """One or more versions (version() tuples joined) as the start of a record line; None for
    versions not to remember: unknown, or with change times in whole seconds."""
    if versions is None or any(versions[k] % 1_000_000_000 == 0 for k in range(4, len(versions), 5)):
        return None
    return " ".join(map(str, versions))


def record_file(name: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "traceql" / name


def _own(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else."""
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def read(name: str) -> list[str]:
    """The lines of record NAME, oldest first; none when it is missing or could have been
    written by another user (its folder or itself writable by others, another owner)."""
    path = record_file(name)
    try:
        if not _own(os.stat(path.parent)):
            return []
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return []
    try:
        if not _own(os.fstat(fd)):
            return []
        with os.fdopen(fd, "r", encoding="ascii", errors="replace") as fh:
            fd = None
            return fh.read().splitlines()
    except OSError:
        return []
    finally:
        if fd is not None:
            os.close(fd)


def remember(name: str, line: str, kept: int) -> None:
    """Add LINE to record NAME (an equal line moves to the end), keeping the KEPT most recent
    lines (best effort: a cache folder that cannot be written records nothing; the cache folder
    is never created)."""
    old = [x for x in read(name) if x != line]
    lines = old[-(kept - 1):] + [line]
    path = record_file(name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")  # (one writer each)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)  # (in the cache folder, which must exist)
        if not _own(os.stat(path.parent)):
            return
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(tmp)
