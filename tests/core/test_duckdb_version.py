"""traceql.core.duckdb_version: duckdb imported after traceql gives the versions duckdb's own module
gives, without importing importlib.metadata; the fallback asks importlib.metadata."""

import importlib.metadata
import importlib.util
import json
import subprocess
import sys
import textwrap

import duckdb

from tests.util import REPO
from traceql.core import duckdb_version

ASK = textwrap.dedent("""
    import json, sys
    {first}
    import duckdb
    import duckdb._version as v
    print(json.dumps({{"version": duckdb.__version__, "engine": duckdb.__duckdb_version__,
                       "both": duckdb.version(), "module": v.__version__, "origin": str(v.__spec__.origin),
                       "metadata": "importlib.metadata" in sys.modules}}))
""")


def _ask(first: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", ASK.format(first=first)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_duckdb_after_traceql_has_its_own_versions_without_importlib_metadata():
    own = _ask("")  # duckdb alone: its own _version module
    spared = _ask("import traceql")
    assert own["origin"].endswith("duckdb/_version.py") and own["metadata"]
    assert spared["origin"].endswith("traceql/core/duckdb_version.py")
    assert not spared["metadata"]
    for key in ("version", "engine", "both", "module"):
        assert spared[key] == own[key], key
    assert own["version"] == importlib.metadata.version("duckdb")


def test_without_the_dist_info_folder_the_version_is_asked_of_importlib_metadata(monkeypatch):
    finder = duckdb_version.VersionFinder()
    spec = finder.find_spec("duckdb._version")
    assert finder.find_spec("duckdb.other") is None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(duckdb_version, "_dist_version", lambda: None)
    assert module.__version__ == importlib.metadata.version("duckdb")
    assert module.__duckdb_version__ == duckdb.__duckdb_version__
    assert module.version() == duckdb.version()


def test_the_finder_is_not_put_twice_nor_after_duckdb():
    assert "duckdb" in sys.modules  # this process imported it above
    assert duckdb_version.spare_metadata_lookup() is None
