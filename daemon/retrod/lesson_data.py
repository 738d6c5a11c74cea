"""`retrod lessons` (DESIGN §2.10): the per-session figures lessons.py measures, read from the
store — the member's dated sessions with their requests and calls by signal (per-session
rollups), the patterns their stored briefs named, the phases' lessons, and only for the sessions
a side holds: cache misses, the calls' example texts and the phases' times — and the answer as
JSON (`lessons`), which the command prints (`render`) and the MCP tool serves as it is.

The project is found as `retrod brief` finds it (`find_sessions`: a `--project` by resolve's one
rule, else the working folder's nearest project)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from psycopg import Connection
from psycopg.rows import dict_row

from . import lessons as rules
from . import tracking
from .report import model
from .report import prices as pricing
from .report.model import AWAY_AFTER_S
from .resolve import project_slugs
from .store.members import current_role
from .store.queries import q
from .stored_text import quoted


def find_sessions(conn: Connection, member: str, *, folder: Path | None, project: str | None,
                  exclude: str | None) -> tuple[str | None, list[dict], list[str] | None]:
    """(the project's name, its dated sessions newest first, `projects_matched`). `project`: as
    every surface reads it (resolve.match_project), one project only; else `folder`'s project:
    the nearest folder from it up that has sessions."""
    def query(slugs: list[str], projects: list[str] | None) -> list[dict]:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(q("brief_sessions"), {"member": member, "slugs": slugs, "projects": projects,
                                                     "exclude": exclude}, prepare=False).fetchall()
        return [r for r in rows if r["started_at"] is not None]  # (a session that never did anything)

    match = tracking.project_match(conn, project, member, one=True)
    if match is not None:
        name = match.names[0] if len(match.projects) == 1 else match.value  # (a folder name: its projects)
        return name, query(match.slugs, match.names), match.matched
    if folder is None:
        return None, [], None
    # From the folder up, but not to the home folder or the root from below them: sessions someone
    # once ran there are no project's history.
    above = [f for f in folder.parents if f not in (Path.home(), Path(folder.anchor))]
    candidates = [(f, project_slugs(f)) for f in (folder, *above)]
    rows = query(sorted({slug for _, slugs in candidates for slug in slugs}), None)
    for candidate, slugs in candidates:
        found = [r for r in rows if r["project_slug"] in slugs]
        if found:
            return str(candidate), found, None
    return str(folder), [], None


@dataclasses.dataclass
class Measured:
    """What §2.10 measures of a project: its sessions and the member's (by (start, uuid)), the
    patterns given, the rows `retrod lessons` answers, and the phases of the project's sessions."""

    project: list[rules.Session]
    member: list[rules.Session]
    recent: list[rules.Session]
    given: dict[str, set[str]]
    patterns: list[dict]
    lessons: list[dict]
    phases: list[rules.Phase]
    calls: dict[str, dict[str, dict[str, int]]]


def measure(conn: Connection, member: str, project_uuids: set[str], recent_uuids: tuple[str, ...] = (),
            prices: pricing.Prices = pricing.DEFAULT, away_after_s: float = AWAY_AFTER_S) -> Measured:
    """§2.10's rows for the project whose dated sessions are `project_uuids`; `recent_uuids`: the
    brief's recent sessions (their misses and calls are read too)."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(q("lessons_sessions"), {"member": member}).fetchall()
        given: dict[str, set[str]] = {}
        for g in cur.execute(q("lessons_given"), {"member": member}):
            given.setdefault(g["pattern"], set()).add(g["session_uuid"])
    everyone = [rules.Session(r["session_uuid"], r["started_at"], r["session_uuid"] in project_uuids,
                              int(r["requests"]), int(r["productive"]), {s: int(r[s]) for s in rules.SIGNAL_PATTERNS})
                for r in rows]
    by_uuid = {s.uuid: s for s in everyone}
    project = [s for s in everyone if s.project]
    recent = [by_uuid[u] for u in recent_uuids if u in by_uuid]
    # Only the sessions a side (or the brief) reads: a cache walk and the calls are per session.
    # (a cache walk is per session: the whole tail only for a pattern `not working` with the sides')
    cached = rules.needed(rules.CACHE_PATTERNS, project, everyone, given, recent)
    misses = model.cache_misses(conn, sorted(cached), member, prices) if cached else {}
    walked = [dataclasses.replace(s, misses=misses[s.uuid]) if s.uuid in misses else s for s in everyone]
    failing = rules.not_working(rules.CACHE_PATTERNS, [s for s in walked if s.project], walked, given)
    tails = rules.needed(failing, project, everyone, given, recent, failing) - cached
    misses.update(model.cache_misses(conn, sorted(tails), member, prices) if tails else {})
    everyone = [dataclasses.replace(s, misses=misses[s.uuid]) if s.uuid in misses else s for s in everyone]
    by_uuid = {s.uuid: s for s in everyone}
    project = [s for s in everyone if s.project]
    recent = [by_uuid[u] for u in recent_uuids if u in by_uuid]
    with conn.cursor(row_factory=dict_row) as cur:
        wanted = rules.needed(rules.SIGNAL_PATTERNS, project, everyone, given, recent)
        calls: dict[str, dict[str, dict[str, int]]] = {}
        for c in cur.execute(q("lessons_signal_calls"), {"sessions": sorted(wanted), "member": member}):
            calls.setdefault(c["session_uuid"], {}).setdefault(c["signal"], {})[c["example"]] = int(c["n"])
        phase_rows = cur.execute(q("lessons_phases"), {"sessions": [s.uuid for s in project],
                                                       "member": member}).fetchall()
    phases = _phases(phase_rows)
    sided = rules.lesson_sessions(project, everyone, phases)
    others = sided - {s.uuid for s in project}
    if others:  # another project's sessions on an all-projects side: their phases' times
        with conn.cursor(row_factory=dict_row) as cur:
            more = cur.execute(q("lessons_phases"), {"sessions": sorted(others), "member": member}).fetchall()
        phases += _phases(more)
    timed = _timed(conn, phases, member, away_after_s, sided)
    mine = [p for p in timed if p.session in project_uuids]
    return Measured(project, everyone, recent, given, rules.pattern_rows(project, everyone, given, calls),
                    rules.lesson_rows(project, everyone, timed), mine, calls)


def _phases(rows: list[dict]) -> list[rules.Phase]:
    return [rules.Phase(r["session_uuid"], r["task"], r["phase"], r["verdict"], r["started_at"], r["ended_at"],
                        r["lessons_learned"]) for r in rows]


def _timed(conn: Connection, phases: list[rules.Phase], member: str, away_after_s: float,
           sessions: set[str]) -> list[rules.Phase]:
    """The phases, with their times for those of the sessions a lesson's side holds."""
    by_session: dict[str, list[int]] = {}
    for i, p in enumerate(phases):
        if p.session in sessions:
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
            away_after_s: float = AWAY_AFTER_S) -> dict:
    """`{project, answer, patterns[], lessons[]}` (and `projects_matched` when `project` matched by
    a part): a project with no history has no rows and the first answer."""
    member = member or current_role(conn)
    where, rows, matched = find_sessions(conn, member, folder=folder, project=project, exclude=None)
    found = measure(conn, member, {r["session_uuid"] for r in rows}, prices=prices,
                    away_after_s=away_after_s) if rows else None
    patterns = found.patterns if found else []
    return {"project": where, **({"projects_matched": matched} if matched else {}),
            "answer": rules.answer(patterns), "patterns": patterns, "lessons": found.lessons if found else []}


# -- text ------------------------------------------------------------------------------------

def rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def unit(pattern: str) -> str:
    return "per 100 requests" if pattern in rules.CACHE_PATTERNS else "per 100 calls"


def render(data: dict) -> str:
    """The text form: the answer, then a row per pattern and per lesson; stored strings quoted."""
    lines = [f"Lessons in {quoted(data['project']) if data['project'] else 'this folder'}: {data['answer']}."]
    if data["patterns"]:
        lines += ["", "Patterns (waste before retrod first named them → since):"]
    for r in data["patterns"]:
        b, a = r["before"], r["after"]
        mark = " (all projects)" if r["baseline"] == "all projects" else ""
        extra = ""
        if r["family"] == "cache":
            extra = f"; extra per session {_usd(b['extra_usd'])} → {_usd(a['extra_usd'])}"
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


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:.2f}"
