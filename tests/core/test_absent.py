"""traceql.core.absent: `import pandas` answered at once when pandas is not installed (DuckDB tries
it for every Python value it converts), found as before when it is."""

import importlib.util
import subprocess
import sys
import textwrap

import pytest

from tests.util import REPO

# A finder put last on sys.meta_path sees an import that nothing before it answered: each call
# is one full search of sys.path for the module.
SPY = textwrap.dedent("""
    import sys
    searches = []
    class Spy:
        def find_spec(self, name, path=None, target=None):
            if name == "pandas":
                searches.append(name)
            return None
    sys.meta_path.append(Spy())
""")

CONVERT = textwrap.dedent("""
    import duckdb
    con = duckdb.connect()
    got = con.execute("SELECT count(*), sum(x) FROM (SELECT unnest(?::BIGINT[]) AS x)", [list(range(100))]).fetchone()
    assert got == (100, 4950), got
""")

no_pandas = pytest.mark.skipif(importlib.util.find_spec("pandas") is not None, reason="pandas is installed here")


def _run(code: str, env_path: str | None = None) -> str:
    env = {"PYTHONPATH": str(REPO) + (":" + env_path if env_path else ""), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@no_pandas
def test_duckdb_values_search_for_pandas_without_traceql_and_not_with_it():
    # without traceql, DuckDB searches for pandas twice per value (and once more per statement)
    assert int(_run(SPY + CONVERT + "print(len(searches))")) >= 200
    # with it, one search when traceql is imported (is pandas installed?) and none per value
    assert _run(SPY + "import traceql\n" + CONVERT + "print(len(searches))") == "1"


@no_pandas
def test_import_pandas_still_fails_as_without_the_finder():
    out = _run(textwrap.dedent("""
        import importlib.util, traceql
        try:
            import pandas
        except ModuleNotFoundError as exc:
            print(exc.name, exc)
        print(importlib.util.find_spec("pandas"))
        import pyarrow  # pyarrow's pandas shim: a timestamp converts (it failed on a None in sys.modules)
        import duckdb
        print(duckdb.connect().execute("SELECT TIMESTAMP '2001-09-09 01:46:40' AS t").to_arrow_table().to_pylist())
    """))
    assert out.splitlines() == ["pandas No module named 'pandas'", "None",
                                "[{'t': datetime.datetime(2001, 9, 9, 1, 46, 40)}]"]


def test_an_installed_module_is_imported(tmp_path):
    (tmp_path / "pandas").mkdir()
    (tmp_path / "pandas" / "__init__.py").write_text("__version__ = 'stand-in'\n")
    assert _run("import traceql, pandas; print(pandas.__version__)", str(tmp_path)) == "stand-in"


def test_a_module_installed_later_is_found_after_invalidate_caches(tmp_path):
    out = _run(textwrap.dedent(f"""
        import importlib, sys
        sys.path.insert(0, {str(tmp_path)!r})
        from traceql.core.absent import skip_absent
        finder = skip_absent("traceql_later_module")
        try:
            import traceql_later_module
        except ModuleNotFoundError as exc:
            print("absent", exc.name)
        open({str(tmp_path / "traceql_later_module.py")!r}, "w").write("VALUE = 42\\n")
        importlib.invalidate_caches()
        import traceql_later_module
        print(traceql_later_module.VALUE, finder in sys.meta_path)
    """))
    assert out.splitlines() == ["absent traceql_later_module", "42 False"]
