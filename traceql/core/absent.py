"""Imports of a module that is not installed, answered at once.

DuckDB's Python client tries `import pandas` twice for every value it converts from Python (each
parameter, each item of a list parameter): without pandas installed, every try searches the whole
sys.path again, about 0.1 ms each, and a small ingest made 1,400 of them (the FLOPs and GPU tables
go in as list parameters). A None in sys.modules would stop the search, but pyarrow's pandas shim
then fails when it converts a timestamp. So skip_absent() puts a finder first on sys.meta_path that
raises ModuleNotFoundError for the names that were not installed when it was called (one search
each): the same error the search would end with, without the search.

A module installed later in the same process is found again once importlib.invalidate_caches()
runs (what Python asks for after installing one), which takes the finder away. A caller of
importlib.util.find_spec() still gets None: only an import statement is answered by the finder.
Where pandas is installed, nothing changes (ws.sql(...).to_pandas() works as before).
"""

from __future__ import annotations

import importlib.util
import sys


class AbsentFinder:
    """A meta-path finder raising ModuleNotFoundError for NAMES when they are imported."""

    def __init__(self, names) -> None:
        self.names = frozenset(names)

    def find_spec(self, name, path=None, target=None):
        if name not in self.names:
            return None
        # only an import (importlib._bootstrap._find_and_load_unlocked -> _find_spec -> here):
        # importlib.util.find_spec(name) keeps answering None, as it does without this finder
        caller = sys._getframe(2).f_code.co_name if hasattr(sys, "_getframe") else ""
        if caller != "_find_and_load_unlocked":
            return None
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    def invalidate_caches(self) -> None:
        """importlib.invalidate_caches(): a module may have been installed since; search again."""
        while self in sys.meta_path:
            sys.meta_path.remove(self)


def skip_absent(*names: str) -> AbsentFinder | None:
    """Answer `import NAME` with ModuleNotFoundError at once for each of NAMES that is not
    installed now; the finder put on sys.meta_path (None when every name is installed or a finder
    of this module is there already)."""
    if any(isinstance(f, AbsentFinder) for f in sys.meta_path):
        return None
    missing = []
    for name in names:
        if name in sys.modules:
            continue
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            continue
    if not missing:
        return None
    finder = AbsentFinder(missing)
    sys.meta_path.insert(0, finder)
    return finder
