"""Reports: named views of the query library with the options `traceql report` offers."""

from __future__ import annotations

import pyarrow as pa

from .errors import UsageError

# report name -> (query file, default parameters)
REPORTS = {
    "range": ("range", {"group_by": "name"}),
}


def run_report(ws, by: str, limit: int | None = None, **params) -> pa.Table:
    if by not in REPORTS:
        raise UsageError(f"--by {by}: no such report; reports: {', '.join(REPORTS)}")
    query, defaults = REPORTS[by]
    values = {**defaults, **{k: v for k, v in params.items() if v is not None}}
    if "match" in values and not values["match"]:
        values.pop("match")
    table = ws.query(query, **values)
    if limit is not None:
        table = table.slice(0, limit)
    return table
