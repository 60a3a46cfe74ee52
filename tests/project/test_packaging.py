"""The wheel carries every SQL and data file, so a plain `pip install .` works anywhere."""

import subprocess
import sys
import zipfile

import pytest

from ..util import REPO


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """`pip wheel` of the repository (no isolation: this venv's setuptools), once for the module:
    (the finished process, its output, the folder holding the wheel). Both tests below built the
    same wheel each (1.6-2.2 s apiece), one with -q."""
    folder = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-w", str(folder), str(REPO)], capture_output=True, text=True)
    return proc, folder


def test_wheel_ships_every_schema_and_query_file(built):
    proc, folder = built
    assert proc.returncode == 0, proc.stderr
    [wheel] = folder.glob("traceql-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for folder, package in (("schemas", "traceql/schemas"), ("queries", "traceql/queries")):
        for path in (REPO / folder).rglob("*"):
            if path.suffix in (".sql", ".csv"):
                expected.add(f"{package}/{path.relative_to(REPO / folder).as_posix()}")
    assert expected and expected <= names, sorted(expected - names)
    # every module of every layer's subpackage (traceql/core, traceql/store, ..., traceql/cli)
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "traceql").rglob("*.py")}
    assert "traceql/cli/main.py" in modules and modules <= names, sorted(modules - names)
    assert "traceql/engines/log4j2-traceql.properties" in names  # --engine spark's driver logging


def test_build_prints_no_packaging_warning(built):
    """Issue 35: `make` printed setuptools' "project.license as a TOML table is deprecated" (twice)
    and a "Package would be ignored" warning for every folder of SQL files not listed as a package.
    The build (no isolation: this venv's setuptools) prints no warning, and the packages listed in
    pyproject.toml are exactly the package's subpackages (its layers) and the folders of schemas/ and queries/."""
    import tomllib

    proc, _ = built
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert "Warning" not in out and "deprecated" not in out, out
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {"traceql"} | {
        ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "traceql").rglob("__init__.py")} | {
        "traceql." + ".".join(p.relative_to(REPO).parts)
        for root in ("schemas", "queries") for p in [REPO / root, *(REPO / root).rglob("*")]
        if p.is_dir() and p.name != "__pycache__"}
    assert listed == folders, (sorted(folders - listed), sorted(listed - folders))


def test_skips_are_summarized_by_reason(tmp_path):
    """`make test` says why tests were skipped: one line per reason with its count (tests/conftest.py)."""
    (tmp_path / "test_some.py").write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('i', range(3))\n"
        "def test_a(i):\n    pytest.skip('../shared/traces not present')\n"
        "def test_b():\n    pytest.skip('no Java')\n"
        "@pytest.mark.skipif(True, reason='marked off')\n"
        "def test_c():\n    pass\n"
        "def test_d():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if " 5 skipped, by reason " in line)
    assert lines[at + 1:at + 4] == ["    3  ../shared/traces not present", "    1  marked off", "    1  no Java"]
