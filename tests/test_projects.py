"""One `--project` rule on every surface (issue 28, accounting.md §4): the command line, the MCP tools
and the web UI's filters take the same value to the same sessions; a part that matches several
projects says which; a value that matches nothing is refused; short names in the UI are distinct."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from helpers import HOST, ingest
from retrod import resolve
from retrod.mcp.tools import OneConnection, Tools
from retrod.settings import Settings
from retrod.ui import data
from test_cli_output import lines, slug

ALICE_1 = "a1a1a1a1-1111-4000-8000-000000000001"
ALICE_2 = "a2a2a2a2-1111-4000-8000-000000000002"
BOB = "b0b0b0b0-2222-4000-8000-000000000003"
TOOL = "70070070-3333-4000-8000-000000000004"
OLD = "01d01d01-4444-4000-8000-000000000005"  # its lines name no working folder


@pytest.fixture
def world(tmp_path: Path, db_url: str) -> dict:
    """Three working folders, two of them `…/work/app` (alice's and bob's), and a session whose
    lines name no folder (known by its Claude Code folder name alone); read into the database."""
    home = tmp_path / "h"
    folders = {"alice": home / "alice" / "work" / "app", "bob": home / "bob" / "work" / "app",
               "tool": home / "bob" / "tool"}
    for folder in folders.values():
        (folder / "src").mkdir(parents=True)
    projects = tmp_path / "projects"
    sessions = [(ALICE_1, "alice", 0), (ALICE_2, "alice", 100), (BOB, "bob", 200), (TOOL, "tool", 300)]
    for session, who, start in sessions:
        (projects / slug(folders[who])).mkdir(parents=True, exist_ok=True)
        (projects / slug(folders[who]) / f"{session}.jsonl").write_text(lines(session, start, 2, str(folders[who])))
    old = projects / "-srv-legacy-app"
    old.mkdir()
    (old / f"{OLD}.jsonl").write_text("".join(
        line.replace(f', "cwd": "{folders["tool"]}"', "") for line in lines(OLD, 400, 1, str(folders["tool"]))
        .splitlines(keepends=True)))
    ingest(db_url, [projects])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    env.update(RETROD_PROJECTS_DIR=str(projects), RETROD_DATA_DIR=str(tmp_path / "data"),
               RETROD_REPORTS_DIR=str(tmp_path / "reports"), RETROD_HOST_ID=HOST, HOME=str(tmp_path / "home"),
               CLAUDE_CONFIG_DIR=str(tmp_path / "claude"), RETROD_DATABASE_URL=db_url)
    return {"env": env, "url": db_url, "folders": folders, "projects": projects}


def retrod(env: dict, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def cli_sessions(world: dict, value: str, cwd: Path | None = None) -> tuple[dict, str]:
    done = retrod(world["env"], "sessions", "--json", "--project", value, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def tools(world: dict, monkeypatch: pytest.MonkeyPatch) -> Tools:
    for name, value in world["env"].items():
        if name.startswith("RETROD_"):
            monkeypatch.setenv(name, value)
    return Tools(Settings(), OneConnection(world["url"]))


def ui_sessions(world: dict, value: str) -> dict:
    with psycopg.connect(world["url"]) as conn:
        return data.sessions(conn, data.SessionQuery(project=value))


def ui_trends(world: dict, value: str) -> dict:
    with psycopg.connect(world["url"]) as conn:
        return data.trends(conn, data.TrendsQuery(project=value, by="month", tz="UTC"))


def uuids(rows: list[dict]) -> set[str]:
    return {row["uuid"] for row in rows}


class TestOneRule:
    @pytest.mark.parametrize(("value", "want"), [
        ("{alice}", {ALICE_1, ALICE_2}),  # 1. a working folder
        ("{alice}/src", {ALICE_1, ALICE_2}),  # 1. an existing folder inside one
        ("{slug_bob}", {BOB}),  # 2. a Claude Code folder name
        ("-srv-legacy-app", {OLD}),  # 2. ... of a session that names no working folder
        ("app", {ALICE_1, ALICE_2, BOB, OLD}),  # 3. a part: of the folders and of the folder names
        ("bob/", {BOB, TOOL}),  # 3. a part of two working folders
    ])
    def test_the_same_value_gives_the_same_sessions_everywhere(self, world: dict, monkeypatch: pytest.MonkeyPatch,
                                                                value: str, want: set[str]) -> None:
        """`sessions`, `trends`, the MCP tools, /api/sessions and /api/trends read a --project alike."""
        value = value.format(alice=world["folders"]["alice"], slug_bob=slug(world["folders"]["bob"]))
        listed, _said = cli_sessions(world, value)
        assert uuids(listed["sessions"]) == want
        mcp, _text = tools(world, monkeypatch).sessions(value, 20)
        assert uuids(mcp["sessions"]) == want
        assert uuids(ui_sessions(world, value)["sessions"]) == want
        trends = retrod(world["env"], "trends", "--json", "--by", "month", "--tz", "UTC", "--project", value)
        assert trends.returncode == 0, trends.stderr
        assert json.loads(trends.stdout)["total"]["sessions"] == len(want)
        assert ui_trends(world, value) == json.loads(trends.stdout)  # /api/trends is `trends --json`

    def test_a_relative_path_is_read_from_the_working_folder(self, world: dict) -> None:
        listed, _said = cli_sessions(world, "src", cwd=world["folders"]["bob"])
        assert uuids(listed["sessions"]) == {BOB}

    def test_a_part_is_case_sensitive(self, world: dict) -> None:
        done = retrod(world["env"], "sessions", "--project", "APP")
        assert done.returncode == 2 and "--project 'APP' matches no project" in done.stderr


class TestSaysWhichProjects:
    def test_a_part_of_several_projects_is_named_on_stderr_and_in_the_json(self, world: dict,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
        alice, bob = str(world["folders"]["alice"]), str(world["folders"]["bob"])
        listed, said = cli_sessions(world, "work/app")
        assert said == f"retrod: --project work/app matched 2 projects: {json.dumps(alice)}, {json.dumps(bob)}\n"
        assert listed["projects_matched"] == [alice, bob]
        trends = retrod(world["env"], "trends", "--json", "--project", "work/app")
        assert trends.stderr == said and json.loads(trends.stdout)["projects_matched"] == [alice, bob]
        assert ui_sessions(world, "work/app")["projects_matched"] == [alice, bob]
        mcp, text = tools(world, monkeypatch).sessions("work/app", 20)
        assert mcp["projects_matched"] == [alice, bob] and text.startswith("--project work/app matched 2 projects")

    def test_one_project_found_exactly_says_nothing(self, world: dict) -> None:
        listed, said = cli_sessions(world, str(world["folders"]["alice"]))
        assert said == "" and "projects_matched" not in listed

    def test_brief_serves_one_project_and_refuses_a_part_of_several(self, world: dict) -> None:
        done = retrod(world["env"], "brief", "--project", "work/app")
        assert done.returncode == 2 and "Traceback" not in done.stderr
        alice, bob = (json.dumps(str(world["folders"][who])) for who in ("alice", "bob"))
        assert f"matches 2 projects ({alice}, {bob})" in done.stderr
        one = retrod(world["env"], "brief", "--project", "tool", "--format", "json")
        assert one.returncode == 0, one.stderr
        brief = json.loads(one.stdout)
        assert brief["project"] == str(world["folders"]["tool"]) and [s["session"] for s in brief["sessions"]] == [TOOL]


class TestNothingMatched:
    @pytest.mark.parametrize("command", [["sessions"], ["trends"], ["brief"]])
    def test_is_a_usage_error_naming_the_value(self, world: dict, command: list[str]) -> None:
        done = retrod(world["env"], *command, "--project", "nowhere")
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stderr.startswith("retrod: error: --project 'nowhere' matches no project")
        assert len(done.stderr.strip().splitlines()) == 1

    def test_the_web_filter_and_the_tools_refuse_it_too(self, world: dict, monkeypatch: pytest.MonkeyPatch) -> None:
        with pytest.raises(data.QueryError, match="'nowhere' matches no project"):
            ui_sessions(world, "nowhere")
        with pytest.raises(data.QueryError, match="'nowhere' matches no project"):
            ui_trends(world, "nowhere")
        with pytest.raises(resolve.ProjectError, match="'nowhere' matches no project"):
            tools(world, monkeypatch).sessions("nowhere", 20)


class TestShortNames:
    def test_short_names_that_would_collide_are_made_distinct(self) -> None:
        shorts = data.short_names(["/h/alice/work/app", "/h/bob/work/app", "/h/bob/tool", "/app", "-srv-legacy"])
        assert shorts == {"/h/alice/work/app": "alice/work/app", "/h/bob/work/app": "bob/work/app",
                          "/h/bob/tool": "bob/tool", "/app": "/app", "-srv-legacy": "-srv-legacy"}

    def test_the_lists_rows_carry_their_projects_distinct_short_name(self, world: dict) -> None:
        rows = {row["uuid"]: row for row in ui_sessions(world, "app")["sessions"]}
        assert rows[ALICE_1]["project"] == str(world["folders"]["alice"])
        assert (rows[ALICE_1]["project_short"], rows[BOB]["project_short"]) == ("alice/work/app", "bob/work/app")
        assert rows[OLD]["project"] == rows[OLD]["project_short"] == "-srv-legacy-app"
