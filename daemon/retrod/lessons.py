"""accounting.md §2.10, whether what retrod tells the next session works: each pattern's and each
lesson's waste before retrod first named it against since, its status, whether it came back, and
what the brief says of it (its mode). Pure: the per-session figures come in (history's
lesson_data.py reads them from the store), JSON-able rows go out; no SQL, no I/O.

Rates are ratios of sums, compared by cross-multiplying the integer sums, never after rounding.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NotRequired, TypedDict

from .basics.format import instant
from .basics.stored_text import one_line

SIGNAL_PATTERNS = ("sibling_error", "error_retry", "persisted_output_read", "post_write_read", "duplicate", "re_read")
CACHE_PATTERNS = ("expired", "invalidated", "model")
PATTERNS = SIGNAL_PATTERNS + CACHE_PATTERNS  # the pattern order
_NONE = (0,) * len(SIGNAL_PATTERNS)  # (a signal a session's figures leave out: none)
WHAT = {
    "sibling_error": "a call cancelled because a call made beside it failed",
    "error_retry": "a failed call followed by another call of the same tool",
    "persisted_output_read": "a Read of a tool result too large to show, saved to a file",
    "post_write_read": "a Read of a file just written",
    "duplicate": "a call repeating an earlier one with the same input, nothing written between",
    "re_read": "a Read of a file already read, not written since",
    "expired": "the prompt cache expired in a pause and was written again",
    "invalidated": "the prompt cache was written again after the start of the conversation changed",
    "model": "the prompt cache was written again after a switch of model",
}
SIDE = 10  # the last 10 counted sessions
SMALL_SESSIONS = 3
SMALL_BASE = 100
WORKING_FLOOR = 5  # before count at least this for `working`
STATUS_ORDER = ("not working", "too early", "unclear", "working")
WASTE_VERDICTS = ("avoidable_waste", "exploratory_waste")


# The rows that go out, declared (`retrod lessons --json`'s, and the brief's): the one place
# their keys are defined; history/shapes.py holds the answers around them.

class Side(TypedDict):
    """A side's sums and rate; a cache cause's with its extra dollars per session."""

    sessions: int
    count: int
    base: int
    rate: float | None
    extra_usd: NotRequired[float | None]


class FirstGiven(TypedDict):
    session: str
    started_at: str


class PatternRow(TypedDict):
    """`patterns[]`."""

    pattern: str
    family: str
    what: str
    example: str | None
    first_given: FirstGiven
    sessions_given: int
    baseline: str
    before: Side
    after: Side
    status: str
    back: bool


class Logged(TypedDict):
    session: str
    task: str
    phase: str
    at: str


class WasteShare(TypedDict):
    before: float | None
    after: float | None


class LessonRow(TypedDict):
    """`lessons[]`."""

    lesson: str
    logged: Logged
    baseline: str
    before: Side
    after: Side
    status: str
    back: bool
    waste_phase_share: WasteShare


class Mode(TypedDict):
    """A pattern the brief names (`modes`)."""

    pattern: str
    mode: str
    status: str | None
    back: bool
    recent_count: int


class ProjectLesson(TypedDict):
    """The brief's `project_lessons[]`."""

    lesson: str | None
    task: str
    phase: str
    session: str
    at: str
    age_days: int


@dataclass(frozen=True, slots=True)
class Session:
    """One dated session's figures, as its report has them (`summary.requests`,
    `summary.tool_use.{calls, productive, signals}`, `summary.cache.misses.<cause>`)."""

    uuid: str
    start: datetime
    project: bool  # one of the project's sessions
    requests: int
    productive: int
    signals: Mapping[str, int]
    # cause -> (count, extra_usd); filled for the sessions a cache pattern measures (`cache_needed`)
    misses: Mapping[str, tuple[int, float]] = field(default_factory=dict)
    calls: int = field(init=False)  # (productive and every signal: added up once, read for every side)

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", self.productive + sum(map(self.signals.get, SIGNAL_PATTERNS, _NONE)))

    @property
    def key(self) -> tuple[datetime, str]:
        return self.start, self.uuid


def base(pattern: str, s: Session) -> int:
    """A pattern's base in a session: calls for a signal, requests for a cache cause; `lesson`:
    calls (a lesson's measure is the whole tool-call waste)."""
    return s.requests if pattern in CACHE_PATTERNS else s.calls


def count(pattern: str, s: Session) -> int:
    if pattern == "lesson":
        return s.calls - s.productive
    if pattern in CACHE_PATTERNS:
        return s.misses.get(pattern, (0, 0.0))[0]
    return s.signals.get(pattern, 0)


@dataclass(frozen=True, slots=True)
class Sides:
    before: list[Session]
    baseline: str
    tail: list[Session]  # the project's counted sessions from the moment on: after is its last 10


class History:
    """The project's and the member's sessions, ordered by (start, uuid), with each base's counted
    sessions found once: a side is then a slice, cut where its moment falls (bisection), however
    many patterns and lessons are measured."""

    def __init__(self, project: Sequence[Session], member: Sequence[Session]) -> None:
        self.project, self.member = project, member
        self._counted: dict[tuple[bool, bool], tuple[list[Session], list[tuple]]] = {}

    def counted(self, pattern: str, project: bool) -> tuple[list[Session], list[tuple]]:
        """The sessions that count for `pattern` (its base above 0), the project's or the
        member's, with their (start, uuid) keys."""
        key = (pattern in CACHE_PATTERNS, project)  # (a base is calls or requests)
        if key not in self._counted:
            found = [s for s in (self.project if project else self.member) if base(pattern, s) > 0]
            self._counted[key] = (found, [s.key for s in found])
        return self._counted[key]


def too_small(pattern: str, side: Sequence[Session]) -> bool:
    return len(side) < SMALL_SESSIONS or sum(base(pattern, s) for s in side) < SMALL_BASE


def sides(pattern: str, history: History, cut_project: tuple, cut_member: tuple) -> Sides:
    """The before side (the project's, else the member's when that is too small) and the project's
    counted sessions from the moment on. A session is before a cut when its (start, uuid) key is
    below it: a session's key for "ordered before it", `(moment,)` for "start < moment"."""
    mine, keys = history.counted(pattern, True)
    at = bisect_left(keys, cut_project)
    before = mine[max(0, at - SIDE):at]
    baseline = "project"
    if too_small(pattern, before):
        every, every_keys = history.counted(pattern, False)
        upto = bisect_left(every_keys, cut_member)
        before = every[max(0, upto - SIDE):upto]
        baseline = "all projects"
    return Sides(before, baseline, mine[at:])


def side(pattern: str, sessions: Sequence[Session]) -> Side:
    c = sum(count(pattern, s) for s in sessions)
    b = sum(base(pattern, s) for s in sessions)
    out: Side = {"sessions": len(sessions), "count": c, "base": b, "rate": 100 * c / b if b else None}
    if pattern in CACHE_PATTERNS:
        out["extra_usd"] = (round(sum(s.misses.get(pattern, (0, 0.0))[1] for s in sessions) / len(sessions), 6)
                            if sessions else None)
    return out


def status(pattern: str, before: Sequence[Session], after: Sequence[Session]) -> str:
    """The first that applies: too early, not working, working, unclear (exact integer tests)."""
    if too_small(pattern, before) or too_small(pattern, after):
        return "too early"
    cb, bb = sum(count(pattern, s) for s in before), sum(base(pattern, s) for s in before)
    ca, ba = sum(count(pattern, s) for s in after), sum(base(pattern, s) for s in after)
    if ca > 0 and ca * bb >= cb * ba:
        return "not working"
    if cb >= WORKING_FLOOR and 2 * ca * bb <= cb * ba:
        return "working"
    return "unclear"


def measure(pattern: str, found: Sides) -> tuple[str, bool]:
    """(status, back): `back` when the status now is `not working` and some earlier prefix of the
    sessions from the moment on was `working`."""
    now = status(pattern, found.before, found.tail[-SIDE:])
    if now != "not working":
        return now, False
    back = any(status(pattern, found.before, found.tail[:k][-SIDE:]) == "working"
               for k in range(1, len(found.tail)))
    return now, back


def needed(patterns: Iterable[str], history: History, given: Mapping[str, set[str]], recent: Sequence[Session],
           whole_tail: Iterable[str] = ()) -> set[str]:
    """The sessions whose details (cache misses, calls' examples) these patterns' figures read:
    their sides (which depend on the bases alone) and the brief's recent sessions; for the
    patterns in `whole_tail`, every session from the moment on (what `back` reads, and only a
    `not working` pattern needs it)."""
    need = {s.uuid for s in recent}
    whole = set(whole_tail)
    for pattern in patterns:
        cuts = _moments(history, given.get(pattern, set()))
        if cuts is None:
            continue
        found = sides(pattern, history, *cuts)
        need.update(s.uuid for s in (*found.before, *(found.tail if pattern in whole else found.tail[-SIDE:])))
    return need


def not_working(patterns: Iterable[str], history: History, given: Mapping[str, set[str]]) -> set[str]:
    """The given patterns whose status now is `not working` (the sessions of their sides known)."""
    out = set()
    for pattern in patterns:
        cuts = _moments(history, given.get(pattern, set()))
        if cuts is not None:
            found = sides(pattern, history, *cuts)
            if status(pattern, found.before, found.tail[-SIDE:]) == "not working":
                out.add(pattern)
    return out


def _moments(history: History, given: set[str]) -> tuple[tuple, tuple] | None:
    """A pattern's cuts: its first given session in the project (G) and anywhere (G*)."""
    first = next((s for s in history.project if s.uuid in given), None)
    if first is None:
        return None
    anywhere = next(s for s in history.member if s.uuid in given)  # (G is one of them)
    return first.key, anywhere.key


def shown(value: object) -> str:
    """A stored string in JSON and the text form's cells: rules 1 and 2, without the quotes."""
    return one_line(value)


def pattern_rows(history: History, given: Mapping[str, set[str]],
                 calls: Mapping[str, Mapping[str, Mapping[str, int]]]) -> list[PatternRow]:
    """`patterns[]`: one row per pattern given to at least one of the project's sessions.
    `given`: pattern -> the sessions given it; `calls`: session -> signal -> example text -> calls."""
    rows: list[PatternRow] = []
    for pattern in PATTERNS:
        cuts = _moments(history, given.get(pattern, set()))
        if cuts is None:
            continue
        sessions_given = [s for s in history.project if s.uuid in given[pattern]]
        found = sides(pattern, history, *cuts)
        after = found.tail[-SIDE:]
        state, back = measure(pattern, found)
        first = sessions_given[0]
        rows.append({
            "pattern": pattern, "family": "cache" if pattern in CACHE_PATTERNS else "signal", "what": WHAT[pattern],
            "example": example(pattern, found.before, after, calls),
            "first_given": {"session": first.uuid, "started_at": instant(first.start)},
            "sessions_given": len(sessions_given), "baseline": found.baseline,
            "before": side(pattern, found.before), "after": side(pattern, after), "status": state, "back": back})
    return sorted(rows, key=lambda r: (STATUS_ORDER.index(r["status"]), PATTERNS.index(r["pattern"])))


def example(pattern: str, before: Sequence[Session], after: Sequence[Session],
            calls: Mapping[str, Mapping[str, Mapping[str, int]]]) -> str | None:
    """The after side's (else the before side's) example, from its sessions with the pattern."""
    chosen = after if any(count(pattern, s) for s in after) else before
    hit = [s for s in chosen if count(pattern, s) > 0]
    if not hit:
        return None
    if pattern in CACHE_PATTERNS:
        return max(hit, key=lambda s: (s.misses[pattern][1], s.key)).uuid
    texts: dict[str, int] = {}
    for s in hit:
        for text, n in calls.get(s.uuid, {}).get(pattern, {}).items():
            texts[text] = texts.get(text, 0) + n
    if not texts:
        return None
    return shown(min(texts, key=lambda t: (-texts[t], t)))


# -- lessons ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Phase:
    """A phase of a dated session: its times (the report's claude + tool + human seconds)."""

    session: str
    task: str
    phase: str
    verdict: str | None
    started_at: datetime
    ended_at: datetime | None
    lessons_learned: str | None
    seconds: float = 0.0

    @property
    def moment(self) -> datetime:
        return self.ended_at or self.started_at

    def order(self) -> tuple:
        return (self.moment, self.session, self.started_at, self.task, self.phase, self.lessons_learned or "")


def compared(text: str | None) -> str:
    """A lesson's compared text: whitespace runs as one space, trimmed, lower-cased."""
    return " ".join((text or "").split()).lower()


def lessons_of(phases: Iterable[Phase]) -> dict[str, tuple[Phase, Phase]]:
    """compared text -> (first logged, newest) phase (of equal ones, the first in `phases`)."""
    logged: dict[str, list[Phase]] = {}
    for p in phases:
        key = compared(p.lessons_learned)
        if key:
            logged.setdefault(key, []).append(p)
    return {key: (min(group, key=Phase.order), max(group, key=Phase.order)) for key, group in logged.items()}


def lesson_rows(history: History, logged: Mapping[str, tuple[Phase, Phase]],
                phases: Sequence[Phase]) -> list[LessonRow]:
    """`lessons[]`, newest first by the first logged phase's moment (ties: the compared text).
    `logged`: the lessons of the project's phases (lessons_of); `phases`: the sides' sessions',
    with their times (for the waste share)."""
    by_session: dict[str, list[Phase]] = {}
    for p in phases:
        by_session.setdefault(p.session, []).append(p)
    rows: list[tuple[datetime, str, LessonRow]] = []
    for text, (first, _) in logged.items():
        m = first.moment
        found = lesson_sides(history, m)
        after = found.tail[-SIDE:]
        state, back = measure("lesson", found)
        rows.append((m, text, {
            "lesson": shown(first.lessons_learned),
            "logged": {"session": first.session, "task": shown(first.task), "phase": shown(first.phase),
                       "at": instant(m)},
            "baseline": found.baseline, "before": side("lesson", found.before), "after": side("lesson", after),
            "status": state, "back": back,
            "waste_phase_share": {"before": waste_share(found.before, by_session),
                                  "after": waste_share(after, by_session)}}))
    rows.sort(key=lambda r: r[1])
    rows.sort(key=lambda r: r[0], reverse=True)
    return [r for _, _, r in rows]


def lesson_sides(history: History, moment: datetime) -> Sides:
    """A lesson's sides: before its first logged moment (the project's, else the member's), and
    the project's from it on."""
    return sides("lesson", history, (moment,), (moment,))  # (start, uuid) < (moment,): start < moment


def waste_share(sessions: Sequence[Session], phases: Mapping[str, list[Phase]]) -> float | None:
    total = waste = 0.0
    for s in sessions:
        for p in phases.get(s.uuid, []):
            total += p.seconds
            if p.verdict in WASTE_VERDICTS:
                waste += p.seconds
    return waste / total if total else None


def lesson_sessions(history: History, logged: Mapping[str, tuple[Phase, Phase]]) -> set[str]:
    """The sessions whose phases' times the lessons' waste shares read (their sides). `logged`:
    the lessons of the project's phases (lessons_of)."""
    need: set[str] = set()
    for first, _ in logged.values():
        m = first.moment
        found = lesson_sides(history, m)
        need.update(s.uuid for s in (*found.before, *found.tail[-SIDE:]))
    return need


def answer(rows: Sequence[PatternRow]) -> str:
    """The one-line answer over the pattern rows (accounting.md §2.10 Interface, exactly)."""
    if not rows:
        return "retrod has named no pattern in this project's briefs yet"

    def noun(n: int) -> str:
        return "pattern" if n == 1 else "patterns"

    t = sum(1 for r in rows if r["status"] == "too early")
    judged = [r for r in rows if r["status"] != "too early"]
    if not judged:
        return f"{t} {noun(t)} named, too early to tell"
    w = sum(1 for r in judged if r["status"] == "working")
    b = sum(1 for r in rows if r["back"])
    a = sum(1 for r in judged if r["baseline"] == "all projects")
    text = f"{w} of {len(judged)} {noun(len(judged))} fell by half or more since retrod started naming them"
    if b:
        text += f"; {b} came back"
    if t:
        text += f"; {t} too early to tell"
    if a:
        text += f"; {a} judged against all projects"
    return text


# -- the brief's policy ----------------------------------------------------------------------

MODE_GROUP = {"back": 0, "not working": 0, "too early": 1, "new": 1, "unclear": 2, "fixed": 3}


def recurs(pattern: str, recent: Sequence[Session]) -> bool:
    hit = sum(1 for s in recent if count(pattern, s) > 0)
    return hit >= 2 or (hit == 1 and len(recent) == 1)


def modes(rows: Sequence[PatternRow], recent: Sequence[Session], last_mention: Mapping[str, str]) -> list[Mode]:
    """The patterns the brief names, in its order: `{pattern, mode, status, back, recent_count}`."""
    by_pattern = {r["pattern"]: r for r in rows}
    out: list[Mode] = []
    for pattern in PATTERNS:
        row = by_pattern.get(pattern)
        mode: str | None
        if row is None:
            mode = "new" if recurs(pattern, recent) else None
        elif row["status"] == "not working":
            mode = "back" if row["back"] else "not working"
        elif row["status"] == "too early":
            mode = "too early"
        elif row["status"] == "unclear":
            mode = "unclear" if recurs(pattern, recent) and last_mention.get(pattern) != "fixed" else None
        else:
            mode = "fixed" if last_mention.get(pattern) != "fixed" else None
        if mode is not None:
            out.append({"pattern": pattern, "mode": mode, "status": None if row is None else row["status"],
                        "back": bool(row and row["back"]),
                        "recent_count": sum(count(pattern, s) for s in recent)})
    return sorted(out, key=lambda m: (MODE_GROUP[m["mode"]], -m["recent_count"], PATTERNS.index(m["pattern"])))


def brief_lessons(logged: Mapping[str, tuple[Phase, Phase]], now: datetime, limit: int = 10) -> list[ProjectLesson]:
    """The brief's lessons: the `limit` newest distinct ones of the project's (`logged`:
    lessons_of its phases), newest first by their newest moment (ties: the compared text), each
    with the newest phase's age in whole days."""
    found = sorted(logged.items(), key=lambda kv: kv[0])
    found.sort(key=lambda kv: kv[1][1].moment, reverse=True)
    out: list[ProjectLesson] = []
    for _, (_, newest) in found[:limit]:
        out.append({"lesson": newest.lessons_learned, "task": newest.task, "phase": newest.phase,
                    "session": newest.session, "at": instant(newest.moment),
                    "age_days": math.floor((now - newest.moment).total_seconds() / 86_400)})
    return out
