"""Sessions without a main event (accounting.md §2.3, issue 28 item 11): their time and their start and
end come from their subagent timeline, and every surface — the report, `sessions`, `trends
--since`, the brief, the web UI's list, the MCP tools' stats — shows the same start, to the
millisecond. Expected figures are worked out by hand below, and held to the reference
(tests/reference.py, written from docs/accounting.md's text); an ingest in other orders and chunks ends in
the same rows as one pass."""

from __future__ import annotations

import json
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reference
from conftest import fresh_database
from helpers import ingest, reports, rollups_match_raw, snapshot
from retrod import tracking
from retrod.history import brief, trends
from retrod.report import model
from retrod.ui import data

SLUG = "-home-me-app"
S1 = "11111111-0000-4000-8000-000000000001"  # subagent files only (and a compaction agent's)
S2 = "22222222-0000-4000-8000-000000000002"  # an empty main transcript, a subagent file
S3 = "33333333-0000-4000-8000-000000000003"  # a main transcript of isSidechain lines only
S4 = "44444444-0000-4000-8000-000000000004"  # main events: its subagent lines are no events
S5 = "55555555-0000-4000-8000-000000000005"  # no timestamp anywhere: undated


def at(day: int, second: float) -> str:
    whole = int(second)
    return f"2026-01-0{day}T10:{whole // 60:02d}:{whole % 60:02d}.{round((second - whole) * 1000):03d}Z"


def user(session: str, t: str, uuid: str, tool_result: bool = False, **extra) -> dict:
    content = [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}] if tool_result else "do it"
    return {"type": "user", "sessionId": session, "timestamp": t, "uuid": uuid, "message": {"content": content},
            **extra}


def assistant(session: str, t: str, uuid: str, key: str, **extra) -> dict:
    return {"type": "assistant", "sessionId": session, "timestamp": t, "uuid": uuid, "requestId": key,
            "message": {"id": key, "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "ok"}],
                        "usage": {"input_tokens": 3, "output_tokens": 7}}, **extra}


def tree() -> dict[str, list[dict]]:
    """relative path -> lines."""
    return {
        # S1, day 1. One timeline over three files, by time (seconds):
        #   0.125 U a1 (first)  10 A a1 claude 9.875  12 U a2 human 2  15 U a1 tool result: tool 3
        #   18 A a2 claude 3  20 A a1 claude 2  [25 U a2: a copy of uuid u0, counted at 0.125]
        #   40 A acompact claude 20      -> claude 34.875, tool 3, human 2, wall 39.875
        f"{SLUG}/{S1}/subagents/agent-a1.jsonl": [
            user(S1, at(1, 0.125), "u0"), assistant(S1, at(1, 10), "u10", "k10"),
            user(S1, at(1, 15), "u15", tool_result=True), assistant(S1, at(1, 20), "u20", "k20")],
        f"{SLUG}/{S1}/subagents/agent-a2.jsonl": [
            user(S1, at(1, 12), "u12"), assistant(S1, at(1, 18), "u18", "k18"), user(S1, at(1, 25), "u0")],
        f"{SLUG}/{S1}/subagents/agent-acompact-1.jsonl": [assistant(S1, at(1, 40), "u40", "k40")],
        # S2, day 2: 100 U (first), an agent_progress line at 140 embedding an assistant message
        # stamped 150 (claude 50), 170 U human 20 -> claude 50, human 20, wall 70.
        f"{SLUG}/{S2}.jsonl": [],
        f"{SLUG}/{S2}/subagents/agent-b1.jsonl": [
            user(S2, at(2, 100), "v100"),
            {"type": "progress", "sessionId": S2, "timestamp": at(2, 140), "uuid": "p140",
             "data": {"type": "agent_progress", "agentId": "b9",
                      "message": assistant(S2, at(2, 150), "v150", "k150")}},
            user(S2, at(2, 170), "v170")],
        # S3, day 3: 300 U sidechain (first), 302.5 A sidechain claude 2.5; a copied line of
        # another session at 310 is no event; a system line is none -> claude 2.5, wall 2.5.
        f"{SLUG}/{S3}.jsonl": [
            {"type": "system", "sessionId": S3, "timestamp": at(3, 299), "content": "hello"},
            user(S3, at(3, 300), "w300", isSidechain=True),
            assistant(S3, at(3, 302.5), "w302", "k302", isSidechain=True),
            user(S4, at(3, 310), "w310", isSidechain=True)],
        # S4, day 4: main events 0 and 5 (claude 5); its subagent's lines at 100 and 200 are not
        # events (the session has main events) -> wall 5.
        f"{SLUG}/{S4}.jsonl": [user(S4, at(4, 0), "x0"), assistant(S4, at(4, 5), "x5", "k5")],
        f"{SLUG}/{S4}/subagents/agent-c1.jsonl": [
            user(S4, at(4, 100), "x100"), assistant(S4, at(4, 200), "x200", "k200")],
        # S5: a request, no timestamp: no event at all, undated
        f"{SLUG}/{S5}/subagents/agent-d1.jsonl": [{**assistant(S5, at(5, 0), "y0", "k0"), "timestamp": None}],
    }


EXPECTED = {  # seconds: wall, claude, tool, human; start, end
    S1: (39.875, 34.875, 3.0, 2.0, "2026-01-01T10:00:00.125", "2026-01-01T10:00:40"),
    S2: (70.0, 50.0, 0.0, 20.0, "2026-01-02T10:01:40", "2026-01-02T10:02:50"),
    S3: (2.5, 2.5, 0.0, 0.0, "2026-01-03T10:05:00", "2026-01-03T10:05:02.500"),
    S4: (5.0, 5.0, 0.0, 0.0, "2026-01-04T10:00:00", "2026-01-04T10:00:05"),
}


def write(root: Path, files: dict[str, list[dict]]) -> None:
    for rel, lines in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture(scope="module")
def ingested(pg_cluster, tmp_path_factory) -> tuple[str, Path, dict[str, dict]]:
    root = tmp_path_factory.mktemp("subagent-timeline") / "projects"
    write(root, tree())
    with fresh_database(pg_cluster) as url:
        ingest(url, [root])
        yield url, root, reports(url)


def test_the_times_of_sessions_without_a_main_event_come_from_their_subagent_timeline(ingested) -> None:
    _, _, got = ingested
    for session, (wall, claude, tool, human, start, end) in EXPECTED.items():
        summary = got[session]["summary"]
        assert (summary["wall_s"], summary["claude_s"], summary["tool_s"], summary["human_s"], summary["away_s"]) \
            == (wall, claude, tool, human, 0.0), session
        assert datetime.fromisoformat(got[session]["session"]["started_at"]) == instant(start), session
        assert datetime.fromisoformat(got[session]["session"]["ended_at"]) == instant(end), session


def test_the_reference_agrees(ingested) -> None:
    _, root, got = ingested
    want = reference.compute(root)
    for session in EXPECTED:
        assert {k: got[session]["summary"][k] for k in want[session]["summary"]} == want[session]["summary"], session
        started = datetime.fromisoformat(got[session]["session"]["started_at"])
        ended = datetime.fromisoformat(got[session]["session"]["ended_at"])
        assert (reference.to_microseconds(started), reference.to_microseconds(ended)) \
            == (want[session]["start_us"], want[session]["end_us"]), session


def test_every_surface_shows_the_same_start(ingested) -> None:
    url, _root, got = ingested
    starts = {s: datetime.fromisoformat(got[s]["session"]["started_at"]) for s in EXPECTED}
    assert got[S5]["session"]["started_at"] is None and got[S5]["summary"]["requests"] == 1
    starts[S5] = None
    with psycopg.connect(url) as conn:
        listed = {r["uuid"]: r
                  for r in tracking.recent_sessions(conn, project=None, since=None, limit=10)["sessions"]}
        assert {s: r["started_at"] for s, r in listed.items()} == starts  # `retrod sessions`
        assert [r["uuid"] for r in tracking.recent_sessions(conn, None, None, 10)["sessions"]] == [S4, S3, S2, S1, S5]
        since_day_2 = tracking.recent_sessions(conn, None, datetime(2026, 1, 2, tzinfo=UTC), 10)["sessions"]
        assert [r["uuid"] for r in since_day_2] == [S4, S3, S2]
        for s in EXPECTED:
            assert listed[s]["wall_s"] == EXPECTED[s][0]
            assert datetime.fromisoformat(model.stats(conn, s)["started_at"]) == starts[s]  # MCP's session_stats
        page = data.sessions(conn, data.SessionQuery())["sessions"]  # the web UI's list
        assert {r["uuid"]: r["started_at"] and datetime.fromisoformat(r["started_at"]) for r in page} == starts
        assert [r["uuid"] for r in page] == [S4, S3, S2, S1, S5]
        assert {r["uuid"]: r["wall_s"] for r in page} == {**{s: e[0] for s, e in EXPECTED.items()}, S5: 0}
        ui_since = data.sessions(conn, data.SessionQuery(since=datetime(2026, 1, 2).date()))["sessions"]
        assert sorted(r["uuid"] for r in ui_since) == [S2, S3, S4]
        # `trends --since`: a session belongs to the day of its start; day 1's is left out
        by_day = trends.trends(conn, by="day", since=datetime(2026, 1, 2, tzinfo=UTC))
        days = {p["period"]: p["sessions"] for p in by_day["periods"] if p["sessions"]}
        assert days == {"2026-01-02": 1, "2026-01-03": 1, "2026-01-04": 1}
        every = {p["period"]: p["sessions"] for p in trends.trends(conn, by="day")["periods"] if p["sessions"]}
        assert every["2026-01-01"] == 1 and every[None] == 1  # S5: the undated row
        told = brief.brief(conn, project=SLUG, sessions=10)  # the brief's JSON (dated only)
        assert {s["session"]: datetime.fromisoformat(s["started_at"]) for s in told["sessions"]} \
            == {s: t for s, t in starts.items() if t is not None}
    rollups_match_raw(url)


def test_a_main_event_arriving_later_turns_the_subagent_timeline_off(pg_cluster, tmp_path) -> None:
    """The order files arrive in, and how they are cut, changes nothing: S4's subagent file read
    before its main transcript (a subagent timeline first), S2's main transcript growing from empty,
    files read in halves — the same rows as one pass over the final files."""
    files = tree()
    one_pass = tmp_path / "one" / "projects"
    write(one_pass, files)
    with fresh_database(pg_cluster) as url:
        ingest(url, [one_pass])
        want = snapshot(url, relative_to=one_pass)
    root = tmp_path / "steps" / "projects"
    with fresh_database(pg_cluster) as url:
        steps = [
            {rel: lines for rel, lines in files.items() if "/subagents/" in rel},  # subagents first
            {rel: lines[: len(lines) // 2] for rel, lines in files.items()},  # then half of every file
            files,
        ]
        for step in steps:
            for rel, lines in step.items():
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                old = path.read_text() if path.exists() else ""
                new = "".join(json.dumps(line) + "\n" for line in lines)
                if not new.startswith(old):  # (the halves of a file already whole: keep it)
                    continue
                path.write_text(new)
            ingest(url, [root], batch_bytes=512)
        with psycopg.connect(url) as conn:  # S4 now has main events: only they count
            assert model.build(conn, S4)["summary"]["wall_s"] == 5.0
        assert snapshot(url, relative_to=root) == want
        rollups_match_raw(url)


def test_main_events_gone_bring_the_subagent_timeline_back(pg_cluster, tmp_path) -> None:
    """A main transcript replaced by an empty one (read again from its start, its rows forgotten):
    the session falls back on its subagent timeline."""
    root = tmp_path / "projects"
    files = tree()
    write(root, files)
    with fresh_database(pg_cluster) as url:
        ingest(url, [root])
        main = root / f"{SLUG}/{S4}.jsonl"
        main.unlink()
        main.write_text("")
        shutil.rmtree(root / f"{SLUG}/{S1}")  # (a deleted transcript keeps its figures)
        ingest(url, [root])
        with psycopg.connect(url) as conn:
            report = model.build(conn, S4)
            assert (report["summary"]["wall_s"], report["summary"]["human_s"], report["summary"]["claude_s"]) \
                == (100.0, 0.0, 100.0)
            assert report["session"]["started_at"].startswith("2026-01-04T10:01:40")
            assert model.build(conn, S1)["summary"]["wall_s"] == EXPECTED[S1][0]
        rollups_match_raw(url)
