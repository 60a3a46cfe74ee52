"""A source file's identity: its SHA-256, which trace.file_sha256 records (ingest computes it in
a thread while DuckDB reads the file; `traceql upgrade`, `traceql diff` and a report on a file
compare it).

Hashing a large export takes seconds (2.2 CPU s for 1.7 GB), and a report on a file
(`traceql report --by kernel FILE`) asks whether the workspace holds the file unchanged each time
it runs. So each digest computed is remembered for the file's version (device, inode, size,
modification and change times, which any write changes: traceql.core.records) in the user's
cache folder, record `file-digests`, when the version did not change while it was hashed and
was at least a second old; sha256() answers from the record while the file is that version.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from traceql.core import records

DIGESTS = "file-digests"
DIGESTS_KEPT = 256


class FileDigest(threading.Thread):
    """The SHA-256 of a file, computed in a background thread (hashlib releases the GIL): the
    identity `traceql upgrade` checks before it reads a trace's source file again. result()
    waits for it; None when the file could not be read."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.digest = path, None
        self.start()

    def run(self) -> None:
        try:
            self.digest = sha256(self.path)
        except OSError:
            pass

    def result(self) -> str | None:
        self.join()
        return self.digest


def sha256(path: Path) -> str:
    """PATH's SHA-256: from the record while the file is the version it was hashed at, else
    computed (and recorded when the file did not change meanwhile)."""
    before = records.version(path)
    key = records.key(before)
    if key is not None:
        for line in reversed(records.read(DIGESTS)):
            if line.startswith(key + " "):
                return line[len(key) + 1:]
    # recorded only for a version at least a second old: file times advance in clock ticks (a few
    # ms), and a rewrite of the same size within the tick of the write hashed would look the same
    settled = before is not None and time.time_ns() - before[4] > 1_000_000_000
    digest = file_sha256(path)
    if key is not None and settled and records.key(records.version(path)) == key:
        records.remember(DIGESTS, f"{key} {digest}", DIGESTS_KEPT)
    return digest


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
