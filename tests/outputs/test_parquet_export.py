"""`traceql export --format parquet --partition-by trace` (traceql.parquet), read without Spark.

Two generated exports (fixtures/gen_nsys.py, their exact facts known to the generator) are
ingested into one workspace, and each into a workspace of its own, as per-rank ingests running
apart would: the two workspaces exported with --trace-id-offset into one directory hold the
same rows as the workspace of both. Files, manifest and field metadata are checked against the
contract's documentation; rows against the generator and DuckDB's views.
"""

from __future__ import annotations

import json

import duckdb
import pyarrow.parquet as pq
import pytest

import traceql
from traceql.outputs import parquet
from traceql.store.contract import CONTRACT_VERSION
from traceql.core.resources import CONTRACT_TABLES, CONTRACT_VIEWS, ROW_ORDER, contract_docs

from ..util import cli as run_cli

VIEWS = CONTRACT_TABLES + CONTRACT_VIEWS


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """{path: generator facts} of two exports, the workspace of both, and one workspace each."""
    from fixtures.gen_nsys import generate

    tmp = tmp_path_factory.mktemp("parquet")
    facts = {}
    for seed, kernels in ((1, 300), (2, 200)):
        path = tmp / f"gen{seed}.sqlite"
        facts[path] = generate(path, kernels=kernels, seed=seed)
    both = tmp / "both.duckdb"
    traceql.ingest(list(facts), db=both)
    single = []
    for i, path in enumerate(facts):
        db = tmp / f"rank{i}.duckdb"
        traceql.ingest([path], db=db)
        single.append(db)
    return facts, both, single, tmp


def test_layout_manifest_and_descriptions(inputs):
    facts, both, _, tmp = inputs
    out = tmp / "export"
    with traceql.open(both) as ws:
        files = ws.export(out, partition_by="trace")
    assert sorted(f.relative_to(out).as_posix() for f in files) == sorted(
        f"{v}/trace_id={t}/part-0.parquet" for v in VIEWS for t in (1, 2))
    manifest = json.loads((out / "_traceql.json").read_text())
    assert (manifest["format"], manifest["format_version"], manifest["contract_version"], manifest["partition_by"]) \
        == ("traceql-parquet", 1, CONTRACT_VERSION, "trace_id")
    docs = contract_docs()
    assert sorted(manifest["views"]) == sorted(VIEWS)
    for view in VIEWS:
        described = [(c.name, c.doc) for c in docs[view].columns]
        assert [(c["name"], c["description"]) for c in manifest["views"][view]["columns"]] == described
        schema = pq.read_schema(out / view / "trace_id=2" / "part-0.parquet")
        assert [(f.name, f.metadata[b"description"].decode()) for f in schema] == \
            [d for d in described if d[0] != "trace_id"]
        assert schema.metadata[b"traceql.view"].decode() == view
        assert schema.metadata[b"traceql.trace_id"] == b"2"
        assert schema.metadata[b"traceql.view_description"].decode() == docs[view].doc


def test_rows_equal_the_views_and_the_generator(inputs):
    facts, both, _, tmp = inputs
    out = tmp / "export-rows"
    with traceql.open(both) as ws:
        ws.export(out, partition_by="trace")
        con = ws.con
        for view in VIEWS:
            cols = [c.name for c in contract_docs()[view].columns]
            expected = con.execute(f"SELECT {', '.join(cols)} FROM {view} ORDER BY trace_id, {ROW_ORDER[view]}").fetchall()
            got = duckdb.sql(f"SELECT {', '.join(cols)} FROM read_parquet('{out}/{view}/*/*.parquet', "
                             f"hive_partitioning = true) ORDER BY trace_id, {ROW_ORDER[view]}").fetchall()
            assert got == expected, view
    for trace_id, f in enumerate(facts.values(), start=1):
        kernels = pq.read_table(out / "kernel" / f"trace_id={trace_id}" / "part-0.parquet")
        assert kernels.num_rows == f["kernels"]
        assert sum(kernels.column("dur").to_pylist()) == f["kernel_dur_sum"]


def test_per_rank_workspaces_fill_one_export(inputs):
    """Each rank's workspace numbers its trace 1; --trace-id-offset places it in the job's export."""
    _, both, single, tmp = inputs
    whole, parts = tmp / "whole", tmp / "parts"
    with traceql.open(both) as ws:
        ws.export(whole, partition_by="trace")
    for offset, db in enumerate(single):
        proc = run_cli("--db", str(db), "export", "--format", "parquet", "--partition-by", "trace",
                       "--trace-id-offset", str(offset), "-o", str(parts))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"wrote {len(VIEWS)} files to ")
    assert (parts / "_traceql.json").read_text() == (whole / "_traceql.json").read_text()
    for view in VIEWS:
        for t in (1, 2):
            a = pq.read_table(whole / view / f"trace_id={t}" / "part-0.parquet")
            b = pq.read_table(parts / view / f"trace_id={t}" / "part-0.parquet")
            if view == "trace":  # the source path and ingest time are each workspace's own
                a, b = a.drop(["ingested_at"]), b.drop(["ingested_at"])
            assert a.equals(b), view
    # the same partitions again: refused, nothing changed; --overwrite replaces them
    before = (parts / "kernel" / "trace_id=2" / "part-0.parquet").read_bytes()
    proc = run_cli("--db", str(single[0]), "export", "--format", "parquet", "--partition-by", "trace",
                   "--trace-id-offset", "1", "-o", str(parts))
    assert proc.returncode == 2
    assert proc.stderr == (f"traceql: error: {parts / 'trace' / 'trace_id=2'}: exists; use --overwrite to replace "
                           "the partitions of these traces\n")
    assert (parts / "kernel" / "trace_id=2" / "part-0.parquet").read_bytes() == before
    proc = run_cli("--db", str(single[0]), "export", "--format", "parquet", "--partition-by", "trace",
                   "--trace-id-offset", "1", "--overwrite", "-o", str(parts))
    assert proc.returncode == 0
    assert pq.read_table(parts / "kernel" / "trace_id=2" / "part-0.parquet").num_rows == 300


def test_refusals(inputs, tmp_path):
    _, both, _, _ = inputs
    with traceql.open(both) as ws:
        with pytest.raises(traceql.UsageError, match="--partition-by trace .* write Parquet partitioned by trace"):
            ws.export(tmp_path / "a", fmt="csv", partition_by="trace")
        with pytest.raises(traceql.UsageError, match="--partition-by trace .* write Parquet partitioned by trace"):
            ws.export(tmp_path / "a", partition_by="trace", per_trace=True)
        old = tmp_path / "old"
        ws.export(old, partition_by="trace", trace_id=1)
        manifest = json.loads((old / "_traceql.json").read_text())
        manifest["contract_version"] = CONTRACT_VERSION + 1
        (old / "_traceql.json").write_text(json.dumps(manifest))
        with pytest.raises(traceql.UsageError, match=f"an export of format 1, contract version {CONTRACT_VERSION + 1}"):
            ws.export(old, partition_by="trace", trace_id=2)
        assert not (old / "kernel" / "trace_id=2").exists()
        with pytest.raises(traceql.UsageError, match="not a traceql Parquet export"):
            parquet.read_manifest(tmp_path)
