"""The brief and `retrod lessons` kept between asks (issue 32, history/kept_briefs.py, migration
0039): the daemon answers `retrod brief` from what it kept while nothing the brief reads changed,
and after any change — a phase logged, a verdict changed or a lesson written by another tool, a
session's new lines committed, a brief given to a stored session, a session's description — its
next answer is the one read from scratch."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from conftest import FIXTURES
from helpers import ingest
from retrod import tracking
from retrod.cli import served
from retrod.cli.commands import execute
from retrod.history import brief, kept_briefs, lesson_data
from retrod.ingest import catchup

PROJECT = "-Users-dain-workspace-claude-code-log-sample"  # 11 sessions
ELSEWHERE = "-Users-dain-workspace-coderabbit-review-helper"  # the member's other project


def _newest(folder: Path) -> Path:
    """The transcript whose last line is the latest (the project's newest session, by its lines)."""
    def last(path: Path) -> str:
        stamps = [json.loads(line).get("timestamp") or "" for line in path.read_text().splitlines() if line.strip()]
        return max(stamps, default="")
    return max(folder.glob("*.jsonl"), key=last)


@pytest.fixture
def asked(db_url: str, tmp_path: Path, monkeypatch):
    """The project ingested with its newest transcript cut in half, phases logged on its sessions,
    and `ask()`: the daemon's answer to `retrod brief --project … --format json` (the daemon runs:
    the command reads no transcript itself)."""
    projects = tmp_path / "projects"
    for name in (PROJECT, ELSEWHERE):
        shutil.copytree(FIXTURES / name, projects / name)
    newest = _newest(projects / PROJECT)
    whole = newest.read_text()
    lines = whole.splitlines(keepends=True)
    newest.write_text("".join(lines[: len(lines) // 2]))
    ingest(db_url, [projects])
    with psycopg.connect(db_url) as conn:
        sessions = [r[0] for r in conn.execute(
            "SELECT DISTINCT f.session_uuid FROM retrod.files f JOIN retrod.session_times t USING (session_uuid)"
            " WHERE f.slug = %s AND t.first_ts IS NOT NULL ORDER BY 1", (PROJECT,))]
        for n, session in enumerate(sessions):
            first = conn.execute("SELECT first_ts FROM retrod.session_times WHERE session_uuid = %s",
                                 (session,)).fetchone()[0]
            tracking.phase_log(conn, session, "build", f"phase {n}", first, first + timedelta(minutes=20),
                               ("avoidable_waste", "high_impact")[n % 2],
                               tracking.PhaseNotes(lessons=f"lesson {n}", notes=f"note {n}"))
    env = {"RETROD_DATABASE_URL": db_url, "RETROD_PROJECTS_DIR": str(projects),
           "RETROD_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path / "home")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(catchup, "catch_up", lambda settings, pool: None)
    reads = []
    monkeypatch.setattr(lesson_data, "member_sessions",
                        lambda *a, real=lesson_data.member_sessions, **k: reads.append(1) or real(*a, **k))
    pool = ConnectionPool(db_url, min_size=1, max_size=2, open=True)

    def ask() -> dict:
        argv = ["brief", "--project", PROJECT, "--format", "json"]
        request = {"argc": str(len(argv)), **{f"argv.{i}": a for i, a in enumerate(argv)}, "cwd": str(tmp_path),
                   "pid": "1", **{f"env.{k}": v for k, v in env.items()}}
        code, err, out = served.answer(pool, request, execute, daemon_env=env)
        assert code == "0", err
        return json.loads(out)

    try:
        yield {"ask": ask, "url": db_url, "projects": projects, "newest": newest, "whole": whole,
               "sessions": sessions, "reads": reads}
    finally:
        pool.close()


def _kept_is_fresh(asked: dict) -> dict:
    """The daemon's answer now, which must be the brief read from scratch."""
    kept = asked["ask"]()
    kept_briefs._kept.clear()
    assert asked["ask"]() == kept
    return kept


def test_an_unchanged_history_is_answered_from_what_was_kept(asked: dict) -> None:
    """A second ask reads none of the member's sessions; both answers are the same."""
    first = asked["ask"]()
    assert first["sessions"] and first["lessons"] and asked["reads"] == [1]
    assert asked["ask"]() == first and asked["reads"] == [1]


@pytest.mark.parametrize("change", [
    # a phase logged (retrod phase, the MCP tool)
    "log",
    # a verdict changed, and a lesson written, by another tool
    "UPDATE public.cc_session_phases SET verdict = 'exploratory_waste' WHERE verdict = 'high_impact'",
    ("UPDATE public.cc_session_phases SET lessons_learned = 'a lesson written later'"
     " WHERE id = (SELECT min(id) FROM public.cc_session_phases)"),
    # a brief given to a stored session (accounting.md §2.10 "Given": a pattern's sides start there)
    ("INSERT INTO retrod.briefs (session_uuid, project, text, patterns) SELECT session_uuid, %(project)s, 'b',"
     " '[{\"pattern\": \"re_read\", \"mode\": \"new\"}, {\"pattern\": \"duplicate\", \"mode\": \"new\"}]'"
     " FROM retrod.session_times WHERE session_uuid = ANY(%(sessions)s) ORDER BY first_ts LIMIT 3"),
    # a session's description (read at each ask)
    ("UPDATE public.cc_sessions SET description = 'described later' WHERE session_uuid = ANY(%(sessions)s)"),
    # the newest session's other half committed
    "commit",
])
def test_a_change_between_two_asks_is_in_the_next_answer(asked: dict, change: str) -> None:
    before = _kept_is_fresh(asked)
    assert asked["ask"]() == before
    if change == "log":
        with psycopg.connect(asked["url"]) as conn:
            tracking.phase_log(conn, before["sessions"][0]["session"], "review", "late", datetime.now(UTC),
                               datetime.now(UTC) + timedelta(minutes=5), "avoidable_waste",
                               tracking.PhaseNotes(lessons="a lesson logged between two asks"))
    elif change == "commit":
        asked["newest"].write_text(asked["whole"])
        ingest(asked["url"], [asked["projects"]])
    else:
        with psycopg.connect(asked["url"]) as conn:
            assert conn.execute(change, {"project": PROJECT, "sessions": asked["sessions"]}).rowcount >= 1
    assert _kept_is_fresh(asked) != before


def test_the_session_asking_changes_the_kept_brief_only_when_it_is_the_projects(asked: dict) -> None:
    """The hook's session is new: a brief without it is the brief without any left out, read
    once for every new session; a session of the project left out is a brief of its own."""
    with psycopg.connect(asked["url"]) as conn:
        plain = brief.brief(conn, project=PROJECT)
        reads = len(asked["reads"])
        for new in ("0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f", "1b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f"):
            assert brief.brief(conn, project=PROJECT, exclude=new) == plain
        assert len(asked["reads"]) == reads
        newest = plain["sessions"][0]["session"]
        without = brief.brief(conn, project=PROJECT, exclude=newest)
        assert newest not in [s["session"] for s in without["sessions"]]
        assert len(asked["reads"]) == reads + 1


def test_a_brief_given_marks_only_a_stored_sessions_day(asked: dict) -> None:
    """Migration 0039: a brief stored for a session already stored counts as a change of it (at
    commit, on its day); one for a session not stored yet marks nothing."""
    days = "SELECT coalesce(sum(changes), 0) FROM retrod.trend_days"
    with psycopg.connect(asked["url"], autocommit=True) as conn:
        before = conn.execute(days).fetchone()[0]
        brief.given(conn, "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f", "startup", {"pattern_rows": [], "project": PROJECT},
                    "text")
        assert conn.execute(days).fetchone()[0] == before
        brief.given(conn, asked["sessions"][0], "resume", {"pattern_rows": [], "project": PROJECT}, "text")
        assert conn.execute(days).fetchone()[0] == before + 1


def test_without_the_phase_triggers_nothing_is_kept(asked: dict) -> None:
    """A role that may not add triggers to the user's tables migrated: a phase written there
    would not be seen, so every ask reads the brief again."""
    with psycopg.connect(asked["url"], autocommit=True) as conn:
        conn.execute("ALTER TABLE public.cc_session_phases DISABLE TRIGGER cc_session_phases_trend_updated")
    first = asked["ask"]()
    with psycopg.connect(asked["url"], autocommit=True) as conn:
        conn.execute("UPDATE public.cc_session_phases SET lessons_learned = 'unseen by the marks'")
    assert asked["ask"]() != first and len(asked["reads"]) == 2


def test_lessons_are_kept_as_the_brief_is(asked: dict) -> None:
    """`retrod lessons` (its command, MCP tool and page) is kept alike: read once while nothing
    changes, read again after a lesson is written."""
    with psycopg.connect(asked["url"]) as conn:
        first = lesson_data.lessons(conn, project=PROJECT)
        reads = len(asked["reads"])
        assert lesson_data.lessons(conn, project=PROJECT) == first and len(asked["reads"]) == reads
        conn.execute("UPDATE public.cc_session_phases SET lessons_learned = 'read the error before retrying'")
        conn.commit()
        again = lesson_data.lessons(conn, project=PROJECT)
        kept_briefs._kept.clear()
        assert again == lesson_data.lessons(conn, project=PROJECT) and len(asked["reads"]) == reads + 2
        assert again["lessons"] != first["lessons"]
