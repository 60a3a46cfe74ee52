"""pytest set-up of the whole suite: no inherited terminal size, why tests were skipped (one line
per reason with its count: `make test` showed 215 's' marks without saying why; -rs lists every
one), and test files in the order of their recorded cost, longest first (tests/costs.py)."""

from __future__ import annotations

import os
from collections import Counter

from tests import costs

# The tests choose the terminal width they check. An inherited COLUMNS/LINES would make the CLI
# wrap its piped output to it: pytest-xdist sets 80x24 in its workers (`make test` runs two).
for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)


def skip_reasons(reports) -> Counter:
    """How many skipped tests each reason accounts for ('Skipped: ' taken off)."""
    counts: Counter = Counter()
    for rep in reports:
        longrepr = getattr(rep, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
        counts[reason.removeprefix("Skipped: ").strip() or "(no reason given)"] += 1
    return counts


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts = skip_reasons(terminalreporter.stats.get("skipped", []))
    if not counts:
        return
    terminalreporter.write_sep("-", f"{sum(counts.values())} skipped, by reason")
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.write_line(f"{n:>5}  {reason}")


def pytest_configure(config):
    # pytest-xdist's --dist loadfile hands each worker the next file when it is done with one,
    # taking the files with the most tests first (--loadscope-reorder, its default): by count, the
    # files of many quick tests went first and a 100 s file could start last, on one worker, while
    # the other had nothing left. pytest_collection_modifyitems orders them by cost instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    """The files longest first by tests/costs.txt (unlisted ones before all: they may be long),
    each file's tests in their own order."""
    recorded = costs.read()
    if not recorded:
        return
    unknown = max(recorded.values()) + 1
    rank = {}
    for item in items:
        name = item.nodeid.split("::", 1)[0]
        rank.setdefault(name, -recorded.get(name, unknown))
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])
