"""Nsight Systems reports (.nsys-rep, and .qdrep from before 2021.3) read through `nsys export`.

traceql reads SQLite exports. Given a report, it runs `nsys export --type sqlite` when an nsys
is at hand ($TRACEQL_NSYS, else `nsys` on PATH) and ingests the export. The export goes to a
cache beside the workspace, never beside the user's file:

    <workspace folder>/.traceql-cache/nsys/<hash of the report's absolute path>/<report name>.sqlite

with <report name>.json beside it recording the report it came from, its size and SHA-256. While
the report is unchanged (same size and SHA-256) the export is reused; a changed report is
exported again into the same file, so ingesting it again replaces its trace (the trace's path is
the export's). $TRACEQL_NSYS_CACHE names another cache folder. The export is written to a
temporary name and renamed when nsys succeeded: a failed or interrupted export leaves nothing.

Without an nsys the report is refused as before (traceql.sources.detect), with how to export it by hand.
A report nsys cannot export (damaged, truncated, not a report) is an input error that quotes
nsys's own message, and nothing is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from traceql.core.errors import InputError, WorkspaceError

SUFFIXES = (".nsys-rep", ".qdrep")
ENV = "TRACEQL_NSYS"
CACHE_ENV = "TRACEQL_NSYS_CACHE"


def is_report(path: Path) -> bool:
    return path.suffix.lower() in SUFFIXES


def nsys_command() -> str | None:
    """The nsys to run: $TRACEQL_NSYS (a path or a command name), else `nsys` on PATH; None
    when there is none."""
    given = os.environ.get(ENV, "").strip()
    if given:
        found = shutil.which(given)
        if found is None:
            raise InputError(f"{ENV}={given}: no such program (give the path of the nsys executable)")
        return found
    return shutil.which("nsys")


def cache_dir(db: Path) -> Path:
    given = os.environ.get(CACHE_ENV, "").strip()
    if given:
        return Path(given)
    return Path(os.path.abspath(db)).parent / ".traceql-cache" / "nsys"


def _digest(path: Path) -> str:
    from traceql.sources.digest import sha256

    return sha256(path)


def file_read(path: Path, db: Path) -> Path:
    """The file an ingest of PATH into workspace DB reads: PATH, or for a report its SQLite export
    (exported(): cached beside DB, exported when nsys is at hand; without one PATH itself, which
    detect refuses with how to export it)."""
    if is_report(Path(path)):
        return exported(path, db) or path
    return path


def exported(report: Path, db: Path) -> Path | None:
    """The SQLite export of REPORT to ingest in its place: the cached one while the report is
    unchanged, else a fresh `nsys export`. None when REPORT is not a report or no nsys is at
    hand (traceql.sources.detect then says how to export it by hand)."""
    report = Path(report)
    if not is_report(report) or not report.is_file():
        return None
    nsys = nsys_command()
    if nsys is None:
        return None
    absolute = Path(os.path.abspath(report))
    folder = cache_dir(db) / hashlib.sha256(str(absolute).encode()).hexdigest()[:16]
    target = folder / (report.name + ".sqlite")  # run.nsys-rep -> run.nsys-rep.sqlite: the rank in the name stays
    record = folder / (report.name + ".json")
    try:
        size, digest = report.stat().st_size, _digest(report)
    except OSError as exc:
        raise InputError(f"{report}: cannot be read ({exc.strerror or exc})") from None
    identity = {"report": str(absolute), "size": size, "sha256": digest}
    with contextlib.suppress(OSError, ValueError):
        if target.is_file() and json.loads(record.read_text()) == identity:
            return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkspaceError(f"{folder}: cannot create the export cache ({exc.strerror or exc})") from None
    tmp = folder / f".{report.name}.{os.getpid()}.tmp.sqlite"
    try:
        _run(nsys, report, tmp)
        os.replace(tmp, target)
        record.write_text(json.dumps(identity))
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def _run(nsys: str, report: Path, out: Path) -> None:
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(report)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise InputError(f"{report}: cannot run {nsys} ({exc.strerror or exc})") from None
    if proc.returncode != 0 or not out.is_file():
        said = " ".join(line.strip() for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip())
        why = f"exit status {proc.returncode}" if proc.returncode != 0 else "it wrote no file"
        raise InputError(f"{report}: nsys export failed ({why}): {said[:500] or 'no message'}")
