"""The documentation stays true: the generated references (docs/commands.md from every command's
--help, docs/contract.md from schemas/contract) equal what `make docs` writes now, every relative
link of README.md and docs/*.md names a file that exists (and a heading that exists, for links
with an anchor), and every `traceql ...` command in README's code blocks is a real command."""

import functools
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _generator()


@functools.cache
def _tree():
    """Every command's (arguments, --help text), each help run once as a user runs it; a help
    that does not exit 0 stops the generator with its error."""
    return tuple((tuple(args), text) for args, text in gen.command_tree())


def _diff_hint(path: Path, want: str) -> str:
    have = path.read_text() if path.exists() else ""
    for i, (a, b) in enumerate(zip(have.splitlines(), want.splitlines()), 1):
        if a != b:
            return f"first difference at line {i}:\n  committed: {a!r}\n  generated: {b!r}"
    return f"committed {len(have.splitlines())} lines, generated {len(want.splitlines())}"


@pytest.mark.parametrize("name", ["commands.md", "contract.md"])
def test_generated_reference_is_current(name):
    path = DOCS / name
    want = gen.commands_md(tree=[(list(a), t) for a, t in _tree()]) if name == "commands.md" else gen.contract_md()
    assert path.exists(), f"docs/{name} is missing: run `make docs`"
    assert path.read_text() == want, f"docs/{name} differs from what `make docs` writes; run `make docs`. " \
                                     + _diff_hint(path, want)


def test_commands_reference_lists_every_command():
    """The tree the generator walks is the CLI's: top-level commands read from `traceql --help`
    itself, each with its own section, and one command's help actually shown."""
    tree = _tree()
    top = [args[0] for args, _ in tree if len(args) == 1]
    assert {"ingest", "report", "sql", "diff", "analyze", "export", "schema"} <= set(top)
    text = (DOCS / "commands.md").read_text()
    for args, _ in tree:
        assert f"\n## {' '.join(['traceql', *args])}\n" in text
    assert "Usage: traceql report [OPTIONS]" in text


def test_contract_reference_matches_the_workspace_schema(tmp_path):
    """contract.md's tables and columns are those a fresh workspace has (read by DuckDB from the
    same files, not by the generator's parser), with a description for every column."""
    import duckdb

    con = duckdb.connect(str(tmp_path / "c.duckdb"))
    files = sorted((REPO / "schemas" / "contract").glob("*.sql"))
    tables = [f for f in files if "CREATE VIEW" not in f.read_text().upper()]
    for f in tables + [f for f in files if f not in tables]:
        con.execute(f.read_text())
    for f in files:
        name, kind, desc, cols = gen.parse_contract_file(f)
        real = [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()]
        assert [c for c, _, _ in cols] == real, f"{f.name}: parsed columns differ from DuckDB's"
        assert desc and all(d for _, _, d in cols), f"{f.name}: a view or column without description"
    text = (DOCS / "contract.md").read_text()
    version = max(int(v) for v in re.findall(r"^## Contract (\d+)", (REPO / "schemas" / "CHANGELOG.md").read_text(), re.M))
    assert f"Contract version **{version}**" in text
    assert "| `kernel_id` | BIGINT NOT NULL |" in text


def _markdown_files():
    return [REPO / "README.md"] + sorted(DOCS.glob("*.md"))


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a file's headings: lower case, punctuation but - and _ dropped, spaces to -."""
    out = set()
    for line in path.read_text().splitlines():
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def _outside_code(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_relative_links_point_to_existing_files():
    bad = []
    for md in _markdown_files():
        for target in re.findall(r"\]\(([^)\s]+)\)", _outside_code(md.read_text())):
            if re.match(r"^[a-z]+://|^mailto:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (md.parent / file).resolve() if file else md
            if not dest.exists():
                bad.append(f"{md.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{md.relative_to(REPO)}: {target} (no such heading)")
    assert not bad, "broken links:\n" + "\n".join(bad)
    assert len(re.findall(r"\]\(docs/", (REPO / "README.md").read_text())) >= 8  # README is a front door


def _readme_commands() -> list[list[str]]:
    """The traceql commands in README's code blocks, as argument lists up to the first option."""
    text = (REPO / "README.md").read_text()
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():  # continuation lines joined
            line = re.sub(r"^\$ ", "", line.strip())
            if not line.startswith("traceql "):
                continue
            words = shlex.split(line.split("  #")[0].split(" | ")[0], comments=True)[1:]
            path = []
            while words and not words[0].startswith("-"):
                path.append(words.pop(0))
            while words and words[0] in ("--db",) and len(words) > 1:  # a global option and its value
                words = words[2:]
                while words and not words[0].startswith("-"):
                    path.append(words.pop(0))
            out.append(path)
    return out


def test_readme_commands_are_real_commands():
    """Every command in README's code blocks that starts with `traceql` exists: it is one of the
    commands whose --help the generator ran with exit code 0. Positional arguments (file names, a
    trace id) after the command name are dropped by trying the longest prefix of the words that is
    a command."""
    commands = _readme_commands()
    assert len(commands) >= 8
    known = {args for args, _ in _tree()}  # each of these --help exited 0 (the generator checks)
    for path in commands:
        prefix = next((tuple(path[:n]) for n in range(len(path), -1, -1) if tuple(path[:n]) in known), None)
        assert prefix is not None and (prefix or not path), f"README: `traceql {' '.join(path)}` is not a traceql command"


def test_paths_named_in_the_docs_exist():
    """Every repository path README.md and docs/*.md name in backticks (`schemas/...`, `queries/...`,
    `tests/...`, ...) exists, so that moving or renaming a file cannot leave the docs pointing at
    nothing. `<name>` and `*` are wildcards; bench/data/ is made by the benchmarks."""
    roots = ("traceql/", "schemas/", "queries/", "tests/", "bench/", "fixtures/", "docs/")
    bad, seen = [], 0
    for md in _markdown_files():
        if md.name in ("commands.md", "contract.md"):
            continue  # generated from the sources they name
        for path in re.findall(r"`([A-Za-z_][\w./*<>-]*)`", md.read_text()):
            if not path.startswith(roots) or path.startswith("bench/data/"):
                continue
            seen += 1
            pattern = re.sub(r"<[^>]+>", "*", path).rstrip("/")
            if not any(REPO.glob(pattern)):
                bad.append(f"{md.relative_to(REPO)}: {path}")
    assert seen >= 30
    assert not bad, "the docs name paths that do not exist (update the docs):\n" + "\n".join(bad)
