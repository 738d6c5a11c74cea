"""`retrod mcp`, started as a subprocess and driven over stdio by the MCP SDK's own client: the
tool list and its schemas, every tool, every error, a whole session whose figures equal
`retrod report --format json`, a database that goes away under the server, and the install."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import throwaway_cluster
from helpers import HOST, ingest
from retrod.basics.verdicts import VERDICTS
from retrod.report import model

SESSION = "258c7280-ae70-4798-800f-63464d01a85d"
GHOST = "99999999-9999-4999-8999-999999999999"
SPOTTER_FOLDER = "/home/USER/projects/spotter-worktrees/spotter-gqc"  # SESSION's working folder
TOOLS = {"start_tracking", "start_phase", "end_phase", "log_phase", "list_phases", "session_stats",
         "retrospective", "sessions", "brief", "lessons", "trends"}


@pytest.fixture
def env(tmp_path: Path, projects: Path, db_url: str) -> dict[str, str]:
    """What Claude Code would start the server with: no daemon, nothing of the test's own RETROD_*."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    return {**base, "RETROD_DATABASE_URL": db_url, "RETROD_PROJECTS_DIR": str(projects),
            "RETROD_DATA_DIR": str(tmp_path / "data"), "RETROD_REPORTS_DIR": str(tmp_path / "reports"),
            "RETROD_HOST_ID": HOST, "HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}


@asynccontextmanager
async def server(env: dict[str, str], errlog: Path, cwd: Path | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "retrod", "mcp"], env=env,
                                   cwd=str(cwd or errlog.parent))
    with errlog.open("a") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(client: ClientSession, tool: str, /, **arguments: Any) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.content and result.content[0].text.strip()  # the short text beside the structured content
    return result.structured_content or {}


async def error(client: ClientSession, tool: str, /, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error and result.structured_content is None, result
    text = result.content[0].text
    assert "\n" not in text and "Traceback" not in text, text
    return text


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def claude_code_above(env: dict[str, str], session: str) -> None:
    """The session file Claude Code keeps for itself: here this test process is the Claude Code
    that starts the server (its parent), so the ancestor-process rule finds `session`."""
    folder = Path(env["CLAUDE_CONFIG_DIR"]) / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{os.getpid()}.json").write_text(json.dumps(
        {"pid": os.getpid(), "sessionId": session, "cwd": "/", "startedAt": int(time.time() * 1000)}))


def append_requests(projects: Path, session: str, start: datetime, outputs: list[int]) -> None:
    """New lines in the session's transcript, as Claude Code writes them while the phase runs."""
    path = next(projects.glob(f"*/{session}.jsonl"))
    with path.open("a") as f:
        for n, output in enumerate(outputs):
            ts = (start + timedelta(milliseconds=n + 1)).isoformat().replace("+00:00", "Z")
            f.write(json.dumps({"type": "assistant", "sessionId": session, "timestamp": ts, "uuid": f"mcp-{n}",
                                "message": {"id": f"msg-mcp-test-{n}", "role": "assistant", "model": "claude-opus-4-6",
                                            "content": [{"type": "text", "text": "ok"}],
                                            "usage": {"input_tokens": 7, "output_tokens": output}}}) + "\n")


def test_the_tools_and_their_schemas(env: dict[str, str], tmp_path: Path) -> None:
    async def run() -> None:
        async with server(env, tmp_path / "server.log") as session:
            assert session.server_info is not None
            assert (session.server_info.name, session.server_info.version) == ("retrod", version("retrod"))
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(listed) == TOOLS
            for tool in listed.values():
                assert tool.description and tool.output_schema and tool.output_schema.get("properties"), tool.name
                for name, prop in tool.input_schema["properties"].items():
                    assert prop.get("description"), (tool.name, name)
            required = {name: set(tool.input_schema.get("required", [])) for name, tool in listed.items()}
            assert required["start_tracking"] == {"description"}
            assert required["log_phase"] == {"phase", "verdict"}  # task and times, or from_task (issue 30)
            assert required["end_phase"] == {"verdict"}
            assert required["session_stats"] == required["list_phases"] == required["sessions"] == set()
            assert listed["end_phase"].input_schema["properties"]["verdict"]["enum"] == list(VERDICTS)
            for name in TOOLS - {"sessions", "trends", "lessons"}:  # (lessons: a project's, no session's)
                assert "session" in listed[name].input_schema["properties"], name
            stats = listed["session_stats"].output_schema["properties"]
            assert {"tokens", "claude_s", "tool_s", "human_s", "away_s", "requests", "tool_use", "open_phase",
                    "found_by", "cache", "plan"} <= set(stats)
            assert listed["list_phases"].annotations.read_only_hint
            assert not listed["end_phase"].annotations.read_only_hint

    anyio.run(run)


def test_a_whole_session_over_mcp_has_the_figures_of_retrod_report(env: dict[str, str], projects: Path,
                                                                    tmp_path: Path) -> None:
    """Track, three phases, the open one's figures so far, the retrospective: the session found by
    the Claude Code process above the server, as when Claude Code starts it."""
    claude_code_above(env, SESSION)

    async def run() -> tuple[dict, dict, dict, dict]:
        async with server(env, tmp_path / "server.log", cwd=tmp_path) as session:
            tracked = await call(session, "start_tracking", description="Hooks research")
            assert tracked["session"] == SESSION
            assert tracked["found_by"].startswith(f"Claude Code process {os.getpid()} ")
            await call(session, "log_phase", task="hooks", phase="read the docs", started_at="2026-02-11T20:36:00Z",
                       ended_at="2026-02-11T21:00:00Z", verdict="high_impact", lessons_learned="read first")
            await call(session, "log_phase", task="hooks", phase="survey", started_at="2026-02-11T21:00:00+00:00",
                       ended_at="2026-02-11T21:24:30+00:00", verdict="exploratory_useful")
            before = await call(session, "session_stats")
            started = await call(session, "start_phase", task="build", phase="implement")
            append_requests(projects, SESSION, datetime.fromisoformat(started["started_at"]), [300, 45])
            during = await call(session, "session_stats")
            await call(session, "end_phase", verdict="avoidable_waste", actions_summary="rewrote it",
                       lessons_learned="test first")
            after = await call(session, "session_stats")
            phases = await call(session, "list_phases")
            retro = await call(session, "retrospective", close=True)
            return before, during, after, {"phases": phases, "retro": retro}

    before, during, after, rest = anyio.run(run)
    # The open phase's figures so far are the lines written since it started, read fresh.
    assert before["open_phase"] is None
    opened = during["open_phase"]
    assert (opened["task"], opened["phase"]) == ("build", "implement")
    assert opened["requests"] == 2 and opened["tokens"]["output"] == 345 and opened["tokens"]["input"] == 14
    assert during["tokens"]["total"]["output"] == before["tokens"]["total"]["output"] + 345
    assert after["open_phase"] is None and after["phases"] == 3

    report = json.loads(cli(env, "report", SESSION, "--format", "json", "--no-save").stdout)
    summary = report["summary"]
    for key in ("wall_s", "claude_s", "tool_s", "human_s", "away_s", "requests", "tool_calls", "tool_use", "cost",
                "tokens", "phases"):
        assert after[key] == summary[key], key
    # accounting.md §2.8's figures, as the report's (the live state's seconds move on between the two)
    assert {k: v for k, v in after["cache"].items() if k != "live"} == {
        k: v for k, v in summary["cache"].items() if k != "live"}
    assert after["cache"]["misses"]["invalidated"]["count"] > 0  # the spotter session has some
    assert after["cache"]["live"]["prefix_tokens"] == summary["cache"]["live"]["prefix_tokens"]
    assert after["started_at"] == report["session"]["started_at"]
    listed = rest["phases"]["phases"]
    assert [(p["number"], p["task"], p["phase"], p["verdict"]) for p in listed] == [
        (1, "hooks", "read the docs", "high_impact"), (2, "hooks", "survey", "exploratory_useful"),
        (3, "build", "implement", "avoidable_waste")]
    assert [(p["started_at"], p["ended_at"]) for p in listed] == [
        (p["started_at"], p["ended_at"]) for p in report["phases"]]
    assert listed[0]["lessons_learned"] == "read first" and listed[2]["actions_summary"] == "rewrote it"
    # The retrospective: the command's Markdown, saved where the command saves it.
    retro = rest["retro"]
    saved = Path(retro["saved_to"])
    assert saved.parent == tmp_path / "reports" and saved.name == "2026-02-11-hooks-research-258c7280.md"
    assert saved.read_text() == retro["markdown"]
    assert retro["markdown"] == cli(env, "report", SESSION, "--no-save").stdout
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_every_error_is_one_sentence_and_the_server_goes_on(env: dict[str, str], tmp_path: Path) -> None:
    async def run() -> None:
        async with server(env, tmp_path / "server.log", cwd=tmp_path) as session:
            text = await error(session, "list_phases")  # no Claude Code above, no transcript here
            assert "cannot tell which session this is" in text and "pass `session`" in text
            assert "is ambiguous" in await error(session, "session_stats", session="25")
            assert f"no transcript of session {GHOST}" in await error(session, "start_tracking",
                                                                         description="x", session=GHOST)
            assert "no session matches 'zz'" in await error(session, "retrospective", session="zz")
            await call(session, "start_tracking", description="x", session=SESSION)
            text = await error(session, "end_phase", verdict="great", session=SESSION)
            assert f"unknown verdict 'great'; use one of: {', '.join(VERDICTS)}" in text
            assert ("no open phase to end, and no ended phase still `pending`; start one with start_phase"
                    in await error(session, "end_phase", verdict="high_impact", session=SESSION))
            await call(session, "log_phase", task="t", phase="one", started_at="2026-02-11T20:40:00Z",
                       ended_at="2026-02-11T21:00:00Z", verdict="small_impact", session=SESSION)
            text = await error(session, "log_phase", task="t", phase="two", started_at="2026-02-11T20:50:00Z",
                               ended_at="2026-02-11T21:10:00Z", verdict="small_impact", session=SESSION)
            assert 'overlaps phase 1 "t" / "one"' in text and "phases may not overlap" in text
            assert "is not a time" in await error(session, "log_phase", task="t", phase="p", started_at="soon",
                                                  ended_at="later", verdict="small_impact", session=SESSION)
            assert "must end" in await error(session, "log_phase", task="t", phase="p",
                                             started_at="2026-02-11T21:30:00Z", ended_at="2026-02-11T21:20:00Z",
                                             verdict="small_impact", session=SESSION)
            await call(session, "start_phase", task="t", phase="open", session=SESSION)
            text = await error(session, "start_phase", task="t", phase="again", session=SESSION)
            assert "is still open; end it first with end_phase" in text
            assert "description is empty" in await error(session, "start_tracking", description=" ", session=SESSION)
            # Issue 20: inputs the schema refuses were pydantic's report (several lines, a URL).
            assert await error(session, "sessions", limit=-1) == (
                "Error executing tool sessions: limit must be at least 1")
            assert await error(session, "sessions", limit="many") == (
                "Error executing tool sessions: limit must be a whole number")
            assert await error(session, "log_phase", task="t", phase="p", started_at="2026-02-11T21:30:00Z",
                               ended_at="2026-02-11T21:40:00Z", session=SESSION) == (
                f"Error executing tool log_phase: verdict is required; use one of: {', '.join(VERDICTS)}")
            # After all of that, the same server answers.
            assert len((await call(session, "list_phases", session=SESSION))["phases"]) == 2
        assert "Traceback" not in (tmp_path / "server.log").read_text()

    anyio.run(run)


def test_a_retrospective_that_cannot_be_saved_is_answered_with_a_warning(env: dict[str, str], tmp_path: Path) -> None:
    """Issue 20: RETROD_REPORTS_DIR not writable was a tool error, and the Markdown was lost."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")

    async def run() -> dict:
        async with server({**env, "RETROD_REPORTS_DIR": str(blocker / "reports")}, tmp_path / "server.log") as session:
            return await call(session, "retrospective", session=SESSION)

    retro = anyio.run(run)
    assert retro["saved_to"] is None and retro["markdown"].startswith("# Session Retrospective: 2026-02-11")
    assert retro["warnings"] == [(f"the report was not saved in RETROD_REPORTS_DIR ({blocker}/reports/"
                                 "2026-02-11-258c7280.md): Not a directory")]


def test_the_server_outlives_its_database(tmp_path: Path, projects: Path, env: dict[str, str]) -> None:
    """The database stops under the server: that call fails with a clear error, the next one
    after it is back works, on the same server process."""
    with throwaway_cluster("retrod-mcp-") as (cluster, _root):
        cluster.create_database("retrod")
        own = {**env, "RETROD_DATABASE_URL": cluster.url()}

        async def run() -> None:
            async with server(own, tmp_path / "server.log") as session:
                assert (await call(session, "sessions"))["sessions"] == []  # nothing ingested yet
                await call(session, "start_tracking", description="before", session=SESSION)
                cluster.stop("fast")
                text = await error(session, "list_phases", session=SESSION)
                assert text.startswith("Error executing tool list_phases: the database is not reachable"), text
                assert "try again once it is back" in text
                assert "database is not reachable" in await error(session, "session_stats", session=SESSION)
                cluster.ensure_running()
                stats = await call(session, "session_stats", session=SESSION)
                assert stats["requests"] > 0 and stats["found_by"] == "the session argument"

        anyio.run(run)
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_sessions_lists_what_the_report_counts(env: dict[str, str], tmp_path: Path) -> None:
    cli(env, "run", "--once")
    cli(env, "track", "start", "--session", SESSION, "--description", "listed")

    async def run() -> dict:
        async with server(env, tmp_path / "server.log") as session:
            return await call(session, "sessions", limit=50)

    listed = {row["uuid"]: row for row in anyio.run(run)["sessions"]}
    expected = json.loads(cli(env, "sessions", "--limit", "50", "--json").stdout)["sessions"]
    assert [row["uuid"] for row in expected] == list(listed)
    assert listed[SESSION]["description"] == "listed" and listed[SESSION]["tracked"]
    report = json.loads(cli(env, "report", SESSION, "--format", "json", "--no-save").stdout)
    assert listed[SESSION]["requests"] == report["summary"]["requests"]
    assert listed[SESSION]["total_tokens"] == sum(report["summary"]["tokens"]["total"].values())
    # accounting.md §2.8's waste, as the report's, from the command and the tool alike
    assert listed[SESSION]["cache_waste_usd"] == report["summary"]["cache"]["waste_usd"] > 0
    assert [row["cache_waste_usd"] for row in expected] == [row["cache_waste_usd"] for row in listed.values()]


def test_brief_and_trends_answer_what_the_commands_print(env: dict[str, str], tmp_path: Path) -> None:
    cli(env, "run", "--once")
    cli(env, "phase", "log", "--session", SESSION, "--task", "hooks", "--phase", "read the docs", "--start",
        "2026-02-11T20:40:00Z", "--end", "2026-02-11T21:00:00Z", "--verdict", "avoidable_waste",
        "--lessons", "read the hook docs before coding")

    async def run() -> tuple[dict, dict, str]:
        async with server(env, tmp_path / "server.log") as session:
            brief = await call(session, "brief", project=SPOTTER_FOLDER, session=GHOST)
            trends = await call(session, "trends", by="month", tz="UTC", split="project")
            refused = await error(session, "trends", tz="Mars/Olympus")
            return brief, trends, refused

    brief, trends, refused = anyio.run(run)
    assert brief == json.loads(cli(env, "brief", "--project", SPOTTER_FOLDER, "--format", "json").stdout)
    assert brief["lessons"][0]["text"] == "read the hook docs before coding"
    assert trends == json.loads(cli(env, "trends", "--by", "month", "--tz", "UTC", "--by-project", "--json").stdout)
    assert sum(p["sessions"] for p in trends["periods"]) == trends["total"]["sessions"] > 10
    assert refused == ("Error executing tool trends: unknown time zone 'Mars/Olympus'; use a name such as UTC or"
                       " Europe/Berlin")


def without_the_sdk(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """`env` as if the `mcp` extra were not installed: an `mcp` package first on the path that
    cannot be imported."""
    hidden = tmp_path / "no-sdk" / "mcp"
    hidden.mkdir(parents=True, exist_ok=True)
    (hidden / "__init__.py").write_text("raise ImportError('the mcp extra is not installed')\n")
    return {**env, "PYTHONPATH": str(hidden.parent)}


def claude_recorder(tmp_path: Path) -> Path:
    """A `claude` that writes the arguments it was given to tmp_path/argv."""
    recorder = tmp_path / "bin" / "claude"
    recorder.parent.mkdir(exist_ok=True)
    recorder.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {tmp_path / 'argv'}\n")
    recorder.chmod(0o755)
    return recorder


def test_without_the_extra_one_line_says_how_to_install_it(env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "retrod", "mcp"], env=without_the_sdk(env, tmp_path),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("retrod: error: `retrod mcp` needs the MCP SDK, an optional extra:"
                           " pip install 'retrod[mcp]'\n")


def test_on_the_embedded_default_the_server_starts_the_cluster_again_after_a_stop(env: dict[str, str],
                                                                                 tmp_path: Path) -> None:
    """Found in review: the daemon, the private cluster's owner, stops it on its way out even
    while a server uses it; the server must start it again, not fail until another command does."""
    import tempfile

    from retrod.settings import Settings
    from retrod.store.db import cluster_for

    root = Path(tempfile.mkdtemp(prefix="retrod-mcp-", dir="/tmp"))  # short: a socket path is in it
    os.chmod(root, 0o711)
    embedded = {k: v for k, v in env.items() if k != "RETROD_DATABASE_URL"} | {"RETROD_DATA_DIR": str(root / "d")}
    cluster = cluster_for(Settings(data_dir=root / "d"))
    try:
        async def run() -> None:
            async with server(embedded, tmp_path / "server.log") as session:
                assert (await call(session, "sessions"))["sessions"] == []
                cluster.stop("fast")  # as the daemon leaving does
                first = await session.call_tool("sessions", {})
                if first.is_error:  # the call that meets the stop may fail, in one sentence ...
                    assert "database is not reachable" in first.content[0].text
                assert (await call(session, "sessions"))["sessions"] == []  # ... the next one works

        anyio.run(run)
    finally:
        cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_skills_install_mcp_without_the_extra_is_refused_before_anything(env: dict[str, str], tmp_path: Path) -> None:
    """Issue 20: it said "registered", and the server Claude Code then started exited at once."""
    recorder = claude_recorder(tmp_path)
    no_sdk = {**without_the_sdk(env, tmp_path), "PATH": f"{recorder.parent}:{env['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "retrod", "skills", "install", "--dir", str(tmp_path / "skills"),
                           "--mcp"], env=no_sdk, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("retrod: error: `retrod mcp` needs the MCP SDK, an optional extra: pip install"
                           " 'retrod[mcp]', then run this again; nothing was installed or registered\n")
    assert not (tmp_path / "argv").exists() and not (tmp_path / "skills").exists()
    printed = cli(no_sdk, "skills", "install", "--dir", str(tmp_path / "skills")).stdout  # the line to run, later
    assert ("to let Claude Code use retrod's MCP tools (the skills prefer them), install the extra"
            " (pip install 'retrod[mcp]'), then run:\n  claude mcp add ") in printed
    assert not (tmp_path / "argv").exists()


def test_skills_install_prints_the_registration_and_runs_it_with_mcp(env: dict[str, str], tmp_path: Path) -> None:
    recorder = claude_recorder(tmp_path)
    # Passwords no path holds (the printed lines name the checkout, the temp and working folders):
    # random, so the test does not depend on where it runs, as "s3" once did.
    secret, first, second = (uuid.uuid4().hex[:16] for _ in range(3))
    path_without_claude = ":".join(p for p in env["PATH"].split(":") if not (Path(p) / "claude").exists())
    base = {**env, "PATH": path_without_claude, "RETROD_DATABASE_URL": f"postgresql://alice:{secret}@db.example/retrod"}
    printed = cli(base, "skills", "install", "--dir", str(tmp_path / "skills")).stdout
    retrod = shutil.which("retrod", path=str(Path(sys.executable).parent))
    line = next(line.strip() for line in printed.splitlines() if line.strip().startswith("claude mcp add"))
    assert line.startswith("claude mcp add --scope user ") and line.endswith(f"retrod -- {retrod} mcp")
    assert "alice:***@db.example" in line and secret not in printed
    assert not (tmp_path / "argv").exists()

    refused = subprocess.run([sys.executable, "-m", "retrod", "skills", "install", "--dir", str(tmp_path / "skills"),
                              "--mcp"], env=base, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "`claude` is not on PATH" in refused.stderr

    cli({**base, "PATH": f"{recorder.parent}:{path_without_claude}"}, "skills", "install", "--dir",
        str(tmp_path / "skills"), "--mcp")
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[:4] == ["mcp", "add", "--scope", "user"] and argv[-3:] == ["--", retrod, "mcp"]
    assert f"--env=RETROD_DATABASE_URL=postgresql://alice:{secret}@db.example/retrod" in argv

    # Found in review: a quoted keyword-form password slipped past the mask once the line was
    # quoted for the shell; a relative folder would be read in each project's folder.
    keyword = {**base, "RETROD_DATABASE_URL": f"host=db user=alice password='{first} {second}'",
               "RETROD_REPORTS_DIR": "rel"}
    printed = cli(keyword, "skills", "install", "--dir", str(tmp_path / "skills")).stdout
    assert first not in printed and second not in printed and "password=***" in printed
    line = next(line.strip() for line in printed.splitlines() if line.strip().startswith("claude mcp add"))
    assert f"--env=RETROD_REPORTS_DIR={Path.cwd() / 'rel'}" in line  # cli() runs in the tests' folder


def test_the_skills_name_the_servers_tools() -> None:
    """The skills use the MCP tools when the server is registered: every tool they name exists."""
    from retrod.claude_code import skills

    text = "\n".join(skills.shipped("retrod").values())
    named = {word for word in TOOLS if f"`{word}`" in text or f"mcp__retrod__{word}" in text}
    assert named == TOOLS - {"sessions"} or named == TOOLS
    assert "mcp__retrod__" in text


def test_log_phase_from_a_task_of_the_plan(env: dict[str, str], tmp_path: Path, projects: Path,
                                           db_url: str) -> None:
    """Issue 30: log_phase's from_task logs task N of the report's plan as phases, one per window,
    as `retrod phase log --from-task` does; the same refusals, in the tool's own terms."""
    ingest(db_url, [projects])
    planned = "026e1400-7606-45c1-aa2f-392d2b6dce7e"  # a TaskCreate / TaskUpdate plan
    with psycopg.connect(db_url) as conn:
        tasks = model.build(conn, planned)["plan"]["tasks"]
    closed = next(t for t in tasks if t["ended_at"] is not None)

    async def run() -> None:
        async with server(env, tmp_path / "server.log") as session:
            assert "started_at cannot be given with from_task" in await error(
                session, "log_phase", phase="p", verdict="small_impact", from_task=closed["number"],
                started_at="2026-02-11T21:30:00Z", session=planned)
            assert f"the session has no task {len(tasks) + 1}" in await error(
                session, "log_phase", phase="p", verdict="small_impact", from_task=len(tasks) + 1, session=planned)
            assert "needs task, started_at and ended_at (or from_task)" in await error(
                session, "log_phase", phase="p", verdict="small_impact", session=planned)
            logged = await call(session, "log_phase", phase="work", verdict="high_impact",
                                from_task=closed["number"], session=planned)
            assert logged["task"] == closed["name"]
            def bounds(pairs: list[tuple[str, str]]) -> list[tuple[datetime, datetime]]:
                return [(datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in pairs]
            assert bounds([(p["started_at"], p["ended_at"]) for p in logged["phases"]]) \
                == bounds([(w["start"], w["end"]) for w in closed["windows"]])
            text = await error(session, "log_phase", phase="again", verdict="high_impact",
                               from_task=closed["number"], session=planned)
            assert f"overlaps phase 1 {json.dumps(closed['name'])} / \"work\"" in text
        assert "Traceback" not in (tmp_path / "server.log").read_text()

    anyio.run(run)


def test_session_stats_carries_the_plans_tasks_with_the_reports_figures(env: dict[str, str], tmp_path: Path,
                                                                         projects: Path, db_url: str) -> None:
    """Issue 30: session_stats holds the plan as the report's `plan` — every task's tokens, times,
    cost, calls and cache figures — and its text names the costliest task by its number."""
    ingest(db_url, [projects])
    planned = "ef958aa1-0e93-49f0-bb71-150f63befcd1"  # a TaskCreate / TaskUpdate plan of six tasks
    with psycopg.connect(db_url) as conn:
        want = model.build(conn, planned)["plan"]

    async def run() -> dict:
        async with server(env, tmp_path / "server.log") as session:
            result = await session.call_tool("session_stats", {"session": planned})
            assert not result.is_error, result.content
            return {"structured": result.structured_content, "text": result.content[0].text}

    got = anyio.run(run)
    plan = got["structured"]["plan"]
    assert plan == want and len(plan["tasks"]) == 6 and plan["family"] == "task"
    figures = ("tokens", "cost", "claude_s", "tool_s", "human_s", "away_s", "tool_use", "cache", "subagents")
    assert all(all(k in task for k in figures) for task in plan["tasks"])
    costliest = max(want["tasks"], key=lambda t: t["cost"]["usd"] or 0)
    assert (f"costliest: task {costliest['number']} {json.dumps(costliest['name'])}"
            f" (${costliest['cost']['usd']:,.2f})") in got["text"]
    assert "6 tasks of Claude's plan worked on" in got["text"]
