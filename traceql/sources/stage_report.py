"""What staging a source file read, for ingest's diagnostics (ingest_stats): the reader used, tables
read another way or absent, absent columns, rows read, duplicate keys dropped. The SQLite reader
(reader.py), the PyTorch profiler JSON reader (kineto.py) and the rocprofv3 JSON reader
(rocprof_json.py) each fill one."""

from __future__ import annotations

from dataclasses import dataclass, field


# Columns without which a table's names (or its rows' keys) are all NULL: an export that lacks
# one (a damaged or edited file) gets a warning, not silently nameless rows. Other absent
# columns are ordinary: older exporter versions lack the columns added later.
ESSENTIAL_COLUMNS = {
    "StringIds": ("id", "value"), "StringTable": ("_id_", "value"), "NVTX_EVENTS": ("text",),
    "CUPTI_ACTIVITY_KIND_MARKER": ("name",), "ThreadNames": ("nameId",),
    "CUPTI_ACTIVITY_KIND_KERNEL": ("demangledName",), "CUPTI_ACTIVITY_KIND_RUNTIME": ("nameId",),
}


def create_raw_tables(con, raw_ddl: str) -> None:
    """Run RAW_DDL (a layout's raw.sql: CREATE TABLE statements) in the `raw` catalog, where every
    reader stages the source's tables."""
    home = con.execute("SELECT current_database()").fetchone()[0]
    try:  # (USE inside: a Ctrl-C just after it must still switch back, or DETACH raw fails)
        con.execute("USE raw")
        con.execute(raw_ddl)
    finally:
        con.execute('USE "' + home.replace('"', '""') + '"')


@dataclass
class StageReport:
    reader: str = "sqlite_scanner"
    fallback_tables: dict[str, str] = field(default_factory=dict)  # table -> reason
    missing_tables: list[str] = field(default_factory=list)
    missing_columns: dict[str, list[str]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    duplicate_keys: dict[str, int] = field(default_factory=dict)  # table -> rows dropped
    source_stats: list[tuple] = field(default_factory=list)  # the reader's own ingest_stats rows (key, value, severity, detail)

    def absent_essentials(self) -> list[tuple[str, int, str, str]]:
        """ingest_stats rows (key, value, severity, detail): the ESSENTIAL_COLUMNS a table of the
        export lacks (its rows were read, the column is NULL in all of them)."""
        out = []
        for table, columns in sorted(self.missing_columns.items()):
            lost = [c for c in ESSENTIAL_COLUMNS.get(table, ()) if c in columns]
            if lost and table not in self.missing_tables:
                out.append((f"source.column_absent.{table}", len(lost), "warning",
                            f"{table} has no column {', '.join(lost)} (a damaged or edited export): what it "
                            "gives (names, ids) is NULL in every row that needs it"))
        return out
