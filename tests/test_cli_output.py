"""What the commands print (issue 28): `sessions`' table, its cost and what lies beyond `--limit`;
`report --format html` to a terminal, a pipe and `--output -`; a verdict for the phase that
`report --close` ends, then or later."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from helpers import HOST

A = "aaaaaaaa-1111-4000-8000-000000000001"
B = "bbbbbbbb-2222-4000-8000-000000000002"
C = "cccccccc-3333-4000-8000-000000000003"
T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def lines(session: str, start: float, requests: int, cwd: str, model: str = "claude-sonnet-4-5") -> str:
    """A user line, then `requests` answers a second apart, each its own request, as Claude Code
    writes them in `cwd`."""
    out = [{"type": "user", "sessionId": session, "timestamp": _at(start), "uuid": f"{session}-u{start}",
            "cwd": cwd, "message": {"role": "user", "content": "go"}}]
    for n in range(requests):
        out.append({"type": "assistant", "sessionId": session, "timestamp": _at(start + n + 1), "cwd": cwd,
                    "message": {"id": f"msg-{session[:4]}-{start}-{n}", "role": "assistant", "model": model,
                                "content": [{"type": "text", "text": "ok"}],
                                "usage": {"input_tokens": 3000, "output_tokens": 1000}}})
    return "".join(json.dumps(line) + "\n" for line in out)


def slug(folder: Path) -> str:
    return "".join(c if c.isalnum() else "-" for c in str(folder))


@pytest.fixture
def env(tmp_path: Path) -> dict:
    """Three sessions of one project (C newest), no daemon, no Claude Code around."""
    work = tmp_path / "work" / "app"
    work.mkdir(parents=True)
    folder = tmp_path / "projects" / slug(work)
    folder.mkdir(parents=True)
    for n, session in enumerate((A, B, C)):
        (folder / f"{session}.jsonl").write_text(lines(session, 100 * n, n + 1, str(work)))
    out = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    out.update(RETROD_PROJECTS_DIR=str(tmp_path / "projects"), RETROD_DATA_DIR=str(tmp_path / "data"),
               RETROD_REPORTS_DIR=str(tmp_path / "reports"), RETROD_HOST_ID=HOST, HOME=str(tmp_path / "home"),
               CLAUDE_CONFIG_DIR=str(tmp_path / "claude"), COLUMNS="200")
    return out


def retrod(env: dict, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stderr
    return done


def refused(done: subprocess.CompletedProcess, needle: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def on_a_terminal(env: dict, *args: str) -> str:
    """What the command wrote with its stdout on a pseudo-terminal (stderr apart; it must succeed)."""
    leader, follower = pty.openpty()
    got: list[bytes] = []

    def read() -> None:  # as it writes: a terminal's buffer holds a few KB
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the other side is closed and all was read
                return
            if not chunk:
                return
            got.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        done = subprocess.run([sys.executable, "-m", "retrod", *args], env=env, stdout=follower,
                              stderr=subprocess.PIPE, timeout=120, check=False)
    finally:
        os.close(follower)
        reader.join(30)
        os.close(leader)
    assert done.returncode == 0, done.stderr
    return b"".join(got).decode().replace("\r\n", "\n")


# -- report --format html ---------------------------------------------------------------------

class TestReportHtml:
    def test_to_a_terminal_it_saves_the_page_and_prints_its_path(self, env: dict, db_url: str) -> None:
        """80 KB of HTML is no use on a terminal: the file is saved and its path printed."""
        env = dict(env, RETROD_DATABASE_URL=db_url)
        shown = on_a_terminal(env, "report", A, "--format", "html")
        assert "<html" not in shown.lower()
        path = Path(shown.strip())
        assert path.parent == Path(env["RETROD_REPORTS_DIR"]) and path.suffix == ".html"
        assert path.read_text().lstrip().lower().startswith("<!doctype html>")

    def test_to_a_pipe_it_writes_the_page(self, env: dict, db_url: str) -> None:
        env = dict(env, RETROD_DATABASE_URL=db_url)
        done = ok(retrod(env, "report", A, "--format", "html"))
        assert done.stdout.lstrip().lower().startswith("<!doctype html>")

    def test_output_dash_writes_the_page_to_stdout_and_saves_nothing(self, env: dict, db_url: str,
                                                                     tmp_path: Path) -> None:
        env = dict(env, RETROD_DATABASE_URL=db_url)
        shown = on_a_terminal(env, "report", A, "--format", "html", "--output", "-")
        assert shown.lstrip().lower().startswith("<!doctype html>")
        assert not Path(env["RETROD_REPORTS_DIR"]).exists()
        assert not (tmp_path / "-").exists() and not Path("-").exists()


# -- a verdict for the phase --close ends ---------------------------------------------------

def phases(db_url: str) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT phase, verdict, lessons_learned, ended_at IS NOT NULL FROM cc_session_phases"
                            " ORDER BY id").fetchall()


class TestCloseWithAVerdict:
    def test_report_close_verdict_and_lessons_end_the_open_phase_with_them(self, env: dict, db_url: str) -> None:
        env = dict(env, RETROD_DATABASE_URL=db_url)
        ok(retrod(env, "phase", "start", "--session", A, "--task", "t", "--phase", "build"))
        ok(retrod(env, "report", A, "--close", "--verdict", "small_impact", "--lessons", "read less",
                  "--no-save"))
        assert phases(db_url) == [("build", "small_impact", "read less", True)]

    def test_phase_end_gives_a_closed_sessions_pending_phase_its_verdict(self, env: dict, db_url: str) -> None:
        env = dict(env, RETROD_DATABASE_URL=db_url)
        ok(retrod(env, "phase", "start", "--session", A, "--task", "t", "--phase", "build"))
        ok(retrod(env, "report", A, "--close", "--no-save"))
        assert phases(db_url) == [("build", "pending", None, True)]
        with psycopg.connect(db_url) as conn:
            ended = conn.execute("SELECT ended_at FROM cc_session_phases").fetchone()[0]
        done = ok(retrod(env, "phase", "end", "--session", A, "--verdict", "avoidable_waste", "--lessons", "x"))
        assert "given its verdict: avoidable_waste" in done.stdout
        assert phases(db_url) == [("build", "avoidable_waste", "x", True)]
        with psycopg.connect(db_url) as conn:  # it keeps the end --close gave it
            assert conn.execute("SELECT ended_at FROM cc_session_phases").fetchone()[0] == ended
        refused(retrod(env, "phase", "end", "--session", A, "--verdict", "small_impact"),
                "no ended phase still `pending`")

    def test_a_verdict_without_close_and_notes_without_a_verdict_are_refused(self, env: dict, db_url: str) -> None:
        env = dict(env, RETROD_DATABASE_URL=db_url)
        ok(retrod(env, "phase", "start", "--session", A, "--task", "t", "--phase", "build"))
        refused(retrod(env, "report", A, "--verdict", "small_impact", "--no-save"), "--verdict goes with --close")
        refused(retrod(env, "report", A, "--close", "--lessons", "x", "--no-save"),
                "--lessons go with --close --verdict")
        refused(retrod(env, "report", A, "--close", "--verdict", "great", "--no-save"), "unknown verdict 'great'")
        assert phases(db_url) == [("build", "pending", None, False)]  # refused: nothing written


# -- retrod sessions ----------------------------------------------------------------------------

class TestSessionsTable:
    def test_a_header_aligned_columns_the_cost_and_how_many_more(self, env: dict, db_url: str) -> None:
        env = dict(env, RETROD_DATABASE_URL=db_url)
        reports = {s: json.loads(ok(retrod(env, "report", s, "--format", "json", "--no-save")).stdout)
                   for s in (B, C)}
        shown = ok(retrod(env, "sessions", "--limit", "2")).stdout.splitlines()
        header, rows, more = shown[0], shown[1:3], shown[3:]
        assert header.split() == ["SESSION", "STARTED", "WALL", "COST", "TOKENS", "REQUESTS", "CALLS", "EFF",
                                  "PROJECT", "PHASES", "DESCRIPTION"]
        assert [row.split()[0] for row in rows] == [C, B]  # newest first
        for row in rows:  # numbers end under their heading's end, text starts under its start
            report = reports[row.split()[0]]
            cost = f"${report['summary']['cost']['usd']:,.2f}"
            assert row[header.index("COST") + len("COST") - len(cost):header.index("COST") + len("COST")] == cost
            tokens = f"{sum(report['summary']['tokens']['total'].values()):,}"
            end = header.index("TOKENS") + len("TOKENS")
            assert row[end - len(tokens):end] == tokens
            assert row[header.index("PROJECT"):].startswith(json.dumps(report["session"]["project_path"]))  # quoted
        assert more == ["… and 1 more (--limit 2)"]

    def test_the_json_is_an_object_with_each_sessions_cost_and_how_many_more(self, env: dict, db_url: str) -> None:
        env = dict(env, RETROD_DATABASE_URL=db_url)
        listing = json.loads(ok(retrod(env, "sessions", "--json", "--limit", "2")).stdout)
        assert set(listing) == {"sessions", "more"} and listing["more"] == 1
        for row in listing["sessions"]:
            report = json.loads(ok(retrod(env, "report", row["uuid"], "--format", "json", "--no-save")).stdout)
            assert row["cost"] == report["summary"]["cost"] and row["cost"]["usd"] > 0
        assert json.loads(ok(retrod(env, "sessions", "--json")).stdout)["more"] == 0
