"""Helpers shared by the tests: where the third-party traces live, and small builders."""

from __future__ import annotations

import hashlib
import sqlite3
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


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


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
