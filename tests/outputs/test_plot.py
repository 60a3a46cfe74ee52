"""`traceql plot`: bar charts of the range, kernel and op reports (matplotlib, optional)."""

import struct
import sys

import pytest

import traceql
from fixtures.gen_nsys import generate
from traceql.cli import main
from traceql.core.errors import UsageError
from traceql.outputs.cells import shorten, shorten_middle
from traceql.outputs.plot import INSTALL_HINT, available, kernel_label

from ..util import cli
from ..util import ingested, trace_file

CS336 = "cs336-zx3xyy-a100-fwd-attn-nvtx-nsys2024.6/result_2_7B_nvtx.sqlite"
DLPROF = "dlprof-pytorch-emit-nvtx-nsys2022.1/nsys_profile.sqlite"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("plot")
    generate(root / "gen.sqlite", layout="3", kernels=200, seed=0)
    db = root / "ws.duckdb"
    traceql.ingest([root / "gen.sqlite"], db=db)
    return db


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def labels(fig):
    return [t.get_text() for t in fig.axes[0].get_yticklabels()]


@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_formats_by_extension(workspace, tmp_path, ext):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"range{ext}"
    with traceql.open(workspace) as ws:
        ws.plot("range", out)
    data = out.read_bytes()
    assert len(data) > 1000
    if ext == ".png":
        width, height = png_size(out)
        assert 800 <= width <= 3000 and 300 <= height <= 3000, (width, height)
    elif ext == ".svg":
        assert b"<svg" in data[:2000] and data.rstrip().endswith(b"</svg>")
    else:
        assert data[:5] == b"%PDF-"


def test_range_plot_content(workspace):
    pytest.importorskip("matplotlib")
    with traceql.open(workspace) as ws:
        report = {r["name"]: r for r in ws.report("range").to_pylist() if r["instances"]}
        fig = ws.plot("range")
    ax = fig.axes[0]
    shown = labels(fig)
    assert len(shown) == len(report)  # fewer names than the limit: all of them, no '[unattributed]'
    assert all("  (×" in label for label in shown)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "CPU time (range duration)", "GPU kernel time", "memcpy time"]
    # bar lengths are the report's numbers (in the axis unit)
    unit = ax.get_xlabel()
    scale = {"time (s)": 1e9, "time (ms)": 1e6, "time (µs)": 1e3, "time (ns)": 1}[unit]
    first = shown[0].split("  (×")[0]
    cpu_bars = ax.containers[0]
    assert cpu_bars[0].get_width() == pytest.approx(report[first]["cpu_total_ns"] / scale)
    assert fig._suptitle.get_text() == "gen.sqlite"


def test_match_stat_limit_title(workspace):
    pytest.importorskip("matplotlib")
    with traceql.open(workspace) as ws:
        report = {r["name"]: r for r in ws.report("range", match=["forward", "backward"]).to_pylist()}
        fig = ws.plot("range", match=["FORWARD", "backward"], stat="mean", title="K-FAC")
        one = ws.plot("range", limit=1)
    names = [label.split("  (×")[0] for label in labels(fig)]
    assert sorted(names) == sorted(report)
    ax = fig.axes[0]
    row = names.index(names[0])
    r = report[names[0]]
    scale = {"time (s)": 1e9, "time (ms)": 1e6, "time (µs)": 1e3, "time (ns)": 1}[ax.get_xlabel()]
    assert ax.containers[1][row].get_width() == pytest.approx(r["gpu_kernel_ns"] / r["instances"] / scale)
    assert fig._suptitle.get_text() == "K-FAC"
    assert "mean per instance" in ax.get_title(loc="left")
    assert len(labels(one)) == 1 and "the 1 longest of" in one.axes[0].get_title(loc="left")


def test_kernel_plot(workspace, tmp_path):
    pytest.importorskip("matplotlib")
    with traceql.open(workspace) as ws:
        kernels = ws.report("kernel").to_pylist()
        fig = ws.plot("kernel", tmp_path / "k.png", limit=3)
    assert len(labels(fig)) == min(3, len(kernels))
    assert labels(fig)[0].startswith(shorten(kernel_label(kernels[0]["name"]), 70))
    assert png_size(tmp_path / "k.png")[0] >= 800


def test_usage_errors(workspace, tmp_path):
    pytest.importorskip("matplotlib")
    with traceql.open(workspace) as ws:
        with pytest.raises(UsageError, match=r"\.png, \.svg or \.pdf"):
            ws.plot("range", tmp_path / "x.gif")
        with pytest.raises(UsageError, match="--match and --domain apply to --by range"):
            ws.plot("kernel", match=["x"])
        with pytest.raises(UsageError, match="nothing to plot: no NVTX ranges match zzz"):
            ws.plot("range", match=["zzz"])
        with pytest.raises(UsageError, match="--stat"):
            ws.plot("range", stat="median")
    proc = cli("--db", str(workspace), "plot", "-o", str(tmp_path / "x.jpg"))
    assert proc.returncode == 2 and proc.stderr.startswith("traceql: error: ")
    assert not (tmp_path / "x.jpg").exists()


def test_cli(workspace, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.svg"
    proc = cli("--db", str(workspace), "plot", "--by", "range", "--match", "forward", "--stat", "mean",
               "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"wrote {out}\n" and proc.stderr == ""
    assert out.stat().st_size > 1000


def test_without_matplotlib(workspace, tmp_path, monkeypatch, capsys):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails as when it is not installed
    with traceql.open(workspace) as ws:
        with pytest.raises(UsageError) as err:
            ws.plot("range", tmp_path / "x.png")
    assert str(err.value) == INSTALL_HINT == "plotting needs matplotlib, which is not installed: " \
        "pip install 'traceql[plot]'"
    with pytest.raises(SystemExit) as done:
        main(["--db", str(workspace), "plot", "-o", str(tmp_path / "x.png")])
    assert done.value.code == 2
    assert capsys.readouterr().err == f"traceql: error: {INSTALL_HINT}\n"
    assert not (tmp_path / "x.png").exists()


def test_labels():
    assert shorten("short", 10) == "short"
    assert shorten("a" * 30, 10) == "a" * 9 + "…" and len(shorten("a" * 30, 10)) == 10
    assert shorten("two\nlines", 20) == "two lines"
    assert shorten_middle("start_" + "x" * 40 + "_end", 15) == "start_x…xxx_end"
    assert kernel_label("void gemm<float, 4>(float const*, int)") == "gemm<float, 4>"
    assert kernel_label("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
    assert kernel_label("void at::native::f<(int)4, at::native::g<float>>(int, at::native::g<float>)") == \
        "at::native::f<(int)4, at::native::g<float>>"
    from traceql.outputs.plot import _labels

    long = ["prefix " * 10 + "alpha", "prefix " * 10 + "beta"]  # the same first 50 characters
    out = _labels(long, [1, 2], "×{}")
    assert len(set(out)) == 2 and out[0].endswith("alpha  (×1)") and out[1].endswith("beta  (×2)")
    assert all(len(label.split("  (")[0]) <= 50 for label in out)


def test_real_trace_range_plot(tmp_path):
    """The cs336 attention benchmark: its NVTX ranges, each with readable CPU and GPU bars."""
    pytest.importorskip("matplotlib")
    src = trace_file(CS336)
    db = tmp_path / "ws.duckdb"
    traceql.ingest([src], db=db)
    with traceql.open(db) as ws:
        fig = ws.plot("range", tmp_path / "cs336.png")
    assert labels(fig)[:3] == ["init_model  (×1)", "benchmark_loop  (×1)", "warmup  (×1)"]
    assert "scaled dot product attention  (×128)" in labels(fig)
    width, height = png_size(tmp_path / "cs336.png")
    assert 1200 <= width <= 2500 and 500 <= height <= 1500


def test_real_trace_op_plot(tmp_path, tmp_path_factory):
    pytest.importorskip("matplotlib")
    if "op" not in available():
        pytest.skip("no op report in this version")
    db = ingested(tmp_path_factory, DLPROF)
    with traceql.open(db) as ws:
        ops = [r for r in ws.report("op").to_pylist() if r["calls"]]
        fig = ws.plot("op", tmp_path / "op.png", stat="mean")
    assert [label.split("  (")[0] for label in labels(fig)] == [r["op"] for r in sorted(
        ops, key=lambda r: -((r["fwd_ns"] or 0) + (r["bwd_ns"] or 0) + (r["recompute_ns"] or 0)
                             + (r["comm_ns"] or 0)) / r["calls"])][:20]
    assert png_size(tmp_path / "op.png")[0] >= 800


def test_kernel_labels_keep_where_names_differ():
    from traceql.outputs.plot import _labels

    base = "at::native::vectorized_elementwise_kernel<(int)4, at::native::{}<float, float, float>, " \
           "std::array<char *, (unsigned long)3>>"
    names = [base.format(f) for f in ("BinaryFunctor", "CUDAFunctor_add", "BUnaryFunctor")]
    out = _labels(names, [1, 2, 3], "{} calls", width=70)
    assert len(set(out)) == 3 and not any("#" in label for label in out)
    for label, word in zip(out, ("BinaryFunctor", "CUDAFunctor_a", "BUnaryFunctor")):
        assert word in label and len(label.split("  (")[0]) <= 70


def test_an_outlier_is_cut_or_drawn_on_a_log_axis(tmp_path):
    """8 s of ncclCommInitRank next to millisecond ranges: on the linear axis its bar is cut
    (value printed, a note says so) so that the others show; --log draws all to scale."""
    pytest.importorskip("matplotlib")
    from traceql.outputs.plot import Chart, _draw, _matplotlib, _outlier_cap

    values = [8.15e9, 41.7e6, 11.8e6, 8.6e6, 13.5e3]
    chart = Chart("t", "sub", [f"r{i}" for i in range(5)], [("CPU", "#1f77b4", values)], [""] * 5)
    assert _outlier_cap(chart) == pytest.approx(41.7e6 * 1.25)
    fig = _draw(chart, *_matplotlib())
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "  8.15 s" in texts and "//" in texts and "cut" in ax.get_title(loc="left")
    assert ax.get_xlim()[1] < 100  # ms: the axis ends near the second range, not at 8 s
    chart.log = True
    fig = _draw(chart, *_matplotlib())
    assert fig.axes[0].get_xscale() == "log" and "//" not in [t.get_text() for t in fig.axes[0].texts]
    even = Chart("t", "sub", ["a", "b"], [("CPU", "#1f77b4", [3e6, 1e6])], ["", ""])
    assert _outlier_cap(even) is None


def test_cli_log_option(workspace, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "log.png"
    proc = cli("--db", str(workspace), "plot", "--by", "kernel", "--log", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert png_size(out)[0] >= 800


def test_seed_kfac_forward_backward_plot_shows_the_true_backward_time(tmp_path, tmp_path_factory):
    """The K-FAC walkthrough's figure (ranges picked by keyword, CPU and GPU time side by side)
    on a PyTorch training trace whose backward kernels come from the autograd thread: the
    Backward bar is the 760.8 ms those kernels take (the attribution rule), not the 97 ms its
    own thread launched."""
    pytest.importorskip("matplotlib")
    db = ingested(tmp_path_factory, "cs336-jsun-train-fwdbwd-rtx3070ti-nsys2025.1/result.sqlite")
    with traceql.open(db) as ws:
        report = {r["name"]: r for r in ws.report("range", match=["Forward", "Backward"]).to_pylist()}
        fig = ws.plot("range", tmp_path / "fb.png", match=["Forward", "Backward"])
    ax = fig.axes[0]
    scale = {"time (s)": 1e9, "time (ms)": 1e6, "time (µs)": 1e3, "time (ns)": 1}[ax.get_xlabel()]
    names = [label.split("  (×")[0] for label in labels(fig)]
    kernel_bars = ax.containers[1]
    backward = kernel_bars[names.index("Backward")].get_width() * scale
    assert backward == pytest.approx(report["Backward"]["gpu_kernel_ns"], rel=1e-9)
    assert abs(backward - 760.8e6) < 0.02 * 760.8e6
