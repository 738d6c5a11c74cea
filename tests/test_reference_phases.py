"""Self-tests of the phase figures of tests/reference.py (accounting.md §2.5).

Tiny hand-built transcripts; every expected number is worked out by hand in the
comments from accounting.md §2, not by running the reference.  Times are seconds
after 2024-01-01T00:00:00Z.
"""

import json
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference import compute, compute_phases, subagent_phase

A = "aaaaaaaa-0000-4000-8000-0000000000a1"
B = "bbbbbbbb-0000-4000-8000-0000000000b2"
BASE = datetime(2024, 1, 1, tzinfo=UTC)


def write(path: Path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def ts(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def window(start: float, end: float) -> tuple[datetime, datetime]:
    return (at(start), at(end))


def usage(inp=0, out=0, cr=0, cc=0):
    return {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": cr,
            "cache_creation_input_tokens": cc}


TEXT = [{"type": "text", "text": "ok"}]


def tool_use(tool_id):
    return [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}]


def user(session, t, content="hi", **extra):
    line = {"type": "user", "sessionId": session, "message": {"role": "user", "content": content}}
    if t is not None:
        line["timestamp"] = ts(t)
    line.update(extra)
    return line


def assistant(session, t, msg_id, use, content=TEXT, **extra):
    line = {"type": "assistant", "sessionId": session,
            "message": {"id": msg_id, "role": "assistant", "content": content, "usage": use}}
    if t is not None:
        line["timestamp"] = ts(t)
    line.update(extra)
    return line


def tool_result(tool_id, content):
    return [{"type": "tool_result", "tool_use_id": tool_id, "content": content}]


def figures(inp, out, cr, cc, requests, tool_turns, claude, tool, human, result_bytes, away=0.0):
    return {
        "tokens": {"input": inp, "output": out, "cache_read": cr, "cache_create": cc},
        "requests": requests,
        "tool_turns": tool_turns,
        "text_turns": requests - tool_turns,
        "claude_s": claude,
        "tool_s": tool,
        "human_s": human,
        "away_s": away,
        "tool_result_bytes": result_bytes,
    }


def test_gaps_straddle_windows_and_an_empty_window(tmp_path):
    write(
        tmp_path / "proj" / f"{A}.jsonl",
        [
            user(A, 2),  # first event, no gap
            # Request m1: first record at 4 (tool_use, out 10), final snapshot at 11
            # (text, out 20).  Timestamp = 4 (earliest) -> W0; usage = out 20;
            # tool turn because ANY of its records has a tool_use.
            assistant(A, 4, "m1", usage(1, 10), tool_use("tu1")),  # claude [2, 4]
            assistant(A, 11, "m1", usage(1, 20)),  # claude [4, 11]: 6 s in W0, 1 s in W1
            user(A, 14, tool_result("tu1", "abcde")),  # tool [11, 14]; 5 bytes at 14 -> W1
            assistant(A, 15, "m2", usage(2, 30, 100, 7)),  # claude [14, 15]; text turn
            {"type": "progress", "sessionId": A, "timestamp": ts(16),
             "data": {"type": "hook_progress"}},  # not an event
            user(A, 35, "next please"),  # human [15, 35]: 5 s W1, 10 s W2, 5 s W3
            assistant(A, 36, "m3", usage(3, 40)),  # claude [35, 36]; text turn
            # Stamped earlier than the high-water mark 36: no gap, no overlap anywhere.
            # Its 3 tool_result bytes (text element only) at 34 -> W3.
            user(A, 34, tool_result("tu0", [{"type": "text", "text": "xyz"}, {"type": "image"}])),
            assistant(A, 38, "m4", usage(4, 50), tool_use("tu2")),  # claude [36, 38]; tool turn
            # No timestamp: not an event, and its request is in no window.
            assistant(A, None, "m5", usage(1000, 0)),
        ],
    )
    # A subagent request (subagents bucket) at 12 -> W1: phases count all buckets.
    write(
        tmp_path / "proj" / A / "subagents" / "agent-s1.jsonl",
        [assistant(A, 12, "s1", usage(5, 6, 7, 8), isSidechain=True, agentId="s1")],
    )

    plus_two = timezone(timedelta(hours=2))
    windows = [
        window(0, 10),  # W0
        window(10, 20),  # W1
        window(20, 30),  # W2: no event and no request inside, only part of a gap
        # W3 = [30, 40) written in +02:00.
        (datetime(2024, 1, 1, 2, 0, 30, tzinfo=plus_two), datetime(2024, 1, 1, 2, 0, 40, tzinfo=plus_two)),
        window(100, 200),  # W4: after everything
    ]
    result = compute_phases(tmp_path, A, windows)
    assert result == [
        # W0: m1 (in 1, out 20, tool turn).  claude: [2,4] 2 + [4,10] 6 = 8.
        figures(1, 20, 0, 0, requests=1, tool_turns=1, claude=8.0, tool=0.0, human=0.0, result_bytes=0),
        # W1: m2 (2, 30, 100, 7) + s1 (5, 6, 7, 8); both text.  claude: [10,11] 1 +
        # [14,15] 1 = 2; tool: [11,14] 3; human: [15,20] 5; bytes 5.
        figures(7, 36, 107, 15, requests=2, tool_turns=0, claude=2.0, tool=3.0, human=5.0, result_bytes=5),
        # W2: human [20,30] 10 only.
        figures(0, 0, 0, 0, requests=0, tool_turns=0, claude=0.0, tool=0.0, human=10.0, result_bytes=0),
        # W3: m3 (3, 40, text) + m4 (4, 50, tool).  human [30,35] 5; claude [35,36] 1 +
        # [36,38] 2 = 3; bytes 3.
        figures(7, 90, 0, 0, requests=2, tool_turns=1, claude=3.0, tool=0.0, human=5.0, result_bytes=3),
        figures(0, 0, 0, 0, requests=0, tool_turns=0, claude=0.0, tool=0.0, human=0.0, result_bytes=0),
    ]

    # Windows are independent and come back in the order given.
    assert compute_phases(tmp_path, A, [windows[2], windows[0]]) == [result[2], result[0]]
    # m5 (no timestamp) counts in the session totals but in no window: 1+2+3+4+5+1000.
    assert compute(tmp_path)[A]["summary"]["tokens"]["total"]["input"] == 1015
    assert compute(tmp_path)[A]["summary"]["requests"] == 6


def test_request_straddling_a_boundary_and_subagent_phases(tmp_path):
    slug = tmp_path / "proj"
    write(
        slug / f"{B}.jsonl",
        [
            user(B, 0, "go"),
            # Request k1: this main record at 12 wins usage (not a sidechain) and
            # attribution (agent ""), but its replayed copy in agent-x1 is stamped 9, so
            # its timestamp is 9 -> W0; and that copy's tool_use makes it a tool turn.
            assistant(B, 12, "k1", usage(10, 100)),  # claude [0, 12]: 10 s W0, 2 s W1
            # agent_progress copy for agent p1: the embedded message's timestamp (9.5)
            # is the record's, not the progress line's (13).  Request m_p -> W0, tool turn
            # (tool_use in the embedded message.content).  p1's earliest = 9.5 -> W0.
            {"type": "progress", "sessionId": B, "timestamp": ts(13),
             "data": {"type": "agent_progress", "agentId": "p1",
                      "message": {"type": "assistant", "sessionId": B, "timestamp": ts(9.5),
                                  "requestId": "req_p",
                                  "message": {"id": "m_p", "role": "assistant",
                                              "content": tool_use("tu_p"),
                                              "usage": usage(1, 2)}}}},
        ],
    )
    sub = slug / B / "subagents"
    # x1: its only line is at 9 -> W0.
    write(sub / "agent-x1.jsonl",
          [assistant(B, 9, "k1", usage(10, 60), tool_use("tu_x"), isSidechain=True)])
    # x2 (nested folder): first line, a progress line (no record), at exactly 10 -> W1
    # (start inclusive).  Request k2 at 15 -> W1, text turn.
    write(sub / "deep" / "agent-x2.jsonl", [
        {"type": "progress", "sessionId": B, "isSidechain": True, "timestamp": ts(10),
         "data": {"type": "hook_progress"}},
        assistant(B, 15, "k2", usage(3, 4), isSidechain=True),
    ])
    # x3: nothing has a timestamp -> None; request k3 is in no window.
    write(sub / "agent-x3.jsonl", [user(B, None, isSidechain=True),
                                   assistant(B, None, "k3", usage(7, 0), isSidechain=True)])
    # x4: earliest at exactly 20 = end of W1 (exclusive) -> None.
    write(sub / "agent-x4.jsonl", [user(B, 20, isSidechain=True)])
    # Compaction agent: never listed; its request kc at 5 -> W0 (text turn).
    write(sub / "agent-acompact-abc123.jsonl",
          [assistant(B, 5, "kc", usage(0, 6), isSidechain=True)])

    windows = [window(0, 10), window(10, 20)]
    assert compute_phases(tmp_path, B, windows) == [
        # W0: k1 (10, 100, tool) + m_p (1, 2, tool) + kc (0, 6, text).  claude [0,10] 10.
        figures(11, 108, 0, 0, requests=3, tool_turns=2, claude=10.0, tool=0.0, human=0.0, result_bytes=0),
        # W1: k2 (3, 4, text).  claude [10,12] 2.
        figures(3, 4, 0, 0, requests=1, tool_turns=0, claude=2.0, tool=0.0, human=0.0, result_bytes=0),
    ]
    assert subagent_phase(tmp_path, B, windows) == {"p1": 0, "x1": 0, "x2": 1, "x3": None, "x4": None}
    # k1, m_p, k2, k3, kc.
    assert compute(tmp_path)[B]["summary"]["requests"] == 5
    assert compute(tmp_path)[B]["subagents"] == ["p1", "x1", "x2", "x3", "x4"]


def test_unknown_session_naive_bounds_and_microsecond_boundaries(tmp_path):
    write(tmp_path / "proj" / f"{A}.jsonl", [user(A, 0), assistant(A, 1, "m1", usage(1, 1))])

    # A session with no file: zeros for every window, no subagents.
    assert compute_phases(tmp_path, B, [window(0, 10)]) == [
        figures(0, 0, 0, 0, requests=0, tool_turns=0, claude=0.0, tool=0.0, human=0.0, result_bytes=0)
    ]
    assert subagent_phase(tmp_path, B, [window(0, 10)]) == {}

    # Bounds are exact microseconds: [0, 1 s - 1 us) misses the request at 1 s and
    # holds 999_999 us of the claude gap [0, 1] -> round(0.999999, 3) = 1.0; the
    # window [1 s - 1 us, 1 s) holds 1 us of it -> 0.0, and still no request.
    one_us = timedelta(microseconds=1)
    result = compute_phases(tmp_path, A, [(at(0), at(1) - one_us), (at(1) - one_us, at(1)), (at(1), at(2))])
    assert [r["requests"] for r in result] == [0, 0, 1]
    assert [r["claude_s"] for r in result] == [1.0, 0.0, 0.0]

    with pytest.raises(ValueError):
        compute_phases(tmp_path, A, [(datetime(2024, 1, 1), datetime(2024, 1, 2))])
