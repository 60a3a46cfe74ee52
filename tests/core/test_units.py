"""traceql.core.units: a column's unit from its name, one rule for the contract and every result.
Checked against what the columns' descriptions say, over every contract column and every column
of the query library (reports, analyze rules, internal queries included): a description saying
'in ns' belongs to a column of unit ns, and a column of unit ns is described as a time; the same
for bytes and percentages. A new column that breaks the naming convention fails here."""

import re

import pytest

from traceql.core.resources import contract_docs
from traceql.core.units import unit
from traceql.query import library


def documented_columns():
    out = [(f"contract {v.name}", c.name, c.doc) for v in contract_docs().values() for c in v.columns
           if not c.type.upper().startswith(("VARCHAR", "ENUM", "BOOL", "TIMESTAMP"))]
    queries = {**library.collection(), **library.internal()}
    out += [(f"queries/{q.name}", c.name, c.doc) for q in queries.values() for c in q.columns.values()]
    return out


COLUMNS = documented_columns()


def test_there_are_columns_of_every_kind():
    units = {unit(name) for _, name, _ in COLUMNS}
    assert {"ns", "bytes", "bytes/s", "GB/s", "Hz", "FLOP", "FLOP/s", "TFLOP/s", "OP/s", "%", "count", None} <= units
    assert len(COLUMNS) > 400


@pytest.mark.parametrize("kind, says, unit_is", [
    ("ns", r"\bin ns\b|\(ns\b|\bns\)|\bns,", r"\bns\b|_ns\b|time|duration|interval|start|end|mean|same for|part"),
    ("bytes", r"\bin bytes\b(?! per|/)|^bytes\b", r"byte|allocat|reserved"),
    ("%", r"as a percentage|in percent", r"percent|share|metric"),
])
def test_units_agree_with_the_descriptions(kind, says, unit_is):
    wrong = [f"{where}.{name}: unit {unit(name)!r}, described as {doc[:70]!r}" for where, name, doc in COLUMNS
             if bool(re.search(says, doc)) and unit(name) != kind]
    wrong += [f"{where}.{name}: unit {kind!r}, described as {doc[:70]!r}" for where, name, doc in COLUMNS
              if unit(name) == kind and not re.search(unit_is, doc)]
    assert wrong == []


def test_the_naming_rule():
    assert [unit(n) for n in ("ts", "dur", "total_ns", "start_ts", "api_dur", "queue_delay", "sil")] == ["ns"] * 7
    assert [unit(n) for n in ("bytes", "total_bytes", "dynamic_shared_memory", "static_smem")] == ["bytes"] * 4
    assert [unit(n) for n in ("pct", "busy_pct", "flops", "fp16_tc_flops", "tflops", "gb_per_s")] == \
        ["%", "%", "FLOP", "FLOP/s", "TFLOP/s", "GB/s"]
    assert [unit(n) for n in ("calls", "instances", "kernel_id", "name", "device_id", "seq", "rank")] == \
        ["count", "count", None, None, None, None, None]
