"""The seconds each test file takes, for the order in which `make test` hands files to its workers
(tests/conftest.py): the longest first, so that no worker starts a long file when the other is
nearly done.

    .venv/bin/python -m pytest -q -n 2 --dist loadfile --junitxml=run.xml
    .venv/bin/python -m tests.costs run.xml > tests/costs.txt

tests/costs.txt holds one line per file, seconds (setup, call and teardown of its tests) then
the path, longest first. A file that is not listed runs before all others (it may be long)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

COSTS = Path(__file__).with_name("costs.txt")


def read(path: Path = COSTS) -> dict[str, float]:
    """{file path relative to the repository: seconds}; {} without the file."""
    if not path.exists():
        return {}
    costs = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, name = line.split(None, 1)
            costs[name.strip()] = float(seconds)
    return costs


def from_junit(xml_path: Path) -> dict[str, float]:
    """Seconds per test file from pytest's --junitxml report (classname 'tests.x.test_y[.Class]')."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        while parts and not parts[-1].startswith("test_"):  # a test class: Class, Class.Inner
            parts.pop()
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time") or 0)
    return dict(seconds)


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python -m tests.costs RUN.xml > tests/costs.txt")
    costs = from_junit(Path(argv[0]))
    print("# wall seconds per test file in RUN.xml (python -m tests.costs RUN.xml), longest first")
    for name, s in sorted(costs.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{s:8.1f} {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
