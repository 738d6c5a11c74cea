"""Phase logging: what `retrod track` and `retrod phase` write into cc_sessions / cc_session_phases.

Each command is one transaction, so a refused command writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from psycopg import Connection
from psycopg.rows import dict_row

from .basics.errors import UserError
from .basics.stored_text import quoted
from .basics.verdicts import PENDING, VERDICTS
from .resolve import Project, ProjectMatch, match_project, projects_of
from .store.members import member_of
from .store.queries import one, q


class TrackingError(UserError, ValueError):
    """The user's mistake; the message says how to fix it."""


@dataclass(frozen=True)
class PhaseNotes:
    actions: str | None = None
    subagents: str | None = None
    useful_info: str | None = None
    lessons: str | None = None
    notes: str | None = None


def local(ts: datetime) -> str:
    """A time as the user reads it: local, with its offset (the database hands out UTC)."""
    return ts.astimezone().isoformat(sep=" ", timespec="seconds")


def parse_time(text: str) -> datetime:
    """ISO 8601; without an offset it is local time."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise TrackingError(f"{text!r} is not a time; use ISO 8601, e.g. 2026-11-29T14:05:00+01:00") from None
    return value if value.tzinfo else value.astimezone()


def check_verdict(verdict: str) -> str:
    if verdict not in VERDICTS:
        raise TrackingError(f"unknown verdict {verdict!r}; use one of: {', '.join(VERDICTS)}")
    return verdict


_Text = TypeVar("_Text", bound=str | None)  # a text given is a text returned, None is None


def _clean(text: _Text, what: str) -> _Text:
    if text is not None and not text.strip():
        raise TrackingError(f"{what} is empty")
    if text is not None and "\x00" in text:
        raise TrackingError(f"{what} contains a NUL character")
    return text


def track_start(conn: Connection, session: str, description: str | None, project_slug: str | None = None) -> dict:
    """Create (or describe again) the user's row for the session. `project_slug`: its project
    folder's name when no transcript of it says yet (a session just starting: `brief --hook`)."""
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        return ensure_session(cur, session, _clean(description, "--description"), project_slug)


def may_write(conn: Connection) -> bool:
    """False for a team's reader role (docs/team.md)."""
    return bool(one(conn.execute(q("team_may_write_sessions")))[0])


def ensure_session(cur, session: str, description: str | None = None, project_slug: str | None = None) -> dict:
    """The user's cc_sessions row for the session, created from what the transcripts say (else
    `project_slug`, and now)."""
    args = {"session": session, "description": description}
    for _attempt in range(2):  # (a command inserting it at the same moment: then it is there)
        row = cur.execute(q("tracking_describe_user_session"), args).fetchone()
        if row is not None:
            return row
        seen = one(cur.execute(q("tracking_session_first_seen"), {"session": session}))
        row = cur.execute(q("tracking_insert_user_session"), {
            **args, "project_slug": seen["project_slug"] or project_slug or "",
            "started_at": seen["started_at"] or datetime.now(UTC),
        }).fetchone()
        if row is not None:
            return row
    # Created by no one and found by no one: a unique session id kept across a team (a foreign
    # key of the user's own rests on it: store/team.sql) and taken by another member.
    raise TrackingError(f"session {session} cannot be tracked: another member tracks a session with this id,"
                        " and cc_sessions keeps session ids unique across the team")


def phase_start(conn: Connection, session: str, task: str, phase: str) -> dict:
    """Open a phase now. Its row, with `warnings` (phase outside the session's span)."""
    task, phase = _clean(task, "--task"), _clean(phase, "--phase")
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        user_session = ensure_session(cur, session)  # locks the row: one phase command at a time
        open_phases = cur.execute(q("tracking_open_phases"), {"session_id": user_session["id"]}).fetchall()
        if open_phases:
            p = open_phases[0]
            raise TrackingError(f"phase {p['task']!r} / {p['phase']!r} is still open; end it first with"
                                " `retrod phase end --verdict VERDICT`")
        span = one(cur.execute(q("tracking_session_span"), {"session": session}))
        now = span["now"]
        _refuse_overlap(cur, user_session["id"], now, None)
        row = one(cur.execute(q("tracking_insert_phase"), {
            "session_id": user_session["id"], "task": task, "phase": phase, "started_at": now,
            "ended_at": None, "verdict": PENDING, **_notes(PhaseNotes()),
        }))
        return {**row, "warnings": _outside_span(span, user_session, now, None)}


def phase_end(conn: Connection, session: str, verdict: str, notes: PhaseNotes, at: datetime | None = None) -> dict:
    """End the open phase with its verdict; with none open, give it to the session's latest phase
    that ended still `pending` (`report --close` ends phases without a verdict): its row, with
    `ended` True when it ended now."""
    check_verdict(verdict)  # (refused before any work)
    _check_notes(notes)
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        user_session = cur.execute(q("tracking_get_user_session"), {"session": session, "member": None}).fetchone()
        if user_session is None:
            raise TrackingError("no open phase to end; start one with `retrod phase start --task T --phase P`")
        return give_verdict(cur, user_session["id"], verdict, notes, at)


def give_verdict(cur, session_id: int, verdict: str, notes: PhaseNotes, at: datetime | None = None) -> dict:
    """`phase end`'s work inside the caller's transaction (`report --close --verdict` runs it
    before it closes the session). `session_id`: the user's cc_sessions row."""
    check_verdict(verdict)
    _check_notes(notes)
    open_phases = cur.execute(q("tracking_open_phases"), {"session_id": session_id}).fetchall()
    if open_phases:
        phase = open_phases[0]
        if at is not None and at < phase["started_at"]:
            raise TrackingError(f"the phase cannot end ({local(at)}) before it starts ({local(phase['started_at'])})")
        return {**one(cur.execute(q("tracking_end_phase"), {"id": phase["id"], "ended_at": at, "verdict": verdict,
                                                   **_notes(notes)})), "ended": True}
    pending = cur.execute(q("tracking_last_pending_phase"), {"session_id": session_id}).fetchone()
    if pending is None:
        raise TrackingError("no open phase to end, and no ended phase still `pending`; start one with"
                            " `retrod phase start --task T --phase P`")
    # It keeps the end it was given (when the session was closed): only its verdict and notes change
    return {**one(cur.execute(q("tracking_end_phase"), {"id": pending["id"], "ended_at": pending["ended_at"],
                                               "verdict": verdict, **_notes(notes)})),
            "ended": False, "task": pending["task"], "phase": pending["phase"]}


def phase_log(conn: Connection, session: str, task: str, phase: str, start: datetime, end: datetime,
              verdict: str, notes: PhaseNotes) -> dict:
    """A whole phase in one call, e.g. logged afterwards. Its row, with `warnings`."""
    task, phase = _clean(task, "--task"), _clean(phase, "--phase")
    check_verdict(verdict)
    _check_notes(notes)
    if end <= start:
        raise TrackingError(f"the phase must end ({local(end)}) after it starts ({local(start)})")
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        user_session = ensure_session(cur, session)  # locks the row: one phase command at a time
        _refuse_overlap(cur, user_session["id"], start, end)
        row = one(cur.execute(q("tracking_insert_phase"), {
            "session_id": user_session["id"], "task": task, "phase": phase, "started_at": start,
            "ended_at": end, "verdict": verdict, **_notes(notes),
        }))
        span = one(cur.execute(q("tracking_session_span"), {"session": session}))
        return {**row, "warnings": _outside_span(span, user_session, start, end)}


def phase_log_windows(conn: Connection, session: str, task: str, phase: str,
                      windows: list[tuple[datetime, datetime]], verdict: str, notes: PhaseNotes) -> dict:
    """Several phases of one task, phase and verdict, one per window (`phase log --from-task`:
    a task's windows, accounting.md §2.9), in one transaction: if any would overlap a phase, none is
    logged. Their rows (`phases`), with `warnings`."""
    task, phase = _clean(task, "--task"), _clean(phase, "--phase")
    check_verdict(verdict)
    _check_notes(notes)
    for start, end in windows:
        if end <= start:
            raise TrackingError(f"the phase must end ({local(end)}) after it starts ({local(start)})")
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        user_session = ensure_session(cur, session)  # locks the row: one phase command at a time
        for start, end in windows:  # every check first: a refusal writes nothing
            _refuse_overlap(cur, user_session["id"], start, end)
        rows = [one(cur.execute(q("tracking_insert_phase"), {
            "session_id": user_session["id"], "task": task, "phase": phase, "started_at": start,
            "ended_at": end, "verdict": verdict, **_notes(notes)})) for start, end in windows]
        span = one(cur.execute(q("tracking_session_span"), {"session": session}))
        warnings = [w for start, end in windows for w in _outside_span(span, user_session, start, end)]
        return {"phases": rows, "warnings": list(dict.fromkeys(warnings))}


def _refuse_overlap(cur, session_id: int, start: datetime, end: datetime | None) -> None:
    """accounting.md §2.5: phases logged through retrod never overlap (an open phase runs on)."""
    clash = cur.execute(q("tracking_overlapping_phase"), {"session_id": session_id, "started_at": start,
                                                 "ended_at": end}).fetchone()
    if clash:
        until = local(clash["ended_at"]) if clash["ended_at"] else "still open"
        raise TrackingError(f"overlaps phase {clash['number']} {quoted(clash['task'])} / {quoted(clash['phase'])}"
                            f" ({local(clash['started_at'])} → {until}); phases may not overlap")


def _outside_span(span: dict, user_session: dict, start: datetime, end: datetime | None) -> list[str]:
    """Accepted, but worth a word: a phase before the session's first line, after its end, or
    in the future (`span`: the session_span row)."""
    warnings = []
    if span["first_ts"] is not None and start < span["first_ts"]:
        warnings.append(f"the phase starts before the session's first line ({local(span['first_ts'])})")
    if user_session["ended_at"] is not None and (end or start) > user_session["ended_at"]:
        warnings.append(f"the phase ends after the session was closed ({local(user_session['ended_at'])})")
    if end is not None and end > span["now"]:
        warnings.append("the phase ends in the future")
    return warnings


def project_match(conn: Connection, project: str | None, member: str | None = None,
                  one: bool = False) -> ProjectMatch | None:
    """What a `--project` names among the projects stored (resolve.match_project; None: not
    given). `member`: among that member's sessions (None: every one the role may read); `one`:
    for a command that serves one project."""
    if not project:
        return None
    return match_project(project, known_projects(conn, member), one=one)


def known_projects(conn: Connection, member: str | None = None) -> list[Project]:
    """Every project stored, by name. `member`: that member's (None: every one the role may read)."""
    return projects_of(conn.execute(q("tracking_known_projects"), {"member": member}).fetchall())


def project_args(match: ProjectMatch | None) -> dict:
    """A match as the statements that filter by project take it (`projects`, `slugs`)."""
    return {"projects": match.names if match else None, "slugs": match.slugs if match else None}


def recent_sessions(conn: Connection, project: str | None, since: datetime | None, limit: int,
                    sort: str = "start") -> dict:
    """`retrod sessions`: `{sessions, more, projects_matched?}` (`more`: how many match beyond
    `limit`), by `sort`: "start" newest first, "tokens" most first, "efficiency" least efficient
    tool use first (sessions without calls last); from the per-session rollups, start and end as
    every surface reads them (no scan of events, requests or calls, so it stays instant with
    thousands of sessions).

    `project`: as every surface reads it (resolve.match_project)."""
    match = project_match(conn, project)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(q("tracking_recent_sessions"), {
            **project_args(match), "since": since, "limit": limit, "sort": sort}).fetchall()
    matching = rows[0]["matching"] if rows else 0
    out: dict = {"sessions": [{"uuid": row["uuid"], "member": row["member"],
                               "project": row["project_path"] or row["project_slug"],  # (its one name)
                               **{k: v for k, v in row.items() if k not in ("uuid", "member", "matching")}}
                              for row in rows],
                 "more": max(0, matching - len(rows))}
    if match and match.matched:
        out["projects_matched"] = match.matched
    return out


def list_phases(conn: Connection, session: str, member: str | None = None) -> list[dict]:
    """The session's phases in start order, each with its `number` (1, 2, ...): the number the
    listings show and the errors name ("overlaps phase 2"), which the database's `id` is not.
    `member`: a team's member whose session it is (member_of)."""
    member = member_of(conn, session, member)
    with conn.cursor(row_factory=dict_row) as cur:
        user_session = cur.execute(q("tracking_get_user_session"), {"session": session, "member": member}).fetchone()
        if user_session is None:
            return []
        rows = cur.execute(q("tracking_list_phases"), {"session_id": user_session["id"]}).fetchall()
    return [{"number": number, **row} for number, row in enumerate(rows, 1)]  # the order overlapping_phase counts in


def _check_notes(notes: PhaseNotes) -> None:
    for what, text in _notes(notes).items():
        if text is not None and "\x00" in text:
            raise TrackingError(f"--{what.replace('_', '-')} contains a NUL character")


def _notes(notes: PhaseNotes) -> dict:
    return {"actions": notes.actions, "subagents": notes.subagents, "useful_info": notes.useful_info,
            "lessons": notes.lessons, "notes": notes.notes}
