"""Call stacks: the code line behind each GPU operation (PyProf's 'trace' column, and more).

Three sources land in the contract table call_stack (one row per frame of each distinct
stack), and op_stack gives each GPU operation its stack:

- PyProf trace markers, "{'traceMarker': ['profile2.py:314', ...]}" NVTX ranges
  (schemas/derive/op_stack.sql, computed from nvtx_range, so `traceql upgrade` can redo it);
- PyTorch profiler traces recorded with with_stack=True: their python_function events
  (schemas/kineto/common/stacks.sql, read from the source at ingest);
- nsys CUDA backtraces (--cudabacktrace): CUDA_CALLCHAINS, one native stack per CUDA call
  (schemas/nsys/common/stacks.sql, read from the source at ingest).

api_call.stack_id links a call to its recorded (Python or native) stack.

Which frames are the user's and which a library's is a rule per source, the regular
expressions of schemas/stacks/library_frames.csv (a field 'frame' or 'module' each; '@stdlib'
stands for Python's standard library, sys.stdlib_module_names). `inline(sql)` joins each
source's patterns into one expression per field and writes it into the SQL as a constant in
place of its placeholder getvariable('stack_library_<source>_<field>'), so that marking frames
is a scan, not a join with the pattern table, and DuckDB compiles each expression once (with a
variable it compiled the 300-name standard-library alternation per row: 37 s of a 1,465-kernel
trace's ingest).

traceql.outputs.folded gives the stacks of a trace in the folded format of flamegraph.pl,
inferno and speedscope (`traceql export --format folded`).
"""

from __future__ import annotations

import csv
import io
import re
import sys
from functools import cache

from traceql.core.resources import read_schema, schema_file

SOURCES = ("pyprof", "python", "cuda_backtrace")
FIELDS = ("frame", "module")
NEVER = r"[^\s\S]"  # a regular expression that matches nothing
# standard-library names that are also common names of a user's own script or folder
NOT_STDLIB = {"test", "this", "antigravity", "__main__", "__future__"}


@cache
def library_patterns() -> dict[tuple[str, str], str]:
    """(source, field) -> one regular expression: the alternation of the rules of
    schemas/stacks/library_frames.csv (NEVER when a source has none for the field)."""
    text = schema_file("stacks/library_frames.csv").read_text(encoding="utf-8")
    parts: dict[tuple[str, str], list[str]] = {(s, f): [] for s in SOURCES for f in FIELDS}
    for row in csv.DictReader(io.StringIO(text)):
        key = (row["source"], row["field"])
        if key not in parts:
            raise RuntimeError(f"schemas/stacks/library_frames.csv: unknown source or field {key}")
        # (each rule is compiled by tests/sources/test_callstacks.py, not at every ingest: 0.04 CPU s)
        pattern = _stdlib_pattern() if row["pattern"] == "@stdlib" else row["pattern"]
        parts[key].append(f"(?:{pattern})")
    return {k: "|".join(v) if v else NEVER for k, v in parts.items()}


def _stdlib_pattern() -> str:
    names = sorted(n for n in sys.stdlib_module_names if n not in NOT_STDLIB)
    return r"^(?:" + "|".join(re.escape(n) for n in names) + r")(?:\.py$|/)"


def inline(sql: str) -> str:
    """SQL (derive/call_stack.sql, derive/op_stack.sql) with the library-frame expressions as
    constants in place of getvariable('stack_library_<source>_<field>'). They come from the
    package's own CSV, never from a trace or a user; quotes are doubled all the same."""
    for (source, field), pattern in library_patterns().items():
        literal = "'" + pattern.replace("'", "''") + "'"
        sql = sql.replace(f"getvariable('stack_library_{source}_{field}')", literal)
    if "getvariable('stack_library_" in sql:
        raise RuntimeError("a library-frame placeholder without a rule: " + sql.split("getvariable('stack_library_")[1][:40])
    return sql


def fill(con, trace_id: int) -> None:
    """Ingest: the source's stacks (adapter view src_call_stack) into call_stack."""
    con.execute("SET VARIABLE trace_id = ?", [trace_id])
    con.execute(inline(read_schema("derive/call_stack.sql")))
    con.execute("INSERT INTO call_stack BY NAME SELECT * FROM derived_call_stack")
