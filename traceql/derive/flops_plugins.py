"""User-defined FLOPs and bytes: plug-ins that cost ops traceql.derive.flops has no formula for (or
costs differently), PyProf's "for custom functions and modules, users can add flops and bytes
calculation" without editing the package.

A plug-in is a Python module with a dict FLOPS that maps op names to functions:

    # my_flops.py
    def fused_gelu(op, shapes, dtypes, direction):
        n = 1
        for d in shapes[0]:
            n *= d
        return 8 * n, 2 * n * 4          # FLOPs, DRAM bytes (either may be None)

    FLOPS = {"myext::fused_gelu": fused_gelu}

Each function gets the op's name as the trace writes it ('myext::fused_gelu'), the shapes of its
inputs (a tuple of ints per tensor input, None for the other inputs), their dtypes ('fp32',
'fp16', 'bf16', ... as traceql.derive.flops.canonical_dtype spells them; None when the trace does not
say) and the direction ('forward', or 'backward' when a PyProf trace costs a backward kernel by
its forward op's shapes). It returns (flops, bytes), or None: no cost from the plug-in, the
built-in formula (if any) applies.

Where plug-ins come from, in this order (the first that names an op wins, and a plug-in wins over
the built-in formula for every op it names):
  1. `traceql ingest --flops PLUGIN` (repeatable);
  2. $TRACEQL_FLOPS: plug-ins separated by the path separator (':' on Linux);
  3. the entry points of group 'traceql.flops' of installed packages, by entry point name (an
     entry point names a module with FLOPS, or a FLOPS dict itself).
PLUGIN is a module name ('my_flops', 'mypkg.flops', imported from sys.path and the current
folder) or a path to a .py file.

An op's names, tried in order: its full name ('myext::fused_gelu'), the name after the
namespace ('fused_gelu'), and for PyProf markers module and op ('Foo.forward',
'torch.nn.functional.gelu').

FLOPs are computed at ingest (kernel_op.flops, kernel_op.bytes): a plug-in changed later applies
to traces ingested again (`traceql ingest` of the same file replaces it). A plug-in that cannot
be imported stops the ingest (exit 2) before anything is written; one whose function raises or
returns something other than two counts gives a warning naming the plug-in and the op (the
ingest's warnings, ingest_stats key 'flops.plugin_failed.<op>'), and those calls keep the
built-in cost.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from traceql.core.errors import UsageError

ENV = "TRACEQL_FLOPS"
GROUP = "traceql.flops"


@dataclass
class Plugin:
    name: str                       # as given: module name, file path or 'entry point NAME'
    formulas: dict                  # op name -> function(op, shapes, dtypes, direction)


@dataclass
class Failure:
    plugin: str
    op: str
    error: str
    calls: int = 0


@dataclass
class Registry:
    plugins: list[Plugin] = field(default_factory=list)
    failures: dict = field(default_factory=dict)   # (plugin, op) -> Failure

    def lookup(self, name: str | None, module: str | None = None) -> tuple[Plugin, str] | None:
        """The plug-in and the op name it knows NAME by (see the module doc), or None."""
        if not name or not self.plugins:
            return None
        names = [name.strip()]
        if "::" in names[0]:
            names.append(names[0].rpartition("::")[2])
        if module:
            names.append(f"{module}.{names[0]}")
        for plugin in self.plugins:
            for n in names:
                if n in plugin.formulas:
                    return plugin, n
        return None

    def cost(self, plugin: Plugin, key: str, op: str, args, direction: str) -> tuple[int | None, int | None] | None:
        """Call the plug-in's function for op OP with ARGS (traceql.derive.flops.Arg); None when it
        declines or fails (a failure is remembered for the ingest's warnings)."""
        shapes = [a.shape if a.is_tensor else None for a in args]
        dtypes = [a.dtype for a in args]
        try:
            out = plugin.formulas[key](op, shapes, dtypes, direction)
            if out is None:
                return None
            flops, nbytes = out
            return _count(flops), _count(nbytes)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - SystemExit too: a plug-in never ends traceql - a user's code: any error is a warning, never an abort
            f = self.failures.setdefault((plugin.name, op), Failure(plugin.name, op, _error_text(exc)))
            f.calls += 1
            return None

    def stats(self) -> list[tuple[str, int, str, str]]:
        """ingest_stats rows (key, value, severity, detail) for the failures."""
        return [(f"flops.plugin_failed.{f.op}", f.calls, "warning",
                 f"distinct input shape(s) of op {f.op} not costed by FLOPs plug-in {f.plugin}: {f.error} "
                 "(the built-in formula, if any, applies)")
                for f in self.failures.values()]


def _count(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise TypeError(f"returned {value!r}: counts are non-negative numbers")
    if value >= 2**63:  # a BIGINT column: larger is an overflow, warned and not stored
        raise ValueError(f"returned {value!r}: more than 2**63-1, the largest count stored")
    return int(round(value))


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, (TypeError, ValueError)) and "returned" in str(exc):
        return str(exc)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def specs_from_env() -> list[str]:
    return [s for s in os.environ.get(ENV, "").split(os.pathsep) if s.strip()]


def load(specs=None) -> Registry:
    """The plug-ins of SPECS (module names or .py paths), then $TRACEQL_FLOPS's, then the
    entry points of group traceql.flops. A plug-in that cannot be loaded is a UsageError."""
    plugins, seen = [], set()
    for spec in list(specs or []) + specs_from_env():
        spec = str(spec).strip()
        if spec and spec not in seen:
            seen.add(spec)
            plugins.append(Plugin(spec, _formulas(_import(spec), spec)))
    for ep in _entry_points():
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - SystemExit too: a plug-in never ends traceql - an installed package's plug-in: say which
            raise UsageError(f"FLOPs plug-in entry point {ep.name!r} ({ep.value}) cannot be loaded: "
                             f"{_error_text(exc)}") from None
        plugins.append(Plugin(f"entry point {ep.name}", _formulas(obj, f"entry point {ep.name!r}")))
    return Registry(plugins)


def _entry_points():
    if not _may_declare_entry_points():
        return []
    from importlib.metadata import entry_points

    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


_SECTION = re.compile(r"^\s*\[\s*" + re.escape(GROUP) + r"\s*\]", re.M)


def _may_declare_entry_points() -> bool:
    """Whether an installed distribution may declare entry points of GROUP: its section in an
    entry_points.txt of a .dist-info or .egg-info folder on sys.path, where importlib.metadata
    finds them. Importing importlib.metadata alone took 23-34 ms of every ingest (email, zipfile,
    csv behind it), and its scan reads every distribution's metadata; this reads the few
    entry_points.txt files. True when unsure: a file (zip, egg) on sys.path, or a finder on
    sys.meta_path that is not Python's own and may list distributions of its own."""
    if any(hasattr(f, "find_distributions") and getattr(f, "__module__", "") != "_frozen_importlib_external"
           for f in sys.meta_path):
        return True
    for entry in sys.path:
        folder = entry or os.getcwd()
        try:
            if os.path.isfile(folder):
                return True
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), encoding="utf-8", errors="replace") as f:
                    if _SECTION.search(f.read()):
                        return True
            except OSError:
                continue
    return False


def _import(spec: str):
    path = Path(spec)
    if spec.endswith(".py") or os.sep in spec or (os.altsep and os.altsep in spec):
        if not path.is_file():
            raise UsageError(f"--flops {spec}: no such file (a FLOPs plug-in is a module name or a .py file)")
        name = "traceql_flops_plugin_" + "".join(c if c.isalnum() else "_" for c in path.stem)
        loader_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader_spec)
        try:
            loader_spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - SystemExit too: a plug-in never ends traceql
            raise UsageError(f"--flops {spec}: the plug-in failed to load: {_error_text(exc)}") from None
        return module
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if exc.name and spec.startswith(exc.name):
            raise UsageError(f"--flops {spec}: no module {spec!r} (give a module name on sys.path or a .py file; "
                             f"see `traceql ingest --help`)") from None
        raise UsageError(f"--flops {spec}: the plug-in failed to load: {_error_text(exc)}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - SystemExit too: a plug-in never ends traceql
        raise UsageError(f"--flops {spec}: the plug-in failed to load: {_error_text(exc)}") from None
    finally:
        if added:
            sys.path.remove(os.getcwd())


def _formulas(obj, what: str) -> dict:
    formulas = obj if isinstance(obj, dict) else getattr(obj, "FLOPS", None)
    if not isinstance(formulas, dict) or not formulas:
        raise UsageError(f"FLOPs plug-in {what}: needs a dict FLOPS of op names to functions "
                         "(see traceql.derive.flops_plugins)")
    bad = [k for k, v in formulas.items() if not isinstance(k, str) or not callable(v)]
    if bad:
        raise UsageError(f"FLOPs plug-in {what}: FLOPS maps op names (text) to functions; not {bad[0]!r}")
    return dict(formulas)


_loaded: dict[str, Registry] = {}


def active() -> Registry:
    """The plug-ins in effect: $TRACEQL_FLOPS's and the entry points' (loaded once per value of
    $TRACEQL_FLOPS in this process)."""
    key = os.environ.get(ENV, "")
    if key not in _loaded:
        _loaded[key] = load()
    return _loaded[key]


@contextmanager
def given(specs):
    """For the duration: SPECS (ingest --flops) before the plug-ins of $TRACEQL_FLOPS, through
    the environment, so that worker processes an ingest starts use them too. Loads them first:
    a plug-in that cannot be loaded is a UsageError before anything is written."""
    specs = [str(Path(s).resolve()) if str(s).endswith(".py") else str(s) for s in (specs or [])]
    old = os.environ.get(ENV)
    if specs:
        os.environ[ENV] = os.pathsep.join(specs + ([old] if old else []))
    try:
        active()
        yield
    finally:
        if specs:
            if old is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = old
