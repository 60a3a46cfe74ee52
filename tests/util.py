"""Helpers shared by the tests: where the third-party traces live, and small builders."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
NO_TRACES = "../shared/traces not present (third-party traces are not part of the repository)"


def trace_file(rel: str) -> Path:
    """A file under ../shared/traces, or skip the test when the folder is absent."""
    path = TRACES / rel
    if not path.exists():
        pytest.skip(NO_TRACES)
    return path


def _built_once(tmp_path_factory, key: str, suffix: str, build) -> Path:
    """The file KEY+SUFFIX in the folder the xdist workers share (the one above each worker's
    basetemp), built by build(path) once per test session: the first test to ask builds it under a
    file lock, the others find it. Not to be written: copy it first."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "ingested"
    shared.mkdir(exist_ok=True)
    built = shared / f"{key}{suffix}"
    with open(shared / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            part = shared / f"{key}.part{suffix}"
            part.unlink(missing_ok=True)
            build(part)
            part.rename(built)
    return built


def ingested(tmp_path_factory, *rels: str, derived: bool = False) -> Path:
    """A workspace of its own (a copy, free to write) holding the shared traces RELS ingested as
    a plain `traceql.ingest(files, db=...)` does, under the TRACEQL_DERIVE and TRACEQL_READER in
    force (derived: with TRACEQL_DERIVE=eager, every derived family built at ingest). The ingest
    runs once per test session and list of files (_built_once), the other tests copy it. 27
    fixtures and tests ingested the same 10 sets of real traces (cs336-jsun, the NCCL ring set,
    the Kineto traces, ...) each on their own, at 2-15 CPU s each; derived=True spares each copy
    the build of the families on its first read of them (11 CPU s on the Kineto traces, in each
    of three modules). Skips when ../shared/traces is absent."""
    files = [trace_file(rel) for rel in rels]
    env = {"TRACEQL_DERIVE": "eager"} if derived else {}
    settings = [str(f) for f in files] + [f"{v}={env.get(v, os.environ.get(v, ''))}"
                                          for v in ("TRACEQL_DERIVE", "TRACEQL_READER")]
    key = hashlib.sha256("\n".join(settings).encode()).hexdigest()[:16]

    def build(part: Path) -> None:
        import traceql

        saved = {v: os.environ.get(v) for v in env}
        os.environ.update(env)
        try:
            traceql.ingest(files, db=part)
        finally:
            for v, value in saved.items():
                if value is None:
                    os.environ.pop(v, None)
                else:
                    os.environ[v] = value

    built = _built_once(tmp_path_factory, key, ".duckdb", build)
    copy = tmp_path_factory.mktemp("ingested") / "ws.duckdb"
    shutil.copyfile(built, copy)
    return copy


def generated_nsys(tmp_path_factory, kernels: int, seed: int = 0, layout: str = "3") -> Path:
    """A synthetic nsys export (fixtures/gen_nsys.py generate) shared by the whole test session,
    to be read, not written: the tests that need a large one (an ingest long enough to be
    interrupted or killed mid-way) spent 9-10 CPU s each generating the same 300,000 kernels."""
    from fixtures.gen_nsys import generate

    key = f"gen_nsys-{layout}-{kernels}-{seed}"
    return _built_once(tmp_path_factory, key, ".sqlite",
                       lambda part: generate(part, layout=layout, kernels=kernels, seed=seed, force=True))


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def readonly(path) -> sqlite3.Connection:
    """A read-only sqlite3 connection to a source file (the oracle's own reader, not traceql's);
    invalid UTF-8 is read as U+FFFD, as traceql reads it."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def source_rows(path, sql: str, *args) -> list[tuple]:
    """All rows of one query over a source SQLite file, read with Python's sqlite3."""
    con = readonly(path)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def cli(*args, cwd=None, env=None, timeout: float = 1800, input: str | None = None) -> subprocess.CompletedProcess:
    """`traceql ARGS` as a user runs it, text output captured (INPUT, if given, on its stdin): what
    cli_process returns, from a child forked off a warm server (tests/cli_server.py) instead of a
    new interpreter, which costs 0.4-0.9 CPU s a command in Python's start-up and traceql's imports alone."""
    from .cli_server import cli as served

    return served(*args, cwd=cwd, env=env, timeout=timeout, input=input)


def cli_process(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """`traceql ARGS` as a user runs it: a subprocess (`python -m traceql`), text output captured.
    For what only a new interpreter shows (stdin, signals, start-up imports)."""
    return subprocess.run([sys.executable, "-m", "traceql", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def make_sqlite(path: Path, statements: list[str]) -> Path:
    con = sqlite3.connect(path)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return path


def nsys_stub(path: Path, version: str | None = "3.24.14", meta_table: str = "META_DATA_EXPORT") -> Path:
    """A minimal nsys-looking export: metadata, StringIds and one kernel."""
    stmts = ["CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
             "INSERT INTO StringIds VALUES (1, 'k(int)'), (2, 'k')",
             "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
             "deviceId INTEGER NOT NULL, contextId INTEGER, streamId INTEGER, correlationId INTEGER, "
             "globalPid INTEGER, demangledName INTEGER, shortName INTEGER)",
             "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 250, 0, 1, 7, 5, 281546145660928, 1, 2)"]
    if version is not None:
        stmts += [f"CREATE TABLE {meta_table} (name TEXT NOT NULL, value TEXT)",
                  f"INSERT INTO {meta_table} VALUES ('EXPORT_SCHEMA_VERSION', '{version}'), "
                  "('EXPORT_PRODUCT_VERSION', '2099.1.1')"]
    return make_sqlite(path, stmts)
