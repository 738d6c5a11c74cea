"""Whole reports kept between asks (report/kept_reports.py): every ask answers, byte for byte,
what a report built afresh answers (model.build, rendered), whatever was committed between two
asks — lines read, a fork read later, a phase logged or changed, the description changed, rows
deleted by hand, a file gone, Claude Code's status — and an ask with nothing changed gives the
kept report itself. A live session, or one with a phase open, is built at every ask."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from conftest import FIXTURES
from helpers import ingest
from plan_transcripts import BASE, Transcript, session_id
from retrod.basics.json_text import json_text
from retrod.report import kept_reports, kept_windows, markdown, model, retrospective
from retrod.report.prices import DEFAULT, Prices, load
from retrod.tracking import PhaseNotes, phase_log, phase_start
from test_forks import ORIG, R1, R2, SLUG, F, G, fork_tree, resumes, write
from test_forks import assistant as said
from test_forks import ts as at
from test_forks import user as asked_by

PLANNED = "a7da6a22-facc-4fcd-8bab-f83c87862004"  # a fixture session with a plan and subagents
PLANNED_FOLDER = "-src-deep-manifest"
MADE = session_id(821)
DAY_AFTER = BASE + timedelta(days=1)  # (at rest: long before now)


@pytest.fixture(autouse=True)
def nothing_kept() -> None:
    kept_reports.forget()
    kept_windows.forget()


def asked(conn: psycopg.Connection, session: str, as_json: bool = True,
          prices: Prices = DEFAULT) -> tuple[dict, str]:
    """The report as `retrod report` (and the daemon) produce it: kept when it may be."""
    return retrospective.produce(conn, session, as_json=as_json, prices=prices)


def afresh(conn: psycopg.Connection, session: str, as_json: bool = True, prices: Prices = DEFAULT) -> str:
    """The report built now, nothing of it kept (the windows' figures are kept_windows', tested there)."""
    report = model.build(conn, session, prices=prices)
    return json_text(report) + "\n" if as_json else markdown.render(report)


def kept(first: dict, again: dict) -> bool:
    """Whether `again` is the report `first` was (kept), not one built again."""
    return again["summary"] is first["summary"]


def _made(root: Path, start: datetime) -> Path:
    """A session of a few requests and calls from `start` (hours apart: a change touches one)."""
    base = (start - BASE).total_seconds()
    t = (Transcript(MADE).user(base).todos(base + 10, ("A", "in_progress"), ("B", "pending")).say(base + 15)
         .todos(base + 7200, ("A", "completed"), ("B", "in_progress")).say(base + 7205))
    return t.write(root)


def test_fixture_sessions_kept_are_the_built_ones(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    shutil.copytree(FIXTURES / PLANNED_FOLDER, root / PLANNED_FOLDER)
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        for as_json in (True, False):
            first, text = asked(conn, PLANNED, as_json)
            assert text == afresh(conn, PLANNED, as_json)
            again, text_again = asked(conn, PLANNED, as_json)
            assert kept(first, again) and text_again is text
        assert json.loads(asked(conn, PLANNED)[1])["plan"]["tasks"]


class TestChanges:
    """Each change between two asks of a session at rest is seen at the next ask."""

    @pytest.fixture
    def session(self, db_url: str, tmp_path: Path):
        root = tmp_path / "projects"
        path = _made(root, DAY_AFTER)
        ingest(db_url, [root])
        with psycopg.connect(db_url, autocommit=True) as conn:
            first, text = asked(conn, MADE)
            assert kept(first, asked(conn, MADE)[0])
            yield conn, root, path, text

    def _seen(self, conn: psycopg.Connection, before: str) -> dict:
        """The next ask's report (parsed), once checked: changed, as built afresh, kept from there."""
        return json.loads(self._seen_text(conn, before))

    def _seen_text(self, conn: psycopg.Connection, before: str) -> str:
        report, text = asked(conn, MADE)
        assert text != before
        assert text == afresh(conn, MADE)
        assert kept(report, asked(conn, MADE)[0])  # (and kept again from there)
        return text

    def test_a_line_read(self, session, db_url: str) -> None:
        conn, root, path, before = session
        more = Transcript(MADE)
        more.ids = 100
        with path.open("a", encoding="utf-8") as out:
            out.write("".join(json.dumps(x) + "\n" for x in more.say((DAY_AFTER - BASE).total_seconds() + 30).lines))
        ingest(db_url, [root])
        assert self._seen(conn, before)["summary"]["requests"] == json.loads(before)["summary"]["requests"] + 1

    def test_an_undated_malformed_line(self, session, db_url: str) -> None:
        """No row, no mark: the file's row alone says it was read (its bad line counted)."""
        conn, root, path, before = session
        with path.open("a", encoding="utf-8") as out:
            out.write("{not json\n")
        ingest(db_url, [root])
        assert self._seen(conn, before)["session"]["bad_lines"] == 1

    def test_a_phase_logged_and_its_verdict_changed_by_another_tool(self, session) -> None:
        conn, _root, _path, before = session
        start = DAY_AFTER + timedelta(seconds=5)
        phase_log(conn, MADE, "t", "p", start, start + timedelta(minutes=3), "high_impact", PhaseNotes())
        logged = self._seen_text(conn, before)
        assert [p["verdict"] for p in json.loads(logged)["phases"]] == ["high_impact"]
        conn.execute("UPDATE public.cc_session_phases SET verdict = 'small_impact'")
        assert [p["verdict"] for p in self._seen(conn, logged)["phases"]] == ["small_impact"]

    def test_the_description_changed(self, session) -> None:
        conn, _root, _path, before = session
        conn.execute("UPDATE public.cc_sessions SET description = 'renamed' WHERE session_uuid = %s", (MADE,))
        assert self._seen(conn, before)["session"]["description"] == "renamed"

    def test_rows_deleted_by_hand(self, session) -> None:
        conn, _root, _path, before = session
        conn.execute("DELETE FROM retrod.requests WHERE session_uuid = %s AND ts > %s",
                     (MADE, DAY_AFTER + timedelta(hours=1)))
        assert self._seen(conn, before)["summary"]["requests"] < json.loads(before)["summary"]["requests"]

    @pytest.mark.parametrize("table", ["session_times", "session_requests", "call_agents", "requests"])
    def test_a_table_emptied_by_hand(self, session, table: str) -> None:
        conn, _root, _path, before = session
        conn.execute(f"TRUNCATE retrod.{table} CASCADE")
        self._seen(conn, before)

    def test_the_transcript_gone(self, session, db_url: str) -> None:
        conn, root, path, before = session
        path.unlink()
        ingest(db_url, [root])
        assert self._seen(conn, before)["session"]["transcripts_deleted"] == 1

    def test_claude_codes_status(self, session) -> None:
        conn, _root, _path, before = session
        conn.execute("INSERT INTO retrod.session_status (session_uuid, cc_version) VALUES (%s, '2.1.9')", (MADE,))
        assert self._seen(conn, before)["claude_code"]["version"] == "2.1.9"

    def test_other_prices_are_another_report(self, session, tmp_path: Path) -> None:
        conn, _root, _path, before = session
        file = tmp_path / "prices.json"
        file.write_text(json.dumps({"models": {"claude-sonnet-4-5": {"input": 1, "output": 2, "cache_read": 0.1,
                                                                      "cache_create_5m": 1.25, "cache_create_1h": 2}}}))
        other = load(file)
        _report, text = asked(conn, MADE, prices=other)
        assert text != before and text == afresh(conn, MADE, prices=other)
        assert asked(conn, MADE)[1] is not text  # (each kept under its own prices)


def test_another_session_of_the_same_day_read_leaves_the_report_kept(db_url: str, tmp_path: Path) -> None:
    """Migration 0041: its own count of changes, not its day's, tells a report it changed."""
    root = tmp_path / "projects"
    _made(root, DAY_AFTER)
    other = Transcript(session_id(822)).user((DAY_AFTER - BASE).total_seconds() + 60)
    other.write(root)
    ingest(db_url, [root])
    with psycopg.connect(db_url, autocommit=True) as conn:
        first, text = asked(conn, MADE)
        other.say((DAY_AFTER - BASE).total_seconds() + 90).write(root)
        ingest(db_url, [root])
        assert conn.execute("SELECT count(*) FROM retrod.requests WHERE session_uuid = %s",
                            (other.session,)).fetchone()[0] == 1
        again, text_again = asked(conn, MADE)
        assert kept(first, again) and text_again is text


def test_a_live_session_is_built_at_every_ask(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    _made(root, datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5))
    ingest(db_url, [root])
    with psycopg.connect(db_url, autocommit=True) as conn:
        first, text = asked(conn, MADE)
        again, text_again = asked(conn, MADE)
        assert not kept(first, again) and text_again == text  # (rows in its last two hours: live)


def test_a_session_with_a_phase_open_is_built_at_every_ask(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    _made(root, DAY_AFTER)
    ingest(db_url, [root])
    with psycopg.connect(db_url, autocommit=True) as conn:
        phase_start(conn, MADE, "t", "open")
        first, _ = asked(conn, MADE, as_json=False)
        again, _ = asked(conn, MADE, as_json=False)
        assert not kept(first, again)


@pytest.mark.parametrize("order", [(G, F, R1, ORIG, R2), (ORIG, R2, F, G, R1)])
def test_forks_read_in_halves_in_any_order(pg_cluster, tmp_path: Path, order: tuple[str, ...]) -> None:
    """Forks and resumes (accounting.md §2.1) read a half at a time, each session asked after every
    read: a fork read later changes what its original holds, and every kept answer follows."""
    from conftest import fresh_database

    whole = tmp_path / "whole" / "projects"
    fork_tree(whole, marked=False)
    resumes(whole)
    root = tmp_path / "growing" / "projects"
    (root / SLUG).mkdir(parents=True)
    with fresh_database(pg_cluster) as url, psycopg.connect(url, autocommit=True) as conn:
        for session in order:
            lines = (whole / SLUG / f"{session}.jsonl").read_bytes().splitlines(keepends=True)
            for upto in (len(lines) // 2, len(lines)):
                (root / SLUG / f"{session}.jsonl").write_bytes(b"".join(lines[:upto]))
                ingest(url, [root], batch_bytes=512)
                for other in order[:order.index(session) + 1]:
                    assert asked(conn, other)[1] == afresh(conn, other), (session, upto, other)


def _undated(session: str, msg: str, output: int = 5) -> str:
    """An assistant record with no timestamp (and no uuid): an undated request of `session`."""
    return json.dumps({"type": "assistant", "sessionId": session,
                       "message": {"id": msg, "model": "claude-sonnet-4-5",
                                   "usage": {"input_tokens": 10, "output_tokens": output},
                                   "content": [{"type": "text", "text": "ok"}]}}) + "\n"


def test_an_undated_request_owned_by_another_session_read_later(db_url: str, tmp_path: Path) -> None:
    """Session Y's undated request is owned by X (a smaller uuid) once X's copy of the record is
    read: Y's requests change, with no dated row of Y moved (no window mark) and no file of Y written."""
    x, y = session_id(901), session_id(902)  # x < y: x owns a record both hold
    root = tmp_path / "projects"
    (root / "-p").mkdir(parents=True)
    (root / "-p" / f"{y}.jsonl").write_text(_undated(y, "msg_shared") + _undated(y, "msg_y_own"))
    ingest(db_url, [root])
    with psycopg.connect(db_url, autocommit=True) as conn:
        first, _ = asked(conn, y)
        assert first["summary"]["requests"] == 2
        assert kept(first, asked(conn, y)[0])
        (root / "-p" / f"{x}.jsonl").write_text(_undated(x, "msg_shared"))
        ingest(db_url, [root])
        fresh = afresh(conn, y)
        assert json.loads(fresh)["summary"]["requests"] == 1  # (the shared record is x's now)
        assert asked(conn, y)[1] == fresh


def test_an_undated_request_edited_by_hand(db_url: str, tmp_path: Path) -> None:
    """The window marks pass over rows with no time: the session's trends mark moves (its rollup)."""
    root = tmp_path / "projects"
    path = _made(root, DAY_AFTER)
    with path.open("a", encoding="utf-8") as out:
        out.write(_undated(MADE, "msg_undated", output=7))
    ingest(db_url, [root])
    with psycopg.connect(db_url, autocommit=True) as conn:
        first, _ = asked(conn, MADE)
        assert kept(first, asked(conn, MADE)[0])
        conn.execute("UPDATE retrod.requests SET output_tokens = 70000 WHERE session_uuid = %s AND ts IS NULL",
                     (MADE,))
        assert asked(conn, MADE)[1] == afresh(conn, MADE)


def test_a_fork_copys_link_taken_back_by_its_original(db_url: str, tmp_path: Path) -> None:
    """F (a background session) holds a line that ORIG wrote: an agent_progress line linking its
    subagent sub1 to its Task call, with no record on it. Read before ORIG, the line is F's and
    links sub1 (matched_by tool_use); ORIG read, it is a fork copy: the link is gone from F's
    report, where only line_holders.copy of F changed (no dated row of F, no file of F)."""
    call = [{"type": "tool_use", "id": "toolu_t", "name": "Task",
             "input": {"description": "look", "subagent_type": "Explore", "prompt": "p"}}]
    progress = {"type": "progress", "timestamp": at(6), "uuid": "o3", "parentToolUseID": "toolu_t",
                "data": {"type": "agent_progress", "agentId": "sub1",
                         "message": {"type": "user", "timestamp": at(6), "message": {"content": "look"}}}}
    root = tmp_path / "projects"
    write(root / SLUG / f"{F}.jsonl", [
        asked_by(F, 0, uuid="f0", sessionKind="bg"),
        {**said(F, 5, "kf", 10, uuid="f1", sessionKind="bg"),
         "message": {"id": "kf", "content": call, "usage": {"input_tokens": 1, "output_tokens": 10}}},
        {**progress, "sessionId": F, "sessionKind": "bg"},
        asked_by(F, 20, uuid="f2", sessionKind="bg")])
    write(root / SLUG / F / "subagents" / "agent-sub1.jsonl", [
        asked_by(F, 7, uuid="s1", isSidechain=True, agentId="sub1"),
        said(F, 9, "ks", 3, uuid="s2", isSidechain=True, agentId="sub1")])
    ingest(db_url, [root])
    with psycopg.connect(db_url, autocommit=True) as conn:
        first, _ = asked(conn, F)
        assert [(a["agent_id"], a["matched_by"]) for a in first["subagents"]] == [("sub1", "tool_use")]
        assert kept(first, asked(conn, F)[0])
        write(root / SLUG / f"{ORIG}.jsonl", [{**progress, "sessionId": ORIG}])
        ingest(db_url, [root])
        fresh = json.loads(afresh(conn, F))
        assert [(a["agent_id"], a["matched_by"]) for a in fresh["subagents"]] == [("sub1", "timestamp")]
        assert asked(conn, F)[1] == afresh(conn, F)


def test_a_fork_copys_compaction_taken_back_by_its_original(db_url: str, tmp_path: Path) -> None:
    """As above with a compact_boundary line: its event has no time (no mark) when it stops counting in F."""
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "o5", "timestamp": at(80)}
    root = tmp_path / "projects"
    write(root / SLUG / f"{F}.jsonl", [
        asked_by(F, 0, uuid="f0", sessionKind="bg"), said(F, 5, "kf", 10, uuid="f1", sessionKind="bg"),
        {**boundary, "sessionId": F, "sessionKind": "bg"}, asked_by(F, 100, uuid="f2", sessionKind="bg")])
    ingest(db_url, [root])
    with psycopg.connect(db_url, autocommit=True) as conn:
        first, _ = asked(conn, F)
        assert first["summary"]["compactions"] == 1
        assert kept(first, asked(conn, F)[0])
        write(root / SLUG / f"{ORIG}.jsonl", [{**boundary, "sessionId": ORIG}])
        ingest(db_url, [root])
        assert json.loads(afresh(conn, F))["summary"]["compactions"] == 0
        assert asked(conn, F)[1] == afresh(conn, F)
