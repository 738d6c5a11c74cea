"""Every key of the declared JSON shapes (the report, trends, the brief, lessons and the status
line's answer: report/shapes.py, history/shapes.py, lessons.py, statusline/shapes.py) is listed in
docs/reference.md, in its payload's section, inside a code span (issue 35): a key added to a shape
cannot go undocumented. And the other way, every key a `{…}` list of those sections names is one
a shape declares. The keys are read from the TypedDicts' own annotations (typing.get_type_hints),
nested ones included; a shape another payload's section documents (the report's cost, tool use
and cache figures in trends and the brief, `retrod lessons`' rows in the brief) is named there,
its keys listed once, where it is declared."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest

from retrod import lessons
from retrod.history import shapes as history
from retrod.report import shapes as report
from retrod.statusline import shapes as statusline

REFERENCE = Path(__file__).parent.parent / "docs" / "reference.md"
# Each payload, the heading of docs/reference.md's section that lists its keys, and the modules
# whose shapes that section documents.
PAYLOADS = {
    "report": (report.Report, "## The report's JSON", {report}),
    "trends": (history.Trends, "## Trends' JSON", {history}),
    "brief": (history.Brief, "## The brief and the SessionStart hook", {history}),
    "lessons": (history.Lessons, "## Lessons: whether the brief works", {history, lessons}),
    "statusline": (statusline.Figures, "## The status line: `retrod statusline`", {statusline}),
}
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
NAME = re.compile(r"[a-z_][a-z0-9_]*")
# A key in a `{…}` list: a name followed by `,`, `}`, `:`, `?` or `[]` (not a quoted value).
LISTED = re.compile(r"(?<![\"\w.])([a-z_][a-z0-9_]*)(?=\??(?:\[\])?\s*[,}:])")


def keys(shape: object, owned: set[types.ModuleType] | None = None, seen: set | None = None) -> set[str]:
    """Every key of a TypedDict and of the TypedDicts its values hold (in lists, dicts, unions),
    those declared in the modules `owned` (None: every module)."""
    seen = set() if seen is None else seen
    if typing.is_typeddict(shape):
        if shape in seen or (owned is not None and shape.__module__ not in {m.__name__ for m in owned}):
            return set()
        seen.add(shape)
        hints = typing.get_type_hints(shape)
        found = set(hints)
        for hint in hints.values():
            found |= keys(hint, owned, seen)
        return found
    found = set()
    if isinstance(shape, types.UnionType) or typing.get_origin(shape) is not None:
        for arg in typing.get_args(shape):
            found |= keys(arg, owned, seen)
    return found


def section(heading: str) -> str:
    """The section of docs/reference.md under `heading`, to the next heading of its level."""
    text = REFERENCE.read_text()
    start = text.index(heading + "\n")
    level = heading.split(" ")[0]
    end = text.find(f"\n{level} ", start + len(heading))
    return text[start:end if end != -1 else None]


def documented(heading: str) -> tuple[set[str], set[str]]:
    """(every name inside the section's code spans, the keys its `{…}` lists name)."""
    spans = [m.group(2) for m in CODE_SPAN.finditer(section(heading))]
    names = {n for span in spans for n in NAME.findall(span)}
    listed = {n for span in spans if "{" in span for n in LISTED.findall(span)}
    return names, listed


def test_keys_reads_nested_shapes() -> None:
    found = keys(report.Report)
    assert {"session", "uuid", "tool_use_by_agent", "re_read", "invalidated", "max_resets_at", "prefix_before",
            "tasks_never_started"} <= found
    assert "saved_to" not in found  # (the retrospective's, not the JSON's)
    assert {"extra_usd", "first_given", "waste_phase_share"} <= keys(history.Lessons)
    assert "first_given" not in keys(history.Brief, {history}) and "pattern_rows" in keys(history.Brief, {history})


@pytest.mark.parametrize("payload", PAYLOADS)
def test_every_key_of_a_shape_is_in_the_reference(payload: str) -> None:
    shape, heading, owned = PAYLOADS[payload]
    names, _ = documented(heading)
    assert sorted(keys(shape, owned) - names) == []


@pytest.mark.parametrize("payload", PAYLOADS)
def test_every_key_the_reference_lists_is_in_a_shape(payload: str) -> None:
    shape, heading, _owned = PAYLOADS[payload]
    _, listed = documented(heading)
    assert sorted(listed - keys(shape)) == []


def test_the_constants_are_the_shapes_keys() -> None:
    """The loops that write token, signal and cause keys read them from the shapes."""
    from retrod.report import cache, model
    assert tuple(report.Tokens.__annotations__) == model.TOKEN_FIELDS
    assert model.SIGNALS == tuple(report.Signals.__annotations__) == lessons.SIGNAL_PATTERNS
    assert tuple(report.Misses.__annotations__) == cache.CAUSES
    assert set(lessons.CACHE_PATTERNS) == set(cache.WASTE_CAUSES)
