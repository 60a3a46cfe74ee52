"""Tell what a file is: an Nsight Systems export (and its schema layout), an nvprof
database, or something else, using only Python's sqlite3 opened read-only."""

from __future__ import annotations

import codecs
import errno
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from traceql.core.errors import InputError, UnsupportedVersionError
from traceql.sources.versions import kineto_versions, nsys_versions

SQLITE_MAGIC = b"SQLite format 3\x00"

# Nsight Systems export layouts: folder under schemas/nsys/, schema major version, and the
# newest schema version known to share that layout. A newer minor or micro version is read
# with a warning; an unknown major is refused.
NSYS_LAYOUTS = {
    2: ("v2", (2, 9, 1)),
    3: ("v3", (3, 28, 1)),
}

# nvprof databases: the Version table's value and the layout folder under schemas/nvprof/
# that reads it. Versions 12 (CUDA 10.x-era nvprof) and 16 (a 2022 CUDA 10/11-era file)
# are the ones seen in real files; they differ only by added columns and tables, which
# the adapters read as NULL or empty, so one folder covers both. A Version outside the
# known range (or none) is read with the nearest layout and a warning, as nsys does for a
# newer minor schema: the tables mirror CUPTI activity records, which only grow.
NVPROF_LAYOUTS = {range(12, 17): "v12"}

# rocprofv3 (ROCm 7) rocpd databases: rocpd_metadata's schema_version and the layout folder under
# schemas/rocpd/ that reads it. Each table is named rocpd_<name>_<guid> (the guid with '_' for
# '-'), with a plain view rocpd_<name> over it that rocprofv3 adds; traceql reads the tables and
# stages each under its plain name (Detected.source_names).
ROCPD_LAYOUTS = {"3": "v3"}
ROCPD_TABLE = re.compile(r"(rocpd_[a-z_]+?)_([0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12})")


@dataclass
class Detected:
    path: Path
    source_format: str                      # 'nsys', 'nvprof', 'kineto', 'rocpd', 'rocprofv3_json', 'rocprof' or 'rpd'
    layout: str                             # e.g. 'nsys/v3'
    schema_version: str | None = None
    exporter_version: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    tables: dict[str, list[str]] = field(default_factory=dict)  # table -> column names
    warnings: list[str] = field(default_factory=list)
    exported_from: Path | None = None         # the Nsight Systems report this export was made from (traceql.sources.nsys_export)
    source_names: dict[str, str] = field(default_factory=dict)  # staged name -> table in the file (rocpd)
    versions: dict[str, str] = field(default_factory=dict)  # trace's driver_version, cuda_*_version, torch_version
    compressed: bool = False                  # a gzip-compressed SQLite file (FILE.rpd.gz), read through a decompressed copy (sources/gunzip.py)


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open a SQLite file strictly read-only, decoding text tolerantly (some exports carry
    invalid UTF-8).

    A file in WAL mode (an export someone opened and changed with sqlite3, say) would get a
    -shm and a -wal file created next to it, or could not be opened at all in a read-only
    folder. Without a write-ahead log beside it every row is in the file itself, so it is
    opened as immutable: nothing created, nothing locked. With a log beside it that holds
    changes, and no -shm index that a program writing it keeps, reading it would create files
    next to it: refused (InputError) with what to do instead."""
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro"
    if is_wal(path):
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        if not wal.exists() or wal.stat().st_size == 0:
            uri += "&immutable=1"
        elif not shm.exists():
            raise InputError(
                f"{path}: a WAL-mode SQLite file whose write-ahead log {wal.name} holds changes not yet in it; "
                "traceql creates no files next to a source: checkpoint it first "
                f"(sqlite3 {path.name} 'PRAGMA wal_checkpoint(TRUNCATE)') or ingest a copy")
    con = sqlite3.connect(uri, uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


def is_wal(path: Path) -> bool:
    """True for a SQLite file in WAL mode (header bytes 18 and 19, the write and read format
    versions, are 2)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(20)
    except OSError:
        return False
    return head.startswith(SQLITE_MAGIC) and len(head) == 20 and 2 in (head[18], head[19])


def sqlite_error(path: Path, exc: Exception) -> InputError:
    """A sqlite3 error while reading PATH as one line: a file that another program holds locked
    while it writes it is not a damaged one."""
    text = str(exc)
    if "locked" in text or "busy" in text.lower():
        return InputError(f"{path}: locked by a program that is writing it ({text}); "
                          "ingest it when that program has finished")
    return InputError(f"{path}: damaged or unreadable SQLite database ({text})")


def _is_text(head: bytes) -> bool:
    """True when HEAD, a file's first bytes, reads as UTF-8 text (a last character cut off by
    the read aside) without control characters other than tab, newline and carriage return:
    binary data that happens to begin with '{' or '<' is not called JSON or XML."""
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return not any(ord(c) < 32 and c not in "\t\n\r" for c in text)


def _describe_non_sqlite(path: Path, head: bytes) -> str:
    if not head:
        return "an empty file, not a SQLite database"
    text = head.lstrip() if _is_text(head) else b""
    if text.startswith(b"<?xml") or text.startswith(b"<"):
        if b"nvvp" in head.lower() or path.suffix.lower() == ".nvvp":
            return ("an XML file (an NVIDIA Visual Profiler session file, which holds no profile data), "
                    "not a SQLite database; export the profile with nvprof -o FILE.nvvp or nsys export --type sqlite")
        return "an XML file, not a SQLite database"
    if head.startswith(b"\x1f\x8b"):
        return "a gzip file that holds neither a SQLite database nor a PyTorch profiler (Kineto) trace"
    if text.startswith(b"{") or text.startswith(b"["):
        return "a JSON file that is not a PyTorch profiler (Kineto) trace (no traceEvents)"
    if path.suffix.lower() in (".nsys-rep", ".qdrep"):
        return ("an Nsight Systems report, not its SQLite export, and no nsys was found to export it (put nsys "
                f"on PATH or set TRACEQL_NSYS), or run 'nsys export --type sqlite {path.name}' and ingest the .sqlite file")
    if head.startswith(SQLITE_MAGIC[:6]):
        return "a damaged SQLite file (bad header)"
    return "not a SQLite database"


def _version_tuple(text: str) -> tuple[int, ...] | None:
    m = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*", text or "")
    if not m:
        return None
    return tuple(int(g) if g is not None else 0 for g in m.groups())


def _nvprof_layout(det: Detected) -> Detected:
    """Pick the nvprof layout folder from the Version table (see NVPROF_LAYOUTS)."""
    known = sorted(v for versions in NVPROF_LAYOUTS for v in versions)
    oldest, newest = known[0], known[-1]
    text = det.schema_version
    version = int(text) if text is not None and text.strip().lstrip("-").isdigit() else None
    for versions, folder in NVPROF_LAYOUTS.items():
        if version in versions:
            det.layout = f"nvprof/{folder}"
            return det
    if version is None:
        det.layout = f"nvprof/{NVPROF_LAYOUTS[max(NVPROF_LAYOUTS, key=max)]}"
        det.warnings.append(
            f"nvprof database without a readable Version ({text!r}); read with the layout of "
            f"Version {oldest}-{newest}, check the results")
    elif version > newest:
        det.layout = f"nvprof/{NVPROF_LAYOUTS[max(NVPROF_LAYOUTS, key=max)]}"
        det.warnings.append(
            f"nvprof database Version {version} is newer than the newest known {newest}; "
            "read with the same layout, check the results")
    else:
        det.layout = f"nvprof/{NVPROF_LAYOUTS[min(NVPROF_LAYOUTS, key=min)]}"
        det.warnings.append(
            f"nvprof database Version {version} is older than the oldest known {oldest}; "
            f"read with the layout of Version {oldest}, check the results")
    return det


def _kineto_layout(path: Path) -> Detected:
    """A PyTorch profiler (Kineto) JSON trace: the layout from its schemaVersion (kineto.LAYOUTS).
    Writers that re-save a trace may put schemaVersion after the events: it is then checked when
    the file is read (kineto.stage), not here."""
    from traceql.sources import kineto

    hdr = kineto.header(path)
    det = Detected(path, "kineto", kineto.layout(path, None)[0], schema_version=hdr.schema_version,
                   exporter_version=kineto.exporter_version(hdr.members),
                   versions=kineto_versions(hdr.members))
    if hdr.schema_version is not None:
        det.layout, notes = kineto.layout(path, hdr.schema_version)
        det.warnings += notes
    return det


# Names of the tables nsys and nvprof write: a view of such a name is reported (see detect)
EXPORTER_PREFIXES = ("CUPTI_", "TARGET_INFO_", "NVTX_", "META_DATA", "EXPORT_", "ENUM_", "OSRT_", "CUDA_",
                     "COMPOSITE_", "SCHED_", "PROFILER_", "GPU_", "NCCL_", "CUDNN_", "CUBLAS_", "MPI_")
EXPORTER_TABLES = ("StringIds", "StringTable", "ThreadNames", "Version", "ProcessStreams", "PROCESSES",
                   "ANALYSIS_DETAILS")


def _rocpd(path: Path, names: list[tuple[str, str]], tables: dict[str, list[str]]) -> Detected | None:
    """A rocprofv3 rocpd database (tables rocpd_<name>_<guid>), else None. The tables are
    staged under their plain names; a file that merges several guids (several processes'
    databases in one) is refused, as is a schema_version with no layout."""
    found: dict[str, dict[str, str]] = {}
    for name, kind in names:
        m = ROCPD_TABLE.fullmatch(name)
        if kind == "table" and m and name in tables:
            found.setdefault(m.group(2), {})[m.group(1)] = name
    if not found or not any("rocpd_kernel_dispatch" in t or "rocpd_region" in t for t in found.values()):
        return None
    if len(found) > 1:
        raise InputError(f"{path}: rocpd database holding {len(found)} guids (merged databases); "
                         "traceql reads one rocpd database per process: ingest each process's file")
    (guid, plain), = found.items()
    version = None
    if "rocpd_metadata" in plain:
        try:
            con = connect_readonly(path)
            try:
                row = con.execute(f'SELECT value FROM "{plain["rocpd_metadata"]}" '
                                  "WHERE tag = 'schema_version' ORDER BY id LIMIT 1").fetchone()
            finally:
                con.close()
        except sqlite3.DatabaseError as exc:
            raise sqlite_error(path, exc) from None
        version = None if row is None else str(row[0]).strip()
    det = Detected(path, "rocpd", "rocpd/v3", schema_version=version, exporter_version=None,
                   tables={p: tables[t] for p, t in plain.items()},
                   source_names=dict(plain))
    if version not in ROCPD_LAYOUTS:
        known = ", ".join(sorted(ROCPD_LAYOUTS))
        if version is not None and version.isdigit() and int(version) > max(int(v) for v in ROCPD_LAYOUTS):
            det.warnings.append(f"rocpd schema_version {version} is newer than the newest known {known}; "
                                "read with the same layout, check the results")
        else:
            raise UnsupportedVersionError(f"{path}: rocpd schema_version {version!r} is not supported; "
                                          f"traceql reads rocpd schema_version {known}")
    else:
        det.layout = f"rocpd/{ROCPD_LAYOUTS[version]}"
    return det


def _compressed_sqlite(path: Path) -> Detected:
    """A gzip-compressed SQLite file: detected on a temporary decompressed copy (removed at once;
    ingest decompresses it again to read it), with PATH's name in every message."""
    from traceql.sources import gunzip

    with gunzip.decompressed(path) as plain:
        try:
            det = detect(plain)
        except (InputError, UnsupportedVersionError) as exc:
            raise type(exc)(str(exc).replace(str(plain), str(path))) from None
    det.path, det.compressed = path, True
    det.warnings = [w.replace(str(plain), str(path)) for w in det.warnings]
    return det


def detect(path: str | os.PathLike) -> Detected:
    """Inspect `path` and say which adapter reads it. Raises InputError for anything
    that is not a readable profiler export, UnsupportedVersionError for unknown versions."""
    path = Path(path)
    if not path.exists():
        if path.is_symlink():  # a link to nothing, or to itself
            try:
                os.stat(path)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise InputError(f"{path}: cannot be read (a symbolic link loop)") from None
            raise InputError(f"{path}: a symbolic link to a missing file ({os.readlink(path)})")
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a profiler export")
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not head.startswith(SQLITE_MAGIC):  # the JSON readers (and msgspec) only for files that are no SQLite
        from traceql.sources import gunzip, kineto, rocprof_json

        if kineto.is_gzip(head) and gunzip.head(path, len(SQLITE_MAGIC)) == SQLITE_MAGIC:
            return _compressed_sqlite(path)
        if rocprof_json.sniff(path, head):
            return Detected(path, "rocprofv3_json", "rocpd/v3", schema_version=None, exporter_version=None)
        if kineto.sniff(path, head):
            if rocprof_json.is_rocprof_v1_trace(path, head):  # Chrome-trace JSON, but not PyTorch's: no events read
                raise InputError(f"{path}: {rocprof_json.v1_trace_refusal(path)}")
            return _kineto_layout(path)
        raise InputError(f"{path}: {_describe_non_sqlite(path, head)}")

    try:
        con = connect_readonly(path)
        try:
            # Tables only: a view (or a trigger) is code of whoever wrote the file, and reading it
            # runs that code (an endless WITH RECURSIVE, a cross join); a view in place of a
            # table the exporter writes is not read, with a warning (read as absent).
            names = con.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
            tables, views = {}, []
            for name, kind in names:
                if kind == "view":
                    views.append(name)
                    continue
                tables[name] = [r[1] for r in con.execute(f'PRAGMA table_info("{name.replace(chr(34), chr(34) * 2)}")')]
            metadata = {}
            for meta in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
                if meta in tables and {"name", "value"} <= set(tables[meta]):
                    metadata = {str(k): (None if v is None else str(v))
                                for k, v in con.execute(f"SELECT name, value FROM {meta}")}
                    break
            system_env = {}
            if "TARGET_INFO_SYSTEM_ENV" in tables and {"name", "value"} <= set(tables["TARGET_INFO_SYSTEM_ENV"]):
                system_env = dict(con.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV "
                                              "WHERE name IN ('NvDriverVersion', 'CudaDriverVersion')").fetchall())
            nvprof_version = None
            if "Version" in tables and "StringTable" in tables:
                row = con.execute("SELECT * FROM Version LIMIT 1").fetchone()
                nvprof_version = None if row is None else str(row[0])
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise sqlite_error(path, exc) from None
    except UnicodeDecodeError:  # SQLite's message quotes the damaged bytes, which Python cannot decode
        raise InputError(f"{path}: damaged or unreadable SQLite database (SQLite's error names undecodable bytes)") from None

    masked = sorted(v for v in views if v.startswith(EXPORTER_PREFIXES) or v in EXPORTER_TABLES)
    note = [f"{', '.join(masked)}: a view where the exporter writes a table; not read (traceql reads tables "
            "only), its rows are absent"] if masked else []


    rocpd = _rocpd(path, names, tables)
    if rocpd is not None:
        return rocpd

    # rocmProfileData (rpd_tracer): the older rocpd schema, plain table names (no guid suffix)
    if {"rocpd_op", "rocpd_api", "rocpd_api_ops", "rocpd_string"} <= set(tables):
        return Detected(path, "rpd", "rpd/v2", schema_version=None, exporter_version=None, tables=tables)

    # rocprof (v1) results.db: its HIP/OPS/COPY tables with BeginNs/EndNs (KERN is a name list)
    if {"OPS", "HIP"} <= set(tables) and {"BeginNs", "EndNs", "Index"} <= set(tables["OPS"]):
        return Detected(path, "rocprof", "rocprof/v1", schema_version=None, exporter_version=None, tables=tables)

    if "StringTable" in tables and any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables):
        return _nvprof_layout(Detected(path, "nvprof", "nvprof", schema_version=nvprof_version,
                                       exporter_version=None, tables=tables, warnings=note))

    nsys_markers = ("StringIds", "NVTX_EVENTS", "ThreadNames", "TARGET_INFO_GPU",
                    "TARGET_INFO_CUDA_GPU", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")
    if metadata or ("StringIds" in tables and any(t in tables for t in nsys_markers[1:])):
        version = metadata.get("EXPORT_SCHEMA_VERSION")
        det = Detected(path, "nsys", "nsys/legacy", schema_version=version,
                       exporter_version=metadata.get("EXPORT_PRODUCT_VERSION"),
                       metadata=metadata, tables=tables, warnings=note, versions=nsys_versions(system_env))
        if version is None:
            if metadata:
                det.warnings.append("export metadata has no EXPORT_SCHEMA_VERSION; read as a pre-2022 export")
            return det
        vt = _version_tuple(version)
        if vt is None:
            raise UnsupportedVersionError(f"{path}: unreadable Nsight Systems export schema version {version!r}")
        if vt[0] not in NSYS_LAYOUTS:
            known = ", ".join(f"{m}.x" for m in sorted(NSYS_LAYOUTS))
            raise UnsupportedVersionError(
                f"{path}: Nsight Systems export schema {version} (major version {vt[0]}) is not supported; "
                f"traceql reads schema {known}")
        folder, newest = NSYS_LAYOUTS[vt[0]]
        det.layout = f"nsys/{folder}"
        if vt > newest:
            det.warnings.append(
                f"export schema {version} is newer than the newest known {'.'.join(map(str, newest))}; "
                "read with the same layout, check the results")
        return det

    if not tables:
        raise InputError(f"{path}: SQLite database with no tables, not a profiler export")
    raise InputError(f"{path}: SQLite database without Nsight Systems or nvprof tables, not a profiler export")
