"""What `traceql ingest` prints about the traces it added (also on stderr, before a report on a file)."""

from __future__ import annotations

import click

from traceql.core.faults import printable
from traceql.outputs.summary_text import source_label


def tell_ingested(results, db, err: bool = False) -> None:
    """What ingest prints about each trace it added or replaced, then the workspace DB (on stderr
    with ERR: a report on a file prints its rows on stdout)."""
    from traceql.store.workspace import COUNTED

    def echo(line: str) -> None:
        click.echo(line, err=err)

    for r in results:
        verb = "replaced" if r.replaced else "added"
        det = r.detected
        source = source_label(det.source_format, det.exporter_version)
        version = f"{source} schema {det.schema_version}" if det.schema_version else f"{source}, no schema version"
        echo(f"{verb} trace {r.trace_id}: {printable(str(r.path))} ({version}, layout {det.layout}) "
             f"in {r.seconds:.2f} s")
        if det.exported_from is not None:
            echo(f"  exported from {printable(str(det.exported_from))} by nsys export")
        echo("  " + ", ".join(f"{v} {r.counts[v]:,}" for v in COUNTED if v in r.counts))
        if r.identity is not None and r.identity.facts:
            echo("  " + printable(r.identity.line()))
        for w in r.warnings:
            echo(f"  warning: {printable(w)}")
        if hint := r.capture_hint():
            echo(f"  note: {hint}")
    echo(f"workspace: {db}")
