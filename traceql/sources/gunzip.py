"""SQLite profiler databases shipped gzip-compressed (rocmProfileData's traces travel as
FILE.rpd.gz): SQLite cannot read a compressed file, so such a file is decompressed to a
temporary copy, read, and the copy removed. The source file itself is never written.

The copy is made with kineto's gzip guard: data expanding more than kineto.MAX_RATIO times
(beyond its first MAX_EVENT bytes) is refused as a gzip bomb, and a damaged or truncated
stream is one InputError line naming the file."""

from __future__ import annotations

import contextlib
import errno
import gzip
import shutil
import tempfile
import zlib
from pathlib import Path

from traceql.core.errors import InputError
from traceql.sources.kineto import _Gzip

CHUNK = 1 << 20  # decompressed bytes copied per step


def head(path: Path, n: int) -> bytes:
    """The first N decompressed bytes of gzip file PATH, b'' when it cannot be decompressed."""
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read(n)
    except (OSError, EOFError, zlib.error):
        return b""


def plain_name(path: Path) -> str:
    """The name of PATH without its .gz suffix (mytrace.rpd.gz -> mytrace.rpd)."""
    return path.name[:-3] if path.name.lower().endswith(".gz") and len(path.name) > 3 else path.name + ".plain"


@contextlib.contextmanager
def decompressed(path: Path):
    """A temporary decompressed copy of gzip file PATH (in the system's temporary folder, named
    like PATH without .gz), removed when the block ends. InputError for damaged gzip data or a
    gzip bomb; a full disk is an InputError that says how much was written."""
    with tempfile.TemporaryDirectory(prefix="traceql-gunzip-") as folder:
        plain = Path(folder) / plain_name(path)
        try:
            with _Gzip(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputError(f"{path}: damaged gzip data ({exc})") from None
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise InputError(f"{path}: no space left to decompress it in {tempfile.gettempdir()} "
                                 "(TMPDIR sets the folder); or gunzip it and ingest the plain file") from None
            if exc.filename is None or Path(exc.filename) != plain:
                raise InputError(f"{path}: damaged gzip data ({exc.strerror or exc})") from None
            raise
        yield plain
