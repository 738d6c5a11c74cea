"""Which session a line belongs to (accounting.md §2.1): a `sessionId` of the form `<session>#…`
names the part before `#`; a background fork's copies of the chain it continues (fork copies)
stay with the session that wrote them. Figures worked out by hand from docs/accounting.md's text."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reference
import reference_tools
from helpers import ingest, reports, rollups_match_raw
from retrod.transcript.fold import FoldState, Source, first_session_id, fold
from retrod.transcript.parser import parse_line

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"


def ts(second: int) -> str:
    return f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}.000Z"


def user(session: str, second: int, **extra) -> dict:
    return {"type": "user", "sessionId": session, "timestamp": ts(second), "message": {"content": "hi"}, **extra}


def assistant(session: str, second: int, key: str, output: int, **extra) -> dict:
    return {"type": "assistant", "sessionId": session, "timestamp": ts(second), "requestId": key,
            "message": {"id": key, "content": [], "usage": {"input_tokens": 1, "output_tokens": output}}, **extra}


@contextmanager
def read_in_halves(pg_cluster, whole: Path, tmp_path: Path, order: tuple[str, ...]) -> Iterator[str]:
    """A fresh database that has read the sessions of `whole` in `order`, each transcript's first
    half and then the whole of it, in batches of 512 bytes (a fork read before or after what it
    copies, and mid-file): its URL."""
    from conftest import fresh_database

    root = tmp_path / "-".join(s[:2] for s in order) / "projects"
    (root / SLUG).mkdir(parents=True)
    with fresh_database(pg_cluster) as url:
        for session in order:
            lines = (whole / SLUG / f"{session}.jsonl").read_bytes().splitlines(keepends=True)
            for upto in (len(lines) // 2, len(lines)):
                (root / SLUG / f"{session}.jsonl").write_bytes(b"".join(lines[:upto]))
                ingest(url, [root], batch_bytes=512)
        yield url


def write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _fold(session: str, lines: list[dict], kind: str = "main", agent: str = ""):
    source = Source(kind, "p", session, agent, f"h:/{session}/{agent}")
    return fold(source, FoldState(), [(i, parse_line(json.dumps(x).encode())) for i, x in enumerate(lines)])


# --- (a) `<session>#…` names the session before `#` -------------------------------------------

WORKFLOW = [user(f"{A}#agent-x", 0), assistant(f"{A}#agent-x", 4, "msg_1", 10), user(f"{A}#", 10)]


def test_a_workflow_agents_session_id_names_the_part_before_the_hash() -> None:
    result = _fold(A, WORKFLOW)
    # Own lines, not copied history: three events, gaps 4 s claude and 6 s human; the request is
    # the main transcript's own (not foreign).
    assert [e.kind for e in result.events] == [None, "claude", "human"]
    assert result.requests["msg_1"].attr_foreign is False
    assert result.state.first_event_us is not None


def test_a_session_id_with_nothing_before_the_hash_names_no_session() -> None:
    lines = [parse_line(json.dumps(x).encode()) for x in ({"sessionId": "#x"}, {"sessionId": 7},
                                                          {"sessionId": f"{A}#agent-1"})]
    assert first_session_id(lines) == A
    result = _fold(A, [user("#agent-x", 0), assistant("#agent-x", 3, "msg_2", 1)])
    assert [e.kind for e in result.events] == [None, "claude"]  # own lines, none copied


def test_reference_names_the_session_before_the_hash(tmp_path: Path) -> None:
    write(tmp_path / "p" / f"{A}.jsonl", WORKFLOW)
    write(tmp_path / "p" / "agent-x1.jsonl", [assistant(f"{B}#agent-x1", 20, "msg_9", 5)])  # 2.0.x layout
    got = reference.compute(tmp_path)
    assert sorted(got) == [A, B]
    assert got[A]["summary"]["wall_s"] == 10.0 and got[A]["summary"]["claude_s"] == 4.0
    assert got[A]["summary"]["human_s"] == 6.0
    assert got[A]["summary"]["tokens"]["main"]["output"] == 10
    assert got[B]["summary"]["tokens"]["subagents"]["output"] == 5


# --- (c, d) background forks: a fork re-writes the chain it continues under its own id -------------

ORIG = "aaaaaaaa-0000-4000-8000-0000000000a0"  # the original, interactive: its lines carry no stamp
F = "0fffffff-0000-4000-8000-0000000000f1"  # a background fork of ORIG (its id sorts before ORIG's)
G = "0aaaaaaa-0000-4000-8000-0000000000f2"  # a background fork of F: a chain of two forks
SLUG = "-home-me-app"


def _o_chain() -> list[dict]:
    """ORIG's own lines: 0 U, 5 A (claude 5, a Bash call), 60 U tool result of 4 bytes (tool 55),
    70 A (claude 10), a compaction boundary."""
    call = [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "abcd"}]
    return [
        user(ORIG, 0, uuid="o1", cwd="/home/me/app"),
        {**assistant(ORIG, 5, "k1", 10, uuid="o2"), "message": {"id": "k1", "content": call,
                                                             "usage": {"input_tokens": 1, "output_tokens": 10}}},
        {**user(ORIG, 60, uuid="o3"), "message": {"content": result}},
        assistant(ORIG, 70, "k2", 20, uuid="o4"),
        {"type": "system", "subtype": "compact_boundary", "sessionId": ORIG, "uuid": "o5", "timestamp": ts(80)},
    ]


def _copy(lines: list[dict], session: str, marked_from: str | None) -> list[dict]:
    """A background fork's copies: the same lines (uuids, timestamps, usage) under its own id,
    stamped by its process; marked with forkedFrom when `marked_from`."""
    out = []
    for line in lines:
        copy = {**line, "sessionId": session, "sessionKind": "bg"}
        if marked_from is not None:
            copy["forkedFrom"] = {"sessionId": marked_from, "messageUuid": line["uuid"]}
        out.append(copy)
    return out


def fork_tree(root: Path, marked: bool) -> None:
    o = _o_chain()
    f_own = [user(F, 1000, uuid="f1", sessionKind="bg"), assistant(F, 1010, "k3", 30, uuid="f2", sessionKind="bg")]
    g_own = [user(G, 2000, uuid="g1", sessionKind="bg"), assistant(G, 2004, "k4", 40, uuid="g2", sessionKind="bg")]
    write(root / SLUG / f"{ORIG}.jsonl", o)
    write(root / SLUG / f"{F}.jsonl", _copy(o, F, ORIG if marked else None) + f_own)
    write(root / SLUG / f"{G}.jsonl", _copy(o, G, F if marked else None) + _copy(f_own, G, F if marked else None)
          + g_own)


# Worked out from accounting.md §2.1–2.4: each session keeps what it wrote; a fork starts with its own line.
FORKS = {  # session: (requests, output tokens, wall, claude, tool, compactions, tool calls, tool-result bytes)
    ORIG: (2, 30, 70.0, 15.0, 55.0, 1, 1, 4),
    F: (1, 30, 10.0, 10.0, 0.0, 0, 0, 0),
    G: (1, 40, 4.0, 4.0, 0.0, 0, 0, 0),
}
STARTS = {ORIG: ts(0), F: ts(1000), G: ts(2000)}


def _figures(summary: dict) -> tuple:
    return (summary["requests"], summary["tokens"]["total"]["output"], summary["wall_s"], summary["claude_s"],
            summary["tool_s"], summary["compactions"], summary["tool_calls"], summary["tool_result_bytes"])


def test_reference_keeps_a_marked_forks_copies_with_the_session_that_wrote_them(tmp_path: Path) -> None:
    fork_tree(tmp_path, marked=True)
    got = reference.compute(tmp_path)
    assert {s: _figures(got[s]["summary"]) for s in FORKS} == FORKS
    assert {s: got[s]["start_us"] for s in FORKS} == {s: parse_ts(t) for s, t in STARTS.items()}


def test_reference_finds_unmarked_fork_copies_by_who_wrote_them(tmp_path: Path) -> None:
    assert reference.UNMARKED_FORK_COPIES  # (the rule the reference is compared with retrod under)
    fork_tree(tmp_path, marked=False)
    got = reference.compute(tmp_path)
    assert {s: _figures(got[s]["summary"]) for s in FORKS} == FORKS
    assert {s: got[s]["start_us"] for s in FORKS} == {s: parse_ts(t) for s, t in STARTS.items()}


def parse_ts(text: str) -> int:
    return reference.parse_timestamp(text)


@pytest.fixture
def forks_ingested(db_url: str, tmp_path: Path, request) -> tuple[str, Path]:
    root = tmp_path / "projects"
    fork_tree(root, marked=request.param)
    ingest(db_url, [root])
    return db_url, root


@pytest.mark.parametrize("forks_ingested", [True], indirect=True, ids=["marked"])
def test_a_marked_forks_copies_stay_with_the_session_that_wrote_them(forks_ingested) -> None:
    url, root = forks_ingested
    got = reports(url)
    assert {s: _figures(got[s]["summary"]) for s in FORKS} == FORKS
    assert {s: datetime.fromisoformat(got[s]["session"]["started_at"]) for s in FORKS} \
        == {s: datetime.fromisoformat(t) for s, t in STARTS.items()}
    want = reference.compute(root)
    for session in FORKS:
        assert {k: got[session]["summary"][k] for k in want[session]["summary"]} == want[session]["summary"]
    assert reference_tools.compute_tool_use(root)[F]["summary"]["calls"] == 0
    assert got[ORIG]["summary"]["tool_use"]["calls"] == 1 and got[F]["summary"]["tool_use"]["calls"] == 0
    rollups_match_raw(url)


@pytest.mark.parametrize("forks_ingested", [True], indirect=True, ids=["marked"])
def test_a_fork_read_under_older_rules_is_read_again_forgetting_its_copies(forks_ingested) -> None:
    """A fork's file read before rules 3 counted its copies as its own lines (events from second 0,
    calls): read again, those rows go, as a replaced file's; its figures are the ones above."""
    url, _root = forks_ingested
    with psycopg.connect(url) as conn:
        (fork_file,) = conn.execute("SELECT id FROM retrod.files WHERE session_uuid = %s AND kind = 'main'",
                                    (F,)).fetchone()
        # what rules 2 stored for the copy of ORIG's first line: an own event at second 0
        conn.execute("INSERT INTO retrod.events (file_id, \"offset\", session_uuid, ts, prev_ts, kind, gap_us,"
                     " tool_result_bytes, line_uuid, gap_class)"
                     " VALUES (%s, 0, %s, %s, NULL, NULL, 0, 0, 'o1', 'human')",
                     (fork_file, F, datetime.fromisoformat(ts(0))))
        conn.execute("UPDATE retrod.files SET state = jsonb_set(state, '{rules}', '2') WHERE kind <> 'meta'")
    assert reports(url)[F]["summary"]["wall_s"] == 1010.0  # (the copied hours, as issue 28 found them)
    ingest(url, [_root])
    got = reports(url)
    assert {s: _figures(got[s]["summary"]) for s in FORKS} == FORKS
    rollups_match_raw(url)


def test_forks_read_before_their_original_end_like_one_pass(pg_cluster, tmp_path: Path) -> None:
    """Newest fork first, then the fork it continues, then the original, each in halves: the same
    rows as one pass (a fork alone holds the copies' only records until the original comes)."""
    from conftest import fresh_database
    from helpers import snapshot

    whole = tmp_path / "whole" / "projects"
    fork_tree(whole, marked=True)
    with fresh_database(pg_cluster) as url:
        ingest(url, [whole])
        want = snapshot(url, relative_to=whole)
    root = tmp_path / "steps" / "projects"
    (root / SLUG).mkdir(parents=True)
    with fresh_database(pg_cluster) as url:
        for session in (G, F, ORIG):
            data = (whole / SLUG / f"{session}.jsonl").read_bytes()
            lines = data.splitlines(keepends=True)
            for upto in (len(lines) // 2, len(lines)):
                (root / SLUG / f"{session}.jsonl").write_bytes(b"".join(lines[:upto]))
                ingest(url, [root], batch_bytes=512)
        assert snapshot(url, relative_to=root) == want
        rollups_match_raw(url)


def test_a_forked_from_of_the_wrong_shape_marks_nothing() -> None:
    """Any field may be of the wrong type (§2.1): such a line is read, and is the file's own."""
    for forked_from in ("x", 7, [], {"sessionId": 7}, {"sessionId": "#agent"}, {"sessionId": A}, None):
        result = _fold(A, [user(A, 0, forkedFrom=forked_from), assistant(A, 3, "msg_5", 2, forkedFrom=forked_from)])
        assert [e.kind for e in result.events] == [None, "claude"], forked_from
        assert result.requests["msg_5"].attr_foreign is False
    marked = _fold(A, [user(A, 0, forkedFrom={"sessionId": f"{B}#x"}), assistant(A, 3, "msg_6", 2,
                                                                                  forkedFrom={"sessionId": B})])
    assert marked.events == [] and marked.requests["msg_6"].attr_foreign is True


def test_a_forks_copy_of_an_agent_progress_line_lists_no_subagent_and_is_no_event() -> None:
    """§2.1/§2.4: a progress line that is a fork copy makes its embedded record foreign; its agent
    is not listed, and its message is no line of the subagent timeline (§2.3)."""
    progress = {"type": "progress", "sessionId": A, "timestamp": ts(1), "forkedFrom": {"sessionId": B},
                "data": {"type": "agent_progress", "agentId": "x7", "message": assistant(A, 2, "msg_7", 4)}}
    result = _fold(A, [progress])
    assert result.requests["msg_7"].attr_foreign is True
    assert "x7" not in result.subagents and result.events == []
    own = _fold(A, [{**progress, "forkedFrom": None}])
    assert own.requests["msg_7"].attr_foreign is False and "x7" in own.subagents
    assert [(e.sub, e.gap_class) for e in own.events] == [(True, "claude")]


# --- (d) unmarked fork copies: who wrote a uuid, decided from what is stored -------------------

R1 = "11111111-0000-4000-8000-0000000000e1"  # two interactive resumes of one conversation: both
R2 = "22222222-0000-4000-8000-0000000000e2"  # start with the line they share (no stamp on either)


def resumes(root: Path) -> None:
    """R1 and R2 share their first line (second 0); R2's last line is earlier (50 < 100): by the
    tuple (stamped_bg, first_ts, last_ts, id), R2 wrote it, though R1's id sorts first."""
    shared = {"type": "user", "timestamp": ts(0), "uuid": "r0", "message": {"content": "go on"}}
    write(root / SLUG / f"{R1}.jsonl", [{**shared, "sessionId": R1}, user(R1, 100, uuid="r1")])
    write(root / SLUG / f"{R2}.jsonl", [{**shared, "sessionId": R2}, user(R2, 50, uuid="r2")])


def _stored_writers(url: str) -> dict[str, str]:
    from retrod.store.queries import q

    with psycopg.connect(url) as conn:
        return dict(conn.execute(q("ingest_uuid_writers"), {"uuids": None}).fetchall())


def _shared_writers(root: Path) -> dict[str, str]:
    """The reference's writers of the uuids more than one session holds."""
    files = reference.find_files(root)
    holders: dict[str, set[str]] = {}
    for file in files:
        for line in file["lines"] if file["kind"] == "main" else ():
            if reference.is_unmarked_candidate(line, file) and reference.non_empty_string(line.get("uuid")):
                holders.setdefault(line["uuid"], set()).add(file["session"])
    writers = reference.uuid_writers(files)
    return {uuid: writers[uuid] for uuid, sessions in holders.items() if len(sessions) > 1}


def test_stored_holders_decide_who_wrote_each_uuid_in_any_order(pg_cluster, tmp_path: Path) -> None:
    """Whatever order the files come in, in halves: ORIG wrote its lines (its copies are stamped
    "bg" in F and G), F wrote its own two (G's copies tie on stamp and first time, F ended first),
    and R2 wrote the line it shares with R1 (ended first)."""
    whole = tmp_path / "whole" / "projects"
    fork_tree(whole, marked=False)
    resumes(whole)
    want = {**dict.fromkeys(("o1", "o2", "o3", "o4", "o5"), ORIG), "f1": F, "f2": F, "r0": R2}
    assert _shared_writers(whole) == want
    for order in ((G, F, R1, ORIG, R2), (ORIG, R2, F, G, R1), (F, R1, G, R2, ORIG)):
        with read_in_halves(pg_cluster, whole, tmp_path, order) as url:
            assert _stored_writers(url) == want, order


def test_transcripts_read_under_rules_3_are_read_again_to_hold_their_uuids(db_url: str, tmp_path: Path) -> None:
    """Files read before migration 0026 (fold rules 3) kept no holders: read again from their start
    (rows kept), they fill them."""
    root = tmp_path / "projects"
    fork_tree(root, marked=False)
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        conn.execute("DELETE FROM retrod.line_holders")
        conn.execute("UPDATE retrod.files SET state = jsonb_set(state, '{rules}', '3') - 'span_first_us'"
                     " - 'span_last_us' WHERE kind <> 'meta'")
    assert _stored_writers(db_url) == {}
    ingest(db_url, [root])
    assert _stored_writers(db_url) == _shared_writers(root) != {}


def test_fork_copies_read_again_under_newer_rules_keep_their_requests_with_who_wrote_them(db_url: str,
                                                                                          tmp_path: Path) -> None:
    """A transcript read under older rules (not so old that its rows are forgotten) is read again
    from its start, its rows and holders kept: the records on its fork copies come back ranked as
    the fork's own (upsert_requests does not know the line is a copy), and are owned again as
    foreign (reown_requests, by the stretch each file read)."""
    from retrod.transcript.fold import FORGET_BELOW_RULES, RULES

    root = tmp_path / "projects"
    fork_tree(root, marked=False)
    ingest(db_url, [root])
    assert {s: _figures(got["summary"]) for s, got in reports(db_url).items() if s in FORKS} == FORKS
    assert FORGET_BELOW_RULES <= RULES - 1
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM retrod.line_holders WHERE copy AND key IS NOT NULL").fetchone()[0]
        conn.execute("UPDATE retrod.files SET state = jsonb_set(state, '{rules}', %s::text::jsonb)"
                      " WHERE kind <> 'meta'", (RULES - 1,))
    ingest(db_url, [root])
    assert {s: _figures(got["summary"]) for s, got in reports(db_url).items() if s in FORKS} == FORKS
    rollups_match_raw(db_url)


# Figures of the unmarked tree's sessions that follow the rule (§2.2's, §2.3's and §2.4's
# per-line ones): requests, tokens, times, start, compactions, tool-result bytes.
def _timeline(summary: dict) -> tuple:
    return (summary["requests"], summary["tokens"]["total"]["output"], summary["wall_s"], summary["claude_s"],
            summary["tool_s"], summary["compactions"], summary["tool_result_bytes"])


def test_unmarked_fork_copies_are_no_events_and_own_no_requests_in_any_order(pg_cluster, tmp_path: Path) -> None:
    """An unmarked background fork (and a fork of it) re-writing its original's lines, read
    before and after the original, in halves: each session's timeline starts with its own first
    line (ORIG 70 s wall, 15 claude, 55 tool, 1 compaction, 4 bytes; F 10 s; G 4 s), and R2 (which
    wrote the line it shares with R1) starts at 0, R1 at 100. The copies' requests stay with the
    session that wrote them, though the forks' ids sort first: ORIG k1 and k2 (30 output tokens),
    F k3 (30), G k4 (40)."""
    whole = tmp_path / "whole" / "projects"
    fork_tree(whole, marked=False)
    resumes(whole)
    want = {s: (f[0], f[1], f[2], f[3], f[4], f[5], f[7]) for s, f in FORKS.items()}
    want[R1], want[R2] = (0, 0, 0.0, 0.0, 0.0, 0, 0), (0, 0, 50.0, 0.0, 0.0, 0, 0)
    starts = {**STARTS, R1: ts(100), R2: ts(0)}
    expected = reference.compute(whole)
    assert {s: _timeline(expected[s]["summary"]) for s in want} == want
    for order in ((G, F, R1, ORIG, R2), (ORIG, R2, F, G, R1)):
        with read_in_halves(pg_cluster, whole, tmp_path, order) as url:
            got = reports(url)
            assert {s: _timeline(got[s]["summary"]) for s in want} == want, order
            assert {s: datetime.fromisoformat(got[s]["session"]["started_at"]) for s in want} \
                == {s: datetime.fromisoformat(t) for s, t in starts.items()}, order
            # §2.4, §2.6: ORIG's Bash call is ORIG's; the forks' copies of it are no calls
            assert {s: got[s]["summary"]["tool_use"]["calls"] for s in (ORIG, F, G)} == {ORIG: 1, F: 0, G: 0}, order
            assert {s: _figures(got[s]["summary"]) for s in FORKS} == FORKS, order
            rollups_match_raw(url)
    tools = reference_tools.compute_tool_use(whole)
    assert {s: tools[s]["summary"]["calls"] for s in (ORIG, F, G)} == {ORIG: 1, F: 0, G: 0}


def test_a_rewritten_transcript_hands_its_uuids_back(db_url: str, tmp_path: Path) -> None:
    """R2 wrote the line it shares with R1 (it ended first). Its file rewritten (read again from
    its start) with a last line at 200 s: R1 ended first now, so R1 wrote it: R1's timeline
    starts at 0 (100 s of wall), R2's at 200."""
    root = tmp_path / "projects"
    resumes(root)
    ingest(db_url, [root])
    got = reports(db_url)
    assert (got[R1]["summary"]["wall_s"], got[R2]["summary"]["wall_s"]) == (0.0, 50.0)
    shared = {"type": "user", "timestamp": ts(0), "uuid": "r0", "message": {"content": "go on"}}
    write(root / SLUG / f"{R2}.jsonl", [{**shared, "sessionId": R2}, user(R2, 200, uuid="r2b")])
    ingest(db_url, [root])
    got = reports(db_url)
    assert (got[R1]["summary"]["wall_s"], got[R2]["summary"]["wall_s"]) == (100.0, 0.0)
    assert datetime.fromisoformat(got[R1]["session"]["started_at"]) == datetime.fromisoformat(ts(0))
    assert datetime.fromisoformat(got[R2]["session"]["started_at"]) == datetime.fromisoformat(ts(200))
    rollups_match_raw(db_url)


def test_unmarked_fork_copies_on_the_bulk_paths_two_lanes(db_url: str, tmp_path: Path) -> None:
    """The bulk path commits a batch's sessions on two connections at once: each lane's ranking
    must see the other's holders and spans (one at a time, from the ranking to the commit), so
    the figures are the hand-worked ones whichever commits first."""
    from psycopg_pool import ConnectionPool

    from retrod.ingest.ingester import Ingester
    from retrod.report import prices
    from retrod.store.store import Store

    root = tmp_path / "projects"
    fork_tree(root, marked=False)
    resumes(root)
    with ConnectionPool(db_url, min_size=1, max_size=4, open=True) as pool:
        with pool.connection() as conn:
            prices.store_tiers(conn)
        Ingester(Store(pool, "host-a"), [root], bulk_from=0).scan()
    got = reports(db_url)
    assert {s: _figures(got[s]["summary"]) for s in FORKS} == FORKS
    assert (got[R1]["summary"]["wall_s"], got[R2]["summary"]["wall_s"]) == (0.0, 50.0)
    rollups_match_raw(db_url)


# --- (e) an unmarked fork copy gives the fork no working folder, subagent or link (§2.1, §2.4, §4) --

def _agents_chain() -> list[dict]:
    """ORIG's own lines, in its folder: 0 U, 5 A calling Task toolu_t, 6 an agent_progress line of
    sub1 answering toolu_t (its record ks1), 20 U the Task's result naming sub1."""
    call = [{"type": "tool_use", "id": "toolu_t", "name": "Task",
             "input": {"description": "look", "subagent_type": "Explore", "prompt": "p"}}]
    result = [{"type": "tool_result", "tool_use_id": "toolu_t", "content": "done"}]
    here = {"cwd": "/home/me/app"}
    progress = {"type": "progress", "sessionId": ORIG, "timestamp": ts(6), "uuid": "o3", "parentToolUseID": "toolu_t",
                "data": {"type": "agent_progress", "agentId": "sub1",
                         "message": {"type": "assistant", "timestamp": ts(6),
                                     "message": {"id": "ks1", "content": [],
                                                 "usage": {"input_tokens": 1, "output_tokens": 3}}}}, **here}
    return [
        user(ORIG, 0, uuid="o1", **here),
        {**assistant(ORIG, 5, "k1", 10, uuid="o2", **here),
         "message": {"id": "k1", "content": call, "usage": {"input_tokens": 1, "output_tokens": 10}}},
        progress,
        {**user(ORIG, 20, uuid="o4", toolUseResult={"agentId": "sub1"}, **here), "message": {"content": result}},
    ]


def agents_fork_tree(root: Path) -> None:
    """F, an unmarked background fork of ORIG, and G of F: each re-writes the lines before it (in
    ORIG's folder), then writes its own in its own folder."""
    o = _agents_chain()
    f_own = [user(F, 1000, uuid="f1", sessionKind="bg", cwd="/home/me/fork"),
             assistant(F, 1010, "k3", 30, uuid="f2", sessionKind="bg", cwd="/home/me/fork")]
    g_own = [user(G, 2000, uuid="g1", sessionKind="bg", cwd="/home/me/g"),
             assistant(G, 2004, "k4", 40, uuid="g2", sessionKind="bg", cwd="/home/me/g")]
    write(root / SLUG / f"{ORIG}.jsonl", o)
    write(root / SLUG / f"{F}.jsonl", _copy(o, F, None) + f_own)
    write(root / SLUG / f"{G}.jsonl", _copy(o, G, None) + _copy(f_own, G, None) + g_own)


# Worked out from accounting.md §4 (the first cwd of the session's own lines) and §2.4 (links: a
# toolUseResult.agentId, or an agent_progress line's agent and parentToolUseID, of its own lines).
PROJECTS = {ORIG: "/home/me/app", F: "/home/me/fork", G: "/home/me/g"}
LINKS = {ORIG: [("sub1", "toolu_t"), ("sub1", "toolu_t")], F: [], G: []}
# a session's links as the report reads them: its files' and its holder lines' that are no fork copies
SESSION_LINKS = """
SELECT session_uuid, agent_id, tool_use_id FROM retrod.subagent_links
UNION ALL
SELECT session_uuid, link_agent, link_tool_use FROM retrod.line_holders
WHERE link_agent IS NOT NULL AND line_uuid IS NOT NULL AND NOT copy
ORDER BY 1, 2, 3
"""


def test_unmarked_fork_copies_give_the_fork_no_folder_subagent_or_link_in_any_order(pg_cluster,
                                                                                    tmp_path: Path) -> None:
    """The forks' copies of ORIG's lines name ORIG's folder, list sub1 (an agent_progress record)
    and link it to toolu_t twice: none of it is the forks'. Read in any order, in halves (a fork
    read first holds the copies as its own until ORIG comes), each session's project, listed
    subagents (as the reference lists them) and links are its own lines'; ORIG's sub1 is matched
    by its tool_use."""
    whole = tmp_path / "whole" / "projects"
    agents_fork_tree(whole)
    expected = reference.compute(whole)
    assert {s: expected[s]["subagents"] for s in PROJECTS} == {ORIG: ["sub1"], F: [], G: []}
    for order in ((G, F, ORIG), (ORIG, F, G), (F, ORIG, G)):
        with read_in_halves(pg_cluster, whole, tmp_path, order) as url:
            got = reports(url)
            assert {s: got[s]["session"]["project_path"] for s in PROJECTS} == PROJECTS, order
            assert {s: sorted(a["agent_id"] for a in got[s]["subagents"]) for s in PROJECTS} \
                == {s: expected[s]["subagents"] for s in PROJECTS}, order
            assert [(a["agent_id"], a["matched_by"]) for a in got[ORIG]["subagents"]] == [("sub1", "tool_use")]
            with psycopg.connect(url) as conn:
                links = conn.execute(SESSION_LINKS).fetchall()
            assert {s: [(a, t) for k, a, t in links if k == s] for s in PROJECTS} == LINKS, order
            rollups_match_raw(url)


def test_a_fork_read_again_keeping_its_rows_keeps_its_own_folder(db_url: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A main transcript read again from its start keeping its rows (newer fold rules that do not
    forget them: Store.rewind) saves the folder of its first own line that names one, which in F
    is a fork copy of ORIG's line (its holder still marked so): its folder is settled again from
    its holders, its own line's (§4 with §2.1)."""
    from retrod.ingest import ingester

    root = tmp_path / "projects"
    agents_fork_tree(root)
    ingest(db_url, [root])
    assert {s: r["session"]["project_path"] for s, r in reports(db_url).items()} == PROJECTS
    monkeypatch.setattr(ingester, "RULES", ingester.RULES + 1)  # (read again, rows kept: not below FORGET_*)
    with psycopg.connect(db_url) as conn:
        rewound = conn.execute("SELECT count(*) FROM retrod.files WHERE kind = 'main' AND (state->>'rules')::int < %s",
                               (ingester.RULES,)).fetchone()[0]
    assert rewound == len(PROJECTS)
    ingest(db_url, [root])
    assert {s: r["session"]["project_path"] for s, r in reports(db_url).items()} == PROJECTS
    rollups_match_raw(db_url)


def test_forks_read_under_rules_7_are_read_again_forgetting_what_their_copies_gave(db_url: str,
                                                                                 tmp_path: Path) -> None:
    """A main transcript read under fold rules 7 (before migration 0036) listed the subagents of
    its copied lines, linked them and took its folder from them: read again from its start, its
    own rows forgotten (fold.FORGET_MAIN_BELOW_RULES), each session has only its own."""
    from retrod.transcript.fold import FORGET_MAIN_BELOW_RULES

    root = tmp_path / "projects"
    agents_fork_tree(root)
    ingest(db_url, [root])
    want = reports(db_url)
    assert FORGET_MAIN_BELOW_RULES == 8
    with psycopg.connect(db_url) as conn:  # what rules 7 left in F: its copies' agent, link and folder
        f_id = conn.execute("SELECT id FROM retrod.files WHERE session_uuid = %s AND kind = 'main'", (F,)).fetchone()[0]
        conn.execute("INSERT INTO retrod.subagents (file_id, session_uuid, agent_id, first_ts, last_ts)"
                     " VALUES (%s, %s, 'sub1', %s, %s)", (f_id, F, ts(6), ts(6)))
        conn.execute("INSERT INTO retrod.subagent_links (file_id, session_uuid, agent_id, tool_use_id)"
                     " VALUES (%s, %s, 'sub1', 'toolu_t')", (f_id, F))
        conn.execute("UPDATE retrod.files SET cwd = '/home/me/app', state = jsonb_set(state, '{rules}', '7')"
                     " WHERE id = %s", (f_id,))
    stale = reports(db_url)[F]
    assert (stale["session"]["project_path"], [a["agent_id"] for a in stale["subagents"]]) == ("/home/me/app", ["sub1"])
    ingest(db_url, [root])
    got = reports(db_url)
    assert {s: (got[s]["session"]["project_path"], got[s]["subagents"]) for s in PROJECTS} \
        == {s: (want[s]["session"]["project_path"], want[s]["subagents"]) for s in PROJECTS}
    assert got[F]["session"]["project_path"] == "/home/me/fork" and got[F]["subagents"] == []
    with psycopg.connect(db_url) as conn:
        links = conn.execute(SESSION_LINKS).fetchall()
    assert {s: [(a, t) for k, a, t in links if k == s] for s in PROJECTS} == LINKS
    rollups_match_raw(db_url)


# --- (f) a fork decided by another transaction while a batch of the fork waits for the lock ----

def _read_chain(session: str, second: int, uuid: str, call: str, **extra) -> list[dict]:
    """A Read of /p: the assistant line calling it, and the user line with its result."""
    use = [{"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": "/p"}}]
    result = [{"type": "tool_result", "tool_use_id": call, "content": "text"}]
    return [{**assistant(session, second, f"k-{call}", 5, uuid=f"{uuid}a", **extra),
             "message": {"id": f"k-{call}", "content": use, "usage": {"input_tokens": 1, "output_tokens": 5}}},
            {**user(session, second + 1, uuid=f"{uuid}u", **extra), "message": {"content": result}}]


@pytest.mark.parametrize("fork_first", [True, False], ids=["fork-waits", "original-waits"])
def test_a_fork_decided_while_a_batch_of_it_waits_for_the_lock(db_url: str, tmp_path: Path, monkeypatch,
                                                                fork_first: bool) -> None:
    """F, a background fork, re-writes ORIG's Read of /p, then reads /p again itself. Read alone,
    F's copy of the Read counts, and F's own Read is a duplicate of it; once ORIG is read, the
    copy is none (§2.1) and F's Read is productive (§2.6). F's second half and ORIG are committed
    at once: the first of the two writes what it writes before the fork-copies lock and waits
    there until the other's commit is done (or would wait on one of its rows), then takes the
    lock. Whichever way it ends (the other commit waiting on this one's rows, or a deadlock
    retried), the figures are those of one pass."""
    from retrod.store.queries import q

    orig = [user(ORIG, 0, uuid="o1"), *_read_chain(ORIG, 5, "o2", "toolu_r1")]
    fork = _copy(orig, F, None) + [user(F, 100, uuid="f1", sessionKind="bg"),
                                   *_read_chain(F, 105, "f2", "toolu_r2", sessionKind="bg")]
    whole = tmp_path / "whole" / "projects"
    write(whole / SLUG / f"{ORIG}.jsonl", orig)
    write(whole / SLUG / f"{F}.jsonl", fork)
    tools = reference_tools.compute_tool_use(whole)
    assert {s: (tools[s]["summary"]["calls"], tools[s]["summary"]["productive"]) for s in (ORIG, F)} \
        == {ORIG: (1, 1), F: (1, 1)}

    fork_root, orig_root = tmp_path / "fork" / "projects", tmp_path / "orig" / "projects"
    write(fork_root / SLUG / f"{F}.jsonl", fork[:len(orig)])  # the copies alone: F's own, for now
    ingest(db_url, [fork_root])
    got = reports(db_url)
    assert got[F]["summary"]["tool_use"]["calls"] == 1
    write(fork_root / SLUG / f"{F}.jsonl", fork)
    write(orig_root / SLUG / f"{ORIG}.jsonl", orig)

    lock, paused, release = q("ingest_lock_fork_copies"), threading.Event(), threading.Event()
    real = psycopg.Connection.execute

    def execute(conn, query, params=None, **kwargs):  # the first to reach the lock waits there
        if query == lock and not paused.is_set():
            paused.set()
            release.wait(timeout=3)  # (or the other commit waits on a row this one wrote)
        return real(conn, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    roots = (fork_root, orig_root) if fork_first else (orig_root, fork_root)
    first = threading.Thread(target=ingest, args=(db_url, [roots[0]]))
    first.start()
    assert paused.wait(timeout=30)
    second = threading.Thread(target=ingest, args=(db_url, [roots[1]]))
    second.start()
    second.join(timeout=3)
    release.set()
    first.join(timeout=60)
    second.join(timeout=60)
    assert not first.is_alive() and not second.is_alive()
    monkeypatch.undo()

    got = reports(db_url)
    assert {s: (got[s]["summary"]["tool_use"]["calls"], got[s]["summary"]["tool_use"]["productive"])
            for s in (ORIG, F)} == {ORIG: (1, 1), F: (1, 1)}
    rollups_match_raw(db_url)
