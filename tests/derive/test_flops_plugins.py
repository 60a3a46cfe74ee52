"""User FLOPs plug-ins (traceql/flops_plugins.py, issue 27): a custom op of a generated PyTorch
profiler trace (fixtures/gen_kineto.py, custom_op=True: 'myext::fused_gelu' on [32, 120]
float inputs) costed by a plug-in, a plug-in formula winning over a built-in one, a plug-in
that raises (a warning naming it; the report still prints), plug-ins that cannot be loaded."""

import gzip
import json
import textwrap

import pytest

import traceql
from fixtures.gen_kineto import CUSTOM_OP, generate
from traceql.derive import flops_plugins
from traceql.core.errors import UsageError

from ..util import cli

PLUGIN = """
def fused_gelu(op, shapes, dtypes, direction):
    (n, c), = [s for s in shapes if s is not None]
    assert dtypes == ["fp32"] and direction == "forward" and op == "myext::fused_gelu"
    return 8 * n * c, 2 * n * c * 4


def relu(op, shapes, dtypes, direction):
    return 1, None


FLOPS = {"myext::fused_gelu": fused_gelu, "relu": relu}
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("flops_plugins")
    path = folder / "custom.json.gz"
    generate(path, kernels=300, seed=3, layers=2, custom_op=True)
    events = json.loads(gzip.open(path).read())["traceEvents"]
    counts = {name: sum(1 for e in events if e.get("cat") == "cpu_op" and e.get("name") == name)
              for name in (CUSTOM_OP, "aten::relu")}
    (folder / "my_flops.py").write_text(PLUGIN)
    (folder / "bad_flops.py").write_text("FLOPS = {'myext::fused_gelu': lambda op, shapes, dtypes, direction: 1 / 0}\n")
    return folder, path, counts


def ops(db):
    with traceql.open(db) as ws:
        return {r["op"]: r for r in ws.report("op").to_pylist()}


def test_a_plugin_costs_the_custom_op_and_wins_over_the_builtin(trace, tmp_path):
    folder, path, counts = trace
    assert counts[CUSTOM_OP] == counts["aten::relu"] > 10
    plain = tmp_path / "plain.duckdb"
    traceql.ingest([path], db=plain)
    before = ops(plain)
    assert before[CUSTOM_OP]["calls"] == counts[CUSTOM_OP] and before[CUSTOM_OP]["flops"] is None
    # built-in: one FLOP per element, forward (relu) and backward (threshold_backward)
    assert before["aten::relu"]["flops"] == 2 * counts["aten::relu"] * 32 * 120

    db = tmp_path / "ws.duckdb"
    results = traceql.ingest([path], db=db, flops=[folder / "my_flops.py"])
    assert not any("plug-in" in w for w in results[0].warnings)
    after = ops(db)
    assert (after[CUSTOM_OP]["flops"], after[CUSTOM_OP]["bytes"]) == (counts[CUSTOM_OP] * 8 * 32 * 120,
                                                                     counts[CUSTOM_OP] * 2 * 32 * 120 * 4)
    # forward: the plug-in's 1 per call, not the built-in's 3,840; its backward op is not named: built-in
    assert after["aten::relu"]["flops"] == counts["aten::relu"] * (1 + 32 * 120)
    # bytes: the built-in's read + write forward and 3 tensors backward; the plug-in gives no forward bytes
    assert before["aten::relu"]["bytes"] == counts["aten::relu"] * (2 + 3) * 32 * 120 * 4
    assert after["aten::relu"]["bytes"] == counts["aten::relu"] * 3 * 32 * 120 * 4
    assert after["aten::linear"]["flops"] == before["aten::linear"]["flops"] > 0  # ops it does not name: built-in
    with traceql.open(db) as ws:
        kop = [r for r in ws.report("kernel-op", columns="all").to_pylist() if r["op"] == CUSTOM_OP]
        family = dict(ws.execute("SELECT op_family, count(*) FROM kernel_op GROUP BY 1").fetchall())
    assert len(kop) == counts[CUSTOM_OP] and {r["flops"] for r in kop} == {8 * 32 * 120}
    assert family["custom"] == counts[CUSTOM_OP]  # relu keeps its built-in family, pointwise


def test_a_plugin_that_raises_gives_a_warning_and_the_report_prints(trace, tmp_path):
    folder, path, counts = trace
    db = tmp_path / "ws.duckdb"
    proc = cli("--db", str(db), "ingest", str(path), "--flops", str(folder / "bad_flops.py"))
    assert proc.returncode == 0, proc.stderr
    assert "not costed by FLOPs plug-in" in proc.stdout and "bad_flops.py" in proc.stdout
    assert f"op {CUSTOM_OP}" in proc.stdout and "ZeroDivisionError" in proc.stdout
    with traceql.open(db) as ws:
        stats = dict(ws.execute("SELECT key, value FROM ingest_stats WHERE key LIKE 'flops.%'").fetchall())
    assert stats == {f"flops.plugin_failed.{CUSTOM_OP}": 1}  # one distinct input shape, [32, 120]
    report = cli("--db", str(db), "report", "--by", "op", "--format", "csv")
    assert report.returncode == 0, report.stderr
    rows = {line.split(",")[0]: line for line in report.stdout.splitlines()[1:]}
    assert CUSTOM_OP in rows and "aten::relu" in rows
    assert ops(db)[CUSTOM_OP]["flops"] is None  # no built-in formula either


def test_plugins_from_the_environment_and_entry_points(trace, tmp_path, monkeypatch):
    folder, path, counts = trace
    monkeypatch.setenv("TRACEQL_FLOPS", str(folder / "bad_flops.py"))
    db = tmp_path / "env.duckdb"
    results = traceql.ingest([path], db=db, flops=[folder / "my_flops.py"])  # given first: it wins
    assert not any("plug-in" in w for w in results[0].warnings)
    assert ops(db)[CUSTOM_OP]["flops"] == counts[CUSTOM_OP] * 8 * 32 * 120

    class EntryPoint:
        name, value = "acme", "acme.flops:FLOPS"

        def load(self):
            return {CUSTOM_OP: lambda op, shapes, dtypes, direction: (7, 3)}

    monkeypatch.delenv("TRACEQL_FLOPS")
    monkeypatch.setattr(flops_plugins, "_entry_points", lambda: [EntryPoint()])
    monkeypatch.setattr(flops_plugins, "_loaded", {})
    db = tmp_path / "ep.duckdb"
    traceql.ingest([path], db=db)
    row = ops(db)[CUSTOM_OP]
    assert (row["flops"], row["bytes"]) == (7 * counts[CUSTOM_OP], 3 * counts[CUSTOM_OP])


def test_an_installed_entry_point_is_found_without_importing_importlib_metadata_otherwise(trace, tmp_path):
    """A package installed with an entry point of group traceql.flops (a .dist-info folder on
    sys.path, as pip writes it) costs the custom op, through the real lookup; without one, an
    ingest does not import importlib.metadata (23-34 ms of every ingest: _may_declare_entry_points
    reads the entry_points.txt files instead). Both in fresh interpreters."""
    folder, path, counts = trace
    site = tmp_path / "site"
    (site / "acme_flops").mkdir(parents=True)
    (site / "acme_flops" / "__init__.py").write_text(
        "FLOPS = {%r: lambda op, shapes, dtypes, direction: (7, 3)}\n" % CUSTOM_OP)
    info = site / "acme_flops-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-flops\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[console_scripts]\nacme = acme_flops:main\n\n[traceql.flops]\nacme = acme_flops\n")
    (info / "RECORD").write_text("")
    probe = textwrap.dedent("""
        import sys, traceql
        traceql.ingest([sys.argv[1]], db=sys.argv[2])
        print("importlib.metadata" in sys.modules)
    """)
    import os
    import subprocess
    import sys

    from ..util import REPO

    def run(db, extra_path):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO)] + extra_path)}
        env.pop("TRACEQL_FLOPS", None)
        proc = subprocess.run([sys.executable, "-c", probe, str(path), str(db)], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert run(tmp_path / "with.duckdb", [str(site)]) == "True"
    row = ops(tmp_path / "with.duckdb")[CUSTOM_OP]
    assert (row["flops"], row["bytes"]) == (7 * counts[CUSTOM_OP], 3 * counts[CUSTOM_OP])
    (info / "entry_points.txt").write_text("[console_scripts]\nacme = acme_flops:main\n")  # no traceql.flops section
    assert run(tmp_path / "without.duckdb", [str(site)]) == "False"
    assert ops(tmp_path / "without.duckdb")[CUSTOM_OP]["flops"] is None


def test_plugins_that_cannot_be_loaded(trace, tmp_path):
    folder, path, _ = trace
    db = tmp_path / "ws.duckdb"
    proc = cli("--db", str(db), "ingest", str(path), "--flops", "no_such_flops_module")
    assert proc.returncode == 2 and "no module 'no_such_flops_module'" in proc.stderr
    assert not db.exists()
    (tmp_path / "empty_flops.py").write_text("X = 1\n")
    with pytest.raises(UsageError, match="needs a dict FLOPS"):
        traceql.ingest([path], db=db, flops=[tmp_path / "empty_flops.py"])
    (tmp_path / "broken_flops.py").write_text("import nothing_here_at_all\n")
    with pytest.raises(UsageError, match="failed to load: ModuleNotFoundError"):
        traceql.ingest([path], db=db, flops=[tmp_path / "broken_flops.py"])
    with pytest.raises(UsageError, match="no such file"):
        traceql.ingest([path], db=db, flops=[tmp_path / "missing.py"])
    assert not db.exists()
    (tmp_path / "bad_value.py").write_text(textwrap.dedent("""
        FLOPS = {"myext::fused_gelu": lambda op, shapes, dtypes, direction: ("many", 1)}
    """))
    results = traceql.ingest([path], db=db, flops=[tmp_path / "bad_value.py"])
    assert any("returned 'many'" in w for w in results[0].warnings)
