"""pytest set-up of the whole suite: no inherited terminal size, and why tests were skipped, one
line per reason with its count (`make test` showed 215 's' marks without saying why; -rs lists
every one)."""

from __future__ import annotations

import os
from collections import Counter

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
