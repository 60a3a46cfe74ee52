"""The package's layers (DESIGN.md section 5): each module imports only from its own layer or the
layers below it, and no set of modules imports itself round in a loop.

Every import counts, also one inside a function (which is how the old flat package hid its
26-module cycle): the modules are parsed with ast, not imported."""

import ast
from pathlib import Path

from ..util import REPO

# Bottom first. A module's layer is its subpackage (traceql/<layer>/...), or its own name at the top.
LAYERS = ("core", "sources", "derive", "query", "store", "outputs", "analysis", "engines", "api",
          "cli", "mcp_server", "__init__", "__main__")
# The interfaces stand side by side: cli and mcp_server do not import each other, except that the
# CLI's `traceql mcp` command starts the server.
RANK = {name: i for i, name in enumerate(LAYERS)}
RANK.update(cli=RANK["cli"], mcp_server=RANK["cli"], __main__=RANK["__init__"])

# (importer, imported) pairs allowed to point up, each with its reason. Keep it short.
ALLOWED: set[tuple[str, str]] = set()


def modules(root: Path, package: str = "traceql") -> dict[str, Path]:
    """Dotted module name -> file, for every .py file below root (a package __init__ by the package's name)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict) -> dict[str, int]:
    """The modules of `known` that module NAME imports (at any depth of its code), with a line of each."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name`, the module mod
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import traceql.core.x.y` -> the nearest known module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.setdefault(target, node.lineno)
    return found


def layer(name: str) -> str:
    parts = name.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def graph(root: Path, package: str = "traceql") -> dict[str, dict[str, int]]:
    known = modules(root, package)
    return {name: imports(name, path, known) for name, path in known.items()}


def upward(edges: dict) -> list[str]:
    """Every import that points to a higher layer, or of a module whose layer is unknown."""
    bad = []
    for name, targets in sorted(edges.items()):
        if layer(name) not in RANK:
            bad.append(f"{name}: in no layer (add its subpackage to LAYERS, in order)")
            continue
        for target, line in sorted(targets.items()):
            if RANK.get(layer(target), len(LAYERS)) > RANK[layer(name)] and (name, target) not in ALLOWED:
                bad.append(f"{name} (line {line}) imports {target}: {layer(name)} is below {layer(target)}")
    return bad


def cycles(edges: dict) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a set of modules
    that import one another round in a loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_import_points_down():
    edges = graph(REPO / "traceql")
    assert len(edges) > 40 and {layer(n) for n in edges} >= set(LAYERS[:8])
    assert upward(edges) == []


def test_no_import_cycle():
    assert cycles(graph(REPO / "traceql")) == []


def test_the_checks_catch_an_upward_import_and_a_cycle(tmp_path):
    """The two checks fail on a planted fault: an import inside a function of core reaching up to
    store, and two query modules that import each other (one of them inside a function)."""
    root = tmp_path / "traceql"
    for folder in ("core", "query", "store"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "core" / "errors.py").write_text("def f():\n    from traceql.store import ingest\n    return ingest\n")
    (root / "store" / "ingest.py").write_text("from traceql.core.errors import f\n")
    (root / "query" / "a.py").write_text("from . import b\n")
    (root / "query" / "b.py").write_text("def g():\n    from .a import x\n")
    edges = graph(root)
    assert upward(edges) == ["traceql.core.errors (line 2) imports traceql.store.ingest: core is below store"]
    assert cycles(edges) == [["traceql.core.errors", "traceql.store.ingest"], ["traceql.query.a", "traceql.query.b"]]
    (root / "odd").mkdir()
    (root / "odd" / "x.py").write_text("")
    assert upward(graph(root))[-1] == "traceql.odd.x: in no layer (add its subpackage to LAYERS, in order)"


def test_the_package_exposes_its_api_only():
    """`import traceql` gives the public API (traceql.api) and the errors users catch, nothing else:
    no internal module, nor sys or types, is a public name."""
    import types

    import traceql

    assert traceql.__all__ == ["ingest", "open", "upgrade", "remove", "diff", "Workspace", "Progress", "RichProgress",
                               "TraceqlError", "InputError", "UsageError", "UnsupportedVersionError", "WorkspaceError",
                               "StaleWorkspaceError", "NewerWorkspaceError", "__version__"]
    assert dir(traceql) == sorted(traceql.__all__)
    for name in traceql.__all__:
        assert not isinstance(getattr(traceql, name), types.ModuleType), name
    assert callable(traceql.ingest) and traceql.ingest.__module__ == "traceql.store.ingest"
    from traceql.store.workspace import WorkspaceFile

    assert issubclass(traceql.Workspace, WorkspaceFile) and traceql.Workspace.__module__ == "traceql.api"
    assert not hasattr(traceql, "sqlcheck") and not hasattr(traceql, "sys") and not hasattr(traceql, "types")
