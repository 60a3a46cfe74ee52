"""The Parquet interchange format: a workspace's contract views as Hive-style partitions by
trace, for Spark (traceql.engines.spark) and any other Parquet reader.

`traceql export --format parquet --partition-by trace -o OUT` writes

    OUT/_traceql.json                        the manifest (below)
    OUT/<view>/trace_id=<N>/part-0.parquet   the rows of trace N of every contract table and view

One file per view and trace, written even when the trace has no rows in that view, so every
view has a file per trace and a reader never has to guess a schema. `trace_id` is the partition
column: it is the directory's name, not a column of the files (Spark, pyarrow.dataset with
hive partitioning, DuckDB's read_parquet(..., hive_partitioning = true) and polars add it back).
Rows are in the view's row order (traceql.core.resources.ROW_ORDER). Files and folders whose names
start with '_' or '.' are not data (Spark and pyarrow skip them): the manifest, and a file being
written (`.part-0.parquet.tmp`, renamed when complete).

The schema is the same in every file of a view, whatever the trace: the contract's columns in
their order with their DuckDB types as Arrow types (INTEGER int32, BIGINT int64, DOUBLE float64,
BOOLEAN bool, VARCHAR string, TIMESTAMP timestamp[us]); the contract's ENUM columns (op_kind,
attribution, style, kind, generation, direction, category) are plain strings, since Parquet and
Spark have no enumerations. Each field carries its column's description from
schemas/contract/<view>.sql as field metadata (`description`, in the Arrow schema stored in the
file); each file's key-value metadata names its view, the view's description, the trace id of
its partition, the format version and the contract version (traceql.store.contract).

The manifest, `_traceql.json`, holds the format ("traceql-parquet") and its version, the
contract version, the partition column, and every view with its description and columns (name,
DuckDB type, Arrow type, description). Writers of one directory must agree on the format and
contract versions; they write the same manifest.

Several workspaces can write into one directory, each its own traces: `trace_id_offset` adds a
number to the trace ids of the partitions written (each workspace numbers its traces from 1),
which is how per-rank ingests running in parallel processes assemble one job's export.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

import pyarrow as pa

from traceql.core.errors import UsageError
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, ROW_ORDER, contract_docs

FORMAT = "traceql-parquet"
FORMAT_VERSION = 1
MANIFEST = "_traceql.json"
PARTITION = "trace_id"
PART_FILE = "part-0.parquet"
VIEWS = CONTRACT_TABLES + CONTRACT_VIEWS


@lru_cache(maxsize=1)
def _arrow_types() -> dict[str, pa.Schema]:
    """Every contract view's columns as DuckDB hands them to Arrow (from the contract created in
    an in-memory database)."""
    import duckdb

    from traceql.core.resources import read_schema

    con = duckdb.connect()
    try:
        for name in VIEWS:
            con.execute(read_schema(f"contract/{name}.sql"))
        return {name: con.execute(f"SELECT * FROM {name} LIMIT 0").to_arrow_table().schema for name in VIEWS}
    finally:
        con.close()


def _plain(t: pa.DataType) -> pa.DataType:
    """An Arrow type as the export stores it: dictionaries (DuckDB ENUMs) as their values."""
    return t.value_type if pa.types.is_dictionary(t) else t


@lru_cache(maxsize=None)
def view_schema(view: str, with_partition: bool = False) -> pa.Schema:
    """The Arrow schema of VIEW's files (without trace_id, the partition column, unless
    with_partition), with the contract's descriptions as field and schema metadata."""
    from traceql.store.contract import CONTRACT_VERSION

    doc = contract_docs()[view]
    described = {c.name: c.doc for c in doc.columns}
    fields = []
    for field in _arrow_types()[view]:
        if field.name == PARTITION and not with_partition:
            continue
        meta = {"description": described.get(field.name, "")}
        fields.append(pa.field(field.name, _plain(field.type), True, meta))
    return pa.schema(fields, metadata={
        "traceql.format": FORMAT, "traceql.format_version": str(FORMAT_VERSION),
        "traceql.contract_version": str(CONTRACT_VERSION), "traceql.view": view,
        "traceql.view_description": doc.doc})


def manifest() -> dict:
    """What _traceql.json holds."""
    from traceql.core.version import __version__
    from traceql.store.contract import CONTRACT_VERSION

    types = {v: dict(cols) for v, cols in _duckdb_types().items()}
    views = {}
    for view in VIEWS:
        doc = contract_docs()[view]
        schema = view_schema(view, with_partition=True)
        views[view] = {"description": doc.doc, "kind": doc.kind, "columns": [
            {"name": f.name, "duckdb_type": types[view][f.name], "arrow_type": str(f.type),
             "description": f.metadata[b"description"].decode()} for f in schema]}
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "contract_version": CONTRACT_VERSION,
            "written_by": f"traceql {__version__}", "partition_by": PARTITION, "views": views}


def _duckdb_types() -> dict[str, list[tuple[str, str]]]:
    from traceql.core.resources import contract_types

    return contract_types()


def read_manifest(root: str | os.PathLike) -> dict:
    """The manifest of the export at ROOT, checked: UsageError when ROOT is no traceql Parquet
    export, or one of another format or contract version than this traceql's."""
    from traceql.store.contract import CONTRACT_VERSION

    path = Path(root) / MANIFEST
    if not path.is_file():
        hint = ""
        if Path(root).is_file():
            hint = " (a workspace file? --engine spark reads its export: traceql export --format parquet " \
                   "--partition-by trace -o DIR)"
        raise UsageError(f"{root}: not a traceql Parquet export, no {MANIFEST}{hint}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable manifest ({exc})") from None
    return check_manifest(data, str(root))


def check_manifest(data: dict, where: str) -> dict:
    from traceql.store.contract import CONTRACT_VERSION

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{where}: {MANIFEST} is not a traceql Parquet export's manifest")
    if data.get("format_version") != FORMAT_VERSION or data.get("contract_version") != CONTRACT_VERSION:
        raise UsageError(
            f"{where}: an export of format {data.get('format_version')}, contract version "
            f"{data.get('contract_version')} (written by {data.get('written_by')}); this traceql reads and writes "
            f"format {FORMAT_VERSION}, contract version {CONTRACT_VERSION}: export the workspace again with this "
            "traceql (after `traceql upgrade`), into another directory")
    return data


def partition_dir(root: Path, view: str, trace_id: int) -> Path:
    return root / view / f"{PARTITION}={trace_id}"


def write(con, out_dir: str | os.PathLike, trace_ids: list[int], *, trace_id_offset: int = 0,
          overwrite: bool = False, progress=None) -> list[Path]:
    """Write the traces TRACE_IDS of the workspace open on CON as partitions of OUT_DIR (see the
    module's documentation); the files written. Partitions that exist already are refused unless
    overwrite; other traces' partitions in OUT_DIR stay as they are."""
    from traceql.core.progress import as_progress

    progress = as_progress(progress)
    root = Path(out_dir)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: exists and is not a directory")
    if (root / MANIFEST).exists():
        read_manifest(root)  # another format or contract version: refused before anything is written
    elif root.is_dir() and any(p.name in VIEWS for p in root.iterdir()):
        raise UsageError(f"{root}: holds view folders but no {MANIFEST}: not a traceql Parquet export")
    targets = {t: t + trace_id_offset for t in trace_ids}
    if any(t < 0 for t in targets.values()):
        raise UsageError(f"--trace-id-offset {trace_id_offset}: trace ids would be negative")
    jobs = [(view, t) for view in VIEWS for t in trace_ids]
    existing = [partition_dir(root, v, targets[t]) for v, t in jobs if partition_dir(root, v, targets[t]).exists()]
    if existing and not overwrite:
        raise UsageError(f"{existing[0]}: exists; use --overwrite to replace the partitions of these traces")
    root.mkdir(parents=True, exist_ok=True)
    _write_manifest(root)
    written = []
    progress.start(f"writing {root}", len(jobs))
    for view, t in jobs:
        target_dir = partition_dir(root, view, targets[t])
        progress.update(len(written), detail=str(target_dir.relative_to(root)))
        target_dir.mkdir(parents=True, exist_ok=True)
        schema = view_schema(view)
        meta = dict(schema.metadata)
        meta[b"traceql.trace_id"] = str(targets[t]).encode()
        columns = ", ".join(f'"{f.name}"' for f in schema)
        reader = con.execute(f"SELECT {columns} FROM {view} WHERE trace_id = ? ORDER BY {ROW_ORDER[view]}",
                             [t]).to_arrow_reader()
        target = target_dir / PART_FILE
        _write_file(reader, target, schema.with_metadata(meta))
        for other in target_dir.iterdir():  # an overwritten partition keeps no file of before
            if other != target and not other.name.startswith((".", "_")):
                if other.is_dir():
                    shutil.rmtree(other)
                else:
                    other.unlink()
        written.append(target)
    progress.update(len(written), detail="done")
    return written


def _write_manifest(root: Path) -> None:
    text = json.dumps(manifest(), indent=1, sort_keys=True) + "\n"
    target = root / MANIFEST
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return
    tmp = root / f".{MANIFEST}.{os.getpid()}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def _write_file(reader: pa.RecordBatchReader, target: Path, schema: pa.Schema) -> None:
    import pyarrow.parquet as pq

    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            for batch in reader:
                writer.write_table(pa.Table.from_batches([batch]).cast(schema))
        os.replace(tmp, target)
    except BaseException:  # a full disk, Ctrl-C: no partial file left behind
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
