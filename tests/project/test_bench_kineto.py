"""Smoke test of bench/kineto.py on a 300-kernel generated Kineto trace: every measurement runs
and the table renders. No timing is asserted; the parsers' venv and HTA are left out."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_kineto_measures_and_renders(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "bench"))  # kineto.py imports run.py beside it
    spec = importlib.util.spec_from_file_location("bench_kineto", REPO / "bench" / "kineto.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_kineto", mod)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "DATA", tmp_path)
    monkeypatch.setattr(mod, "PARSERS_VENV", tmp_path / "no-venv")
    res = mod.measure(300, timeout=300, hta=False)
    assert res["stage"]["out"] == res["parse"]["msgspec"]["out"]  # every event staged
    assert res["ingest"]["secs"] > 0 and res["parse"]["orjson"]["problem"].startswith("not installed")
    text = mod.render(res, "meta")
    assert "**traceql ingest**" in text and "fastest" in text
