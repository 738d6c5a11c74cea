"""Phase logging: what `retrod track` and `retrod phase` write into cc_sessions / cc_session_phases.

Each command is one transaction, so a refused command writes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from psycopg import Connection
from psycopg.rows import dict_row

from .report.model import VERDICTS, SessionNotFound, resolve_session
from .store.queries import q
from .transcript.discovery import UUID_RE


class TrackingError(ValueError):
    """The user's mistake; the message says how to fix it."""


@dataclass(frozen=True)
class PhaseNotes:
    actions: str | None = None
    subagents: str | None = None
    useful_info: str | None = None
    lessons: str | None = None
    notes: str | None = None


def project_slugs(cwd: Path) -> list[str]:
    """Claude Code's folder name for a working directory: every character but [A-Za-z0-9]
    becomes `-` (its sanitizePath); older versions replaced only `/` and `.` (FORMATS §1)."""
    text = str(cwd)
    return list(dict.fromkeys([re.sub(r"[^A-Za-z0-9]", "-", text), re.sub(r"[/.]", "-", text)]))


def current_session(roots: list[Path], cwd: Path) -> str:
    """The most recently modified main transcript of the working directory's project folder."""
    candidates = []
    for root in roots:
        for slug in project_slugs(cwd):
            folder = root / slug
            if folder.is_dir():
                candidates += [p for p in folder.glob("*.jsonl") if UUID_RE.fullmatch(p.stem)]
    if not candidates:
        raise TrackingError(f"no Claude Code transcript for {cwd} under {', '.join(map(str, roots))};"
                            " pass --session UUID")
    return max(candidates, key=lambda p: p.stat().st_mtime).stem


def resolve(conn: Connection, given: str | None, roots: list[Path], cwd: Path) -> str:
    """--session as typed (uuid or unique prefix), else the working directory's current session."""
    if given is None:
        return current_session(roots, cwd)
    given = given.strip().lower()
    if UUID_RE.fullmatch(given):
        return given
    try:
        return resolve_session(conn, given)
    except SessionNotFound as exc:
        raise TrackingError(str(exc)) from exc


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


def _clean(text: str | None, what: str) -> str | None:
    if text is not None and not text.strip():
        raise TrackingError(f"{what} is empty")
    if text is not None and "\x00" in text:
        raise TrackingError(f"{what} contains a NUL character")
    return text


def track_start(conn: Connection, session: str, description: str | None) -> dict:
    """Create (or describe again) the user's row for the session."""
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        return ensure_session(cur, session, _clean(description, "--description"))


def ensure_session(cur, session: str, description: str | None = None) -> dict:
    """The user's cc_sessions row for the session, created from what the transcripts say."""
    seen = cur.execute(q("session_first_seen"), {"session": session}).fetchone()
    return cur.execute(q("upsert_user_session"), {
        "session": session,
        "project_slug": seen["project_slug"] or "",
        "started_at": seen["started_at"] or datetime.now(timezone.utc),
        "description": description,
    }).fetchone()


def phase_start(conn: Connection, session: str, task: str, phase: str, at: datetime | None = None) -> dict:
    task, phase = _clean(task, "--task"), _clean(phase, "--phase")
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        user_session = ensure_session(cur, session)
        open_phases = cur.execute(q("open_phases"), {"session_id": user_session["id"]}).fetchall()
        if open_phases:
            p = open_phases[0]
            raise TrackingError(f"phase {p['task']!r} / {p['phase']!r} is still open; end it first with"
                                " `retrod phase end --verdict VERDICT`")
        return cur.execute(q("insert_phase"), {
            "session_id": user_session["id"], "task": task, "phase": phase, "started_at": at,
            "ended_at": None, "verdict": "pending", **_notes(PhaseNotes()),
        }).fetchone()


def phase_end(conn: Connection, session: str, verdict: str, notes: PhaseNotes, at: datetime | None = None) -> dict:
    check_verdict(verdict)
    _check_notes(notes)
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        user_session = cur.execute(q("get_user_session"), {"session": session}).fetchone()
        open_phases = user_session and cur.execute(
            q("open_phases"), {"session_id": user_session["id"]}).fetchall()
        if not open_phases:
            raise TrackingError("no open phase to end; start one with `retrod phase start --task T --phase P`")
        phase = open_phases[0]
        if at is not None and at < phase["started_at"]:
            raise TrackingError(f"the phase cannot end ({at.isoformat()}) before it starts"
                                f" ({phase['started_at'].isoformat()})")
        return cur.execute(q("end_phase"), {"id": phase["id"], "ended_at": at, "verdict": verdict,
                                            **_notes(notes)}).fetchone()


def phase_log(conn: Connection, session: str, task: str, phase: str, start: datetime, end: datetime,
              verdict: str, notes: PhaseNotes) -> dict:
    """A whole phase in one call, e.g. logged afterwards."""
    task, phase = _clean(task, "--task"), _clean(phase, "--phase")
    check_verdict(verdict)
    _check_notes(notes)
    if end <= start:
        raise TrackingError(f"the phase must end ({end.isoformat()}) after it starts ({start.isoformat()})")
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        user_session = ensure_session(cur, session)
        return cur.execute(q("insert_phase"), {
            "session_id": user_session["id"], "task": task, "phase": phase, "started_at": start,
            "ended_at": end, "verdict": verdict, **_notes(notes),
        }).fetchone()


def list_phases(conn: Connection, session: str) -> list[dict]:
    with conn.cursor(row_factory=dict_row) as cur:
        user_session = cur.execute(q("get_user_session"), {"session": session}).fetchone()
        if user_session is None:
            return []
        return cur.execute(q("list_phases"), {"session_id": user_session["id"]}).fetchall()


def _check_notes(notes: PhaseNotes) -> None:
    for what, text in _notes(notes).items():
        if text is not None and "\x00" in text:
            raise TrackingError(f"--{what.replace('_', '-')} contains a NUL character")


def _notes(notes: PhaseNotes) -> dict:
    return {"actions": notes.actions, "subagents": notes.subagents, "useful_info": notes.useful_info,
            "lessons": notes.lessons, "notes": notes.notes}
