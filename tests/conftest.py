"""pytest hooks of the whole suite: why tests were skipped, one line per reason with its count
(`make test` showed 215 's' marks without saying why; -rs lists every one)."""

from __future__ import annotations

from collections import Counter


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
