"""`retrod lessons` (accounting.md §2.10): the per-session figures lessons.py measures, read from the
store — the member's sessions with their requests and calls by signal (per-session rollups, read
once for the project and the member), the patterns their stored briefs named, the phases'
lessons, and only for the sessions a side holds: cache misses, the calls' example texts and the
phases' times — and the answer as JSON (`lessons`), which the command prints (`render`) and the
MCP tool serves as it is.

The project is found as `retrod brief` finds it (`find_sessions`: a `--project` by resolve's one
rule, else the working folder's nearest project)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from psycopg import Connection
from psycopg.rows import dict_row

from .. import lessons as rules
from ..basics.format import NONE, rate, usd
from ..basics.stored_text import quoted
from ..report import model
from ..report import prices as pricing
from ..report.model import AWAY_AFTER_S
from ..resolve import match_project, project_slugs, projects_of
from ..store.members import current_role
from ..store.queries import q
from . import kept_briefs, shapes, trend_periods


def member_sessions(conn: Connection, member: str, projects: bool = True) -> list[dict]:
    """The member's sessions, of every project, ordered by (start, uuid) (undated ones first,
    `started_at` None): their project and §2.10's figures, read once for all that a brief or
    `retrod lessons` finds and measures. Without `projects`, only their folder names and the
    dated ones: enough to find a folder's project (find_sessions), not to match a `--project`."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(q("lessons_member_sessions"), {"member": member, "projects": projects}).fetchall()


def find_sessions(conn: Connection, member: str, *, folder: Path | None, project: str | None,
                  exclude: str | None, every: list[dict] | None = None
                  ) -> tuple[str | None, list[dict], list[str] | None]:
    """(the project's name, its dated sessions newest first, `projects_matched`). `project`: as
    every surface reads it (resolve.match_project), one project only; else `folder`'s project:
    the nearest folder from it up that has sessions. `every`: the member's sessions
    (member_sessions, with their projects when `project` is given), when already read."""
    every = member_sessions(conn, member, projects=bool(project)) if every is None else every

    def newest_first(rows: list[dict]) -> list[dict]:
        dated = sorted((r for r in rows if r["started_at"] is not None and r["session_uuid"] != exclude),
                       key=lambda r: r["session_uuid"])
        return sorted(dated, key=lambda r: r["started_at"], reverse=True)  # (stable: uuid order on ties)

    if project:  # (tracking.project_match, over the projects of the sessions read)
        match = match_project(project, projects_of((r["project_path"], r["project_slug"]) for r in every), one=True)
        name = match.names[0] if len(match.projects) == 1 else match.value  # (a folder name: its projects)
        slugs, names = set(match.slugs), set(match.names)
        return (name, newest_first([r for r in every if r["project_slug"] in slugs and r["project"] in names]),
                match.matched)
    if folder is None:
        return None, [], None
    # From the folder up, but not to the home folder or the root from below them: sessions someone
    # once ran there are no project's history.
    above = [f for f in folder.parents if f not in (Path.home(), Path(folder.anchor))]
    by_slug: dict[str, list[dict]] = {}
    for r in every:
        by_slug.setdefault(r["project_slug"], []).append(r)
    for candidate in (folder, *above):
        found = newest_first([r for slug in set(project_slugs(candidate)) for r in by_slug.get(slug, ())])
        if found:
            return str(candidate), found, None
    return str(folder), [], None


def descriptions(conn: Connection, member: str, sessions: list[str]) -> dict[str, str]:
    """Session -> its description (`retrod track start`), for those that have one."""
    return dict(conn.execute(q("lessons_session_descriptions"), {"sessions": sessions, "member": member}).fetchall())


@dataclasses.dataclass
class Measured:
    """What §2.10 measures of a project: its sessions and the member's (by (start, uuid)), the
    patterns given, the rows `retrod lessons` answers, and the lessons of the project's phases."""

    project: list[rules.Session]
    member: list[rules.Session]
    recent: list[rules.Session]
    given: dict[str, set[str]]
    patterns: list[rules.PatternRow]
    lessons: list[rules.LessonRow]
    logged: dict[str, tuple[rules.Phase, rules.Phase]]  # (lessons.lessons_of)
    calls: dict[str, dict[str, dict[str, int]]]


def measure(conn: Connection, member: str, every: list[dict], project_uuids: set[str],
            recent_uuids: tuple[str, ...] = (), prices: pricing.Prices = pricing.DEFAULT,
            away_after_s: float = AWAY_AFTER_S) -> Measured:
    """§2.10's rows for the project whose dated sessions are `project_uuids`, of the member's
    sessions `every` (member_sessions); `recent_uuids`: the brief's recent sessions (their misses
    and calls are read too)."""
    rows = [r for r in every if r["started_at"] is not None]  # (an undated session takes no part)
    with conn.cursor(row_factory=dict_row) as cur:
        given: dict[str, set[str]] = {}
        for g in cur.execute(q("lessons_given"), {"member": member}):
            given.setdefault(g["pattern"], set()).add(g["session_uuid"])
    signals = rules.SIGNAL_PATTERNS
    everyone = [rules.Session(r["session_uuid"], r["started_at"], r["session_uuid"] in project_uuids, r["requests"],
                              r["productive"], {s: r[s] for s in signals}) for r in rows]  # (bigint: int)
    by_uuid = {s.uuid: s for s in everyone}
    project = [s for s in everyone if s.project]
    recent = [by_uuid[u] for u in recent_uuids if u in by_uuid]
    # Only the sessions a side (or the brief) reads: a cache walk and the calls are per session.
    # (a cache walk is per session: the whole tail only for a pattern `not working` with the sides')
    unwalked = rules.History(project, everyone)  # (a side depends on the bases alone, not on the misses)
    cached = rules.needed(rules.CACHE_PATTERNS, unwalked, given, recent)
    misses = model.cache_misses(conn, sorted(cached), member, prices) if cached else {}
    walked = [dataclasses.replace(s, misses=misses[s.uuid]) if s.uuid in misses else s for s in everyone]
    failing = rules.not_working(rules.CACHE_PATTERNS, rules.History([s for s in walked if s.project], walked), given)
    tails = rules.needed(failing, unwalked, given, recent, failing) - cached
    misses.update(model.cache_misses(conn, sorted(tails), member, prices) if tails else {})
    everyone = [dataclasses.replace(s, misses=misses[s.uuid]) if s.uuid in misses else s for s in everyone]
    by_uuid = {s.uuid: s for s in everyone}
    project = [s for s in everyone if s.project]
    recent = [by_uuid[u] for u in recent_uuids if u in by_uuid]
    with conn.cursor(row_factory=dict_row) as cur:
        wanted = rules.needed(rules.SIGNAL_PATTERNS, unwalked, given, recent)
        calls: dict[str, dict[str, dict[str, int]]] = {}
        for c in cur.execute(q("lessons_signal_calls"), {"sessions": sorted(wanted), "member": member}):
            calls.setdefault(c["session_uuid"], {}).setdefault(c["signal"], {})[c["example"]] = int(c["n"])
    phase_rows = conn.execute(q("lessons_member_phases"), {"member": member}).fetchall()
    history = rules.History(project, everyone)
    logged = rules.lessons_of(_phases(phase_rows, project_uuids))
    sided = rules.lesson_sessions(history, logged)  # (another project's among them: an all-projects side)
    timed = _timed(conn, _phases(phase_rows, sided), member, away_after_s)
    return Measured(project, everyone, recent, given, rules.pattern_rows(history, given, calls),
                    rules.lesson_rows(history, logged, timed), logged, calls)


def _phases(rows: list[tuple], sessions: set[str]) -> list[rules.Phase]:
    """The phases of these sessions (member_phases' rows), in its order."""
    return [rules.Phase(*row) for row in rows if row[0] in sessions]


def _timed(conn: Connection, phases: list[rules.Phase], member: str, away_after_s: float) -> list[rules.Phase]:
    """The phases, with their times."""
    by_session: dict[str, list[int]] = {}
    for i, p in enumerate(phases):
        by_session.setdefault(p.session, []).append(i)
    out = list(phases)
    for session, indexes in by_session.items():
        windows = [{"id": i, "started_at": phases[i].started_at, "ended_at": phases[i].ended_at} for i in indexes]
        seconds = model.phase_seconds(conn, session, windows, member, away_after_s)
        for i in indexes:
            out[i] = dataclasses.replace(phases[i], seconds=seconds.get(i, 0.0))
    return out


def lessons(conn: Connection, *, folder: Path | None = None, project: str | None = None,
            member: str | None = None, prices: pricing.Prices = pricing.DEFAULT,
            away_after_s: float = AWAY_AFTER_S) -> shapes.Lessons:
    """`{project, answer, patterns[], lessons[]}` (and `projects_matched` when `project` matched by
    a part): a project with no history has no rows and the first answer."""
    member = member or current_role(conn)

    def read() -> shapes.Lessons:
        every = member_sessions(conn, member, projects=bool(project))
        where, rows, matched = find_sessions(conn, member, folder=folder, project=project, exclude=None, every=every)
        found = measure(conn, member, every, {r["session_uuid"] for r in rows}, prices=prices,
                        away_after_s=away_after_s) if rows else None
        patterns = found.patterns if found else []
        # (cast: mypy cannot follow a key written only when there is one; the shape declares it)
        return cast(shapes.Lessons, {"project": where, **({"projects_matched": matched} if matched else {}),
                                     "answer": rules.answer(patterns), "patterns": patterns,
                                     "lessons": found.lessons if found else []})

    # Kept between asks as a brief is (kept_briefs.py): it reads nothing the marks do not tell of.
    return kept_briefs.kept(trend_periods.marks(conn, member),
                            ("lessons", None if folder is None else str(folder), project, prices.identity(),
                             away_after_s), read)


# -- text ------------------------------------------------------------------------------------

def unit(pattern: str) -> str:
    return "per 100 requests" if pattern in rules.CACHE_PATTERNS else "per 100 calls"


def render(data: Mapping[str, Any]) -> str:
    """The text form: the answer, then a row per pattern and per lesson; stored strings quoted."""
    lines = [f"Lessons in {quoted(data['project']) if data['project'] else 'this folder'}: {data['answer']}."]
    if data["patterns"]:
        lines += ["", "Patterns (waste before retrod first named them → since):"]
    for r in data["patterns"]:
        b, a = r["before"], r["after"]
        mark = " (all projects)" if r["baseline"] == "all projects" else ""
        extra = ""
        if r["family"] == "cache":
            extra = f"; extra per session {usd(b['extra_usd'], NONE)} → {usd(a['extra_usd'], NONE)}"
        lines.append(f"- {r['pattern']}: {r['status']}{', came back' if r['back'] else ''} — {r['what']}")
        lines.append(f"    {rate(b['rate'])}{mark} → {rate(a['rate'])} {unit(r['pattern'])}"
                     f" ({b['sessions']} sessions before, {a['sessions']} after){extra};"
                     f" first given {r['first_given']['started_at'][:10]}, to {r['sessions_given']}"
                     f" session{'' if r['sessions_given'] == 1 else 's'}")
        if r["example"] is not None:
            lines.append(f"    e.g. {quoted(r['example'])}")
    if data["lessons"]:
        lines += ["", "Lessons (the project's tool-call waste before each was first logged → since):"]
    for r in data["lessons"]:
        b, a = r["before"], r["after"]
        mark = " (all projects)" if r["baseline"] == "all projects" else ""
        logged = r["logged"]
        lines.append(f"- {quoted(r['lesson'])}: {r['status']}{', came back' if r['back'] else ''}")
        lines.append(f"    {rate(b['rate'])}{mark} → {rate(a['rate'])} per 100 calls"
                     f" ({b['sessions']} sessions before, {a['sessions']} after);"
                     f" logged {logged['at'][:10]} in {quoted(logged['task'])} / {quoted(logged['phase'])}")
    return "".join(f"{line}\n" for line in lines)
