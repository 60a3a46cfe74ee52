"""`traceql mcp` end to end with the mcp SDK's own client over stdio: the server is started as
`python -m traceql --db WS mcp` and asked what the CLI answers on cs336-jsun (ingested once for the
suite: tests/util.py ingested). Figures are compared with the CLI's csv for the same question and
with Python's sqlite3 over the source export; the sql tool's refusals leave the workspace
byte-identical."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import os
import sqlite3
import subprocess
import sys

import pytest

from ..util import REPO, cli, ingested, sha256, trace_file

if importlib.util.find_spec("mcp") is None:
    pytest.skip("the mcp extra (pip install 'traceql[mcp]') is not installed", allow_module_level=True)
import anyio  # noqa: E402 - after the skip

mcp = StdioServerParameters = stdio_client = None  # the SDK, imported by the sdk fixture


@pytest.fixture(scope="module", autouse=True)
def sdk():
    """The mcp SDK's client, imported when this module's tests run rather than when the suite is
    collected: the import costs 2 CPU s, which every xdist worker paid, while one runs them."""
    global mcp, StdioServerParameters, stdio_client
    import mcp as package
    from mcp.client.stdio import StdioServerParameters as params, stdio_client as client

    mcp, StdioServerParameters, stdio_client = package, params, client

CS336 = "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite"
TOOLS = {"traces", "schema", "report", "summary", "sql", "analyze", "diff"}


def traceql(*args) -> str:
    proc = cli(*args, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def csv_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def session(db, calls, cwd=None):
    """Start the server on DB, list its tools, make CALLS [(name, args)]: (tools, results)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "traceql", "--db", str(db), "mcp"],
                                   cwd=str(cwd or REPO), env={"PYTHONPATH": str(REPO)})

    async def run():
        async with stdio_client(params, errlog=sys.stderr) as (read, write):
            async with mcp.ClientSession(read, write) as client:
                await client.initialize()
                tools = (await client.list_tools()).tools
                return tools, [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def ok(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def one_line_error(result) -> str:
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("traceql: error: ") and "\n" not in text.strip(), text
    return text


def cells(rows: list[dict]) -> list[dict]:
    """Structured rows as the csv writes them: '' for NULL, str() of the rest."""
    return [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]


def source(sql: str):
    con = sqlite3.connect(f"file:{trace_file(CS336)}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return ingested(tmp_path_factory, CS336)


@pytest.fixture(scope="module")
def asked(sdk, ws):
    """One server on the module's workspace (`python -m traceql --db WS mcp`, from the repository),
    kept running for the module: asked(CALLS) makes CALLS [(name, args)] in order and gives
    (tools, results), as session() does. Each call opens the workspace anew, so a server that
    answered other questions before answers as a new one; starting one cost 2 CPU s (Python, the
    mcp SDK), for each of eight tests. Tests that need a workspace or a folder of their own start
    their own (session())."""
    from anyio.from_thread import start_blocking_portal

    params = StdioServerParameters(command=sys.executable, args=["-m", "traceql", "--db", str(ws), "mcp"],
                                   cwd=str(REPO), env={"PYTHONPATH": str(REPO)})
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(stdio_client(params, errlog=sys.stderr)) as (read, write):
            with portal.wrap_async_context_manager(mcp.ClientSession(read, write)) as client:
                portal.call(client.initialize)
                tools = portal.call(client.list_tools).tools

                def ask(calls):
                    return tools, [portal.call(client.call_tool, name, args) for name, args in calls]
                yield ask


def test_tool_list_and_schemas(asked):
    tools, (kernels,) = asked([("schema", {"view": "kernel"})])
    by_name = {t.name: t for t in tools}
    assert set(by_name) == TOOLS
    for t in tools:
        assert t.input_schema["type"] == "object" and len(t.description) > 100, t.name
    from traceql.query.reports import REPORTS
    from traceql.core.resources import contract_docs

    report = by_name["report"].input_schema
    assert report["required"] == ["by"] and report["properties"]["by"]["enum"] == list(REPORTS)
    assert {"trace", "where", "sort", "limit", "columns", "group", "range", "range_match"} <= set(report["properties"])
    # every report-specific option of the registry, with its values and its help, as the CLI has them
    from traceql.mcp_server import option_name
    from traceql.query.registry import OPTIONS

    for param, opt in OPTIONS.items():
        prop = report["properties"][option_name(param)]
        assert prop["description"].startswith(opt.help) and {k: prop[k] for k in opt.values} == opt.values, param
    assert option_name("skip_first") == "skip_first" and option_name("max_depth") == "depth"
    assert by_name["sql"].input_schema["required"] == ["query"]
    doc = contract_docs()["kernel"]
    view = ok(kernels)["views"][0]
    assert view["view"] == "kernel" and view["description"] == doc.doc
    assert [(c["name"], c["type"], c["description"]) for c in view["columns"]] == \
        [(c.name, c.type, c.doc) for c in doc.columns]
    units = {c["name"]: c["unit"] for c in view["columns"]}
    assert (units["ts"], units["dur"], units["dynamic_shared_memory"], units["name"]) == ("ns", "ns", "bytes", None)


def test_report_and_sql_equal_the_cli_csv(ws, asked):
    sql = "SELECT name, count(*) AS calls, sum(dur) AS total_ns FROM kernel GROUP BY 1 ORDER BY 3 DESC, 1"
    range_args = {"by": "range", "where": "name IN ('Forward', 'Backward') OR name LIKE 'Warm-up%'", "sort": "cpu_total_ns",
                  "columns": ["name", "instances", "cpu_total_ns", "gpu_kernel_ns"]}
    _, (kernel, ranges, rows, traces) = asked([
        ("report", {"by": "kernel", "limit": 10}), ("report", range_args), ("sql", {"query": sql}),
        ("traces", {})])
    want = csv_rows(traceql("--db", str(ws), "report", "--by", "kernel", "--limit", "10", "--format", "csv"))
    got = ok(kernel)
    assert len(want) == 10 and cells(got["rows"]) == want
    assert [c["name"] for c in got["columns"]] == list(want[0])
    assert "total_ns" in kernel.content[0].text.replace(" ", "") or "Total" in kernel.content[0].text
    want = csv_rows(traceql("--db", str(ws), "report", "--by", "range", "--where", range_args["where"], "--sort",
                            "cpu_total_ns", "-c", ",".join(range_args["columns"]), "--format", "csv"))
    assert want and cells(ok(ranges)["rows"]) == want
    want = csv_rows(traceql("--db", str(ws), "sql", sql, "--format", "csv"))
    got = ok(rows)
    assert cells(got["rows"]) == want and got["row_count"] == len(want) and got["note"] is None
    assert {c["name"]: c["type"] for c in got["columns"]} == {"name": "string", "calls": "int64", "total_ns": "int64"}
    assert [c["unit"] for c in got["columns"]] == [None, "count", "ns"]
    units = {c["name"]: c["unit"] for c in ok(kernel)["columns"]}  # the kernel report's, one rule (core.units)
    assert units == {"name": None, "calls": "count", "total_ns": "ns", "pct": "%", "avg_ns": "ns", "med_ns": "ns",
                     "min_ns": "ns", "max_ns": "ns", "stddev_ns": "ns"}
    # and the source export itself (CUPTI kernels: count and summed duration)
    (n, total), = source("SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert sum(r["calls"] for r in got["rows"]) == n and sum(r["total_ns"] for r in got["rows"]) == total
    trace, = ok(traces)["traces"]
    assert trace["counts"]["kernel"] == n and trace["source_format"] == "nsys"


def test_sql_row_cap_says_how_many_rows_there_were(asked):
    _, (capped,) = asked([("sql", {"query": "SELECT kernel_id, dur FROM kernel ORDER BY ts", "max_rows": 7})])
    (n,), = source("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    got = ok(capped)
    assert len(got["rows"]) == 7 and got["row_count"] == n > 7
    assert got["note"].startswith(f"{n} rows; the first 7 are returned")
    first = source("SELECT end - start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start, rowid LIMIT 7")
    assert [r["dur"] for r in got["rows"]] == [d for d, in first]


def test_sql_refuses_writes_files_and_attach(ws, tmp_path):
    target = tmp_path / "out.csv"
    before = sha256(ws)
    files = sorted(os.listdir(ws.parent)), sorted(os.listdir(tmp_path))
    hostile = ["DELETE FROM kernel", "CREATE TABLE t AS SELECT 1 AS x", f"COPY kernel TO '{target}'",
               "SELECT * FROM read_text('/etc/hostname')", f"ATTACH '{tmp_path / 'x.duckdb'}' AS x"]
    _, results = session(ws, [("sql", {"query": q}) for q in hostile] + [("sql", {"query": "SELECT count(*) AS n "
                                                                                            "FROM kernel"})],
                         cwd=tmp_path)
    texts = [one_line_error(r) for r in results[:-1]]
    assert "not a query" in texts[0] or "DELETE" in texts[0], texts[0]
    assert "read_text" in texts[3] or "external" in texts[3].lower() or "file" in texts[3].lower(), texts[3]
    (n,), = source("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert ok(results[-1])["rows"] == [{"n": n}]  # the server answered after the refusals
    assert sha256(ws) == before
    assert (sorted(os.listdir(ws.parent)), sorted(os.listdir(tmp_path))) == files and not target.exists()


def test_missing_workspace_and_bad_arguments_are_tool_errors(asked, tmp_path):
    _, missing = session(tmp_path / "none.duckdb", [("traces", {}), ("report", {"by": "kernel"}),
                                                     ("schema", {"view": "kernel"})])
    for r in missing[:2]:
        assert "no workspace here" in one_line_error(r)
    assert ok(missing[2])["views"][0]["view"] == "kernel"  # still serving
    assert not (tmp_path / "none.duckdb").exists()
    _, bad = asked([("report", {"by": "nope"}), ("report", {"by": "kernel", "limit": -1}),
                          ("sql", {}), ("report", {"by": "kernel", "group": "frame"}),
                          ("report", {"by": "kernel", "trace": 99}), ("schema", {"view": "kernal"}),
                          ("sql", {"query": "SELECT nam FROM kernel"}), ("nope", {}),
                          ("report", {"by": "kernel", "limit": 2**63}), ("summary", {"limit": 2**63}),
                          ("report", {"by": "kernel", "limit": 1})])
    texts = [one_line_error(r) for r in bad[:-1]]
    # a limit past a 64-bit row count is refused by the schema, not an OverflowError inside
    assert all("9223372036854775808" in t and "maximum" in t and "Error" not in t.split(":", 1)[0] for t in texts[8:10]), texts[8:10]
    assert "'nope' is not one of" in texts[0] and "limit" in texts[1] and "'query' is a required" in texts[2]
    assert texts[3] == "traceql: error: --group applies to --by range or source only"  # the CLI's words
    assert "--trace 99: no such trace" in texts[4]
    assert "did you mean kernel" in texts[5] and "nam" in texts[6] and "no tool 'nope'" in texts[7]
    assert ok(bad[-1])["row_count"] == 1


def test_analyze_equals_the_cli(ws, asked):
    _, (found,) = asked([("analyze", {"rules": ["sync_calls", "gpu_gaps"], "limit": 3})])
    got = ok(found)
    want = csv_rows(traceql("--db", str(ws), "analyze", "--rule", "sync_calls", "--rule", "gpu_gaps",
                            "--format", "csv"))
    assert cells(got["rows"]) == want
    evidence = csv_rows(traceql("--db", str(ws), "analyze", "--rule", "gpu_gaps", "--format", "csv"))
    gaps = got["evidence"]["gpu_gaps"]
    assert gaps["row_count"] == len(evidence) and cells(gaps["rows"]) == evidence[:3]


def test_diff_equals_the_cli(ws, asked):
    _, (same, changed, missing) = asked([("diff", {"a": 1, "b": 1, "changed_only": False}),
                                                ("diff", {"a": 1, "b": 1}), ("diff", {"a": 1, "b": 7})])
    got = ok(same)
    want = csv_rows(traceql("--db", str(ws), "diff", "1", "1", "--format", "csv"))
    assert got["row_count"] == len(want) > 10 and len(got["rows"]) == 50
    for mine, theirs in zip(cells(got["rows"]), want):  # float sums: DuckDB's parallel order moves the last bits
        assert mine.keys() == theirs.keys()
        for k in mine:
            assert mine[k] == theirs[k] or math.isclose(float(mine[k]), float(theirs[k]), rel_tol=1e-12), k
    assert got["summary"]["verdict"] == "no significant change"
    assert ok(changed)["row_count"] == 0 and "--trace 7: no such trace" in one_line_error(missing)


def test_report_options_equal_the_cli(ws, asked):
    """The report-specific options come from the report registry: they give the CLI's rows, and a
    refusal is the CLI's message, word for word, which the Python API raises too."""
    from traceql.api import open as open_workspace
    from traceql.core.errors import UsageError

    asks = [({"by": "range", "depth": 3, "skip_first": 1, "spread": True},
             ["--by", "range", "--depth", "3", "--skip-first", "1", "--spread"]),
            ({"by": "range", "match": ["forward", "BACKWARD"], "group": "name"},
             ["--by", "range", "--match", "forward", "--match", "BACKWARD", "--group", "name"]),
            ({"by": "kernel", "with_dims": True, "limit": 8}, ["--by", "kernel", "--with-dims", "--limit", "8"]),
            ({"by": "kernel", "with_dims": False, "limit": 3}, ["--by", "kernel", "--limit", "3"])]
    refused = [({"by": "kernel", "depth": 2}, ["--by", "kernel", "--depth", "2"], {"max_depth": 2}),
               ({"by": "kernel", "level": "leaf"}, ["--by", "kernel", "--level", "leaf"], {"level": "leaf"}),
               ({"by": "source", "group": "name"}, ["--by", "source", "--group", "name"], {"group_by": "name"}),
               ({"by": "range", "per_iteration": True}, ["--by", "range", "--per-iteration"], {"per_iteration": True})]
    _, results = asked([("report", a) for a, _ in asks] + [("report", a) for a, _, _ in refused])
    for (args, flags), result in zip(asks, results):
        want = csv_rows(traceql("--db", str(ws), "report", *flags, "--format", "csv"))
        assert want and cells(ok(result)["rows"]) == want, args
    spread = ok(results[0])
    assert {"cpu_stddev_ns", "kernel_max_ns"} <= {c["name"] for c in spread["columns"]}
    assert [c["name"] for c in ok(results[2])["columns"]][:3] == ["name", "grid", "block"]
    with open_workspace(ws) as api:
        for (args, flags, params), result in zip(refused, results[len(asks):]):
            proc = cli("--db", ws, "report", *flags)
            assert proc.returncode == 2 and proc.stdout == "", args
            assert one_line_error(result) == proc.stderr.strip(), args
            with pytest.raises(UsageError) as exc:
                api.report(args["by"], **params)
            assert proc.stderr.strip() == f"traceql: error: {exc.value}", args
    assert "applies to --by range only" in one_line_error(results[len(asks)])


def test_summary_equals_the_cli(ws, asked):
    _, (whole, limited) = asked([("summary", {}), ("summary", {"limit": 2, "trace": 1})])
    got = ok(whole)
    want = csv_rows(traceql("--db", str(ws), "summary", "--format", "csv"))
    assert cells(got["rows"]) == want and got["row_count"] == len(want)
    doc = json.loads(traceql("--db", str(ws), "summary", "--format", "json"))
    assert got["traces"] == json.loads(json.dumps(doc["traces"])) and got["gpus"] == doc["gpus"]
    # the kernels of the GPU activities section against the source export
    (n, total), = source("SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    names = {r[0] for r in source("SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                  "JOIN StringIds s ON s.id = k.demangledName")}
    kernels = [r for r in got["rows"] if r["section"] == "GPU activities" and r["name"] in names]
    assert sum(r["calls"] for r in kernels) == n and sum(r["total_ns"] for r in kernels) == total
    assert "GPU activities" in whole.content[0].text and "API calls" in whole.content[0].text
    small = ok(limited)
    want = csv_rows(traceql("--db", str(ws), "summary", "--limit", "2", "--trace", "1", "--format", "csv"))
    assert cells(small["rows"]) == want and len(want) == 4


def test_resources_contract_and_query_library(tmp_path):
    """The contract reference and the query library as resources, read through the client: every view
    and column of resources.contract_docs() with its type and description, every query of the library
    with its parameters and its SQL (as `traceql queries NAME` prints it); an unknown URI is an error."""
    from mcp.shared.exceptions import MCPError

    from traceql.core.resources import contract_docs
    from traceql.core.units import unit
    from traceql.query import library
    from traceql.store.contract import CONTRACT_VERSION

    params = StdioServerParameters(command=sys.executable, args=["-m", "traceql", "--db", str(tmp_path / "none.duckdb"),
                                                                 "mcp"], cwd=str(REPO), env={"PYTHONPATH": str(REPO)})

    async def run():
        async with stdio_client(params, errlog=sys.stderr) as (read, write):
            async with mcp.ClientSession(read, write) as client:
                await client.initialize()
                listed = (await client.list_resources()).resources
                texts = {}
                for uri in ("traceql://contract", "traceql://queries", "traceql://queries/kernel",
                            "traceql://queries/analyze/gpu_gaps"):
                    texts[uri] = (await client.read_resource(uri)).contents[0]
                try:
                    await client.read_resource("traceql://queries/nope")
                    unknown = None
                except MCPError as exc:
                    unknown = exc.message
                return listed, texts, unknown

    listed, texts, unknown = anyio.run(run)
    lib = library.collection()
    assert [r.uri for r in listed] == ["traceql://contract", "traceql://queries"] + \
        [f"traceql://queries/{n}" for n in lib]
    contract = texts["traceql://contract"]
    assert contract.mime_type == "text/markdown" and f"Contract version {CONTRACT_VERSION}." in contract.text
    sections = contract.text.split("\n## ")[1:]
    docs = contract_docs()
    assert [s.split("\n", 1)[0] for s in sections] == list(docs)
    for section, doc in zip(sections, docs.values()):
        rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| column")]
        assert rows == [f"| {c.name} | {c.type} | {unit(c.name) or ''} | {c.doc.replace('|', chr(92) + '|')} |"
                        for c in doc.columns], doc.name
    index = json.loads(texts["traceql://queries"].text)
    assert [q["name"] for q in index] == list(lib) and all("sql" not in q for q in index)
    for q in index:
        want = lib[q["name"]]
        assert (q["description"], q["parameters"], q["input"]) == (want.description, want.params, want.input)
        assert [c["name"] for c in q["columns"]] == list(want.columns)
    kernel = json.loads(texts["traceql://queries/kernel"].text)
    assert kernel["sql"] == lib["kernel"].sql and set(kernel["parameters"]) == {"trace_id", "per_trace", "with_dims"}
    printed = traceql("queries", "kernel")
    assert kernel["sql"].rstrip() in printed and "--param with_dims:" in printed
    assert json.loads(texts["traceql://queries/analyze/gpu_gaps"].text)["sql"] == lib["analyze/gpu_gaps"].sql
    assert unknown.startswith("traceql: error: no resource 'traceql://queries/nope'")


KMEANS = "kmeans-rtx3080-old-nsys/report2.sqlite"


def test_server_answers_while_another_process_reingests(ws, tmp_path):
    """Another process ingests into the workspace the server serves (ingest writes a copy and renames it
    over the file): every call made meanwhile answers, with the old workspace or the new one, never an
    error; the calls after it see the new trace (each call opens the workspace anew)."""
    import shutil

    db = tmp_path / "ws.duckdb"
    shutil.copyfile(ws, db)  # the module's workspace stays as it is for the other tests
    (old,), = source("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con = sqlite3.connect(f"file:{trace_file(KMEANS)}?mode=ro", uri=True)
    (added,), = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    con.close()
    params = StdioServerParameters(command=sys.executable, args=["-m", "traceql", "--db", str(db), "mcp"],
                                   cwd=str(REPO), env={"PYTHONPATH": str(REPO)})
    query = {"query": "SELECT count(*) AS n, count(DISTINCT trace_id) AS traces FROM kernel"}

    async def run():
        async with stdio_client(params, errlog=sys.stderr) as (read, write):
            async with mcp.ClientSession(read, write) as client:
                await client.initialize()
                before = await client.call_tool("sql", query)
                ingest = subprocess.Popen([sys.executable, "-m", "traceql", "--db", str(db), "ingest",
                                           str(trace_file(KMEANS))], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                during = []
                while ingest.poll() is None:
                    result = await client.call_tool("sql", query)
                    during.append((result, ingest.poll() is None))  # answered while the ingest still ran
                    await anyio.sleep(0.05)
                assert ingest.wait() == 0, ingest.stderr.read()
                after = [await client.call_tool("sql", query), await client.call_tool("traces", {}),
                         await client.call_tool("report", {"by": "kernel", "per_trace": True, "columns":
                                                           ["trace_id", "calls"]})]
                return before, during, after

    before, during, (count, traces, per_trace) = anyio.run(run)
    assert ok(before)["rows"] == [{"n": old, "traces": 1}]
    assert sum(running for _, running in during) >= 1, "no call was made while the ingest ran"
    for result, _ in during:
        assert ok(result)["rows"] in ([{"n": old, "traces": 1}], [{"n": old + added, "traces": 2}])
    assert ok(count)["rows"] == [{"n": old + added, "traces": 2}]
    assert [(t["trace_id"], t["counts"]["kernel"]) for t in ok(traces)["traces"]] == [(1, old), (2, added)]
    calls = {}
    for r in ok(per_trace)["rows"]:
        calls[r["trace_id"]] = calls.get(r["trace_id"], 0) + r["calls"]
    assert calls == {1: old, 2: added}
