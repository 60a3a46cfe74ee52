"""A source file's identity: its SHA-256, which trace.file_sha256 records (ingest computes it in
a thread while DuckDB reads the file; `traceql upgrade` and `traceql diff` compare it)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path


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
            self.digest = file_sha256(self.path)
        except OSError:
            pass

    def result(self) -> str | None:
        self.join()
        return self.digest


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
