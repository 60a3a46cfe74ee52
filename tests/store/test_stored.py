"""Reports stored at ingest (traceql.stored): they give exactly the rows the report query
computes, they are read only when they can answer, and nothing a user or a new ingest does
leaves them stale."""

from __future__ import annotations

import shutil

import pytest

import traceql
from fixtures.gen_nsys import generate
from traceql.store import stored
from traceql.query.reports import REPORTS, report_query

from ..util import trace_file

REAL = [
    "nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite",
    "dlprof-pytorch-emit-nvtx-nsys2022.1/nsys_profile.sqlite",
    "pipit-saxpy-mpi-cuda-nsys2022.2/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
]
NVPROF = "nvprof-gpuml-titanv/timeline.nvvp"


def used_stored(ws, by, trace_id=None, per_trace=False, **params):
    """Whether report BY with these options reads stored rows (what run_report asks)."""
    q = report_query(by)
    from traceql.query import library

    values = {**REPORTS[by][1], **params, "trace_id": trace_id, "per_trace": per_trace}
    return stored.load(ws.con, by, q, library.bind(q, values)) is not None


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    db = tmp_path_factory.mktemp("stored_real") / "ws.duckdb"
    traceql.ingest([trace_file(p) for p in REAL], db=db)
    traceql.ingest([trace_file(NVPROF)], db=db)
    ws = traceql.open(db)
    yield ws
    ws.close()


@pytest.mark.parametrize("by", stored.STORED)
def test_stored_rows_are_the_computed_rows(real, by):
    ids = real.trace_ids()
    assert len(ids) == 4
    for trace_id in ids + [None]:
        for per_trace in (False, True):
            expected = real.report(by, trace_id=trace_id, per_trace=per_trace, recompute=True)
            got = real.report(by, trace_id=trace_id, per_trace=per_trace)
            assert got.equals(expected), (by, trace_id, per_trace)
            # several traces together without --per-trace are computed: medians do not add up
            assert used_stored(real, by, trace_id, per_trace) == (trace_id is not None or per_trace)
    assert sum(real.report(by, trace_id=t).num_rows for t in ids) == real.report(by, per_trace=True).num_rows > 0


@pytest.mark.parametrize("by", stored.STORED)
def test_a_limit_reads_only_the_first_stored_rows(real, by):
    """--limit without --sort reads only the first rows of each trace from the stored table
    (at 1 M kernels `--by range --limit 20` read all 505 k stored rows); the same rows."""
    q = report_query(by)
    from traceql.query import library

    for trace_id, per_trace in [(real.trace_ids()[0], False), (None, True)]:
        for limit in (0, 1, 3):
            expected = real.report(by, trace_id=trace_id, per_trace=per_trace, limit=limit, recompute=True)
            assert real.report(by, trace_id=trace_id, per_trace=per_trace, limit=limit).equals(expected)
            bound = library.bind(q, {**REPORTS[by][1], "trace_id": trace_id, "per_trace": per_trace})
            rows = stored.load(real.con, by, q, bound, limit=limit)
            assert rows.num_rows == expected.num_rows, (by, trace_id, limit)


def test_summary_reads_the_same_rows(real, monkeypatch):
    read = []  # the reports whose stored rows a summary used
    load = stored.load

    def spy(con, by, *args, **kwargs):
        rows = load(con, by, *args, **kwargs)
        read.extend([by] if rows is not None else [])
        return rows

    monkeypatch.setattr(stored, "load", spy)
    for trace_id in real.trace_ids():
        read.clear()
        a = real.summary(trace_id=trace_id)
        assert read, "the summary read no stored rows"
        read.clear()
        b = real.summary(trace_id=trace_id, recompute=True)
        assert not read
        assert a.rows.equals(b.rows) and a.rows.num_rows > 0


def test_other_options_are_computed(real):
    trace_id = real.trace_ids()[0]
    assert used_stored(real, "range", trace_id)
    assert not used_stored(real, "range", trace_id, group_by="path")
    assert not used_stored(real, "range", trace_id, max_depth=2)
    assert not used_stored(real, "range", trace_id, match=["aten"])
    assert not used_stored(real, "kernel", trace_id, with_dims=True)
    assert not used_stored(real, "memcpy", trace_id)  # not a stored report
    # --where filters the input rows: computed, and different from the stored report
    full = real.report("kernel", trace_id=trace_id)
    some = real.report("kernel", trace_id=trace_id, where="dur > 5000")
    assert some.num_rows < full.num_rows
    assert real.report("range", trace_id=trace_id, group_by="path").equals(
        real.report("range", trace_id=trace_id, group_by="path", recompute=True))


@pytest.fixture(scope="module")
def generated_built(tmp_path_factory):
    """A generated export (300 kernels) and a workspace of it, made once for the module."""
    folder = tmp_path_factory.mktemp("stored")
    src = folder / "gen.sqlite"
    generate(src, layout="3", kernels=300, seed=5)
    traceql.ingest([src], db=folder / "ws.duckdb")
    return src, folder / "ws.duckdb"


@pytest.fixture()
def generated_ws(generated_built, tmp_path):
    """(source, a copy of generated_built's workspace in tmp_path): as if just ingested (the copy
    spares each of ten tests its own ingest)."""
    src, built = generated_built
    db = tmp_path / "ws.duckdb"
    shutil.copyfile(built, db)
    return src, db


def registry(db):
    with traceql.open(db) as ws:
        return sorted(tuple(r.values()) for r in ws.sql(
            "SELECT trace_id, report, row_count FROM stored_report").to_pylist())


def test_reingest_replaces_the_stored_rows(generated_ws):
    src, db = generated_ws
    # range reads the attribution family, op the pytorch one too (traceql.derivation): each is
    # stored when its families are built, on first use
    at_ingest = sorted((1, by) for by in stored.STORED if by not in ("range", "op"))
    assert [r[:2] for r in registry(db)] == at_ingest
    with traceql.open(db) as ws:
        ws.report("range")
    assert [r[:2] for r in registry(db)] == sorted((1, by) for by in stored.STORED if by != "op")
    with traceql.open(db) as ws:
        ws.report("op")
    before = registry(db)
    assert [r[:2] for r in before] == sorted((1, by) for by in stored.STORED)
    traceql.ingest([src], db=db)  # the same file again: trace 1 replaced
    assert [r[:2] for r in registry(db)] == at_ingest
    with traceql.open(db) as ws:
        ws.report("range")
        ws.report("op")
    assert registry(db) == before
    with traceql.open(db) as ws:
        for by in stored.STORED:
            n = ws.con.execute(f"SELECT count(*) FROM {stored.table_name(by, report_query(by))}").fetchone()[0]
            assert n == dict(((t, b), c) for t, b, c in before)[(1, by)]


def test_a_users_write_drops_them(generated_ws):
    _, db = generated_ws
    with traceql.open(db, write=True) as ws:
        before = ws.report("kernel")
        ws.sql("DELETE FROM kernel WHERE kernel_id % 2 = 0")
        assert not used_stored(ws, "kernel", 1)
        after = ws.report("kernel")
        assert after.equals(ws.report("kernel", recompute=True))
        assert sum(after.column("calls").to_pylist()) < sum(before.column("calls").to_pylist())
        assert not ws.con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE 'stored%'").fetchone()[0]


def test_another_query_version_is_never_read(generated_ws, tmp_path):
    src, db = generated_ws
    with traceql.open(db, write=True) as ws:
        q = report_query("api")
        ws.con.execute("UPDATE stored_report SET fingerprint = '0123456789abcdef' WHERE report = 'api'")
        ws.con.execute(f"ALTER TABLE {stored.table_name('api', q)} RENAME TO stored_api_0123456789abcdef")
        assert not used_stored(ws, "api", 1)
        assert ws.report("api").equals(ws.report("api", recompute=True))
    # the next ingest drops the other version's rows and stores its own
    other = tmp_path / "other.sqlite"
    generate(other, layout="2", kernels=100, seed=6)
    traceql.ingest([other], db=db)
    with traceql.open(db) as ws:
        names = {r[0] for r in ws.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert "stored_api_0123456789abcdef" not in names and stored.table_name("api", report_query("api")) in names
        assert not used_stored(ws, "api", 1) and used_stored(ws, "api", 2)


def test_rows_dropped_behind_its_back_are_computed(generated_ws):
    _, db = generated_ws
    with traceql.open(db, write=True) as ws:
        expected = ws.report("range", recompute=True)
        ws.con.execute(f"DROP TABLE {stored.table_name('range', report_query('range'))}")  # registry left as it was
        assert not used_stored(ws, "range", 1)
        assert ws.report("range").equals(expected)


def test_too_large_reports_are_not_stored(tmp_path, monkeypatch):
    src = tmp_path / "gen.sqlite"
    generate(src, layout="3", kernels=300, seed=5)
    monkeypatch.setattr(stored, "MAX_ROWS", 3)
    traceql.ingest([src], db=tmp_path / "ws.duckdb")
    with traceql.open(tmp_path / "ws.duckdb") as ws:
        # (computing them builds the deferred families, which store the reports that read them)
        counts = {by: ws.report(by, recompute=True).num_rows for by in stored.STORED}
    kept = {report for _, report, _ in registry(tmp_path / "ws.duckdb")}
    with traceql.open(tmp_path / "ws.duckdb") as ws:
        assert kept == {by for by, n in counts.items() if n <= 3} and kept != set(stored.STORED)
        for by in stored.STORED:
            assert used_stored(ws, by, 1) == (counts[by] <= 3)
            assert ws.report(by).equals(ws.report(by, recompute=True))


def test_cli_recompute_prints_the_same(generated_ws):
    from click.testing import CliRunner

    from traceql.cli import cli

    _, db = generated_ws
    runner = CliRunner()
    for args in (["report", "--by", "range"], ["report", "--by", "api"], ["summary"]):
        a = runner.invoke(cli, ["--db", str(db), *args, "--format", "csv"])
        b = runner.invoke(cli, ["--db", str(db), *args, "--format", "csv", "--recompute"])
        assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output
        assert a.stdout == b.stdout and a.stdout.count("\n") > 2 and a.stdout.splitlines()[0].count(",") > 1
        assert a.stderr == b.stderr


def test_the_first_range_report_reads_the_rows_its_family_build_stored(tmp_path, monkeypatch):
    """Ingest defers the attribution family; the first `report --by range` builds it, and the build
    stores the range report's rows: the report then reads them instead of computing them again
    (it computed them a second time, 0.1-0.2 s of the first answer)."""
    from traceql.query import reports

    src = tmp_path / "g.sqlite"
    generate(src, layout="3", kernels=200, seed=3)
    db = tmp_path / "w.duckdb"
    monkeypatch.delenv("TRACEQL_DERIVE", raising=False)
    traceql.ingest([src], db=db)
    computed = []
    real_compute = reports._compute
    monkeypatch.setattr(reports, "_compute", lambda *a, **k: computed.append(a) or real_compute(*a, **k))
    with traceql.open(db) as ws:
        assert not used_stored(ws, "range", trace_id=1)  # nothing stored at ingest
        first = ws.report("range", trace_id=1)
        assert computed == []
        assert used_stored(ws, "range", trace_id=1)
        assert first.num_rows > 0
        assert first.equals(ws.report("range", trace_id=1, recompute=True))
        assert len(computed) == 1  # (recompute computes: the spy sees a computation)
