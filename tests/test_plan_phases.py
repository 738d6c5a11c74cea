"""`retrod phase log --from-task N` (accounting.md §2.9): a task of the report's plan logged as phases, one
per window, in one transaction — refused whole when one would overlap a phase, usage errors exit
2 with one line — and the phases' figures add up to the task's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from helpers import HOST
from plan_transcripts import Transcript, at, session_id
from retrod.report import model

TWO_WINDOWS = session_id(801)  # task 1 "A": [10, 20) and [30, 40); task 2 "B": [20, 30)
OPEN = session_id(802)  # task 1 "A": [10, open)


@pytest.fixture
def env(db_url: str, tmp_path: Path) -> dict:
    root = tmp_path / "projects"
    (Transcript(TWO_WINDOWS).user(0)
     .todos(10, ("A", "in_progress"), ("B", "pending"))
     .todos(20, ("A", "pending"), ("B", "in_progress"))
     .todos(30, ("A", "in_progress"), ("B", "completed"))
     .say(35).todos(40, ("A", "completed"), ("B", "completed")).say(50)).write(root)
    Transcript(OPEN).user(0).todos(10, ("A", "in_progress")).say(20).say(30).write(root)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    environ.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(root), RETROD_HOST_ID=HOST,
                   RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_REPORTS_DIR=str(tmp_path / "reports"),
                   HOME=str(tmp_path / "home"))
    return environ


def retrod(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def log(env: dict, session: str, *args: str) -> subprocess.CompletedProcess:
    return retrod(env, "phase", "log", "--session", session, "--phase", "work", "--verdict", "high_impact", *args)


def user_error(done: subprocess.CompletedProcess, needle: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def phases(db_url: str) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT task, phase, verdict, started_at, ended_at FROM cc_session_phases"
                            " ORDER BY started_at").fetchall()


def test_one_phase_per_window_whose_figures_are_the_tasks(env: dict, db_url: str) -> None:
    done = log(env, TWO_WINDOWS, "--from-task", "1", "--lessons", "plan first")
    assert done.returncode == 0, done.stderr
    assert phases(db_url) == [("A", "work", "high_impact", at(10), at(20)),
                              ("A", "work", "high_impact", at(30), at(40))]
    with psycopg.connect(db_url) as conn:
        report = model.build(conn, TWO_WINDOWS)
    task = report["plan"]["tasks"][0]
    logged = report["phases"]
    assert [p["lessons_learned"] for p in logged] == ["plan first", "plan first"]
    for key in ("requests", "tool_turns", "text_turns"):
        assert sum(p[key] for p in logged) == task[key]
    for key in ("claude_s", "tool_s", "human_s", "away_s"):
        assert sum(p[key] for p in logged) == pytest.approx(task[key], abs=0.002)
    for field in task["tokens"]:
        assert sum(p["tokens"][field] for p in logged) == task["tokens"][field]
    assert sum(p["tool_use"]["calls"] for p in logged) == task["tool_use"]["calls"] == 2
    assert sum(p["cost"]["usd"] for p in logged) == pytest.approx(task["cost"]["usd"], abs=1e-6)
    for key in ("read", "create"):  # the prompt cache's figures (accounting.md §2.8) over the same windows
        assert sum(p["cache"][key] for p in logged) == task["cache"][key]
    for cause, figures in task["cache"]["misses"].items():
        assert sum(p["cache"]["misses"][cause]["count"] for p in logged) == figures["count"]
    # (by hand: [10, 20) holds the calls of 10 and [30, 40) those of 30 and the text of 35)
    assert task["requests"] == 3 and task["text_turns"] == 1
    # --task names the phases otherwise
    assert log(env, TWO_WINDOWS, "--from-task", "2", "--task", "the B step").returncode == 0
    assert phases(db_url)[1][:2] == ("the B step", "work")


def test_an_overlap_logs_nothing_and_names_the_phase(env: dict, db_url: str) -> None:
    done = retrod(env, "phase", "log", "--session", TWO_WINDOWS, "--task", "other", "--phase", "p",
                  "--start", at(35).isoformat(), "--end", at(36).isoformat(), "--verdict", "small_impact")
    assert done.returncode == 0, done.stderr
    # Task 1's first window [10, 20) is free, its second [30, 40) is not: neither is logged.
    user_error(log(env, TWO_WINDOWS, "--from-task", "1"), 'overlaps phase 1 "other" / "p"')
    assert len(phases(db_url)) == 1


def test_usage_errors(env: dict, db_url: str) -> None:
    user_error(log(env, TWO_WINDOWS, "--from-task", "1", "--start", at(10).isoformat()),
               "--start cannot be given with --from-task")
    user_error(log(env, TWO_WINDOWS, "--from-task", "3"), "the session has no task 3: its tasks are 1 to 2")
    assert log(env, TWO_WINDOWS, "--from-task", "0").returncode == 2
    user_error(log(env, TWO_WINDOWS, "--from-task", "1", "--end", at(60).isoformat()),
               "--end is only for a task still current")
    user_error(log(env, OPEN, "--from-task", "1"), "task 1 ('A') is still current")
    user_error(log(env, OPEN, "--from-task", "1", "--end", at(10).isoformat()), "must be later than the start")
    user_error(log(env, TWO_WINDOWS), "phase log needs --task, --start and --end (or --from-task N)")
    assert phases(db_url) == []


def test_a_task_still_current_is_logged_up_to_end(env: dict, db_url: str) -> None:
    assert log(env, OPEN, "--from-task", "1", "--end", at(25).isoformat()).returncode == 0
    assert phases(db_url) == [("A", "work", "high_impact", at(10), at(25))]


def test_the_skill_tells_claude_to_log_a_completed_task() -> None:
    from retrod.claude_code import skills

    track = skills.shipped("retrod")["retrod-track"]
    assert 'retrod phase log --session "${CLAUDE_SESSION_ID}" --from-task <N>' in track
    assert "`mcp__retrod__log_phase` with `from_task`" in track
    assert "When you mark a task completed" in track
