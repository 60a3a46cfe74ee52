"""Detection of what a file is, and the errors for everything that is not a readable export."""

import os
import subprocess
import sys

import pytest

import traceql
from traceql.sources.detect import detect
from traceql.core.errors import InputError, UnsupportedVersionError

from ..util import REPO, make_sqlite, nsys_stub, sha256, trace_file


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "traceql.cli", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_nvvp_session_xml_is_rejected_with_one_line_and_workspace_untouched(tmp_path):
    nvvp = trace_file("negative-nvvp-session-xml/profile.nvvp")
    db = tmp_path / "ws.duckdb"
    good = nsys_stub(tmp_path / "good.sqlite")
    assert run_cli("--db", str(db), "ingest", str(good)).returncode == 0
    before = sha256(db)
    proc = run_cli("--db", str(db), "ingest", str(nvvp))
    assert proc.returncode == 3
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"traceql: error: {nvvp}: an XML file (an NVIDIA Visual Profiler session file")
    assert "not a SQLite database" in lines[0]
    assert sha256(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.sqlite", "ws.duckdb"]


@pytest.mark.parametrize("content, expected", [
    (b"", "an empty file, not a SQLite database"),
    (b"hello, world\n", "not a SQLite database"),
    (bytes(range(256)) * 4, "not a SQLite database"),
    (b'{"events": []}', "a JSON file that is not a PyTorch profiler (Kineto) trace"),
    # binary data that begins with '{' or '<' (CI's random bytes did, once) is no JSON or XML;
    # text whose 100th byte cuts a character in two still is
    (b"{" + bytes(range(128, 256)), "not a SQLite database"),
    (b"<\x00\x01\x02" * 30, "not a SQLite database"),
    (b'{"name": "' + "\u00e9".encode() * 60 + b'"}', "a JSON file that is not a PyTorch profiler (Kineto) trace"),
])
def test_non_sqlite_inputs(tmp_path, content, expected):
    path = tmp_path / "input.sqlite"
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        detect(path)
    assert str(err.value) == f"{path}: {expected}" or str(err.value).startswith(f"{path}: {expected}")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        detect(tmp_path / "nope.sqlite")
    with pytest.raises(InputError, match="is a directory"):
        detect(tmp_path)


def test_sqlite_without_profiler_tables(tmp_path):
    path = make_sqlite(tmp_path / "other.sqlite", ["CREATE TABLE people (name TEXT)"])
    with pytest.raises(InputError, match="without Nsight Systems or nvprof tables"):
        detect(path)
    empty = make_sqlite(tmp_path / "empty.sqlite", ["PRAGMA user_version = 1"])
    with pytest.raises(InputError, match="no tables"):
        detect(empty)


def test_future_major_version_is_refused(tmp_path):
    path = nsys_stub(tmp_path / "future.sqlite", version="4.0.0")
    with pytest.raises(UnsupportedVersionError) as err:
        detect(path)
    assert str(err.value) == (f"{path}: Nsight Systems export schema 4.0.0 (major version 4) is not supported; "
                              "traceql reads schema 2.x, 3.x")
    proc = run_cli("--db", str(tmp_path / "ws.duckdb"), "ingest", str(path))
    assert proc.returncode == 4
    assert not (tmp_path / "ws.duckdb").exists()


def test_newer_minor_version_reads_with_a_warning(tmp_path):
    path = nsys_stub(tmp_path / "newer.sqlite", version="3.99.0")
    db = tmp_path / "ws.duckdb"
    [res] = traceql.ingest([path], db=db)
    assert res.detected.layout == "nsys/v3"
    with traceql.open(db) as ws:
        rows = ws.sql("SELECT key, severity, detail FROM ingest_stats WHERE key LIKE 'schema.%'").to_pylist()
        assert rows == [{"key": "schema.version_newer_than_known", "severity": "warning",
                         "detail": "export schema 3.99.0 is newer than the newest known 3.28.1; "
                                   "read with the same layout, check the results"}]
        assert ws.sql("SELECT name, dur, pid FROM kernel").to_pylist() == [{"name": "k(int)", "dur": 150, "pid": 4242}]


def test_layouts_by_version(tmp_path):
    assert detect(nsys_stub(tmp_path / "a.sqlite", "2.9.1", "EXPORT_META_DATA")).layout == "nsys/v2"
    assert detect(nsys_stub(tmp_path / "b.sqlite", "3.1.2", "EXPORT_META_DATA")).layout == "nsys/v3"
    assert detect(nsys_stub(tmp_path / "c.sqlite", "3.25.0")).layout == "nsys/v3"
    assert detect(nsys_stub(tmp_path / "d.sqlite", None)).layout == "nsys/legacy"


def test_real_files_are_told_apart():
    assert detect(trace_file("nvprof-gpuml-titanv/timeline.nvvp")).source_format == "nvprof"
    legacy = detect(trace_file("kmeans-rtx3080-old-nsys/report2.sqlite"))
    assert (legacy.source_format, legacy.layout, legacy.schema_version) == ("nsys", "nsys/legacy", None)
    v3 = detect(trace_file("nsysai-h100-2gpu-pytorch-nsys2026.2/h100_2gpu_1s.sqlite"))
    assert (v3.layout, v3.schema_version, v3.exporter_version) == ("nsys/v3", "3.25.0", "2026.2.1.210")


def test_gzip_compressed_sqlite_export(tmp_path):
    """A gzip-compressed SQLite export (FILE.sqlite.gz, rocmProfileData's FILE.rpd.gz) is detected
    and ingested through a temporary decompressed copy: the same rows as the plain file, the
    source named by its .gz path, the temporary folder left empty; a gzip of a SQLite file that is
    no profiler export is refused with the .gz path in the message."""
    import gzip
    import tempfile

    plain = nsys_stub(tmp_path / "stub.sqlite")
    packed = tmp_path / "stub.sqlite.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    det = detect(packed)
    assert (det.source_format, det.layout, det.compressed, det.path) == ("nsys", "nsys/v3", True, packed)
    temp = tmp_path / "tmp"
    temp.mkdir()
    saved, tempfile.tempdir = tempfile.tempdir, str(temp)
    try:
        [res] = traceql.ingest([packed], db=tmp_path / "ws.duckdb")
    finally:
        tempfile.tempdir = saved
    assert res.counts["kernel"] == 1 and list(temp.iterdir()) == []
    with traceql.open(tmp_path / "ws.duckdb") as w:
        assert w.sql("SELECT path FROM trace").to_pylist() == [{"path": str(packed.resolve())}]
    other = make_sqlite(tmp_path / "other.db", ["CREATE TABLE t (x INTEGER)"])
    bad = tmp_path / "other.db.gz"
    bad.write_bytes(gzip.compress(other.read_bytes()))
    with pytest.raises(InputError, match=rf"^{bad}: SQLite database without Nsight Systems or nvprof tables"):
        detect(bad)
