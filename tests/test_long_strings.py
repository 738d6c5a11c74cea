"""Strings of any length never stop ingest (DESIGN §2.1; issue 19).

A btree index row holds ~2,700 bytes: a 4,000-character message id, request id, tool id, model
name, agent id, session id or path once made PostgreSQL refuse a batch (ProgramLimitExceeded),
which retrod took for the database being away: `run --once` exited 1 and no file after it was
stored. Every index now holds such a string whole or a hash of it, keys still compare whole, and
an error caused by one file's data is that file's fault (logged once, retried later), never an
outage. Expected figures are the independent reference's (tests/reference.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import string
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool

import reference
from helpers import HOST, reports, rollups_match_raw
from retrod.ingest.ingester import Ingester
from retrod.store.store import Store
from retrod.transcript.keys import indexable
from retrod.transcript.parser import storable_id

LONG = "11111111-2222-4000-8000-00000000000a"
EXAMPLES = int(os.environ.get("RETROD_HYPOTHESIS_EXAMPLES", "12"))


def noise(n: int, seed: int) -> str:
    """`n` characters no compression shrinks (PostgreSQL compresses long index values)."""
    rnd = random.Random(seed)
    return "".join(rnd.choice(string.ascii_letters + string.digits + "éλ🙂") for _ in range(n))


def long_session(root: Path) -> None:
    """A session whose ids, names and paths are 4,000 characters long, with a subagent file
    several folders deep (a path over 2,700 bytes) and a 2.0.x agent file naming a long session."""
    mid, tool, path, model_name, agent = (noise(4000, seed) for seed in range(5))
    main = root / "-long" / f"{LONG}.jsonl"
    main.parent.mkdir(parents=True)
    lines = [
        {"type": "user", "sessionId": LONG, "uuid": noise(4000, 10), "timestamp": "2026-04-01T10:00:00.000Z",
         "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "sessionId": LONG, "uuid": noise(4000, 11), "requestId": noise(4000, 12),
         "timestamp": "2026-04-01T10:00:05.000Z",
         "message": {"id": mid, "model": model_name, "usage": {"input_tokens": 10, "output_tokens": 20},
                     "content": [{"type": "tool_use", "id": tool, "name": noise(4000, 13),
                                  "input": {"file_path": path}}]}},
        {"type": "user", "sessionId": LONG, "uuid": noise(4000, 14), "timestamp": "2026-04-01T10:00:09.000Z",
         "toolUseResult": {"agentId": agent},
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool, "content": "ok"}]}},
        {"type": "progress", "sessionId": LONG, "timestamp": "2026-04-01T10:00:10.000Z",
         "parentToolUseID": tool, "data": {"type": "agent_progress", "agentId": agent, "message": {
             "type": "assistant", "timestamp": "2026-04-01T10:00:10.000Z", "requestId": noise(4000, 15),
             "message": {"id": noise(4000, 16), "model": model_name, "usage": {"input_tokens": 1, "output_tokens": 3},
                         "iterations": [], "speed": "fast"}}}},
        {"type": "assistant", "sessionId": LONG, "timestamp": "2026-04-01T10:00:12.000Z",
         "message": {"id": mid, "model": model_name, "usage": {"input_tokens": 10, "output_tokens": 25},
                     "content": [{"type": "tool_use", "id": tool, "name": "Read", "input": {"file_path": path}}]}},
    ]
    main.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # (a file name holds 255 bytes at most: ASCII folders of 200)
    deep = root / "-long" / LONG / "subagents" / "/".join(random.Random(n).choice(string.ascii_letters) * 200
                                                          for n in range(14))
    deep.mkdir(parents=True)
    assert len(str(deep).encode()) > 2800
    (deep / "agent-a1.jsonl").write_text(json.dumps(
        {"type": "assistant", "sessionId": LONG, "isSidechain": True, "timestamp": "2026-04-01T10:00:11.000Z",
         "message": {"id": noise(4000, 17), "model": model_name, "usage": {"input_tokens": 2, "output_tokens": 4},
                     "content": [{"type": "tool_use", "id": noise(4000, 18), "name": "Read",
                                  "input": {"file_path": path}}]}}) + "\n")
    (root / "-long" / "agent-0fabc123.jsonl").write_text(json.dumps(
        {"type": "assistant", "sessionId": noise(4000, 19), "timestamp": "2026-04-01T10:00:00.000Z",
         "message": {"id": "msg_of_the_long_session", "usage": {"input_tokens": 5, "output_tokens": 6}}}) + "\n")


def test_long_ids_and_paths_beside_normal_sessions(db_url: str, projects: Path, tmp_path: Path) -> None:
    long_session(projects)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects), RETROD_HOST_ID=HOST,
               RETROD_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path / "home"))
    done = subprocess.run([sys.executable, "-m", "retrod", "run", "--once"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "not ingested" not in done.stderr, done.stderr
    got, want = reports(db_url), reference.compute(projects)
    stored = {indexable(session): figures for session, figures in want.items()}  # (a long session id, hashed)
    assert got.keys() == stored.keys()
    for session, expected in stored.items():
        summary = got[session]["summary"]
        for key in ("wall_s", "claude_s", "tool_s", "human_s", "requests", "compactions", "tool_calls",
                    "tool_result_bytes", "tokens"):
            assert summary[key] == expected["summary"][key], (session[:40], key)
    long_report = got[LONG]
    assert long_report["summary"]["tokens"]["total"]["output"] == 25 + 3 + 4
    assert {s["agent_id"] for s in long_report["subagents"]} == {indexable(noise(4000, 4)), "a1"}
    model_row = long_report["summary"]["tokens_by_model"][0]
    assert model_row["model"].startswith(noise(4000, 3)[:20]) and len(model_row["model"].encode()) <= 200
    # One tool id: its call in the main transcript once, a Read of the same long path after it.
    assert long_report["summary"]["tool_use"]["calls"] == 2
    rollups_match_raw(db_url)


def test_a_files_own_data_error_is_its_fault_not_an_outage(db_url: str, projects: Path) -> None:
    """A value the database refuses for one file's data (here a check a DBA added, and an index
    over a column retrod does not shorten) fails that file alone: logged once, retried at the next
    scan, every other file stored."""
    with psycopg.connect(db_url) as conn:
        conn.execute("ALTER TABLE retrod.requests ADD CONSTRAINT sane_output CHECK (output_tokens < 1000000)")
        conn.execute("CREATE INDEX meta_descriptions ON retrod.subagent_meta (description)")
    huge = projects / "-bad" / "99999999-0000-4000-8000-000000000001.jsonl"
    huge.parent.mkdir()
    huge.write_text(json.dumps({"type": "assistant", "timestamp": "2026-04-01T10:00:00Z",
                                "message": {"id": "msg_big", "usage": {"output_tokens": 5_000_000}}}) + "\n")
    meta = projects / "-bad" / "99999999-0000-4000-8000-000000000002" / "subagents" / "agent-m1.meta.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"agentType": "x", "description": noise(9000, 30)}))
    meta.with_name("agent-m1.jsonl").write_text("")
    with structlog.testing.capture_logs() as logged:
        for _scan in range(2):
            with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
                stats = Ingester(Store(pool, HOST), [projects], 1 << 20).scan()
            assert stats.failed == 2
    failures = [e for e in logged if e["event"].startswith("file not ingested")]
    assert sorted(Path(e["path"]).name for e in failures) == sorted([huge.name, meta.name])  # once each
    assert {e["log_level"] for e in failures} == {"error"}
    assert any("CheckViolation" in e["error"] for e in failures)
    assert any("ProgramLimitExceeded" in e["error"] for e in failures)
    shutil.rmtree(projects / "-bad")
    with psycopg.connect(db_url) as conn:
        conn.execute("ALTER TABLE retrod.requests DROP CONSTRAINT sane_output")
    got = reports(db_url)
    want = reference.compute(projects)
    assert got.keys() >= want.keys()
    for session, expected in want.items():
        assert got[session]["summary"]["tokens"] == expected["summary"]["tokens"], session


# ---- any string in any field the fold reads ---------------------------------------------------

ODD = st.sampled_from(["", "\x00", "\ud800", "\\", "\\h", "…#", "🙂", "é", " ", "\n", "a"])
TEXT = st.one_of(
    st.text(max_size=12),
    st.builds(lambda parts, n, seed: "".join(parts) + noise(n, seed), st.lists(ODD, max_size=4),
              st.integers(2500, 5000), st.integers(0, 10**6)),
    st.lists(ODD, max_size=8).map("".join),
)


@st.composite
def odd_line(draw, session: str, n: int) -> str:
    """A transcript line with drawn strings in every field the parser and fold read."""
    kind = draw(st.sampled_from(["user", "assistant", "progress", "system"]))
    text = lambda: draw(TEXT)  # noqa: E731 - one draw per field
    message = {"id": text(), "model": text(), "role": kind,
               "usage": {"input_tokens": n, "output_tokens": n + 1, "speed": text(),
                         "iterations": [{"input_tokens": n, "output_tokens": n + 1, "model": text()}]},
               "content": [{"type": "tool_use", "id": text(), "name": text(), "input": {"file_path": text(),
                                                                                      "command": text()}},
                           {"type": "tool_result", "tool_use_id": text(), "content": text(), "is_error": True},
                           {"type": "text", "text": text()}]}
    line = {"type": kind, "subtype": text(), "uuid": text(), "requestId": text(), "parentToolUseID": text(),
            "sessionId": draw(st.sampled_from([session, text()])), "isSidechain": draw(st.booleans()),
            "timestamp": draw(st.sampled_from([f"2026-04-01T10:{n // 60:02d}:{n % 60:02d}.000Z", text()])),
            "toolUseResult": {"agentId": text()}, "message": message}
    if kind == "progress":
        line["data"] = {"type": "agent_progress", "agentId": text(),
                        "message": {"type": "assistant", "sessionId": text(), "requestId": text(), "message": message}}
    return json.dumps(line) + "\n"


@st.composite
def odd_tree(draw) -> dict[str, str]:
    session = "22222222-3333-4000-8000-00000000000b"
    lines = [draw(odd_line(session, n)) for n in range(draw(st.integers(1, 6)))]
    agent = [draw(odd_line(session, 100 + n)) for n in range(draw(st.integers(0, 3)))]
    tree = {f"-odd/{session}.jsonl": "".join(lines), f"-odd/{session}/subagents/agent-x.jsonl": "".join(agent)}
    if draw(st.booleans()):  # a 2.0.x agent file, its session named by its first sessionId
        tree["-odd/agent-beef.jsonl"] = draw(odd_line(session, 200)).replace(session, draw(TEXT) or "s", 1)
    return tree


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])
@given(tree=odd_tree())
def test_any_string_in_any_field_stops_nothing(db_url: str, tmp_path_factory: pytest.TempPathFactory,
                                               tree: dict[str, str]) -> None:
    root = tmp_path_factory.mktemp("odd")
    for name, text in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        stats = Ingester(Store(pool, HOST), [root]).scan()
    assert stats.failed == 0
    got = reports(db_url)
    want = {storable_id(s): figures for s, figures in reference.compute(root).items()}
    assert got.keys() == want.keys()
    for session, expected in want.items():
        summary = got[session]["summary"]
        assert (summary["requests"], summary["tokens"]) == (expected["summary"]["requests"],
                                                            expected["summary"]["tokens"]), session[:40]
        assert (summary["wall_s"], summary["claude_s"], summary["tool_s"], summary["human_s"]) == (
            expected["summary"]["wall_s"], expected["summary"]["claude_s"], expected["summary"]["tool_s"],
            expected["summary"]["human_s"])
    rollups_match_raw(db_url)
