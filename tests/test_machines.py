"""One history across a person's machines (issue 28, accounting.md §4 "Machines"): two hosts
(RETROD_HOST_ID a and b) ingesting into one database. A project folder synced to both counts once;
`trends --by-machine` gives every figure to the machine whose files hold it — each request to the
machine of the file holding its attributed record, the same record on both to the smaller host id,
time and calls to the machine whose transcript holds the line — and its rows add up to the unsplit
figures; the web UI's `machine=` filters /api/sessions and /api/trends, and its trends twin answers
what the command prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from conftest import FIXTURES, fresh_database
from helpers import ingest, older_migrations
from retrod.history import trends
from retrod.report.model import SIGNALS, TOKEN_FIELDS
from retrod.settings import Settings
from retrod.ui import data, secret
from retrod.ui.server import UiServer
from test_ui import free_port, get, login

TIMES = ("wall_s", "claude_s", "tool_s", "human_s", "away_s")
BUCKETS = ("main", "subagents", "compaction", "total")
M = "3a3a3a3a-0000-4000-8000-000000000001"  # started on a, resumed on b (b's copy of the folder is ahead)
OTHER = "3b3b3b3b-0000-4000-8000-000000000002"  # on b only


def at(second: float) -> str:
    return (datetime(2026, 3, 2, 10, tzinfo=UTC) + timedelta(seconds=second)).isoformat().replace("+00:00", "Z")


def user(uuid: str, second: float, session: str, content: object = "go on") -> dict:
    return {"type": "user", "uuid": uuid, "sessionId": session, "timestamp": at(second),
            "message": {"role": "user", "content": content}}


def result(uuid: str, second: float, session: str, tool: str, text: str) -> dict:
    return user(uuid, second, session, [{"type": "tool_result", "tool_use_id": tool, "content": text}])


def assistant(uuid: str, second: float, session: str, key: str, inp: int, out: int,
              tool: tuple[str, str, dict] | None = None) -> dict:
    content = [{"type": "tool_use", "id": tool[0], "name": tool[1], "input": tool[2]}] if tool else \
        [{"type": "text", "text": "done"}]
    return {"type": "assistant", "uuid": uuid, "sessionId": session, "timestamp": at(second),
            "message": {"id": key, "role": "assistant", "model": "claude-sonnet-4-5", "content": content,
                        "usage": {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": 0,
                                  "cache_creation_input_tokens": 0}}}


# M's first four lines, on both machines: 10 s of Claude, 5 s of tool, 10 s of Claude; a call.
M_SHARED = [user("m-u1", 0, M, "hello"),
            assistant("m-a1", 10, M, "msg_m1", 100, 10, ("tu_m1", "Read", {"file_path": "/x"})),
            result("m-u2", 15, M, "tu_m1", "abc"), assistant("m-a2", 25, M, "msg_m2", 200, 20)]
# ... and what only b's copy holds: 60 s of the person, 5 s of Claude, 2 s of tool, 8 s of Claude; a call.
M_ON_B = [user("m-u3", 85, M), assistant("m-a3", 90, M, "msg_m3", 300, 30, ("tu_m2", "Bash", {"command": "ls"})),
          result("m-u4", 92, M, "tu_m2", "xy"), assistant("m-a4", 100, M, "msg_m4", 400, 40)]
DAY = 86400
OTHER_LINES = [user("o-u1", 2 * DAY, OTHER, "hi"), assistant("o-a1", 2 * DAY + 4, OTHER, "msg_o1", 50, 5)]  # Wednesday


def write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture
def two_hosts(db_url: str, tmp_path: Path) -> dict[str, Path]:
    """Host a's and host b's projects folders, read into one database, b last. (Their paths sort
    the other way round from their host ids: a tie goes by host id, not by path or by which was
    read last; test_a_project_synced_to_both_machines_counts_once reads b first.)"""
    roots = {"a": tmp_path / "zz-host-a" / "projects", "b": tmp_path / "aa-host-b" / "projects"}
    write(roots["a"] / "-home-me-proj" / f"{M}.jsonl", M_SHARED)
    write(roots["b"] / "-home-me-proj" / f"{M}.jsonl", M_SHARED + M_ON_B)
    write(roots["b"] / "-home-me-other" / f"{OTHER}.jsonl", OTHER_LINES)
    ingest(db_url, [roots["a"]], host="a")
    ingest(db_url, [roots["b"]], host="b")
    return roots


def essentials(f: dict) -> dict:
    """The figures a machine's row and the unsplit ones are compared by."""
    return {"sessions": f["sessions"], "requests": f["requests"], "tokens": f["tokens"],
            **{t: f[t] for t in TIMES}, "calls": f["tool_use"]["calls"], "productive": f["tool_use"]["productive"],
            "signals": f["tool_use"]["signals"], "tool_result_bytes": f["tool_result_bytes"]}


def assert_machines_add_up(period: dict) -> None:
    """A period's machines' rows add up to its figures: counts and tokens exactly, seconds and
    dollars to what rounding each row (to the millisecond, to the micro-dollar) can move."""
    rows = period["machines"]
    n = len(rows)
    assert sum(r["sessions"] for r in rows) == period["sessions"]
    assert sum(r["requests"] for r in rows) == period["requests"]
    for b in BUCKETS:
        for f in TOKEN_FIELDS:
            assert sum(r["tokens"][b][f] for r in rows) == period["tokens"][b][f], (b, f)
    for t in TIMES:
        assert abs(sum(r[t] for r in rows) - period[t]) <= 0.0005 * n + 1e-9, t
    assert abs(sum(r["cost"]["usd"] or 0 for r in rows) - (period["cost"]["usd"] or 0)) <= 0.0000005 * n + 1e-9
    assert sum(r["tool_use"]["calls"] for r in rows) == period["tool_use"]["calls"]
    assert sum(r["tool_use"]["productive"] for r in rows) == period["tool_use"]["productive"]
    for s in SIGNALS:
        assert sum(r["tool_use"]["signals"][s] for r in rows) == period["tool_use"]["signals"][s]
    assert sum(r["tool_result_bytes"] for r in rows) == period["tool_result_bytes"]
    for cause, misses in period["cache"]["misses"].items():  # each miss where its request is (accounting.md §2.8)
        assert sum(r["cache"]["misses"][cause]["count"] for r in rows) == misses["count"], cause
        assert abs(sum(r["cache"]["misses"][cause]["extra_usd"] for r in rows) - misses["extra_usd"]) \
            <= 0.0000005 * n + 1e-9
    assert abs(sum(r["cache"]["waste_usd"] for r in rows) - period["cache"]["waste_usd"]) <= 0.0000005 * n + 1e-9


def tokens(inp: int, out: int) -> dict:
    main = {"input": inp, "output": out, "cache_read": 0, "cache_create": 0}
    empty = dict.fromkeys(TOKEN_FIELDS, 0)
    return {"main": main, "subagents": empty, "compaction": empty, "total": main}


def test_each_figure_goes_to_the_machine_whose_files_hold_it(db_url: str, two_hosts: dict[str, Path]) -> None:
    with psycopg.connect(db_url) as conn:
        whole = trends.trends(conn, by="week", tz="UTC")
        split = trends.trends(conn, by="week", tz="UTC", split="machine")
    (period,) = [p for p in split["periods"] if p["sessions"]]
    assert period["period"] == "2026-03-02"
    # unsplit: M once (its four shared lines and requests not twice), the other session once
    assert essentials(whole["total"]) == {
        "sessions": 2, "requests": 5, "tokens": tokens(1050, 105), "wall_s": 104.0, "claude_s": 37.0,
        "tool_s": 7.0, "human_s": 60.0, "away_s": 0.0, "calls": 2, "productive": 2,
        "signals": dict.fromkeys(SIGNALS, 0), "tool_result_bytes": 5}
    rows = {r["machine"]: r for r in period["machines"]}
    assert [r["machine"] for r in period["machines"]] == ["a", "b"]
    # a: M (its main transcript's smaller host) and what a's copy holds — shared lines and requests
    # tie with b's copy and go to the smaller host id, though b read them last and b's path sorts first
    assert essentials(rows["a"]) == {
        "sessions": 1, "requests": 2, "tokens": tokens(300, 30), "wall_s": 100.0, "claude_s": 20.0,
        "tool_s": 5.0, "human_s": 0.0, "away_s": 0.0, "calls": 1, "productive": 1,
        "signals": dict.fromkeys(SIGNALS, 0), "tool_result_bytes": 3}
    # b: the other session, and the part of M only b's copy holds
    assert essentials(rows["b"]) == {
        "sessions": 1, "requests": 3, "tokens": tokens(750, 75), "wall_s": 4.0, "claude_s": 17.0,
        "tool_s": 2.0, "human_s": 60.0, "away_s": 0.0, "calls": 1, "productive": 1,
        "signals": dict.fromkeys(SIGNALS, 0), "tool_result_bytes": 2}
    assert_machines_add_up(period)
    # one model at one price, on one day: cost goes with the tokens — b's part of M is 7/3 of a's
    # (700/70 against 300/30), the other session a sixth (50/5) — and adds up
    usd_a, usd_b = rows["a"]["cost"]["usd"], rows["b"]["cost"]["usd"]
    assert usd_a > 0 and abs(usd_b - usd_a * (7 / 3 + 1 / 6)) <= 1e-6, (usd_a, usd_b)
    assert abs(usd_a + usd_b - whole["total"]["cost"]["usd"]) <= 1e-6
    # the split's periods, total and everything else are the unsplit answer's
    assert {k: v for k, v in split.items() if k not in ("periods", "split", "total")} == \
        {k: v for k, v in whole.items() if k not in ("periods", "split", "total")}
    assert split["total"] == whole["total"]
    assert [{k: v for k, v in p.items() if k != "machines"} for p in split["periods"]] == whole["periods"]


def test_a_machine_filter_is_that_machines_row(db_url: str, two_hosts: dict[str, Path]) -> None:
    with psycopg.connect(db_url) as conn:
        split = trends.trends(conn, by="week", tz="UTC", split="machine")
        rows = {r["machine"]: r for p in split["periods"] for r in p.get("machines", [])}
        for host in ("a", "b"):
            only = trends.trends(conn, by="week", tz="UTC", machine=host)
            assert only["machine"] == host
            (period,) = [p for p in only["periods"] if p["sessions"]]
            assert {k: v for k, v in period.items() if k not in ("period", "start", "end", "change")} == \
                {k: v for k, v in rows[host].items() if k != "machine"}
        # by day, b's Monday holds M's part and no session (M's is a's): shown with its figures
        by_day = trends.trends(conn, by="day", tz="UTC", machine="b")
        assert [(p["period"], p["sessions"], p["claude_s"]) for p in by_day["periods"]] == \
            [("2026-03-02", 0, 13.0), ("2026-03-03", 0, 0.0), ("2026-03-04", 1, 4.0)]
        lines = trends.render(by_day).splitlines()
        assert [line.split()[0] for line in lines[2:5]] == ["2026-03-02", "2026-03-03", "2026-03-04"]
        assert "no sessions" not in lines[2] and "13s" in lines[2] and "(no sessions)" in lines[3]
        nowhere = trends.trends(conn, by="week", tz="UTC", machine="c")
        assert nowhere["periods"] == [] and nowhere["total"]["sessions"] == 0
        # /api/sessions: the sessions with a transcript on the machine
        listed = {h: sorted(r["uuid"] for r in data.sessions(conn, data.SessionQuery.parse({"machine": h}))["sessions"])
                  for h in ("a", "b", "c")}
        assert listed == {"a": [M], "b": sorted([M, OTHER]), "c": []}
        assert data.choices(conn)["machines"] == ["a", "b"]


def test_a_project_synced_to_both_machines_counts_once(pg_cluster, db_url: str) -> None:
    """The fixture corpus read by two hosts from the same folder (synced: the same paths), b
    first: its unsplit trends are those of one host reading it alone, and split, every figure
    ties and goes to the smaller host id."""
    ingest(db_url, [FIXTURES], host="b")
    ingest(db_url, [FIXTURES], host="a")
    with fresh_database(pg_cluster) as alone_url:
        ingest(alone_url, [FIXTURES], host="a")
        with psycopg.connect(alone_url) as conn:
            alone = trends.trends(conn, by="week", tz="UTC")
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(DISTINCT host_id) FROM retrod.files").fetchone()[0] == 2
        whole = trends.trends(conn, by="week", tz="UTC")
        split = trends.trends(conn, by="week", tz="UTC", split="machine")
    assert whole == alone
    assert whole["total"]["sessions"] > 40
    for period in split["periods"]:
        if not period["sessions"]:
            assert period["machines"] == []
            continue
        assert [r["machine"] for r in period["machines"]] == ["a"]
        (row,) = period["machines"]
        assert {k: v for k, v in row.items() if k != "machine"} == \
            {k: v for k, v in period.items() if k not in ("period", "start", "end", "change", "machines")}


def retrod(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture
def served(db_url: str, two_hosts: dict[str, Path], tmp_path: Path) -> Iterator[tuple[UiServer, str]]:
    settings = Settings(database_url=db_url, data_dir=tmp_path / "ui-data", ui_port=free_port())
    with ConnectionPool(db_url, min_size=1, max_size=4) as pool, UiServer(pool, settings) as server:
        assert server.hub is not None, "the UI did not start"
        yield server, secret.read(tmp_path / "ui-data") or ""


def test_the_command_and_the_dashboard_split_and_filter_by_machine_alike(
        served: tuple[UiServer, str], db_url: str, two_hosts: dict[str, Path], tmp_path: Path) -> None:
    server, token = served

    def api(path: str) -> tuple[int, dict]:
        status, _headers, body = get(server.port, f"{path}&token={token}")
        return status, json.loads(body)

    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    # b's command, on b: it reads b's folder first (nothing new there), then answers for both machines
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(two_hosts["b"]), RETROD_HOST_ID="b",
               RETROD_DATA_DIR=str(tmp_path / "cli-data"), HOME=str(tmp_path / "home"))
    done = retrod(env, "trends", "--json", "--by-machine", "--tz", "UTC")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["split"] == "machine"
    assert [r["machine"] for p in printed["periods"] for r in p.get("machines", [])] == ["a", "b"]
    assert api("/api/trends?split=machine&tz=UTC") == (200, printed)
    with psycopg.connect(db_url) as conn:
        assert printed == json.loads(json.dumps(trends.trends(conn, by="week", tz="UTC", split="machine")))
    text = retrod(env, "trends", "--by-machine", "--tz", "UTC")
    assert text.returncode == 0, text.stderr
    assert [line.split()[-1] for line in text.stdout.splitlines() if line.startswith(" " * 10)][-2:] == ["a", "b"]

    status, only_b = api("/api/trends?machine=b&tz=UTC")
    assert status == 200 and only_b["machine"] == "b"
    b_row = next(r for p in printed["periods"] for r in p.get("machines", []) if r["machine"] == "b")
    assert only_b["total"]["tokens"] == b_row["tokens"] and only_b["total"]["claude_s"] == b_row["claude_s"]
    status, listed = api("/api/sessions?machine=a")
    assert status == 200 and [r["uuid"] for r in listed["sessions"]] == [M]
    assert listed["filters"]["machine"] == "a"
    cookie = login(server.port, token)
    status, _headers, page = get(server.port, "/?machine=b", cookie)
    assert status == 200 and b'<select name="machine"' in page and b'<option value="b" selected>' in page
    status, _headers, page = get(server.port, "/trends?split=machine&tz=UTC", cookie)
    assert status == 200 and b'data-machine="a"' in page and b'data-machine="b"' in page


def test_requests_whose_machine_is_not_known_go_with_their_session(pg_cluster, tmp_path: Path) -> None:
    """Requests stored before migration 0023 (or since, by an older retrod on another machine) do
    not say which machine read them: split, each goes to its session's machine (the smallest
    host holding its main transcript), and a record read again from a machine takes its place in
    a tie."""
    from retrod.store.migrate import migrate

    before = older_migrations(tmp_path / "migrations-0022", lambda version: version < 23)
    root = tmp_path / "b" / "projects"
    write(root / "-home-me-proj" / f"{M}.jsonl", M_SHARED)
    with fresh_database(pg_cluster) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA retrod CASCADE")  # (the template is migrated to today: start from nothing)
            conn.execute("DROP TABLE public.cc_session_phases, public.cc_sessions")
            assert migrate(conn, before)[-1] == 22
            # what an older retrod stored: a's transcript of M and its requests, with no machine
            conn.execute("INSERT INTO retrod.files (host_id, path, kind, slug, session_uuid) VALUES"
                         " ('a', '/a/-home-me-proj/m.jsonl', 'main', '-home-me-proj', %(m)s)", {"m": M})
            conn.execute("INSERT INTO retrod.requests (key, session_uuid, agent, ts, attr_sidechain, attr_foreign,"
                         " usage_main, input_tokens, output_tokens, cache_read_tokens, cache_create_tokens,"
                         " cache_create_5m_tokens, cache_create_1h_tokens, has_tool_use) VALUES"
                         " ('msg_m1', %(m)s, '', %(t)s, false, false, true, 100, 10, 0, 0, 0, 0, true),"
                         " ('msg_old', %(m)s, '', %(t)s, false, false, true, 7, 1, 0, 0, 0, 0, false)",
                         {"m": M, "t": datetime(2026, 3, 2, 10, 0, 10, tzinfo=UTC)})
            assert migrate(conn)[0] == 23  # (and the migrations after it)
            assert conn.execute("SELECT count(*) FROM retrod.requests WHERE machine IS NULL").fetchone()[0] == 2
        ingest(url, [root], host="b")  # b reads M's first lines: msg_m1 ties, and b's record is known
        with psycopg.connect(url) as conn:
            machines = dict(conn.execute("SELECT key, machine FROM retrod.requests").fetchall())
            split = trends.trends(conn, by="week", tz="UTC", split="machine")
    assert machines == {"msg_m1": "b", "msg_m2": "b", "msg_old": None}
    rows = {r["machine"]: r for p in split["periods"] for r in p.get("machines", [])}
    assert {h: r["requests"] for h, r in rows.items()} == {"a": 1, "b": 2}  # msg_old: M's machine, a
    assert rows["a"]["tokens"]["total"]["output"] == 1 and rows["a"]["sessions"] == 1
    assert_machines_add_up(next(p for p in split["periods"] if p["sessions"]))


def test_the_mcp_trends_tool_splits_by_machine_as_the_command(db_url: str, two_hosts: dict[str, Path],
                                                              tmp_path: Path) -> None:
    import anyio

    from test_mcp import call, server

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(two_hosts["a"]), RETROD_HOST_ID="a",
               RETROD_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path / "home"),
               CLAUDE_CONFIG_DIR=str(tmp_path / "claude"))

    async def run() -> dict:
        async with server(env, tmp_path / "server.log") as session:
            return await call(session, "trends", tz="UTC", split="machine")

    answered = anyio.run(run)
    done = retrod(env, "trends", "--json", "--by-machine", "--tz", "UTC")
    assert done.returncode == 0, done.stderr
    assert answered == json.loads(done.stdout)
    assert [r["machine"] for p in answered["periods"] for r in p.get("machines", [])] == ["a", "b"]


def test_a_machine_holding_only_a_projects_subagent_still_names_the_project(db_url: str, tmp_path: Path) -> None:
    """Split by project and filtered to a machine that holds only a session's subagent file (its
    requests, no session of its own there): the row still carries the project's folder name and
    working folder (found by review: they were taken from the sessions' figures, which that
    machine has none of)."""
    main_lines = [{**line, "cwd": "/home/me/app"} for line in M_SHARED]
    write(tmp_path / "a" / "-home-me-app" / f"{M}.jsonl", main_lines)
    agent = [{**assistant("s-a1", 30, M, "msg_s1", 70, 7), "isSidechain": True, "agentId": "x1"}]
    write(tmp_path / "b" / "-home-me-app" / M / "subagents" / "agent-x1.jsonl", agent)
    ingest(db_url, [tmp_path / "a"], host="a")
    ingest(db_url, [tmp_path / "b"], host="b")
    with psycopg.connect(db_url) as conn:
        only_b = trends.trends(conn, by="week", tz="UTC", split="project", machine="b")
    rows = [r for p in only_b["periods"] for r in p.get("projects", [])]
    assert [(r["project"], r["project_slug"], r["project_path"], r["requests"]) for r in rows] \
        == [("/home/me/app", "-home-me-app", "/home/me/app", 1)]
