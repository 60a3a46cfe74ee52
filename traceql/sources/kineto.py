"""Read PyTorch profiler (Kineto) Chrome-trace JSON files, plain or gzip-compressed.

A Kineto trace is one JSON object: a few top-level members (schemaVersion, deviceProperties,
distributedInfo, baseTimeNanoseconds, ...) and the array traceEvents, which holds nearly all of
the file (millions of events in a big trace). Some writers put members after the array, and a
Chrome trace may also be a bare array of events.

Parsing, with memory bounded by the block size (BLOCK bytes of decompressed text), never the
file size:

1. The text before the array is decoded on its own (`header`): it is small.
2. The array is read in blocks. Each block is cut after the last `}`, `{` pair (commas and
   blanks between) in it and the part before the cut is decoded, in one call, as a list of
   events by msgspec into typed structs. A cut that falls inside a string or inside an
   event's arguments leaves an unclosed string, object or array on the left, which cannot
   decode: the cut before it is tried instead. A successful decode therefore ends on a true
   boundary between two events. What follows the array's closing bracket is decoded like
   the text before it.
3. Each list of events becomes an Arrow batch inserted into raw.kineto_event
   (schemas/kineto/raw.sql) by a second thread while the next block is decoded (_Inserter):
   phase, category, name, pid, tid and id as values; ts, dur and args as their exact JSON
   text (msgspec.Raw), never through a float. The adapter SQL (schemas/kineto/) converts and
   maps everything else.

Times: Kineto writes microseconds with up to three decimals, either relative to
baseTimeNanoseconds (1.4e12 us) or since the Unix epoch (1.7e15 us: 19 significant digits with
the nanoseconds, more than a float64 holds). The decimal text of ts and dur is converted to
integer ns exactly, rounded to whole ns halves away from zero when a writer gave more than
three decimals ('1.0005' -> 1001 ns): the macro kineto_ns of schemas/kineto/common/labels.sql. An event's end is ts + dur of the two converted values.

The parser was chosen by measurement (bench/kineto.py; bench/KINETO.md has the figures):
msgspec's typed decoding with raw values was the fastest of msgspec, orjson, the standard
json module, ijson (yajl2_c) and DuckDB's read_json, and the only fast one that gives the
numbers' text; DuckDB's reader goes through doubles and needs the whole object in memory.
"""

from __future__ import annotations

import gzip
import re
import sys
import zlib
from array import array
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, Union

import msgspec

from traceql.core.errors import InputError, UnsupportedVersionError
from traceql.sources.stage_report import StageReport, create_raw_tables
from traceql.sources.versions import kineto_versions

# schemaVersion -> layout folder under schemas/kineto/. Every trace seen (2020-2026 builds, CUDA
# and ROCm) is schema 1 or has no schemaVersion (read as 1); the category names that changed
# within it are mapped by schemas/kineto/categories.csv.
LAYOUTS = {1: "v1"}

BLOCK = 16 << 20          # decompressed bytes read per step
MAX_EVENT = 4 * BLOCK     # text held at once without an event boundary: beyond it, an error (memory stays bounded)
MAX_TRIES = 256           # cuts tried per block (each decode reads up to the block): linear on any input
MAX_RATIO = 250           # gzip: decompressed bytes per compressed byte, checked beyond MAX_EVENT (real traces: 10-40)
SPLIT_MIN = 20_000        # events in a block from which its columns are built in Arrow (_raw_column, _int_or_str)
HEAD_LIMIT = 64 << 20     # the members before traceEvents are searched for this far
GZIP_MAGIC = b"\x1f\x8b"

# Categories whose args the adapters read; the args of other events (python_function,
# cpu_instant_event, ...: often the most numerous) are not kept.
ARGS_KEPT = frozenset((
    "kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "cuda_runtime", "Runtime",
    "cuda_driver", "Driver", "cpu_op", "Operator", "user_annotation", "gpu_user_annotation", "cuda_sync",
))
# The name of PyTorch's allocator events (profile_memory=True), whose args are kept whatever their
# category: 'cpu_instant_event' in current writers, none in 2021's (schemas/kineto/common/memory.sql).
MEMORY_EVENT = "[memory]"

_RAW_EMPTY = msgspec.Raw()
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\}\s*\]")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


# gc=False: the decoded events hold no reference cycles (JSON cannot make one), so the garbage
# collector need not track them: its full collections walked every event decoded so far (7 of them
# in a 700 k-event trace, about 0.25 CPU s).
class _Event(msgspec.Struct, gc=False):
    ph: Union[str, None] = None
    cat: Union[str, None] = None
    name: Union[str, None] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: msgspec.Raw = _RAW_EMPTY
    dur: msgspec.Raw = _RAW_EMPTY
    id: Union[int, str, None] = None
    args: msgspec.Raw = _RAW_EMPTY


class _LooseEvent(msgspec.Struct, gc=False):
    """For a block where some event has a field of an unexpected type (a numeric name, a float
    pid): every field is taken as it comes and turned into text."""
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _RAW_EMPTY
    dur: msgspec.Raw = _RAW_EMPTY
    id: Any = None
    args: msgspec.Raw = _RAW_EMPTY


_DECODE = msgspec.json.Decoder(list[_Event])
_DECODE_LOOSE = msgspec.json.Decoder(list[_LooseEvent])
_DECODE_ANY = msgspec.json.Decoder()


@dataclass
class Header:
    """What a Kineto file says outside its events."""
    members: dict = field(default_factory=dict)   # top-level members other than traceEvents
    bare_array: bool = False                       # the file is a bare array of events

    @property
    def schema_version(self) -> str | None:
        v = self.members.get("schemaVersion")
        return None if v is None else str(v)


def layout(path: Path, version: str | None) -> tuple[str, list[str]]:
    """The layout ('kineto/v1') that reads schemaVersion VERSION, and warnings about it; an
    unknown older or unreadable version raises UnsupportedVersionError."""
    number = int(version) if version is not None and version.strip().isdigit() else None
    if number in LAYOUTS:
        return f"kineto/{LAYOUTS[number]}", []
    newest = max(LAYOUTS)
    if version is None:
        return f"kineto/{LAYOUTS[newest]}", [
            "Kineto trace without schemaVersion (written before 2022, or converted): read as schema 1"]
    if number is not None and number > newest:
        return f"kineto/{LAYOUTS[newest]}", [
            f"Kineto schemaVersion {version} is newer than the newest known {newest}; read with the same "
            "layout, check the results"]
    raise UnsupportedVersionError(f"{path}: Kineto schemaVersion {version!r} is not supported; traceql reads "
                                  f"schemaVersion {', '.join(map(str, LAYOUTS))}")


def is_gzip(head: bytes) -> bool:
    return head.startswith(GZIP_MAGIC)


class _Gzip(gzip.GzipFile):
    """A gzip stream that refuses to decompress more than MAX_RATIO bytes per compressed byte
    (beyond MAX_EVENT bytes): a small file that would expand to gigabytes (a 'gzip bomb')."""

    out = 0

    def read(self, size=-1):
        data = super().read(size)
        self.out += len(data)
        if self.out > MAX_EVENT:
            packed = max(1, self.fileobj.tell())
            if self.out > MAX_RATIO * packed:
                raise InputError(f"{self.name}: gzip data expanding more than {MAX_RATIO} times "
                                 f"({self.out:,} bytes from {packed:,}): not a profiler trace (a gzip bomb?)")
        return data


def _open(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return _Gzip(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")


def _read(fh, n: int) -> bytes:
    try:
        return fh.read(n)
    except (OSError, EOFError, zlib.error) as exc:  # a damaged or truncated gzip stream
        raise InputError(f"{getattr(fh, 'name', 'file')}: damaged gzip data ({exc})") from None


def sniff(path: Path, head: bytes) -> bool:
    """Whether the file starting with HEAD looks like a Chrome-trace JSON (plain or gzip): an
    object naming traceEvents, or an array of objects with 'ph'."""
    if is_gzip(head):
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(1 << 16)
        except (OSError, EOFError, zlib.error):
            return False
    text = head.lstrip()
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:].lstrip()
    if text.startswith(b"{"):
        return b'"traceEvents"' in head or b'"schemaVersion"' in head or b'"deviceProperties"' in head
    if text.startswith(b"["):
        return b'"ph"' in head
    return False


def _decode_members(text: bytes) -> dict | None:
    """The members in TEXT ('"a": 1, "b": [..]'), or None when it is not such a list."""
    text = text.strip().strip(b",").strip()
    if not text:
        return {}
    try:
        value = _DECODE_ANY.decode(b"{" + text + b"}")
    except (msgspec.DecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _locate_events(fh, path: Path, first: int = BLOCK) -> tuple[Header, bytes]:
    """Read up to the start of the event array: its header, and the text after the '['. FIRST
    bytes are read first, then twice as many each time up to BLOCK."""
    data = b""
    size = first
    while True:
        more = _read(fh, size)
        size = min(2 * size, BLOCK)
        data += more
        stripped = data.lstrip()
        if stripped.startswith(b"\xef\xbb\xbf"):
            stripped = stripped[3:].lstrip()
        if stripped.startswith(b"["):
            return Header(bare_array=True), stripped[1:]
        if stripped and not stripped.startswith(b"{"):
            raise InputError(f"{path}: not a JSON object or array, not a PyTorch profiler (Kineto) trace")
        body = stripped[1:]
        for m in _EVENTS_KEY.finditer(body):
            members = _decode_members(body[:m.start()])
            if members is not None:  # the key is a member of the top-level object
                return Header(members=members), body[m.end():]
        if not more or len(data) > HEAD_LIMIT:
            if not more and _decode_members(body.rstrip().rstrip(b"}")) is not None:
                raise InputError(f"{path}: a JSON object without traceEvents, not a PyTorch profiler (Kineto) trace")
            raise InputError(f"{path}: no traceEvents array found (not a PyTorch profiler (Kineto) trace, or damaged)")


def header(path: Path) -> Header:
    """The members before the events (what detection needs), read from the start of the file: in
    64 kB first, not a whole block (decompressing and copying 16 MB was 0.05 s of every
    detection of a trace that big)."""
    with _open(path) as fh:
        return _locate_events(fh, path, first=64 << 10)[0]


def _decode_block(piece: bytes, path: Path) -> list:
    try:
        return _DECODE.decode(piece)
    except msgspec.ValidationError:
        return _DECODE_LOOSE.decode(piece)
    except RecursionError:  # arguments nested thousands deep
        raise InputError(f"{path}: JSON nested too deeply inside an event (more than {sys.getrecursionlimit()} levels): "
                         "not a PyTorch profiler trace") from None


def _events(fh, path: Path, hdr: Header, rest: bytes):
    """Yield lists of events; at the end, add the members after the array to hdr.members."""
    data = rest
    eof = False
    while True:
        if not eof:
            more = _read(fh, BLOCK)
            eof = not more
            data += more
        if eof:
            yield from _last(data, path, hdr)
            return
        cuts = list(_BOUNDARY.finditer(data, max(0, len(data) - (1 << 20))))
        if not cuts:
            cuts = list(_BOUNDARY.finditer(data))
        done = False
        for cut in reversed(cuts[-MAX_TRIES:]):
            try:  # (one copy of the block: the bracketed piece)
                events = _decode_block(b"".join((b"[", memoryview(data)[:cut.start() + 1], b"]")), path)
            except msgspec.DecodeError:
                continue
            yield events
            data = data[cut.end() - 1:]
            done = True
            break
        if not done and len(cuts) > 64:
            raise InputError(f"{path}: not valid JSON inside traceEvents (no event boundary decodes)")
        if not done and len(data) > MAX_EVENT:
            raise InputError(f"{path}: no boundary between two events in {len(data):,} bytes of traceEvents "
                             f"(an event larger than {MAX_EVENT >> 20} MB, or not a Kineto trace)")


def _last(data: bytes, path: Path, hdr: Header):
    """The events before the array's closing bracket, and the members after it."""
    stripped = data.strip()
    candidates = [m.start() for m in _ARRAY_END.finditer(data)]
    if stripped.startswith(b"]"):  # no events left before the bracket
        candidates = [-1] + candidates
    for pos in reversed(candidates[-MAX_TRIES:]):  # each try decodes up to pos: linear, bounded tries
        close = data.index(b"]", pos + 1)
        tail = data[close + 1:].strip()
        if hdr.bare_array:
            members = {} if not tail else None
        elif tail.startswith(b","):
            members = _decode_members(tail[1:].rstrip()[:-1]) if tail.rstrip().endswith(b"}") else None
        else:
            members = {} if tail == b"}" else None
        if members is None:
            continue
        try:
            events = _decode_block(b"[" + data[:pos + 1] + b"]", path) if pos >= 0 else []
        except msgspec.DecodeError:
            continue
        if "traceEvents" in members:
            raise InputError(f"{path}: the JSON object has traceEvents twice (a damaged or concatenated file); "
                             "traceql reads a trace with one")
        hdr.members.update(members)
        if events:
            yield events
        return
    if re.search(rb"[:\[,]\s*-?(NaN|Infinity)\b", data):
        raise InputError(f"{path}: JSON with NaN or Infinity as a number, which JSON does not allow (a writer's bug); "
                         "not read")
    raise InputError(f"{path}: truncated or damaged JSON (the traceEvents array is not closed properly)")


def _raw_column(values: list) -> pa.Array:
    """msgspec.Raw values as one Arrow string column ('' for an absent value), without a Python
    string per value. A big block's values are joined by NUL, which JSON text cannot hold (a
    control character is escaped inside a string and invalid outside one), and split by Arrow:
    2-2.5x faster than calling len() on each Raw for the offsets (ts and dur of bench/kineto.py's
    100 k kernels); a small one's (importing pyarrow.compute, 28 ms, would cost more) by len()."""
    import pyarrow as pa  # here, not at import: detecting and reading SQLite need no pyarrow

    if len(values) >= SPLIT_MIN:
        import pyarrow.compute as pc

        joined = b"\0".join(values)
        whole = pa.LargeStringArray.from_buffers(1, pa.py_buffer(array("q", [0, len(joined)])), pa.py_buffer(joined))
        column = pc.split_pattern(whole, "\0").flatten()
        if len(column) == len(values):  # (else a NUL after all)
            return column
    offsets = array("q", [0])
    offsets.extend(accumulate(map(len, values)))
    return pa.LargeStringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(values)))


def _int_or_text(values: list) -> tuple[pa.Array, pa.Array]:
    """pid, tid or id values (JSON integers, or strings in some writers): (the integer, or the
    string read as one when it is all digits; the string as written, else NULL)."""
    import pyarrow as pa

    try:
        return pa.array(values, pa.int64()), pa.nulls(len(values), pa.string())
    except (pa.ArrowException, TypeError, OverflowError):
        pass
    if len(values) >= SPLIT_MIN:  # a big block: in Arrow (the loop below is 1 us a value)
        mixed = _int_or_str(values)
        if mixed is not None:
            return mixed
    ints, texts = [], []
    for v in values:
        if isinstance(v, bool) or v is None:
            ints.append(None), texts.append(None)
        elif isinstance(v, int):
            ints.append(v if -(1 << 63) <= v < (1 << 63) else None), texts.append(None)
        else:
            s = v if isinstance(v, str) else msgspec.json.encode(v).decode()
            t = s.strip()
            ints.append(int(t) if _DIGITS.fullmatch(t) else None), texts.append(s)
    return pa.array(ints, pa.int64()), pa.array(texts, pa.string())


# A string read as an integer: an optional minus and at most 18 ASCII digits (within 64 bits),
# blanks around them allowed
_DIGITS = re.compile(r"-?[0-9]{1,18}")


def _int_or_str(values: list) -> tuple[pa.Array, pa.Array] | None:
    """_int_or_text for values that are integers, strings and None only (real traces: a few
    'Spans' and 'Traces' pids in the last block, or 2021's tids as strings of digits), in Arrow;
    None for anything else (booleans, numbers beyond 64 bits, objects), which the loop handles.
    A string of digits (_DIGITS) is read as the integer in both."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ints = [v if type(v) is int else None for v in values]
    strs = [v if type(v) is str else None for v in values]
    if ints.count(None) + strs.count(None) - values.count(None) != len(values):
        return None  # (a value of another type)
    try:
        numbers = pa.array(ints, pa.int64())
    except OverflowError:
        return None
    texts = pa.array(strs, pa.string())
    trimmed = pc.utf8_trim_whitespace(texts)
    digits = pc.if_else(pc.match_substring_regex(trimmed, f"^{_DIGITS.pattern}$"), trimmed, None)
    return pc.coalesce(numbers, pc.cast(digits, pa.int64())), texts


def _text(values: list) -> pa.Array:
    import pyarrow as pa

    try:
        return pa.array(values, pa.string())
    except (pa.ArrowException, TypeError):
        return pa.array([None if v is None else v if isinstance(v, str) else msgspec.json.encode(v).decode()
                         for v in values], pa.string())


def _batch(events: list, first_row: int) -> pa.Table:
    import pyarrow as pa

    n = len(events)
    rows = array("q", range(first_row, first_row + n))
    pid, pid_text = _int_or_text([e.pid for e in events])
    tid, tid_text = _int_or_text([e.tid for e in events])
    fid, fid_text = _int_or_text([e.id for e in events])
    return pa.Table.from_arrays(
        [pa.Int64Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(rows)]),
         _text([e.ph for e in events]), _text([e.cat for e in events]), _text([e.name for e in events]),
         pid, pid_text, tid, tid_text,
         _raw_column([e.ts for e in events]), _raw_column([e.dur for e in events]),
         fid, fid_text,
         _raw_column([e.args if e.cat in ARGS_KEPT or e.ph == "M" or e.name == MEMORY_EVENT else _RAW_EMPTY
                      for e in events])],
        names=["src_row", "ph", "cat", "name", "pid", "pid_text", "tid", "tid_text", "ts", "dur",
               "id", "id_text", "args"])


class _Inserter:
    """Inserts the Arrow batches into raw.kineto_event in a thread of its own, while the next
    block is decoded: DuckDB releases the GIL while it copies a batch, so the copy (0.7 of 4.2 s
    staging 704 k events) overlaps the decoding. At most QUEUED batches wait: memory stays
    bounded by the block size. The connection is used by this thread alone until the `with`
    block ends, which waits for the last insert and raises the error of a failed one; an error
    of the reading drops the batches still queued."""

    QUEUED = 2

    def __init__(self, con):
        import queue
        import threading

        self.con, self.error = con, None
        self.queue: queue.Queue = queue.Queue(maxsize=self.QUEUED)
        self.thread = threading.Thread(target=self._run, name="traceql-kineto-insert", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (batch := self.queue.get()) is not None:
            if self.error is not None:
                continue  # (drained: the reader stops at its next put)
            try:
                self.con.register("_traceql_kineto_batch", batch)
                try:
                    self.con.execute("INSERT INTO raw.kineto_event SELECT * FROM _traceql_kineto_batch")
                finally:
                    self.con.unregister("_traceql_kineto_batch")
            except BaseException as exc:  # (re-raised by the reading thread)
                self.error = exc

    def put(self, batch) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(batch)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is not None and self.error is None:
            self.error = exc  # the reader failed (bad JSON, Ctrl-C): the batches queued are dropped
        self.queue.put(None)
        self.thread.join()
        if kind is None and self.error is not None:
            raise self.error


@dataclass
class KinetoStageReport(StageReport):
    """What staging read, as for SQLite sources, and the file's top-level members (distributedInfo, ...)."""
    reader: str = f"msgspec {msgspec.__version__} (Kineto JSON, typed decoding in blocks)"
    members: dict = field(default_factory=dict)


def stage(con, path: Path, raw_ddl: str, progress=None, det=None) -> KinetoStageReport:
    """Create the raw tables of schemas/kineto/raw.sql in the `raw` catalog and fill them from
    the Kineto file at PATH: raw.kineto_event (every event), raw.kineto_member (the top-level
    members, as JSON text) and raw.TARGET_INFO_SESSION_START_TIME (baseTimeNanoseconds, the UTC
    time of ts 0, when the file has it). progress(table, done, total, rows) as reader.stage calls
    it. DET (traceql.sources.detect.Detected), when given, gets the trace-level facts of all members,
    also those after the events (rank, world size, host: see metadata())."""
    import pyarrow as pa

    report = KinetoStageReport()
    create_raw_tables(con, raw_ddl)
    size = max(path.stat().st_size, 1)
    n = 0
    with _open(path) as fh, _Inserter(con) as inserter:
        hdr, rest = _locate_events(fh, path)
        for events in _events(fh, path, hdr, rest):
            inserter.put(_batch(events, n))
            n += len(events)
            if progress:
                done = getattr(getattr(fh, "fileobj", fh), "tell", lambda: 0)()
                progress("traceEvents", min(99, done * 100 // size), 100, n)
    members = pa.Table.from_arrays(
        [pa.array(list(hdr.members), pa.string()),
         pa.array([msgspec.json.encode(v).decode() for v in hdr.members.values()], pa.string())],
        names=["key", "value"])
    con.register("_traceql_kineto_members", members)
    try:
        con.execute("INSERT INTO raw.kineto_member SELECT * FROM _traceql_kineto_members")
    finally:
        con.unregister("_traceql_kineto_members")
    facts = metadata(hdr.members)
    if "BASE_TIME_NS" in facts:
        con.execute("INSERT INTO raw.TARGET_INFO_SESSION_START_TIME VALUES (?)", [int(facts["BASE_TIME_NS"])])
    report.rows = {"kineto_event": n, "kineto_member": len(hdr.members)}
    report.members = hdr.members
    if det is not None:
        det.metadata.update(facts)
        det.exporter_version = exporter_version(hdr.members)
        det.versions = kineto_versions(hdr.members)
        if det.schema_version is None:  # not before the events: check it now that all are read
            det.schema_version = hdr.schema_version
            det.layout, notes = layout(path, hdr.schema_version)
            det.warnings += notes
    return report


def metadata(members: dict) -> dict[str, str]:
    """The trace-level facts of a Kineto file's members, under the keys ingest's trace row reads."""
    out: dict[str, str] = {}
    dist = members.get("distributedInfo")
    if isinstance(dist, dict):
        for key, name in (("rank", "RANK"), ("world_size", "WORLD_SIZE")):
            v = dist.get(key)
            if isinstance(v, int) and not isinstance(v, bool):
                out[name] = str(v)
    for key in ("host_name", "hostname", "host"):
        if isinstance(members.get(key), str):
            out["EXPORT_HOST"] = members[key]
            break
    base = members.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool):
        out["BASE_TIME_NS"] = str(base)
    return out


def exporter_version(members: dict) -> str:
    """'PyTorch profiler (Kineto)' with the CUPTI, CUDA runtime and driver versions it records."""
    parts = [f"{label} {members[key]}" for key, label in (
        ("cupti_version", "CUPTI"), ("cuda_runtime_version", "CUDA runtime"),
        ("cuda_driver_version", "CUDA driver")) if key in members]
    return "PyTorch profiler (Kineto)" + (f", {', '.join(parts)}" if parts else "")
