"""duckdb's version, answered without importlib.metadata.

`import duckdb` runs duckdb/_version.py, which asks importlib.metadata for the installed package's
version. Importing importlib.metadata (with email, zipfile, socket, csv behind it) is most of that:
about 0.045 s of the 0.4 s of a command such as `traceql sql 'SELECT 1'`, spent on a figure no
command prints. spare_metadata_lookup() puts a finder on sys.meta_path that answers that import,
before duckdb is imported, with a module of the same three names:

- __version__: the version in the name of duckdb's .dist-info folder next to the package, which
  is what importlib.metadata reads for an installed package;
- __duckdb_version__: the bundled engine's, from the _duckdb extension (loaded by then);
- version(): both, in duckdb's words.

Where that folder is not found (duckdb installed another way), __version__ is asked of
importlib.metadata as duckdb asks it. Nothing changes when duckdb was imported before traceql.
tests/core/test_duckdb_version.py compares the three with duckdb's own in a fresh interpreter.
"""

from __future__ import annotations

import os
import sys

_NAME = "duckdb._version"


def _dist_version() -> str | None:
    """The version of the duckdb package found first on sys.path, from its .dist-info folder's
    name (duckdb-1.5.5.dist-info); None when it is not exactly one such folder."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("duckdb")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    site = os.path.dirname(os.path.abspath(next(iter(spec.submodule_search_locations))))
    try:
        found = [n for n in os.listdir(site) if n.startswith("duckdb-") and n.endswith(".dist-info")]
    except OSError:
        return None
    if len(found) != 1:
        return None
    return found[0][len("duckdb-"):-len(".dist-info")]


def _attribute(module, name: str):
    if name == "__version__":
        value = _dist_version()
        if value is None:  # as duckdb itself would answer
            from importlib.metadata import version

            value = version("duckdb")
    elif name == "__duckdb_version__":
        import _duckdb

        value = _duckdb.__version__
    else:
        raise AttributeError(f"module {_NAME!r} has no attribute {name!r}")
    setattr(module, name, value)
    return value


class VersionFinder:
    """A meta-path finder and loader answering `import duckdb._version` (duckdb's own import of
    it) with the stand-in module; the import system then binds it to the duckdb package as
    it binds any submodule."""

    def find_spec(self, name, path=None, target=None):
        if name != _NAME:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, self, origin=__file__)

    def create_module(self, spec):
        return None  # the default: a plain module

    def exec_module(self, module) -> None:
        module.__doc__ = __doc__
        module.__getattr__ = lambda name: _attribute(module, name)

        def version() -> str:
            """Human-friendly formatted version string of both the distribution package and the bundled DuckDB engine."""
            return f"{module.__version__} (with duckdb {module.__duckdb_version__})"

        module.version = version


def spare_metadata_lookup() -> VersionFinder | None:
    """Put the finder first on sys.meta_path unless duckdb is imported already or a finder of
    this module is there; the finder put there, else None."""
    if "duckdb" in sys.modules or any(isinstance(f, VersionFinder) for f in sys.meta_path):
        return None
    finder = VersionFinder()
    sys.meta_path.insert(0, finder)
    return finder
