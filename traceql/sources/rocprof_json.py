"""Read rocprofv3's JSON output (`rocprofv3 --output-format json`, the rocprofiler-sdk tool's
"rocprofiler-sdk-tool" document), plain or gzip-compressed, into the rocpd source tables.

The JSON holds the same rocprofiler-sdk records that rocprofv3 writes to a rocpd database
(schemas/rocpd/raw.sql): agents (with the same HSA properties that rocpd keeps as extdata),
kernel symbols, and buffer records per kind (kernel_dispatch, hip_api, hsa_api, marker_api,
memory_copy, ...), each with rocprofiler's internal correlation id, which rocpd stores as the
event's stack_id. So the file is staged as rocpd tables and read by the rocpd/v3 adapters: one
set of SQL for both outputs of the tool.

Mapping (JSON -> rocpd table):
- agents -> rocpd_info_agent: id the agent handle, type 'GPU' (HSA type 2) or 'CPU', type_index
  logical_node_type_id (the HIP device ordinal of a GPU), extdata the agent object as JSON.
- kernel_symbols -> rocpd_info_kernel_symbol: display_name is formatted_kernel_name, the name
  rocprofv3 prints (the symbol without its '.kd' suffix, demangled).
- buffer_records.kernel_dispatch -> rocpd_kernel_dispatch, memory_copy -> rocpd_memory_copy
  (the operation's name, MEMORY_COPY_*, as name), hip_api/hsa_api/marker_api/rccl_api ->
  rocpd_region named by strings.buffer_records[kind].operations[operation] (a rocTX record by
  its message in strings.marker_api when there is one).
- every record gets one rocpd_event row: category the record kind's name
  (strings.buffer_records[kind].kind: KERNEL_DISPATCH, HIP_RUNTIME_API_EXT, MARKER_CORE_API, ...),
  stack_id the internal correlation id.
- metadata.pid and command -> rocpd_info_process (row id 1); the records' thread ids ->
  rocpd_info_thread; metadata.node -> rocpd_info_node.

Memory: the document is one JSON object and is decoded whole (msgspec, typed: only the fields
above are kept). Files beyond MAX_BYTES of JSON text are refused with a one-line error that
names the bounded alternative (rocprofv3's rocpd database output).
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import msgspec

from traceql.core.errors import InputError
from traceql.sources.kineto import _Gzip, is_gzip
from traceql.sources.stage_report import StageReport, create_raw_tables

TOP_KEY = b'"rocprofiler-sdk-tool"'
MAX_BYTES = 2 << 30   # decompressed JSON text decoded at once: beyond it, refused
SNIFF_BYTES = 4096

# buffer_records kinds read as rocpd regions (API calls and rocTX); every other non-empty kind is
# counted in ingest_stats as not read.
REGION_KINDS = ("hip_api", "hsa_api", "marker_api", "rccl_api")
READ_KINDS = ("kernel_dispatch", "memory_copy") + REGION_KINDS


class _Handle(msgspec.Struct, frozen=True):
    handle: int = 0


class _Corr(msgspec.Struct, frozen=True):
    internal: int = 0
    external: int = 0


class _Dim(msgspec.Struct, frozen=True):
    x: int = 0
    y: int = 0
    z: int = 0


class _Dispatch(msgspec.Struct, frozen=True):
    agent_id: _Handle = _Handle()
    queue_id: _Handle = _Handle()
    kernel_id: int | None = None
    dispatch_id: int | None = None
    private_segment_size: int | None = None
    group_segment_size: int | None = None
    workgroup_size: _Dim = _Dim()
    grid_size: _Dim = _Dim()


class _Record(msgspec.Struct):
    kind: int = 0
    operation: int = 0
    thread_id: int | None = None
    correlation_id: _Corr = _Corr()
    start_timestamp: int | None = None
    end_timestamp: int | None = None
    dispatch_info: _Dispatch | None = None
    stream_id: _Handle | None = None
    queue_id: _Handle | None = None
    dst_agent_id: _Handle | None = None
    src_agent_id: _Handle | None = None
    bytes: int | None = None


class _Symbol(msgspec.Struct):
    kernel_id: int
    kernel_name: str | None = None
    formatted_kernel_name: str | None = None
    group_segment_size: int | None = None
    private_segment_size: int | None = None
    sgpr_count: int | None = None
    arch_vgpr_count: int | None = None
    accum_vgpr_count: int | None = None


class _KindNames(msgspec.Struct, frozen=True):
    kind: str = ""
    operations: list[str] = []


class _KeyValue(msgspec.Struct):
    key: int
    value: str | None = None


class _Strings(msgspec.Struct, frozen=True):
    buffer_records: list[_KindNames] = []
    marker_api: list[_KeyValue] = []


class _Node(msgspec.Struct, frozen=True):
    hostname: str | None = None
    system_name: str | None = None
    release: str | None = None


class _Metadata(msgspec.Struct, frozen=True):
    pid: int | None = None
    command: list[str] = []
    node: _Node = _Node()


class _Tool(msgspec.Struct):
    metadata: _Metadata = _Metadata()
    agents: list[msgspec.Raw] = []
    kernel_symbols: list[_Symbol] = []
    strings: _Strings = _Strings()
    buffer_records: dict[str, list[_Record]] = {}


class _Document(msgspec.Struct):
    tool: list[_Tool] = msgspec.field(name="rocprofiler-sdk-tool", default_factory=list)


class _Agent(msgspec.Struct):
    id: _Handle = _Handle()
    type: int = 0
    node_id: int | None = None
    logical_node_id: int | None = None
    logical_node_type_id: int | None = None
    name: str | None = None
    product_name: str | None = None


def _first_bytes(path: Path, head: bytes) -> bytes | None:
    """The first SNIFF_BYTES of the JSON text of the file starting with HEAD (decompressed when
    it is gzip); None for damaged gzip data."""
    try:
        if is_gzip(head):
            with gzip.open(path, "rb") as fh:
                return fh.read(SNIFF_BYTES)
        if len(head) < SNIFF_BYTES:
            with open(path, "rb") as fh:
                return fh.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    return head


def sniff(path: Path, head: bytes) -> bool:
    """Whether the file starting with HEAD is rocprofv3 JSON (plain or gzip): an object whose
    first member is "rocprofiler-sdk-tool"."""
    head = _first_bytes(path, head)
    if head is None:
        return False
    text = head.lstrip()
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:].lstrip()
    return text.startswith(b"{") and text[1:].lstrip().startswith(TOP_KEY)


# rocprof v1 (--hip-trace, --hsa-trace) writes its trace as Chrome-trace JSON too (results.json):
# process_name metadata naming the tracks it fills, and 'X' events whose args carry the times in
# ns as text (BeginNs, EndNs). The same run's results.db holds the same records.
_V1_TRACKS = (b'"name":"CPU HIP API"', b'"name":"CPU HSA API"', b'"name":"COPY"', b'"BeginNs":')


def is_rocprof_v1_trace(path: Path, head: bytes) -> bool:
    """Whether the Chrome-trace JSON starting with HEAD (plain or gzip) is rocprof v1's
    (results.json): its first events name rocprof's tracks or carry its BeginNs arguments."""
    head = _first_bytes(path, head)
    if head is None:
        return False
    compact = head.replace(b" ", b"")
    return b'"traceEvents"' in compact and sum(track in compact for track in _V1_TRACKS) >= 2


def v1_trace_refusal(path: Path) -> str:
    """Why a rocprof v1 results.json is not read, and what to give instead."""
    db = path.with_name("results.db")
    where = (f"its results.db ({db}) holds the same records: ingest that" if db.is_file() else
             "ingest the results.db rocprof writes beside it (the same records), or record with rocprofv3 "
             "(--output-format rocpd, or json)")
    return (f"a rocprof v1 trace in Chrome-trace JSON (results.json of rocprof --hip-trace/--hsa-trace), which "
            f"traceql does not read: {where}")


def _text(path: Path) -> bytes:
    """The JSON text of PATH, decompressed; InputError beyond MAX_BYTES, for a damaged gzip
    stream, or for gzip data expanding more than kineto.MAX_RATIO times (a gzip bomb)."""
    with open(path, "rb") as fh:
        gz = is_gzip(fh.read(2))
    try:
        with (_Gzip(path, "rb") if gz else open(path, "rb")) as fh:
            data = fh.read(MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: damaged gzip data ({exc})") from None
    if len(data) > MAX_BYTES:
        raise InputError(f"{path}: rocprofv3 JSON larger than {MAX_BYTES:,} bytes"
                         f"{' decompressed' if gz else ''}; traceql decodes this JSON whole: record with "
                         "rocprofv3 --output-format rocpd instead (the database is read in bounded memory)")
    return data


def _decode(path: Path) -> _Tool:
    try:
        doc = msgspec.json.decode(_text(path), type=_Document)
    except msgspec.DecodeError as exc:
        raise InputError(f"{path}: not readable as rocprofv3 JSON ({exc})") from None
    if len(doc.tool) != 1:
        raise InputError(f"{path}: rocprofv3 JSON with {len(doc.tool)} tool documents; traceql reads "
                         "files holding one (one process)")
    return doc.tool[0]


def _insert(con, table: str, columns: dict[str, list]) -> int:
    """Insert COLUMNS (name -> values, all of one length) into raw.TABLE; the row count."""
    import pyarrow as pa

    n = len(next(iter(columns.values()))) if columns else 0
    if not n:
        return 0
    batch = pa.Table.from_pydict(columns)
    con.register("_traceql_rocprof_json", batch)
    try:
        names = ", ".join(f'"{c}"' for c in columns)
        con.execute(f'INSERT INTO raw."{table}" ({names}) SELECT {names} FROM _traceql_rocprof_json')
    finally:
        con.unregister("_traceql_rocprof_json")
    return n


def stage(con, path: Path, raw_ddl: str, progress=None) -> StageReport:
    """Create the rocpd raw tables (RAW_DDL, schemas/rocpd/raw.sql) in the `raw` catalog and fill
    them from the rocprofv3 JSON file at PATH (see the module's mapping). progress(table, done,
    total, rows) as reader.stage calls it."""
    report = StageReport(reader=f"msgspec {msgspec.__version__} (rocprofv3 JSON, decoded whole)")
    create_raw_tables(con, raw_ddl)
    if progress:
        progress("rocprofv3 JSON", 0, 2, 0)
    tool = _decode(path)
    kinds = tool.strings.buffer_records
    strings: dict[str, int] = {}

    def string_id(text: str | None) -> int | None:
        if text is None:
            return None
        return strings.setdefault(text, len(strings) + 1)

    def kind_name(k: int) -> str | None:
        return kinds[k].kind if 0 <= k < len(kinds) else None

    def op_name(k: int, op: int) -> str | None:
        ops = kinds[k].operations if 0 <= k < len(kinds) else []
        return ops[op] if 0 <= op < len(ops) else None

    rows: dict[str, int] = {}
    meta = tool.metadata
    rows["rocpd_info_process"] = _insert(con, "rocpd_info_process", {
        "id": [1], "pid": [meta.pid], "command": [" ".join(meta.command) or None]})
    rows["rocpd_info_node"] = _insert(con, "rocpd_info_node", {
        "id": [1], "hostname": [meta.node.hostname], "system_name": [meta.node.system_name],
        "release": [meta.node.release]})
    agents = {"id": [], "type": [], "absolute_index": [], "logical_index": [], "type_index": [],
              "name": [], "product_name": [], "extdata": []}
    for raw_agent in tool.agents:
        a = msgspec.json.decode(raw_agent, type=_Agent)
        agents["id"].append(a.id.handle)
        agents["type"].append({1: "CPU", 2: "GPU"}.get(a.type, str(a.type)))
        agents["absolute_index"].append(a.node_id)
        agents["logical_index"].append(a.logical_node_id)
        agents["type_index"].append(a.logical_node_type_id)
        agents["name"].append(a.name)
        agents["product_name"].append(a.product_name)
        agents["extdata"].append(bytes(raw_agent).decode("utf-8", "replace"))
    rows["rocpd_info_agent"] = _insert(con, "rocpd_info_agent", agents)
    syms = tool.kernel_symbols
    rows["rocpd_info_kernel_symbol"] = _insert(con, "rocpd_info_kernel_symbol", {
        "id": [s.kernel_id for s in syms], "kernel_name": [s.kernel_name for s in syms],
        "display_name": [s.formatted_kernel_name or s.kernel_name for s in syms],
        "group_segment_size": [s.group_segment_size for s in syms],
        "private_segment_size": [s.private_segment_size for s in syms],
        "sgpr_count": [s.sgpr_count for s in syms], "arch_vgpr_count": [s.arch_vgpr_count for s in syms],
        "accum_vgpr_count": [s.accum_vgpr_count for s in syms]})

    events = {"id": [], "category_id": [], "stack_id": [], "parent_stack_id": [], "correlation_id": []}
    threads: set[int] = set()

    def event(rec: _Record) -> int:
        events["id"].append(len(events["id"]) + 1)
        events["category_id"].append(string_id(kind_name(rec.kind)))
        events["stack_id"].append(rec.correlation_id.internal)
        events["parent_stack_id"].append(None)
        events["correlation_id"].append(rec.correlation_id.external)
        if rec.thread_id is not None:
            threads.add(rec.thread_id)
        return len(events["id"])

    buffers = tool.buffer_records
    dispatch = {c: [] for c in ("id", "pid", "tid", "agent_id", "kernel_id", "dispatch_id", "queue_id",
                                "stream_id", "start", "end", "private_segment_size", "group_segment_size",
                                "workgroup_size_x", "workgroup_size_y", "workgroup_size_z",
                                "grid_size_x", "grid_size_y", "grid_size_z", "event_id")}
    for i, r in enumerate(buffers.get("kernel_dispatch", ()), 1):
        d = r.dispatch_info or _Dispatch()
        for col, value in (("id", i), ("pid", 1), ("tid", r.thread_id), ("agent_id", d.agent_id.handle),
                           ("kernel_id", d.kernel_id), ("dispatch_id", d.dispatch_id),
                           ("queue_id", d.queue_id.handle),
                           ("stream_id", None if r.stream_id is None else r.stream_id.handle),
                           ("start", r.start_timestamp), ("end", r.end_timestamp),
                           ("private_segment_size", d.private_segment_size),
                           ("group_segment_size", d.group_segment_size),
                           ("workgroup_size_x", d.workgroup_size.x), ("workgroup_size_y", d.workgroup_size.y),
                           ("workgroup_size_z", d.workgroup_size.z), ("grid_size_x", d.grid_size.x),
                           ("grid_size_y", d.grid_size.y), ("grid_size_z", d.grid_size.z),
                           ("event_id", event(r))):
            dispatch[col].append(value)
    rows["rocpd_kernel_dispatch"] = _insert(con, "rocpd_kernel_dispatch", dispatch)

    copies = {c: [] for c in ("id", "pid", "tid", "start", "end", "name_id", "dst_agent_id", "src_agent_id",
                              "size", "queue_id", "stream_id", "event_id")}
    for i, r in enumerate(buffers.get("memory_copy", ()), 1):
        for col, value in (("id", i), ("pid", 1), ("tid", r.thread_id), ("start", r.start_timestamp),
                           ("end", r.end_timestamp), ("name_id", string_id(op_name(r.kind, r.operation))),
                           ("dst_agent_id", None if r.dst_agent_id is None else r.dst_agent_id.handle),
                           ("src_agent_id", None if r.src_agent_id is None else r.src_agent_id.handle),
                           ("size", r.bytes), ("queue_id", None if r.queue_id is None else r.queue_id.handle),
                           ("stream_id", None if r.stream_id is None else r.stream_id.handle),
                           ("event_id", event(r))):
            copies[col].append(value)
    rows["rocpd_memory_copy"] = _insert(con, "rocpd_memory_copy", copies)

    messages = {m.key: m.value for m in tool.strings.marker_api}
    regions = {c: [] for c in ("id", "pid", "tid", "start", "end", "name_id", "event_id")}
    for kind in REGION_KINDS:
        for r in buffers.get(kind, ()):
            name = op_name(r.kind, r.operation)
            if kind == "marker_api":
                name = messages.get(r.correlation_id.internal) or name
            for col, value in (("id", len(regions["id"]) + 1), ("pid", 1), ("tid", r.thread_id),
                               ("start", r.start_timestamp), ("end", r.end_timestamp),
                               ("name_id", string_id(name)), ("event_id", event(r))):
                regions[col].append(value)
    rows["rocpd_region"] = _insert(con, "rocpd_region", regions)
    rows["rocpd_event"] = _insert(con, "rocpd_event", events)
    ordered = sorted(threads)
    rows["rocpd_info_thread"] = _insert(con, "rocpd_info_thread", {
        "id": ordered, "pid": [1] * len(ordered), "tid": ordered, "name": [None] * len(ordered)})
    rows["rocpd_string"] = _insert(con, "rocpd_string", {
        "id": list(strings.values()), "string": list(strings)})
    report.rows = {t: n for t, n in rows.items() if n}
    report.source_stats = [
        (f"rocprofv3_json.records_not_read.{k}", len(v), "info",
         f"buffer_records.{k}: a record kind traceql does not read from rocprofv3 JSON")
        for k, v in sorted(buffers.items()) if v and k not in READ_KINDS]
    if progress:
        progress("rocprofv3 JSON", 2, 2, sum(rows.values()))
    return report
