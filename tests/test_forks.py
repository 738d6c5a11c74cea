"""Which session a line belongs to (DESIGN §2.1): a `sessionId` of the form `<session>#…`
names the part before `#`; a background fork's copies of the chain it continues (fork copies)
stay with the session that wrote them. Figures worked out by hand from DESIGN's text."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reference
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
