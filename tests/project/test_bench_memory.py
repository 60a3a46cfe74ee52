"""Smoke test of bench/memory.py on a 300-kernel generated Kineto trace with memory events:
both ingests run, memory_event holds what the generator wrote (allocations, frees and peak,
from generate()'s own count), every memory statement was EXPLAINed without a nested loop, and
the table renders. No timing is asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from fixtures.gen_kineto import generate

REPO = Path(__file__).resolve().parents[2]


def test_bench_memory_measures_and_renders(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "bench"))  # memory.py imports run.py and kineto.py beside it
    spec = importlib.util.spec_from_file_location("bench_memory", REPO / "bench" / "memory.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_memory", mod)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "DATA", tmp_path)
    monkeypatch.setattr(sys.modules["kineto"], "DATA", tmp_path)
    res = mod.measure(360, timeout=300)
    written = generate(tmp_path / "same.json", kernels=res["kernels"], memory=True)
    got = res["with"]
    assert (got["allocations"], got["memory_events"], got["peak"]) == (
        written["mem_allocations"], written["mem_allocations"] + written["mem_frees"], written["mem_peak"])
    assert written["mem_allocations"] == 360 and written["mem_frees"] == 360
    assert res["without"]["memory_events"] == written["iterations"]  # one 512-byte event per step
    names = [p["sql"] for p in got["plans"]]
    assert any("raw.mem_range" in n for n in names) and any("INSERT INTO memory_event" in n for n in names)
    assert not [p for p in got["plans"] if mod.bad_joins(p["ops"])]
    text = mod.render([res], "meta")
    assert "| 360 | 720 | 300 |" in text and "no nested loop" in text
