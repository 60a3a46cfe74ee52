"""nvtx_range.group_name: the macro nvtx_group_name of schemas/derive/group_name.sql on literal
strings of every PyTorch generation and PyProf marker kind, and the column on real traces,
checked against names read here with Python's sqlite3 and grouped by an independent rule
written in Python (ast/json for the markers, re for the suffixes)."""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from collections import Counter

import duckdb
import pytest

import traceql
from traceql.core.resources import read_schema

from ..util import ingested, trace_file

NSYSAI = "nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite"
DLPROF = "dlprof-pytorch-emit-nvtx-nsys2022.1/nsys_profile.sqlite"
NVPROF = "nvprof-pytorch-emit-nvtx-lm-v100-a/net.sql"

LINEAR = ("{'mod': 'torch.nn.functional', 'op': 'linear', 'args': [{'name': '', 'type': 'tensor', "
          "'shape': (32, 400), 'dtype': 'float32'}, {'name': '', 'type': 'tensor', 'shape': (120, 400), "
          "'dtype': 'float32'}, {'name': '', 'type': 'tensor', 'shape': (120,), 'dtype': 'float32'}]}")

CASES = [
    # PyTorch 1.0: no spaces, 'stashed' on backward nodes
    ("addmm, seq=5", "addmm"),
    ("AddmmBackward, stashed seq=5", "AddmmBackward"),
    ("torch::autograd::AccumulateGrad, stashed seq=18446744073709551615", "torch::autograd::AccumulateGrad"),
    # ~1.1-1.11 (real strings of the 1.4-era nvprof trace and the 1.10 DLProf trace)
    ("view, seq = 0", "view"),
    ("NllLossBackward, seq = 228", "NllLossBackward"),
    ("AddBackward0, seq = 118", "AddBackward0"),
    ("torch::autograd::CopyBackwards, seq = 129", "torch::autograd::CopyBackwards"),
    ("aten::conv2d, seq = 0", "aten::conv2d"),
    ("aten::x, seq = -2", "aten::x"),
    # record_shapes (>= 1.2): sizes; with seq < 0 the legacy builder dropped the name
    ("aten::addmm, seq = 5, sizes = [[120], [32, 400], [400, 120], [], []]", "aten::addmm"),
    (", sizes = [[2, 3]]", ""),
    (", sizes = [[2, 3], [], [3]]", ""),
    (", sizes = []", ""),
    # NVTX observer (~1.12+): op_id on every range, sizes and input_op_ids with record_shapes
    ("aten::to, op_id = 317177", "aten::to"),
    ("aten::mm, op_id = 18", "aten::mm"),
    ("aten::addmm, seq = 5, op_id = 17", "aten::addmm"),
    ("aten::addmm, seq = 5, op_id = 17, sizes = [[120], [32, 400], [400, 120], [], []], "
     "input_op_ids = [(12,0), (0,-1), (13,0), (0,-1), (0,-1)]", "aten::addmm"),
    ("aten::cat, op_id = 3, sizes = [[2, 3], [2, 3], []], input_op_ids = [(1,0), (2,0), (0,-1)]", "aten::cat"),
    ("aten::cat, op_id = 3, sizes = [[[2, 3], [2, 3]], []]", "aten::cat"),  # a nested list goes too
    ("aten::empty, op_id = 4, sizes = [[], [], []], input_op_ids = []", "aten::empty"),
    ("AddmmBackward0, seq = 5, op_id = 19", "AddmmBackward0"),
    ("autograd::engine::evaluate_function: AddmmBackward0, op_id = 9",
     "autograd::engine::evaluate_function: AddmmBackward0"),
    ("autograd::engine::evaluate_function: AddmmBackward0", "autograd::engine::evaluate_function: AddmmBackward0"),
    # names with commas and parentheses keep them: only the suffix chain at the end goes
    ("FSDP::post_forward (encoder.block.0), op_id = 7", "FSDP::post_forward (encoder.block.0)"),
    ("FSDP::post_forward (encoder.block.14.layer.0), op_id = 314310", "FSDP::post_forward (encoder.block.14.layer.0)"),
    ("my_fn(a, b), seq = 3, op_id = 4", "my_fn(a, b)"),
    ("step 3, seq = 3", "step 3"),
    ("a, b", "a, b"),
    ("loss, step 3", "loss, step 3"),
    ("x, seq = 3, op_id = 4, extra", "x, seq = 3, op_id = 4, extra"),  # not at the end
    ("x, op_id = 7, seq = 3", "x, op_id = 7"),  # out of order: only the valid tail ', seq = 3'
    ("x, op_id = ", "x, op_id = "),
    ("x, op_id = 7 ", "x, op_id = 7 "),
    ("x,op_id = 7", "x,op_id = 7"),
    ("x, seq =5", "x, seq =5"),
    ("{x}, op_id = 3", "{x}"),  # a '{' name that is no marker still loses its suffix
    # PyProf argument markers (and the DLProf-era callid keys): mod.op
    (LINEAR, "torch.nn.functional.linear"),
    ("{'mod': 'Tensor', 'op': '__iadd__', 'args': [{'name': '', 'type': 'tensor', 'shape': (35, 20, 200), "
     "'dtype': 'float32'}]}", "Tensor.__iadd__"),
    ("{'mod': 'torch', 'op': 'randn', 'args': []}", "torch.randn"),
    ("{'mod': 'torch', 'op': 'einsum', 'args': [{'name': '', 'type': 'str', 'value': \"it's, {odd}\"}]}",
     "torch.einsum"),
    ("{'mod': 'Tensor', 'op': 'add', 'callid': 3, 'input_callids': [1, 2], 'args': []}", "Tensor.add"),
    # module markers: the class name
    ("{'mod': 'Linear', 'strRepr': 'in_features=400, out_features=120, bias=True'}", "Linear"),
    ("{'mod': 'LSTM', 'strRepr': \"200, 200, nonlinearity='tanh'\"}", "LSTM"),
    # trace markers: the innermost frame, with or without funcStack
    ("{'traceMarker': ['a.py:1', 'b.py:2', 'profile2.py:106']}", "traceMarker profile2.py:106"),
    ("{'traceMarker': ['profile2.py:314', 'profile2.py:261']}", "traceMarker profile2.py:261"),
    ("{'traceMarker': ['dummy_network.py:35']}", "traceMarker dummy_network.py:35"),
    ("{'traceMarker': ['dummy_network.py:42', 'dummy_network.py:26'], "
     "'funcStack': '/<module>/dummy_network::_call_impl/dummy_network::forward/relu(2)'}",
     "traceMarker dummy_network.py:26"),
    ("{'traceMarker': ['a.py:1', \"it's.py:3\"], 'funcStack': '/<module>/f'}", "traceMarker it's.py:3"),
    # DLProf JSON
    ('{"model_config": {"emit_nvtx": true}}', "model_config"),
    ('{"model_config": {"num_workers": 0, "amp_enabled": false, "profile": {"a": 1}}}', "model_config"),
    # look-alikes stay as they are
    ("{'foo': 1}", "{'foo': 1}"),
    ("{'mod': 'Linear'}", "{'mod': 'Linear'}"),
    ("{'mod': 'torch', 'op': 'mm'}", "{'mod': 'torch', 'op': 'mm'}"),
    ("{'op': 'mm', 'mod': 'torch', 'args': []}", "{'op': 'mm', 'mod': 'torch', 'args': []}"),
    ("{'traceMarker': []}", "{'traceMarker': []}"),
    ("{'traceMarker': ['a.py:1']", "{'traceMarker': ['a.py:1']"),
    ("{'traceMarker': ['a.py:1'], 'other': 2}", "{'traceMarker': ['a.py:1'], 'other': 2}"),
    ('{"model_config": 3}', '{"model_config": 3}'),
    ('{"other": {"a": 1}}', '{"other": {"a": 1}}'),
    ("{'mod': 'torch', 'op': 'mm', 'args': []} trailing", "{'mod': 'torch', 'op': 'mm', 'args': []} trailing"),
    # plain names, empty, NULL
    ("aten::mm", "aten::mm"),
    ("layer:conv1", "layer:conv1"),
    ("train_step", "train_step"),
    ("torch::autograd::AccumulateGrad", "torch::autograd::AccumulateGrad"),
    ("", ""),
    (None, None),
    # invalid UTF-8, decoded with replacement characters at ingest, and other non-ASCII text
    ("aten::mm\ufffd, op_id = 5", "aten::mm\ufffd"),
    ("\ufffd\ufffd", "\ufffd\ufffd"),
    ("{'mod': '\ufffd', 'op': 'x\ufffd', 'args': []}", "\ufffd.x\ufffd"),
    ("{'traceMarker': ['\ufffd.py:1']}", "traceMarker \ufffd.py:1"),
    ("Größe, Schritt 3, seq = 1", "Größe, Schritt 3"),
]

MB = 1_000_000


def mb(piece: str) -> str:
    """piece repeated to at least 1 MB"""
    return piece * (MB // len(piece) + 1)


BIG = [
    ("a" * MB + ", op_id = 5", "a" * MB),
    (mb("x, "), mb("x, ")),
    (mb(", seq = 1"), mb(", seq = 1")[:-len(", seq = 1")]),  # only the last is a suffix
    ("{'mod': 'torch', 'op': 'cat', 'args': ["
     + mb("{'name': '', 'type': 'tensor', 'shape': (2, 3), 'dtype': 'float32'}, ") + "]}", "torch.cat"),
    ("{'traceMarker': [" + mb("'/site-packages/torch/nn/modules/module.py:532', ") + "'net.py:9']}",
     "traceMarker net.py:9"),
    ("aten::cat, op_id = 3, sizes = [" + mb("[2, 3], ") + "[]]", "aten::cat"),
]


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute(read_schema("derive/group_name.sql"))
    yield c
    c.close()


def group(con, names: list[str | None]) -> list[str | None]:
    """nvtx_group_name over a table of the names, in their order."""
    con.execute("CREATE OR REPLACE TEMP TABLE t (i INTEGER, name VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(names)))
    return [r[0] for r in con.execute("SELECT nvtx_group_name(name) FROM t ORDER BY i").fetchall()]


def test_macro_on_literal_strings(con):
    got = group(con, [n for n, _ in CASES])
    wrong = [(n, want, g) for (n, want), g in zip(CASES, got) if g != want]
    assert not wrong, "\n".join(f"{n!r}: want {w!r}, got {g!r}" for n, w, g in wrong)


def test_macro_on_megabyte_names(con):
    got = group(con, [n for n, _ in BIG])
    for (name, want), g in zip(BIG, got):
        assert len(name) >= MB
        assert g == want, (name[:60], (g or "")[:60])


def test_macro_on_a_constant_and_null_typed(con):
    # used as a scalar function too, e.g. on a literal
    assert con.execute("SELECT nvtx_group_name('aten::mm, op_id = 1')").fetchone()[0] == "aten::mm"
    assert con.execute("SELECT nvtx_group_name(NULL::VARCHAR)").fetchone()[0] is None


# ------------------------------------------------------------------------------ real traces


def independent_group(name: str | None) -> str | None:
    """The grouping rule written again in Python, from the reference's description of the
    strings: markers parsed as Python / JSON literals, suffixes stripped with re."""
    if name is None:
        return None
    if name.startswith("{") and name.endswith("}"):
        try:
            d = json.loads(name) if name.startswith('{"') else ast.literal_eval(name)
        except Exception:  # not a literal: no marker
            d = None
        if isinstance(d, dict):
            keys = list(d)
            if keys[:2] == ["mod", "op"] and keys[-1] == "args":
                return f"{d['mod']}.{d['op']}"
            if keys == ["mod", "strRepr"]:
                return d["mod"]
            if keys in (["traceMarker"], ["traceMarker", "funcStack"]) and d["traceMarker"]:
                return "traceMarker " + d["traceMarker"][-1]
            if keys == ["model_config"] and isinstance(d["model_config"], dict):
                return "model_config"
        return name
    m = re.fullmatch(r"(.*), (?:stashed )?seq=-?\d+", name, re.S)
    if m:
        return m.group(1)
    return re.sub(r"(?:, seq = -?\d+)?(?:, op_id = \d+)?(?:, sizes = \[[-\d, \[\]]*\])?"
                  r"(?:, input_op_ids = \[[-\d, ()]*\])?\Z", "", name, count=1)


def test_independent_rule_agrees_on_the_literal_strings():
    assert [independent_group(n) for n, _ in CASES] == [w for _, w in CASES]


def sqlite_names(path, nvprof: bool = False) -> list[str | None]:
    """Every range's name, read straight from the export (opened read-only)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        if nvprof:  # a range's start record (flags 2) carries its name
            sql = ("SELECT s.value FROM CUPTI_ACTIVITY_KIND_MARKER m JOIN StringTable s ON s._id_ = m.name "
                   "WHERE m.flags = 2")
        else:  # 59 push/pop, 60 start/end
            sql = ("SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
                   "WHERE e.eventType IN (59, 60)")
        return [r[0] for r in con.execute(sql).fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory):
    cache = {}

    def get(rel: str):
        if rel not in cache:
            src = trace_file(rel)
            with traceql.open(ingested(tmp_path_factory, rel)) as ws:
                rows = ws.sql("SELECT name, group_name FROM nvtx_range ORDER BY range_id").to_pylist()
            cache[rel] = (src, [(r["name"], r["group_name"]) for r in rows])
        return cache[rel]
    return get


def check_against_source(src, rows, nvprof=False):
    names = sqlite_names(src, nvprof)
    assert Counter(n for n, _ in rows) == Counter(names)
    mapping = {}
    for name, g in rows:
        mapping.setdefault(name, set()).add(g)
    assert all(len(v) == 1 for v in mapping.values())
    wrong = [(n, independent_group(n), g) for n, (g,) in mapping.items() if independent_group(n) != g]
    assert not wrong, wrong[:5]
    return Counter(independent_group(n) for n in names)


def test_nsysai_h100_groups(workspaces):
    src, rows = workspaces(NSYSAI)
    groups = check_against_source(src, rows)
    distinct = len({g for _, g in rows})
    print(f"{NSYSAI}: {len(rows)} ranges, {len({n for n, _ in rows})} names, {distinct} group names")
    assert len(rows) == 16782
    assert distinct <= 1000
    assert distinct == len(groups) == 176
    # every range has ', op_id = N' (the NVTX observer, grad mode off): one stripping rule
    assert Counter(g for _, g in rows) == Counter(re.sub(r", op_id = \d+$", "", n) for n, _ in rows)
    got = dict(rows)
    assert got["aten::to, op_id = 317177"] == "aten::to"
    assert got["FSDP::post_forward (encoder.block.14.layer.0), op_id = 314310"] == \
        "FSDP::post_forward (encoder.block.14.layer.0)"
    assert groups["aten::as_strided"] == 2200 and groups["aten::to"] == 1190


def test_dlprof_groups(workspaces):
    src, rows = workspaces(DLPROF)
    groups = check_against_source(src, rows)
    assert len(rows) == 166 and len(groups) == 50
    got = dict(rows)
    assert got["aten::conv2d, seq = 0"] == "aten::conv2d"
    assert got["aten::cudnn_convolution, seq = 5"] == "aten::cudnn_convolution"
    assert got['{"model_config": {"emit_nvtx": true}}'] == "model_config"
    assert got["{'traceMarker': ['dummy_network.py:35'], 'funcStack': '/<module>/randn'}"] == \
        "traceMarker dummy_network.py:35"
    assert got["{'mod': 'torch', 'op': 'randn', 'args': []}"] == "torch.randn"
    relu2 = [n for n in got if n.startswith("{'traceMarker'") and n.endswith("forward/relu(2)'}")]
    assert len(relu2) == 1 and got[relu2[0]] == "traceMarker dummy_network.py:26"
    assert (groups["aten::conv2d"], groups["torch.nn.functional.conv2d"], groups["Tensor.cuda"],
            groups["traceMarker dummy_network.py:35"], groups["model_config"]) == (2, 2, 11, 2, 1)


def test_nvprof_pytorch_groups(workspaces):
    src, rows = workspaces(NVPROF)
    groups = check_against_source(src, rows, nvprof=True)
    assert len(rows) == 1195 and len(groups) == 148
    got = dict(rows)
    assert got["view, seq = 0"] == "view"
    assert got["NllLossBackward, seq = 228"] == "NllLossBackward"
    assert got["torch::autograd::AccumulateGrad"] == "torch::autograd::AccumulateGrad"
    assert got["{'traceMarker': ['profile2.py:314', 'profile2.py:261']}"] == "traceMarker profile2.py:261"
    norm = [n for n in got if n.startswith("{'mod': 'Tensor', 'op': 'norm', 'args': [")]
    assert norm and {got[n] for n in norm} == {"Tensor.norm"}
    assert (groups["view"], groups["NllLossBackward"], groups["torch::autograd::AccumulateGrad"],
            groups["traceMarker profile2.py:261"], groups["Tensor.norm"], groups["traceMarker profile2.py:106"]) \
        == (52, 1, 28, 28, 28, 1)


def test_range_report_groups_by_operator_on_nsysai(tmp_path_factory):
    """`report --by range` groups by grouping name by default: on nsysai-h100's 16,782 PyTorch
    ranges (16,582 distinct full names) one row per operator, 176 of them, where grouping by
    full name printed one row per instance; --group name keeps the full names, --group path
    nests grouping names."""
    src = trace_file(NSYSAI)
    names = sqlite_names(src)
    with traceql.open(ingested(tmp_path_factory, NSYSAI)) as ws:
        by_group = [r for r in ws.report("range").to_pylist() if r["name"] != "[unattributed]"]
        by_name = [r for r in ws.report("range", group_by="name").to_pylist() if r["name"] != "[unattributed]"]
        by_path = [r for r in ws.report("range", group_by="path").to_pylist() if r["name"] != "[unattributed]"]
    assert len(by_group) == len({independent_group(n) for n in names}) == 176
    assert len(by_name) == len(set(names)) == 16582
    assert sum(r["instances"] for r in by_group) == sum(r["instances"] for r in by_name) == len(names)
    counts = {r["name"]: r["instances"] for r in by_group}
    assert counts["aten::to"] == 1190 and counts["aten::as_strided"] == 2200
    assert not any(", op_id = " in r["name"] for r in by_path)
    assert len(by_path) < 1000 and sum(r["instances"] for r in by_path) == len(names)
