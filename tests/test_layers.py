"""The code map: retrod's modules import one another in no cycle, and its rooms only as the table
of docs/architecture.md allows. The table is read from that page, so the page and the test
cannot disagree; and every dependency it allows must be one the code has, so it cannot go stale.

Imports are read from the source (ast), every one of them: at the top, inside a function (a lazy
import is still a dependency, and a cycle through one is still a cycle), or for the type checker.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "daemon" / "retrod"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
ANYTHING = "anything"


def modules() -> dict[str, Path]:
    """Every module of retrod by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The retrod modules `name` imports, each with the line that imports it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # `from . import x`: the module x if there is one, else a name in the package
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import retrod.report.model.x`: the module it is in
                target = target.rpartition(".")[0]
            if target.split(".")[0] == "retrod" and target != name:
                yield target, node.lineno


def graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: the first line that does}."""
    known = modules()
    edges: dict[str, dict[str, int]] = {name: {} for name in known}
    for name, path in known.items():
        for target, line in imports(name, path, known):
            edges[name].setdefault(target, line)
    return edges


def table() -> dict[str, tuple[list[str], set[str] | None]]:
    """room -> (its modules and packages as the page writes them, the rooms it may import; None:
    anything), from the table under "## Who may import whom" in docs/architecture.md."""
    text = PAGE.read_text(encoding="utf-8").split("## Who may import whom", 1)[1]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    rooms = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        room, held, allowed = cells[0].strip("`"), re.findall(r"`([^`]+)`", cells[1]), cells[-1]
        rooms[room] = (held, None if allowed == ANYTHING else set(re.findall(r"`([^`]+)`", allowed)))
    assert rooms, f"no table under '## Who may import whom' in {PAGE}"
    return rooms


def room_of() -> dict[str, str]:
    """module -> its room, from the table: `x/` holds the package x, `y.py` the module y. The
    package `retrod` itself (an empty `__init__.py`) is in none."""
    rooms, known = table(), modules()
    owner: dict[str, list[str]] = {name: [] for name in known if name != "retrod"}
    for room, (held, _allowed) in rooms.items():
        for entry in held:
            if entry.endswith("/"):
                package = "retrod." + entry.rstrip("/").replace("/", ".")
                members = [n for n in known if n == package or n.startswith(package + ".")]
            else:
                members = [n for n in known if n == "retrod." + entry.removesuffix(".py").replace("/", ".")]
            assert members, f"room {room!r} names {entry!r}, which is no module of retrod's"
            for member in members:
                owner.setdefault(member, []).append(room)
    homeless = sorted(n for n, rooms_ in owner.items() if not rooms_)
    assert not homeless, f"modules in no room of {PAGE.name}'s table: {homeless}"
    twice = {n: r for n, r in owner.items() if len(r) > 1}
    assert not twice, f"modules in more than one room: {twice}"
    return {name: rooms_[0] for name, rooms_ in owner.items()}


def _cycle(edges: dict[str, set[str]] | dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle of the graph (its nodes in order, the first again at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_imports_itself_through_others() -> None:
    edges = graph()
    cycle = _cycle(edges)
    assert cycle is None, "import cycle: " + " -> ".join(
        f"{a} (line {edges[a][b]})" for a, b in itertools.pairwise(cycle)) + f" -> {cycle[-1]}"


def test_rooms_import_only_what_the_table_allows_and_all_of_it() -> None:
    rooms, owner, edges = table(), room_of(), graph()
    used: dict[str, set[str]] = {room: set() for room in rooms}
    refused = []
    for name, targets in edges.items():
        for target, line in targets.items():
            here, there = owner[name], owner[target]
            if here == there:
                continue
            used[here].add(there)
            allowed = rooms[here][1]
            if allowed is not None and there not in allowed:
                refused.append(f"{name} (room {here}) imports {target} (room {there}), line {line}")
    assert not refused, "imports the table does not allow:\n" + "\n".join(refused)
    # The table says what the code does: a dependency no module has any more is struck from it.
    stale = {room: sorted(allowed - used[room]) for room, (_held, allowed) in rooms.items()
             if allowed is not None and allowed - used[room]}
    assert not stale, f"{PAGE.name} allows dependencies the code does not have: {stale}"


def test_the_table_is_a_layering() -> None:
    rooms = table()
    unknown = {room: sorted(allowed - set(rooms)) for room, (_held, allowed) in rooms.items()
               if allowed is not None and allowed - set(rooms)}
    assert not unknown, f"the table names rooms it does not have: {unknown}"
    assert not [room for room, (_held, allowed) in rooms.items() if allowed is not None and "cli" in allowed]
    layers = {room: allowed for room, (_held, allowed) in rooms.items() if allowed is not None}
    assert _cycle(layers) is None, f"the table's rooms import one another in a cycle: {_cycle(layers)}"


def test_the_mcp_bindings_import_the_work_never_the_reverse() -> None:
    edges = graph()
    assert edges["retrod"] == {}  # retrod/__init__.py, in no room: it must stay empty
    assert "retrod.mcp.tools" in edges["retrod.mcp.server"]
    assert "retrod.mcp.server" not in edges["retrod.mcp.tools"]
    assert edges["retrod.mcp"] == {}  # asked by `skills install` without loading the SDK or the work


def test_settings_and_the_report_agree_on_the_away_threshold() -> None:
    """settings keeps its own copy rather than import the report, which reads the settings."""
    from retrod import settings
    from retrod.report import model

    assert settings.Settings.model_fields["away_after_s"].default == settings.AWAY_AFTER_S == model.AWAY_AFTER_S


@pytest.mark.parametrize(("source", "expected"), [
    ("from . import a, b\n", {"retrod.a", "retrod.b"}),
    ("from .pkg import c\n", {"retrod.pkg.c"}),
    ("from .pkg.c import thing\n", {"retrod.pkg.c"}),
    ("from ..a import x\n", set()),  # above retrod: not ours
    ("def f():\n    from .a import x\n", {"retrod.a"}),  # a lazy import counts
    ("import retrod.pkg.c\nimport os\n", {"retrod.pkg.c"}),
])
def test_the_import_reader(tmp_path: Path, source: str, expected: set[str]) -> None:
    """What the checks above stand on: relative forms, lazy imports, names that are not modules."""
    module = tmp_path / "m.py"
    module.write_text(source)
    known = {"retrod": tmp_path / "__init__.py", "retrod.a": tmp_path / "a.py", "retrod.b": tmp_path / "b.py",
             "retrod.pkg": tmp_path / "pkg" / "__init__.py", "retrod.pkg.c": tmp_path / "pkg" / "c.py",
             "retrod.m": module}
    assert {target for target, _line in imports("retrod.m", module, known)} == expected
