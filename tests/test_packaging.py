"""The wheel carries every SQL and data file, so a plain `pip install .` works anywhere."""

import subprocess
import sys
import zipfile

from .util import REPO


def test_wheel_ships_every_schema_and_query_file(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(tmp_path), str(REPO)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    [wheel] = tmp_path.glob("traceql-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for folder, package in (("schemas", "traceql/schemas"), ("queries", "traceql/queries")):
        for path in (REPO / folder).rglob("*"):
            if path.suffix in (".sql", ".csv"):
                expected.add(f"{package}/{path.relative_to(REPO / folder).as_posix()}")
    assert expected and expected <= names, sorted(expected - names)
    assert "traceql/cli.py" in names
    assert "traceql/log4j2-traceql.properties" in names  # --engine spark's driver logging
