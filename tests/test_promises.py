"""docs/promises.md, "What retrod promises", names the tests that try each fault: every named
test exists, and every test of the fault suites is named there, so the two cannot drift."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parent
PROMISES = TESTS.parent / "docs" / "promises.md"
FAULT_SUITES = ("test_hardening.py", "test_faults.py", "test_team.py")


def _promised() -> list[tuple[str, str]]:
    text = PROMISES.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| fault")]
    cited = [re.findall(r"`(test_\w+\.py)::(test_\w+)`", row.rsplit("|", 2)[1]) for row in rows]
    assert rows and all(cited), "every row of the table names at least one test"
    return [pair for row in cited for pair in row]


def _defined(file: str) -> set[str]:
    return set(re.findall(r"^(?:async )?def (test_\w+)\(", (TESTS / file).read_text(encoding="utf-8"), re.M))


def test_every_promise_names_tests_that_exist() -> None:
    missing = [f"{file}::{name}" for file, name in _promised() if name not in _defined(file)]
    assert missing == []


def test_every_fault_test_is_promised() -> None:
    promised = set(_promised())
    unlisted = [f"{file}::{name}" for file in FAULT_SUITES
                for name in sorted(_defined(file)) if (file, name) not in promised]
    assert unlisted == []
