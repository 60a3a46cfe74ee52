"""The derivation graph (schemas/derive/graph.csv): which contract tables are computed from which,
in families built together, and which families a workspace holds.

Ingest builds the 'ingest' family (launching calls) with the tables it reads from the source.
The other families (attribution: op_range, range_gpu, unattributed_gpu; busy: device_busy;
pytorch: torch_op, kernel_op, op_stack; peak: device_peak) are built when a query first reads one
of their tables (traceql.store.workspace.Workspace.ensure), for every trace that lacks them, and
then kept in the workspace: the first answer to a question that does not need them (`report --by kernel`) no longer
waits for them. TRACEQL_DERIVE=eager builds them all at ingest, as before. Which (trace, family)
pairs are built is recorded in the table derived_family (schemas/derived_family.sql); a workspace
without it was written before families existed and holds them all.

A step whose `needs_any` tables hold no row of the trace is skipped: its table would get no row
of the trace either (a trace without NVTX ranges has no op_range, torch_op, kernel_op rows).
TRACEQL_DERIVE=full runs every step regardless: the reference the tests compare with.

The diagnostics of schemas/derive/stats.sql that read a family's tables, and the stored reports
that read them (traceql.store.stored), are written when the family is built.
"""

from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass
from functools import cache

from traceql.core.errors import UsageError
from traceql.core.resources import RANGE_SOURCE, read_schema

BUILT = "derived_family"
INGEST = "ingest"  # the family every ingest builds
MODES = ("lazy", "eager", "full")


@dataclass(frozen=True)
class Step:
    table: str
    family: str
    inputs: tuple[str, ...]
    needs_any: tuple[str, ...]
    writes: tuple[str, ...]


@cache
def graph() -> tuple[Step, ...]:
    """The rows of schemas/derive/graph.csv, in build order."""
    lines = [ln for ln in read_schema("derive/graph.csv").splitlines() if ln.strip() and not ln.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    return tuple(Step(r["table"], r["family"], tuple(r["inputs"].split()), tuple(r["needs_any"].split()),
                      tuple((r["writes"] or "").split())) for r in rows)


def tables() -> tuple[str, ...]:
    return tuple(s.table for s in graph())


@cache
def families() -> tuple[str, ...]:
    """Every family, the ingest family first, the others in the order of their first table."""
    out = [INGEST]
    for s in graph():
        if s.family not in out:
            out.append(s.family)
    return tuple(out)


def deferred() -> tuple[str, ...]:
    """The families built when first asked for."""
    return tuple(f for f in families() if f != INGEST)


def mode() -> str:
    """TRACEQL_DERIVE: 'lazy' (default), 'eager' (every family at ingest) or 'full' (every family
    at ingest, no step skipped for empty inputs)."""
    value = os.environ.get("TRACEQL_DERIVE", "").strip().lower() or "lazy"
    if value not in MODES:
        raise UsageError(f"TRACEQL_DERIVE={value}: one of {', '.join(MODES)}")
    return value


@cache
def _family_of() -> dict[str, str]:
    out = {}
    for s in graph():
        out[s.table] = s.family
    for s in graph():  # a table a step also writes (call_stack's PyProf stacks) is complete with it
        for w in s.writes:
            out.setdefault(w, s.family)
    return out


def requires(family: str) -> set[str]:
    """FAMILY and every family its tables' inputs belong to, transitively."""
    out, todo = set(), [family]
    while todo:
        f = todo.pop()
        if f in out:
            continue
        out.add(f)
        for s in graph():
            if s.family == f:
                todo += [_family_of()[t] for t in s.inputs if t in _family_of() and _family_of()[t] != f]
    return out


_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def read_by(sql: str, needed: bool = True) -> set[str]:
    """The deferred families whose tables SQL names, with (needed) the families they need (a word
    match: a table named in a string or a comment counts too, which at worst builds a family early)."""
    owners = _family_of()
    words = {w.lower() for w in _WORDS.findall(sql)}
    named = {owners[w] for w in words if w in owners}
    if needed and "ingest_stats" in words:  # holds diagnostics of every family (schemas/derive/stats.sql)
        named |= set(deferred())
    if not needed:
        return named - {INGEST}
    out = set()
    for f in named - {INGEST}:
        out |= requires(f)
    return out - {INGEST}


def ordered(fams) -> list[str]:
    return [f for f in families() if f in fams]


# -- the workspace's record ------------------------------------------------------------------

def create_record(con, existing_built: bool = True, new: bool = False) -> None:
    """The tables derived_family and nvtx_range_source, when the workspace on CON lacks them.
    existing_built: the traces it holds already were ingested before families existed, with every
    family built (no derived_family), or before the ranges waited in nvtx_range_source for the
    family 'nesting' (no nvtx_range_source): with nvtx_range built. new: the workspace was just
    created (it holds neither table, nor any trace): nothing to ask or to record."""
    if new:
        con.execute(read_schema("derived_family.sql"))
        con.execute(read_schema(f"{RANGE_SOURCE}.sql"))
        return
    if not _has_table(con, BUILT):
        con.execute(read_schema("derived_family.sql"))
        if existing_built:
            con.execute(f"INSERT INTO {BUILT} SELECT trace_id, unnest(?::VARCHAR[]) FROM trace", [list(families())])
    if not _has_table(con, RANGE_SOURCE):
        con.execute(read_schema(f"{RANGE_SOURCE}.sql"))
        if existing_built:
            _record_all(con, nesting())


def nesting() -> str:
    """The family of nvtx_range, which nests the ranges of nvtx_range_source."""
    return _family_of()["nvtx_range"]


def _record_all(con, family: str) -> None:
    """FAMILY is built for every trace of the workspace."""
    con.execute(f"INSERT INTO {BUILT} SELECT trace_id, ? FROM trace t WHERE NOT EXISTS "
                f"(SELECT 1 FROM {BUILT} b WHERE b.trace_id = t.trace_id AND b.family = ?)", [family, family])


def record(con, trace_id: int, fams) -> None:
    """Families FAMS are built for trace TRACE_ID (create_record ran when the workspace was opened
    for writing: a record made only now would take every other trace for complete)."""
    con.execute(f"INSERT INTO {BUILT} SELECT DISTINCT $id, f FROM unnest($fams::VARCHAR[]) AS t(f) "
                f"WHERE NOT EXISTS (SELECT 1 FROM {BUILT} b WHERE b.trace_id = $id AND b.family = f)",
                {"id": trace_id, "fams": sorted(fams)})  # (one statement: executemany committed each row)


def forget(con, trace_id: int) -> None:
    """The record of trace TRACE_ID (removed or ingested again)."""
    if _has_record(con):
        con.execute(f"DELETE FROM {BUILT} WHERE trace_id = ?", [trace_id])


def _has_record(con) -> bool:
    return _has_table(con, BUILT)


def _has_table(con, name: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                            "AND schema_name = 'main' AND table_name = ?", [name]).fetchone()[0])


def pending(con, tables: set[tuple[str, str]] | None = None) -> dict[str, list[int]]:
    """Deferred family -> the traces that lack it. A workspace without the record holds them all,
    one without nvtx_range_source the family 'nesting' (create_record).
    tables: the workspace's (schema, table) names when the caller has listed them already."""
    def has(name):
        return ("main", name) in tables if tables is not None else _has_table(con, name)

    if not has(BUILT):
        return {}
    out: dict[str, list[int]] = {}
    fams = deferred() if has(RANGE_SOURCE) else tuple(f for f in deferred() if f != nesting())
    for trace_id, built in con.execute(
            f"SELECT t.trace_id, list(b.family) FILTER (WHERE b.family IS NOT NULL) FROM trace t "
            f"LEFT JOIN {BUILT} b ON b.trace_id = t.trace_id GROUP BY t.trace_id ORDER BY t.trace_id").fetchall():
        for fam in fams:
            if fam not in (built or ()):
                out.setdefault(fam, []).append(trace_id)
    return out


# -- diagnostics of a family -------------------------------------------------------------------

_STAT_KEY = re.compile(r"SELECT\s+(?:\w+\.)?trace_id,\s*'([\w.]+)'", re.I)


@cache
def _stat_blocks() -> tuple[tuple[str, str, frozenset], ...]:
    """schemas/derive/stats.sql as (key, SELECT, deferred families it reads) per UNION ALL part."""
    text = read_schema("derive/stats.sql")
    body = text[re.search(r"CREATE\s+OR\s+REPLACE\s+TEMP\s+VIEW\s+derived_stats\s+AS", text, re.I).end():]
    body = body.strip().rstrip(";")
    out = []
    for part in re.split(r"^\s*UNION\s+ALL\s*$", body, flags=re.M | re.I):
        key = _STAT_KEY.search(part)
        if key is None:
            raise RuntimeError("schemas/derive/stats.sql: a part without a key: " + part.strip()[:60])
        code = "\n".join(ln for ln in part.splitlines() if not ln.lstrip().startswith("--"))
        code = re.sub(r"'(?:[^']|'')*'", "''", code)  # its key and text name tables it need not read
        out.append((key.group(1), part, frozenset(read_by(code, needed=False))))
    return tuple(out)


def stat_keys(fams) -> set[str]:
    """The ingest_stats keys that read a table of the deferred families FAMS (any of them)."""
    fams = set(fams)
    return {key for key, _, reads in _stat_blocks() if reads & fams}


def stats_sql(new, built) -> str | None:
    """A SELECT (trace_id, key, value, severity, detail) of the diagnostics of
    schemas/derive/stats.sql that read a table of the families NEW, just built (NEW None: whatever
    they read), and of no family that is not BUILT (new ones included); None when there are none.
    It reads the view nvtx_range_any (schemas/include/nvtx_range_any.sql), which it does not make."""
    parts = [sql for _, sql, reads in _stat_blocks() if (new is None or reads & set(new)) and reads <= set(built)]
    return None if not parts else "\nUNION ALL\n".join(parts)
