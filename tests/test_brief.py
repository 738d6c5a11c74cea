"""`retrod brief` and the SessionStart hook (issue 22): a project's history — real fixture sessions
gathered into one project, with phases logged on them — briefed from a folder inside it: its
lessons and notes once each, newest first; its waste phases with the report's own cost; the waste
signals that recur, each with the path the reference oracle finds hit most; each session's cost
and efficiency, and their direction. Then the hook as Claude Code runs it (payloads shaped like
its documented SessionStart JSON, tests/payloads/sessionstart.json), with a daemon and without, and
the settings entry that installs it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

import reference_tools
from conftest import FIXTURES
from helpers import HOST, ingest, reports
from retrod import tracking
from retrod.basics.verdicts import shown
from retrod.claude_code import hooks
from retrod.claude_code.hooks import MATCHER
from retrod.fastpath.client import SOCKET_NAME
from retrod.history import brief
from retrod.report.model import SIGNALS
from retrod.resolve import ProjectError, project_slugs

PAYLOAD = json.loads((Path(__file__).parent / "payloads" / "sessionstart.json").read_text())
# Real sessions of four fixture projects, gathered as one project's history.
GATHERED = ("-home-USER-projects-spotter-worktrees-spotter-gqc", "-src-deep-manifest",
            "-Users-dain-workspace-coderabbit-review-helper", "-Users-schrockn--erk-repos-erk-worktrees-erk-slot-37")
ELSEWHERE = "-experiments-worktrees"  # another project's session: never in this project's brief
NEW = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f"  # the session that starts (the payload's)


def _logged(conn: psycopg.Connection, session: str, n: int, first: datetime) -> list[dict]:
    """Phases on a session's first hour: what each wrote, by hand."""
    plan = [("build", "tests first", "high_impact", "run the tests before each commit", None, None),
            ("build", "parser", "avoidable_waste", "read the parser once, then edit it", "the CI is slow",
             "rewrote the parser twice"),
            ("explore", "hooks", "exploratory_waste", f"lesson of session {n}", None, "read every hook doc")]
    logged = []
    for k, (task, phase, verdict, lessons, notes, actions) in enumerate(plan[: 1 + n % 3]):
        start, end = first + timedelta(minutes=20 * k), first + timedelta(minutes=20 * (k + 1))
        tracking.phase_log(conn, session, task, phase, start, end, verdict,
                           tracking.PhaseNotes(actions=actions, lessons=lessons, notes=notes))
        logged.append({"session": session, "task": task, "phase": phase, "verdict": verdict, "start": start,
                       "lessons": lessons, "notes": notes, "actions": actions})
    return logged


@pytest.fixture(scope="module")
def history(pg_cluster, tmp_path_factory) -> dict:
    from conftest import fresh_database

    tmp = tmp_path_factory.mktemp("brief")
    work = tmp / "work" / "app"
    (work / "src" / "deep").mkdir(parents=True)
    (tmp / "empty").mkdir()
    projects = tmp / "projects"
    folder = projects / project_slugs(work)[0]
    for name in GATHERED:
        shutil.copytree(FIXTURES / name, folder, dirs_exist_ok=True)
    shutil.copytree(FIXTURES / ELSEWHERE, projects / ELSEWHERE)
    with fresh_database(pg_cluster) as url:
        ingest(url, [projects])
        by_session = reports(url)
        ours = sorted((s for s, r in by_session.items()
                       if r["session"]["project_slug"] == folder.name and r["session"]["started_at"]),
                      key=lambda s: by_session[s]["session"]["started_at"], reverse=True)
        assert len(ours) >= 6  # (with the 2.0.x subagent files' sessions of the gathered folders)
        logged = []
        with psycopg.connect(url) as conn:
            for n, session in enumerate([*ours, *(s for s in by_session if s not in ours)]):
                first = datetime.fromisoformat(by_session[session]["session"]["started_at"])
                logged += _logged(conn, session, n, first)
        yield {"url": url, "work": work, "projects": projects, "folder": folder, "ours": ours, "logged": logged,
               "reports": reports(url), "tmp": tmp}


def _brief(history: dict, **kwargs) -> dict:
    with psycopg.connect(history["url"]) as conn:
        return brief.brief(conn, **{"folder": history["work"] / "src" / "deep", **kwargs})


def test_the_brief_of_a_project_with_history(history: dict) -> None:
    ours, by_session = history["ours"], history["reports"]
    data = _brief(history, sessions=len(ours))
    assert data["project"] == str(history["work"])  # found from a folder inside it
    assert [s["session"] for s in data["sessions"]] == ours  # newest first
    for s in data["sessions"]:  # each session's figures are its report's
        summary = by_session[s["session"]]["summary"]
        assert s["cost"]["usd"] == pytest.approx(summary["cost"]["usd"], abs=1e-6)
        assert s["tool_use"] == summary["tool_use"]
        assert s["claude_s"] == summary["claude_s"] and s["output_tokens"] == summary["tokens"]["total"]["output"]

    # lessons and notes: each text once (its newest phase), newest first, none of another project's
    phases = sorted((p for p in history["logged"] if p["session"] in ours), key=lambda p: p["start"], reverse=True)
    want, seen = [], set()
    for p in phases:
        for kind, text in (("lesson", p["lessons"]), ("note", p["notes"])):
            if text and text not in seen:
                seen.add(text)
                want.append((kind, text, p["task"], p["phase"], p["verdict"], p["session"]))
    assert [(x["kind"], x["text"], x["task"], x["phase"], x["verdict"], x["session"]) for x in data["lessons"]] == want
    assert len(want) < sum(bool(p["lessons"]) + bool(p["notes"]) for p in phases)  # some were said twice

    # waste phases, newest first, at the cost the report gives the same phase
    wasted = [p for p in phases if p["verdict"] in ("avoidable_waste", "exploratory_waste")]
    assert data["waste_phases_total"] == len(wasted) > brief.WASTE_PHASES
    wasted = wasted[:brief.WASTE_PHASES]
    assert [(w["session"], w["phase"]) for w in data["waste_phases"]] == [(p["session"], p["phase"]) for p in wasted]
    for w in data["waste_phases"]:
        report_phase = next(p for p in by_session[w["session"]]["phases"] if p["phase"] == w["phase"])
        assert w["cost"] == report_phase["cost"] and w["claude_s"] == report_phase["claude_s"]
        assert w["actions_summary"] == next(p["actions"] for p in wasted if (p["session"], p["phase"]) ==
                                            (w["session"], w["phase"]))
    assert data["waste_phases"] and any(w["cost"]["usd"] for w in data["waste_phases"])

    # recurring waste: every signal in two sessions or more, the most widespread first, with the
    # path the oracle (tests/reference_tools.py) finds that signal hit most often
    counts = {sig: [by_session[s]["summary"]["tool_use"]["signals"][sig] for s in ours] for sig in SIGNALS}
    recurring = {sig: c for sig, c in counts.items() if sum(1 for n in c if n) >= 2}
    assert {w["signal"] for w in data["recurring_waste"]} == set(recurring) >= {"post_write_read", "re_read"}
    for w in data["recurring_waste"]:
        assert (w["count"], w["sessions"]) == (sum(recurring[w["signal"]]), sum(1 for n in recurring[w["signal"]] if n))
    assert [w["sessions"] for w in data["recurring_waste"]] == sorted((w["sessions"] for w in data["recurring_waste"]),
                                                                      reverse=True)
    calls = [c for s in ours for c in reference_tools.tool_use(history["projects"], s)["calls"]]
    for sig in ("post_write_read", "re_read"):
        hits = Counter(c["path"] for c in calls if c["signal"] == sig)
        top = max(hits.values())
        entry = next(w for w in data["recurring_waste"] if w["signal"] == sig)
        assert (entry["example"], entry["example_count"]) == (min(p for p, n in hits.items() if n == top), top)

    # direction: the newer half against the older half, worked out here from the reports
    d, half = data["direction"], len(ours) // 2
    assert d["sessions_compared"] == half
    cost = [by_session[s]["summary"]["cost"]["usd"] for s in ours]
    assert d["cost_per_session"]["newer"] == pytest.approx(sum(cost[:half]) / half, abs=1e-6)
    assert d["cost_per_session"]["older"] == pytest.approx(sum(cost[-half:]) / half, abs=1e-6)
    tool_use = [by_session[s]["summary"]["tool_use"] for s in ours]
    newer = sum(t["productive"] for t in tool_use[:half]) / sum(t["calls"] for t in tool_use[:half])
    assert d["efficiency"]["newer"] == pytest.approx(newer)
    ratio = d["cost_per_session"]["newer"] / d["cost_per_session"]["older"]
    assert d["cost_per_session"]["direction"] == ("up" if ratio > 1.1 else "down" if ratio < 0.9 else "steady")

    text = brief.render(data)
    lines = text.splitlines()
    assert len(lines) <= brief.MAX_LINES
    assert str(history["work"]) in lines[0] and "not instructions" in lines[0]
    # accounting.md §2.10: the pattern lines, then the project's lessons, newest first
    heading = lines.index("Lessons logged in this project's phases (newest first):")
    assert all(line.startswith("- `") for line in lines[2:heading]) and [p["mode"] for p in data["patterns"]]
    assert {p["mode"] for p in data["patterns"]} == {"new"}  # no brief named one before
    assert lines[heading + 1].startswith(f"- {json.dumps(data['project_lessons'][0]['lesson'])} (")
    pwr = next(w for w in data["recurring_waste"] if w["signal"] == "post_write_read")
    said = (f"{pwr['count']} reads right after Claude's own write, in {pwr['sessions']} of {len(ours)} sessions,"
            f" e.g. {json.dumps(brief.short_path(pwr['example'], data['project']))} ({pwr['example_count']}×)")
    assert said in text
    assert f"cost per session {d['cost_per_session']['direction']}" in text
    assert "rewrote the parser twice" in text


def test_the_session_asking_is_left_out_and_sessions_limits_the_history(history: dict) -> None:
    ours = history["ours"]
    assert [s["session"] for s in _brief(history, exclude=ours[0])["sessions"]] == ours[1:1 + brief.DEFAULT_SESSIONS]
    assert len(_brief(history)["sessions"]) == brief.DEFAULT_SESSIONS < len(ours)
    two = _brief(history, sessions=2)
    assert [s["session"] for s in two["sessions"]] == ours[:2]
    assert {x["session"] for x in two["lessons"]} <= set(ours[:2])
    # a project named as every surface reads `--project`: its Claude Code folder name is the projects
    # of that folder (the fixtures' sessions ran in several working folders)
    named = _brief(history, folder=None, project=history["folder"].name, sessions=len(ours))
    assert [s["session"] for s in named["sessions"]] == ours and named["project"] == history["folder"].name
    with pytest.raises(ProjectError, match=r"matches \d+ projects .*this command serves one"):
        _brief(history, folder=None, project=history["folder"].name[-12:])  # a part of several


def test_no_history_no_brief(history: dict) -> None:
    data = _brief(history, folder=history["tmp"] / "empty")
    assert data["sessions"] == [] and brief.render(data) == ""


def test_sessions_once_run_in_the_home_folder_are_no_projects_history(db_url: str, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / "code" / "new").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    session = "55555555-0000-4000-8000-000000000005"
    folder = tmp_path / "projects" / project_slugs(home)[0]
    folder.mkdir(parents=True)
    lines = [{"type": "user", "sessionId": session, "timestamp": "2026-03-02T10:00:00Z", "uuid": "u1",
              "message": {"role": "user", "content": "hi"}},
             {"type": "assistant", "sessionId": session, "timestamp": "2026-03-02T10:01:00Z", "uuid": "a1",
              "message": {"id": "msg-home-1", "role": "assistant", "model": "claude-sonnet-4-20250514",
                          "content": [{"type": "text", "text": "ok"}],
                          "usage": {"input_tokens": 1, "output_tokens": 2}}}]
    (folder / f"{session}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    ingest(db_url, [tmp_path / "projects"])
    with psycopg.connect(db_url) as conn:
        assert brief.brief(conn, folder=home / "code" / "new")["sessions"] == []
        assert [s["session"] for s in brief.brief(conn, folder=home)["sessions"]] == [session]


def test_a_long_history_still_fits_in_40_lines(history: dict, tmp_path: Path) -> None:
    with psycopg.connect(history["url"]) as conn:
        first = datetime.fromisoformat(history["reports"][history["ours"][0]]["session"]["started_at"])
        for k in range(30):  # a phase a minute, each with its own lesson, notes and a waste verdict
            tracking.phase_log(conn, history["ours"][0], "long", f"step {k}", first - timedelta(hours=2, minutes=-k),
                               first - timedelta(hours=2, minutes=-k - 1), "avoidable_waste",
                               tracking.PhaseNotes(lessons=f"distinct lesson {k} " + "x" * 300, notes=f"note {k}"))
    data = _brief(history, sessions=50)
    lines = brief.render(data).splitlines()
    assert len(lines) <= 40 and len(brief.render(data)) <= 10_000
    assert any("more: retrod brief --format json" in line for line in lines)
    assert len(data["lessons"]) > 60  # the JSON keeps them all


# -- the command and the hook, as Claude Code runs them -----------------------------------------

def _env(history: dict, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_"))}
    env.update(RETROD_DATABASE_URL=history["url"], RETROD_PROJECTS_DIR=str(history["projects"]),
               RETROD_DATA_DIR=str(history["tmp"] / "data"), RETROD_HOST_ID=HOST, HOME=str(history["tmp"] / "home"),
               CLAUDE_CONFIG_DIR=str(history["tmp"] / "claude"))
    return {**env, **extra}


def _run(env: dict, *args: str, cwd: Path, stdin: bytes | None = None, python: list[str] | None = None
         ) -> subprocess.CompletedProcess:
    return subprocess.run([*(python or [sys.executable, "-m", "retrod"]), *args], env=env, cwd=cwd, input=stdin,
                          capture_output=True, timeout=120)


def _payload(history: dict, source: str, session: str = NEW, cwd: Path | None = None) -> bytes:
    folder = cwd or history["work"]
    return json.dumps({**PAYLOAD, "session_id": session, "source": source, "cwd": str(folder),
                       "transcript_path": str(history["folder"] / f"{session}.jsonl")}).encode()


def _context(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert set(output) == {"hookSpecificOutput"} and output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return output["hookSpecificOutput"]["additionalContext"]


def _tracked(history: dict, session: str) -> tuple | None:
    with psycopg.connect(history["url"]) as conn:
        return conn.execute("SELECT project_slug, ended_at FROM cc_sessions WHERE session_uuid = %s",
                            (session,)).fetchone()


@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact", "fork"])
def test_the_hook_answers_every_source_with_the_brief_and_tracks_the_session(history: dict, source: str) -> None:
    session = str(uuid.uuid4()) if source != "resume" else history["ours"][1]
    assert not (history["folder"] / f"{session}.jsonl").exists() or source == "resume"  # not written yet
    with psycopg.connect(history["url"]) as conn:  # (before: the brief it stores names patterns to a dated session)
        want = brief.render(brief.brief(conn, folder=history["work"], exclude=session))
    done = _run(_env(history), "brief", "--hook", cwd=history["work"], stdin=_payload(history, source, session))
    assert _context(done) == want and want
    assert done.stderr == b""
    assert (session[:8] in want) is False  # not its own history
    assert _tracked(history, session)[0] == history["folder"].name  # its project, before any transcript says so


def test_the_command_prints_the_brief_and_nothing_without_history(history: dict) -> None:
    env = _env(history)
    done = _run(env, "brief", cwd=history["work"] / "src")
    assert done.returncode == 0 and done.stdout.decode() == brief.render(_brief(history))
    data = json.loads(_run(env, "brief", "--format", "json", "--sessions", "2", cwd=history["work"]).stdout)
    assert [s["session"] for s in data["sessions"]] == history["ours"][:2]
    inside = _run({**env, "CLAUDE_CODE_SESSION_ID": history["ours"][0]}, "brief", cwd=history["work"])
    assert history["ours"][0][:8] not in inside.stdout.decode()  # the session asking is left out
    empty = _run(env, "brief", cwd=history["tmp"] / "empty")
    assert empty.returncode == 0 and empty.stdout == b"" and b"no past sessions" in empty.stderr
    hook = _run(env, "brief", "--hook", cwd=history["tmp"], stdin=_payload(history, "startup",
                                                                           cwd=history["tmp"] / "empty"))
    assert hook.returncode == 0 and hook.stdout == b""


@pytest.mark.parametrize("stdin", [b"", b"{", b"[1, 2]", b"\xff\xfe\x00garbage", b'{"session_id": 7, "cwd": 3}',
                                   b'{"session_id": "../../etc", "cwd": "relative/path"}'])
def test_the_hook_never_fails_on_what_it_is_given(history: dict, stdin: bytes) -> None:
    done = _run(_env(history), "brief", "--hook", cwd=history["work"], stdin=stdin)
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    if done.stdout:  # nothing it can trust but its folder: the brief of that folder's project
        assert _context(done) == brief.render(_brief(history, folder=history["work"]))


@pytest.mark.parametrize("trouble", ["no database", "bad settings", "bad prices"])
def test_the_hook_never_fails_without_its_database_or_settings(history: dict, trouble: str) -> None:
    extra = {"no database": {"RETROD_DATABASE_URL": f"postgresql://nobody@/x?host={history['tmp']}/nowhere"},
             "bad settings": {"RETROD_AWAY_AFTER_S": "soon"},
             "bad prices": {"RETROD_PRICES": str(history["tmp"] / "missing.json")}}[trouble]
    done = _run(_env(history, **extra), "brief", "--hook", cwd=history["work"], stdin=_payload(history, "startup"))
    assert done.returncode == 0 and done.stdout == b""
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("retrod brief: ") and lines[0].endswith("no brief this time")


def _daemon(env: dict, data: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(str(data / SOCKET_NAME))
                return process
            except OSError:
                time.sleep(0.1)
    process.terminate()
    raise AssertionError("the daemon did not open its socket")


def test_with_the_daemon_the_hook_is_answered_without_loading_the_database_driver(history: dict) -> None:
    env = _env(history)
    process = _daemon(env, history["tmp"] / "data")
    try:
        session = str(uuid.uuid4())
        # psycopg made unimportable: only the daemon can have answered
        no_driver = [sys.executable, "-c", ("import sys; sys.modules['psycopg'] = None;"
                                            " from retrod.cli.entry import main; sys.exit(main())")]
        done = _run(env, "brief", "--hook", cwd=history["work"], stdin=_payload(history, "startup", session),
                    python=no_driver)
        with psycopg.connect(history["url"]) as conn:
            want = brief.render(brief.brief(conn, folder=history["work"], exclude=session))
        assert _context(done) == want
        assert _tracked(history, session) is not None
        garbage = _run(env, "brief", "--hook", cwd=history["work"], stdin=b"\x00\xff", python=no_driver)
        assert garbage.returncode == 0 and _context(garbage) == brief.render(_brief(history, folder=history["work"]))
    finally:
        process.terminate()
        process.wait(timeout=30)


# -- installing the hook -----------------------------------------------------------------------

OTHER = {"model": "opus", "env": {"FOO": "1"}, "statusLine": {"type": "command", "command": "~/bin/line"},
         "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}],
                   "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}]}}


def test_install_adds_one_entry_keeps_the_rest_and_uninstall_restores_the_file(history: dict) -> None:
    env = _env(history)
    settings = Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    before = json.dumps(OTHER, indent=4) + "\n"
    settings.write_text(before)
    done = _run(env, "hooks", "install", cwd=history["tmp"])
    assert done.returncode == 0, done.stderr
    after = json.loads(settings.read_text())
    ours = after["hooks"]["SessionStart"][-1]
    assert {k: v for k, v in after.items() if k != "hooks"} == {k: v for k, v in OTHER.items() if k != "hooks"}
    assert after["hooks"]["PreToolUse"] == OTHER["hooks"]["PreToolUse"]
    assert after["hooks"]["SessionStart"][:-1] == OTHER["hooks"]["SessionStart"]
    assert ours["matcher"] == "startup|resume|clear|compact" and len(ours["hooks"]) == 1
    command = ours["hooks"][0]["command"]
    assert command.endswith(f"{Path(sys.executable).parent / 'retrod'} brief --hook")
    assert f"RETROD_DATABASE_URL={history['url']}" in command or "RETROD_DATABASE_URL='" in command
    backups = list(settings.parent.glob("settings.json.retrod-backup-*"))
    assert len(backups) == 1 and backups[0].read_text() == before

    # the installed entry, run as Claude Code runs a hook command: the new session's first context
    run = subprocess.run(["sh", "-c", command], cwd=history["work"], input=_payload(history, "startup"),
                         capture_output=True, timeout=120, env={k: v for k, v in os.environ.items()
                                                                  if not k.startswith(("RETROD_", "CLAUDE_"))})
    context = _context(run)
    assert "run the tests before each commit" in context and "reads right after Claude's own write" in context

    again = _run(env, "hooks", "install", cwd=history["tmp"])
    assert b"already installed" in again.stdout and len(list(settings.parent.glob("settings.json.retrod-*"))) == 1
    # a retrod from elsewhere (another virtualenv) is replaced, not doubled
    stale = json.loads(settings.read_text())
    stale["hooks"]["SessionStart"][-1]["hooks"][0]["command"] = "RETROD_DATA_DIR=/x /old/venv/bin/retrod brief --hook"
    settings.write_text(json.dumps(stale))
    _run(env, "hooks", "install", cwd=history["tmp"])
    assert [g for g in json.loads(settings.read_text())["hooks"]["SessionStart"]
            if any(hooks.is_ours(h) for h in g["hooks"])] == [ours]

    removed = _run(env, "hooks", "uninstall", cwd=history["tmp"])
    assert removed.returncode == 0 and b"removed" in removed.stdout
    assert json.loads(settings.read_text()) == OTHER
    assert b"nothing to remove" in _run(env, "hooks", "uninstall", cwd=history["tmp"]).stdout


def test_a_first_install_creates_the_settings_and_uninstall_leaves_them_empty(tmp_path: Path) -> None:
    path = tmp_path / "claude" / "settings.json"
    lines = hooks.install(path)
    assert lines[0].startswith(f"installed in {path}")
    assert len(json.loads(path.read_text())["hooks"]["SessionStart"]) == 1
    hooks.uninstall(path)
    assert json.loads(path.read_text()) == {}
    path.write_text('{"hooks": {"SessionStart": {"not": "a list"}}}')
    with pytest.raises(hooks.claude_settings.SettingsError, match="not a list"):
        hooks.install(path)
    assert json.loads(path.read_text()) == {"hooks": {"SessionStart": {"not": "a list"}}}


@pytest.mark.parametrize("url", ["postgresql://me:s3cret@db.example/retrod", "host=db.example password=s3cret"])
def test_a_database_password_reaches_neither_the_settings_nor_a_backup(tmp_path: Path, monkeypatch,
                                                                       url: str) -> None:
    """As the status line's install: settings.json is no secrets file, and each change copies it
    into a backup. Claude Code's environment (or ~/.pgpass) carries the password instead."""
    for name in [k for k in os.environ if k.startswith("RETROD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RETROD_DATABASE_URL", url)
    monkeypatch.setenv("RETROD_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "claude" / "settings.json"
    first = hooks.install(path)
    monkeypatch.setenv("RETROD_DATA_DIR", str(tmp_path / "other"))  # a second install: a backup of the first's file
    second = hooks.install(path)
    assert second[1].startswith("backup: ")
    written = [p for p in path.parent.iterdir() if p.is_file()]
    assert len(written) >= 2 and not [p.name for p in written if b"s3cret" in p.read_bytes()]
    assert first[-1] == second[-1] == ("RETROD_DATABASE_URL is not written into the settings (it holds a password):"
                                       " Claude Code must have it in its environment, or keep the password in"
                                       " ~/.pgpass")
    command = json.loads(path.read_text())["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert command.startswith(f"RETROD_DATA_DIR={tmp_path / 'other'} /") and "RETROD_DATABASE_URL" not in command
    assert "s3cret" not in "\n".join(first + second)


def test_the_password_an_older_retrod_wrote_is_not_copied_into_the_backup(tmp_path: Path, monkeypatch) -> None:
    """An older retrod wrote the database URL, password and all, into its entry: installing again
    takes it out of the settings, and the backup of the file before holds it masked."""
    for name in [k for k in os.environ if k.startswith("RETROD_")]:
        monkeypatch.delenv(name)
    old = ("RETROD_DATABASE_URL=postgresql://me:s3cret@db.example/retrod RETROD_DATA_DIR=/d"
           " /old/venv/bin/retrod brief --hook")
    theirs = {"type": "command", "command": "psql postgresql://me:theirs@db.example/x -c 'select 1'"}
    before = {"model": "opus", "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [theirs]},
                                                          {"matcher": MATCHER, "hooks": [{"type": "command",
                                                                                          "command": old}]}]}}
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(before))
    lines = hooks.install(path)
    backup = Path(lines[1].removeprefix("backup: "))
    assert b"s3cret" not in path.read_bytes() and b"s3cret" not in backup.read_bytes()
    kept = json.loads(backup.read_text())
    masked = ("RETROD_DATABASE_URL=postgresql://me:***@db.example/retrod RETROD_DATA_DIR=/d"
              " /old/venv/bin/retrod brief --hook")
    assert kept == {**before, "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [theirs]},
                                                         {"matcher": MATCHER, "hooks": [{"type": "command",
                                                                                         "command": masked}]}]}}


@pytest.mark.parametrize(("command", "ours"), [
    ("/a/b/retrod brief --hook", True), ("RETROD_DATA_DIR=/x '/a b/retrod' brief --hook", True),
    ("/usr/bin/python3 -m retrod brief --hook", True), ("/a/retrod brief", False), ("other brief --hook", False),
    ("echo 'unclosed", False)])
def test_only_retrods_own_entry_is_retrods(command: str, ours: bool) -> None:
    assert hooks.is_ours({"type": "command", "command": command}) is ours


@pytest.mark.parametrize(("argv", "parsed"), [
    (["--hook"], {"sessions": ""}), (["--hook", "--sessions", "3"], {"sessions": "3"}),
    (["--sessions", "07", "--hook"], {"sessions": "7"}), (["--hook", "--sessions=3"], None), ([], None),
    (["--hook", "--hook"], None), (["--hook", "--sessions", "0"], None), (["--hook", "--format", "json"], None)])
def test_the_hooks_fast_path_takes_only_what_the_hook_runs(argv: list[str], parsed: dict | None) -> None:
    """Anything else is left to argparse (the full command line), which says what is wrong."""
    from retrod.fastpath import client

    assert client.parse_brief(argv) == parsed


def test_an_example_path_is_shown_short() -> None:
    assert brief.short_path("/home/me/app/src/x.py", "/home/me/app") == "src/x.py"
    assert brief.short_path("/elsewhere/a/very/long/path/to/some/deeply/nested/folder/file.py", "/home/me/app") == (
        "…/nested/folder/file.py")
    assert brief.short_path("pytest -x tests", "/home/me/app") == "pytest -x tests"


def test_the_costliest_tasks_of_the_recent_sessions_with_their_verdicts(db_url: str, tmp_path: Path) -> None:
    """Issue 30: the brief names the recent sessions' costliest tasks of Claude's plan, with the
    report's figures and the verdict of a phase logged for one (`phase log --from-task` names it
    after the task)."""
    projects = tmp_path / "projects"
    shutil.copytree(FIXTURES, projects)
    ingest(db_url, [projects])
    by_session = reports(db_url)
    folders: dict[str, list[dict]] = {}
    for r in by_session.values():
        if r["session"]["started_at"]:
            folders.setdefault(r["session"]["project_slug"], []).append(r)

    def recent(slug: str) -> list[dict]:
        return sorted(folders[slug], key=lambda r: r["session"]["started_at"], reverse=True)[:brief.DEFAULT_SESSIONS]

    slug = max(folders, key=lambda s: sum(len(r["plan"]["tasks"]) for r in recent(s)))
    tasks = [(t, r["session"]["uuid"]) for r in recent(slug) for t in r["plan"]["tasks"]]
    assert len(tasks) > brief.COSTLIEST_TASKS  # more than are shown: the costliest are chosen
    want = sorted(tasks, key=lambda ts: -ts[0]["cost"]["usd"])[:brief.COSTLIEST_TASKS]
    top, top_session = want[0]
    with psycopg.connect(db_url, autocommit=True) as conn:
        start = datetime.fromisoformat(top["windows"][0]["start"])
        tracking.phase_log(conn, top_session, top["name"], "p", start, start + timedelta(minutes=1), "high_impact",
                           tracking.PhaseNotes())
        data = brief.brief(conn, project=slug)
    got = data["costliest_tasks"]
    assert [(t["session"], t["name"], t["cost"], t["claude_s"], t["calls"]) for t in got] == [
        (s, t["name"], t["cost"], t["claude_s"], t["tool_use"]["calls"]) for t, s in want]
    assert got[0]["verdicts"] == ["high_impact"] and all(t["verdicts"] == [] for t in got[1:])
    named = f"- {json.dumps(top['name'], ensure_ascii=False)} ("  # quoted: stored text (accounting.md §2.10)
    line = next(x for x in brief.render(data).splitlines() if x.startswith(named))
    assert line.endswith(f"{top['tool_use']['calls']} tool calls, {shown('high_impact')}")
