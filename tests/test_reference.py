"""Self-tests of tests/reference.py on tiny hand-built transcripts.

Every expected number below is worked out by hand in the comments, from DESIGN.md
section 2, not by running the reference.
"""

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference import compute, compute_phase_models

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"  # never has a file
C = "cccccccc-0000-4000-8000-000000000003"
E = "eeeeeeee-0000-4000-8000-000000000005"
F = "ffffffff-0000-4000-8000-000000000006"
S = "55555555-0000-4000-8000-000000000007"
X = "99999999-0000-4000-8000-000000000009"


def write(path: Path, lines, tail: str = "") -> None:
    """Write dicts as JSON lines (strings are written verbatim), then an optional tail."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = ""
    for line in lines:
        text += (line if isinstance(line, str) else json.dumps(line)) + "\n"
    path.write_text(text + tail, encoding="utf-8")


def ts(seconds: float) -> str:
    whole = int(seconds)
    millis = round((seconds - whole) * 1000)
    return f"2024-01-01T{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}.{millis:03d}Z"


def user(session, t, content="hi", **extra):
    line = {"type": "user", "sessionId": session, "message": {"role": "user", "content": content}}
    if t is not None:
        line["timestamp"] = t
    line.update(extra)
    return line


def assistant(session, t, msg_id=None, request_id=None, usage=None, content=None, **extra):
    message = {"role": "assistant", "content": content or [{"type": "text", "text": "ok"}]}
    if msg_id is not None:
        message["id"] = msg_id
    if usage is not None:
        message["usage"] = usage
    line = {"type": "assistant", "sessionId": session, "message": message}
    if request_id is not None:
        line["requestId"] = request_id
    if t is not None:
        line["timestamp"] = t
    line.update(extra)
    return line


def usage(inp=0, out=0, cr=0, cc=0):
    return {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": cr,
            "cache_creation_input_tokens": cc}


def tokens(result, session, bucket):
    return result[session]["summary"]["tokens"][bucket]


def test_streaming_dedup_bad_lines_and_partial_last_line(tmp_path):
    write(
        tmp_path / "proj" / f"{A}.jsonl",
        [
            user(A, ts(0)),  # first event: no gap
            # Two streaming snapshots of one request (same message.id): keep the max
            # output snapshot -> in 10, out 50, cr 100, cc 5.  Gaps: claude +2, +1.5.
            assistant(A, ts(2), "msg_1", "req_1", usage(10, 1, 100, 5)),
            json.dumps(assistant(A, ts(3.5), "msg_1", "req_1", usage(10, 50, 100, 5))) + "\r",  # CRLF
            "not json{",  # bad JSON: skipped
            "[1, 2, 3]",  # not an object: skipped
            "",  # empty line: skipped
            '{"type": "assistant", "output_tokens": NaN}',  # NaN is not JSON: skipped
            # Key is message.id "msg_2" (no requestId).  Flat cache_creation is missing,
            # so cc = 5m + 1h = 2 + 4 = 6; cache_read is a bool -> 0; input 3.0 is a
            # float -> 0; output 7.  Gap: claude +0.5.
            assistant(A, ts(4), "msg_2", None, {
                "input_tokens": 3.0, "output_tokens": 7, "cache_read_input_tokens": True,
                "cache_creation": {"ephemeral_5m_input_tokens": 2, "ephemeral_1h_input_tokens": 4},
            }),
        ],
        # Partial last line (no "\n"): ignored entirely, including its huge usage.
        tail=json.dumps(assistant(A, ts(100), "msg_3", "req_3", usage(1, 1000, 1, 1))),
    )
    result = compute(tmp_path)
    assert list(result) == [A]
    summary = result[A]["summary"]
    assert summary["requests"] == 2  # msg_1, msg_2
    # main: input 10+0, output 50+7, cache_read 100+0, cache_create 5+6
    assert tokens(result, A, "main") == {"input": 10, "output": 57, "cache_read": 100, "cache_create": 11}
    assert tokens(result, A, "total") == tokens(result, A, "main")
    assert tokens(result, A, "subagents") == {"input": 0, "output": 0, "cache_read": 0, "cache_create": 0}
    # claude = 2 + 1.5 + 0.5 = 4.0; wall = 4 - 0
    assert (summary["wall_s"], summary["claude_s"], summary["tool_s"], summary["human_s"]) == (4.0, 4.0, 0.0, 0.0)
    assert result[A]["project_slug"] == "proj"
    assert result[A]["subagents"] == []


def test_time_gaps_of_each_kind_with_non_monotonic_timestamps(tmp_path):
    def tool_result(content):
        return [{"type": "tool_result", "tool_use_id": "t", "content": content}]

    write(
        tmp_path / "proj" / f"{A}.jsonl",
        [
            user(A, ts(0), "start"),  # e1, first event
            # e2 assistant @5: claude +5.  tool_use toolu_1.
            assistant(A, ts(5), content=[{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]),
            # e3 tool_result @12: tool +7.  "abc€" = 3 + 3 = 6 bytes.
            user(A, ts(12), tool_result("abc€")),
            # e4 assistant @10 (earlier than e3): claude +max(0, -2) = 0.
            # tool_use toolu_2 and toolu_1 again (distinct ids: toolu_1, toolu_2).
            assistant(A, ts(10), content=[
                {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {}},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}},
                {"type": "tool_use", "id": "", "name": "Bash", "input": {}},  # empty id: not counted
            ]),
            # e5 tool_result @20: tool +8, from the high-water mark 12 (not from e4's 10).  List content:
            # "hé" (3 bytes) + lone surrogate "\ud800" (3 bytes) + an image element (0) = 6 bytes.
            user(A, ts(20), tool_result([
                {"type": "text", "text": "hé"},
                {"type": "image", "source": {}},
                {"type": "text", "text": "\ud800"},
            ])),
            # not an event, but counts as 1 compaction
            {"type": "system", "subtype": "compact_boundary", "sessionId": A, "timestamp": ts(21)},
            # e6 compact summary @30: claude +10
            user(A, ts(30), "This session is being continued...", isCompactSummary=True),
            # progress is not an event (its timestamp is not in wall either)
            {"type": "progress", "sessionId": A, "timestamp": ts(60), "data": {"type": "hook_progress"}},
            # e7 plain user @40: human +10
            user(A, ts(40), "thanks"),
            # assistant with no timestamp: not an event, but its tool_use counts (toolu_3)
            assistant(A, None, content=[{"type": "tool_use", "id": "toolu_3", "name": "Bash", "input": {}}]),
            # e8 @50 written with a space separator and no offset (= UTC): human +10
            user(A, "2024-01-01 00:00:50", "more"),
            # invalid timestamps: not events
            user(A, "garbage", "x"),
            user(A, 1704067255, "x"),
            user(A, "2024-02-30T00:00:00Z", "x"),
            # e9 @55 written with a +01:00 offset: human +5
            user(A, "2024-01-01T01:00:55.0009+01:00", "last"),
            # copied history and sidechain lines are not own lines: no time, no bytes, no tools
            user(B, ts(1000), tool_result("ignored copied history")),
            user(A, ts(2000), tool_result("ignored sidechain"), isSidechain=True),
            assistant(B, ts(3000), content=[{"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}}]),
            {"type": "system", "subtype": "compact_boundary", "sessionId": B, "timestamp": ts(22)},
        ],
    )
    summary = compute(tmp_path)[A]["summary"]
    # claude 5 + 0 + 10 = 15; tool 7 + 8 = 15; human 10 + 10 + 5 = 25 (plus 0.0009 s
    # from the last timestamp's fraction: 55.0009 - 50 = 5.0009 -> human 25.0009 -> 25.001)
    assert summary["claude_s"] == 15.0
    assert summary["tool_s"] == 15.0
    assert summary["human_s"] == 25.001
    # wall = latest (55.0009) - earliest (0) = 55.0009 -> 55.001 = the sum of the gaps
    assert summary["wall_s"] == 55.001
    assert summary["compactions"] == 1
    assert summary["tool_calls"] == 3  # toolu_1, toolu_2, toolu_3
    assert summary["tool_result_bytes"] == 12  # 6 + 6
    assert summary["requests"] == 0  # no line carries message.usage


def test_copied_history_stays_with_the_session_that_produced_it(tmp_path):
    write(
        tmp_path / "proj" / f"{A}.jsonl",
        [
            # Copied history (sessionId B, B has no file): not an event (else wall
            # would start at 0), but its request counts for A, its only holder.
            user(B, ts(0), "old prompt"),
            assistant(B, ts(1), "msg_X", "req_X", usage(1, 5, 0, 0)),
            # Copy of C's request, stamped earlier and with a bigger output than C's own
            # record.  Attribution: C's record is not foreign -> C wins.  Usage: both
            # non-sidechain, output 20 > 9 -> the copy's usage is the one counted (for C).
            assistant(C, ts(2), "msg_Y", "req_Y", usage(2, 20, 0, 0)),
            # A's own lines: user @100, assistant @103 -> claude 3, wall 3.
            user(A, ts(100), "new prompt"),
            assistant(A, ts(103), "msg_Z", "req_Z", usage(3, 4, 0, 0)),
        ],
    )
    write(
        tmp_path / "proj" / f"{C}.jsonl",
        [user(C, ts(50)), assistant(C, ts(51), "msg_Y", "req_Y", usage(2, 9, 0, 0))],
    )
    result = compute(tmp_path)
    assert sorted(result) == [A, C]  # B has no file: no session B
    # A: msg_X (copied, only record) + msg_Z -> 2 requests, output 5 + 4, input 1 + 3
    assert result[A]["summary"]["requests"] == 2
    assert tokens(result, A, "main") == {"input": 4, "output": 9, "cache_read": 0, "cache_create": 0}
    assert result[A]["summary"]["wall_s"] == 3.0
    assert result[A]["summary"]["claude_s"] == 3.0
    assert result[A]["summary"]["human_s"] == 0.0
    # C: msg_Y with the largest usage tuple (output 20)
    assert result[C]["summary"]["requests"] == 1
    assert tokens(result, C, "main") == {"input": 2, "output": 20, "cache_read": 0, "cache_create": 0}


def test_agent_progress_copy_duplicating_a_subagent_file_record(tmp_path):
    def progress(t, agent_id, embedded, session=S):
        data = {"type": "agent_progress", "message": embedded, "normalizedMessages": []}
        if agent_id is not None:
            data["agentId"] = agent_id
        return {"type": "progress", "sessionId": session, "timestamp": t, "data": data,
                "isSidechain": False}

    def embedded(t, msg_id, request_id, use):
        return {"type": "assistant", "timestamp": t, "requestId": request_id, "uuid": "u-" + msg_id,
                "message": {"id": msg_id, "role": "assistant", "content": [], "usage": use}}

    write(
        tmp_path / "proj" / f"{S}.jsonl",
        [
            user(S, ts(0)),
            assistant(S, ts(1), "msg_main", "req_main", usage(1, 10, 0, 0)),  # main, out 10
            # Copy of a111's request msg_sub, placeholder output 1, embedded ts 2.
            progress(ts(2.5), "a111", embedded(ts(2), "msg_sub", "req_sub", usage(5, 1, 7, 0))),
            # Unnamed agent_progress agent: subagents bucket, not listed.  out 2.
            progress(ts(4), None, embedded(ts(4), "msg_anon", "req_anon", usage(0, 2, 0, 0))),
            # agent_progress copy that is copied history (line's sessionId is X, the
            # embedded message has none): not listed, but its request still counts for
            # S (only record), subagents bucket.  out 3.
            progress(ts(5), "a222", embedded(ts(5), "msg_222", "req_222", usage(0, 3, 0, 0)), session=X),
            # agent_progress embedding a user message: not a record.  Reference choice
            # (DESIGN 2.4 is ambiguous here): only agent_progress *records* list their
            # agent, so "a333" is not listed.
            progress(ts(6), "a333", {"type": "user", "message": {"role": "user", "content": "go"}}),
        ],
    )
    subdir = tmp_path / "proj" / S / "subagents"
    # The subagent file's record of msg_sub: final output 40, later timestamp 3.
    # Usage: both records are sidechain -> output 40 wins.  Attribution: both
    # (sidechain, not foreign); the copy's timestamp 2 < 3 -> (S, "a111") either way.
    write(subdir / "agent-a111.jsonl", [
        user(S, ts(1.5), "task prompt", isSidechain=True, agentId="a111"),
        assistant(S, ts(3), "msg_sub", "req_sub", usage(5, 40, 7, 0), isSidechain=True, agentId="a111"),
    ])
    (subdir / "agent-a111.meta.json").write_text('{"agentType": "Explore"}\n')  # not a transcript
    # Compaction agent, one level deeper below subagents/: compaction bucket, not listed. out 6.
    write(subdir / "nested" / "agent-acompact-abc123.jsonl", [
        assistant(S, ts(10), "msg_c", "req_c", usage(100, 6, 0, 0), isSidechain=True),
    ])
    result = compute(tmp_path)
    assert list(result) == [S]
    summary = result[S]["summary"]
    # msg_main, msg_sub, msg_anon, msg_222, msg_c
    assert summary["requests"] == 5
    assert tokens(result, S, "main") == {"input": 1, "output": 10, "cache_read": 0, "cache_create": 0}
    # msg_sub (5/40/7) + msg_anon (0/2/0) + msg_222 (0/3/0)
    assert tokens(result, S, "subagents") == {"input": 5, "output": 45, "cache_read": 7, "cache_create": 0}
    assert tokens(result, S, "compaction") == {"input": 100, "output": 6, "cache_read": 0, "cache_create": 0}
    assert tokens(result, S, "total") == {"input": 106, "output": 61, "cache_read": 7, "cache_create": 0}
    assert result[S]["subagents"] == ["a111"]
    # Only the main transcript's own user/assistant lines are events: @0 and @1.
    assert summary["wall_s"] == 1.0
    assert summary["claude_s"] == 1.0


def test_session_existence_project_slug_and_keyless_records(tmp_path):
    # Session X: only orphan subagent files in two project folders -> slug "proj-a".
    write(tmp_path / "proj-b" / X / "subagents" / "agent-z9.jsonl", [])
    write(tmp_path / "proj-a" / X / "subagents" / "agent-y1.jsonl", [
        # A record with no message.id, requestId or uuid is a request of its own.
        assistant(X, ts(1), None, None, usage(1, 1, 0, 0)),
        assistant(X, ts(1), None, None, usage(1, 1, 0, 0)),
    ])
    # Session E: an empty (0-byte) main transcript, plus a 2.0.x project-level agent
    # file whose first non-empty string sessionId names E (first line has none).
    (tmp_path / "proj-c").mkdir()
    (tmp_path / "proj-c" / f"{E}.jsonl").write_bytes(b"")
    write(tmp_path / "proj-c" / "agent-q1.jsonl", [
        {"type": "user", "sessionId": "", "message": {"content": "Warmup"}, "timestamp": ts(0)},
        assistant(E, ts(2), "msg_q", "req_q", usage(3811, 12, 0, 0), isSidechain=True),
    ])
    write(tmp_path / "proj-c" / "agent-nobody.jsonl", [  # no sessionId: belongs to no session
        {"type": "assistant", "message": {"id": "msg_n", "usage": usage(1, 1, 1, 1)}},
    ])
    write(tmp_path / "proj-c" / "agent-.jsonl", [assistant(E, ts(3), "msg_e", None, usage(1, 1, 1, 1))])
    write(tmp_path / "proj-c" / "not-a-uuid.jsonl", [assistant(E, ts(3), "msg_n2", None, usage(1, 1, 1, 1))])
    write(tmp_path / "proj-c" / f"{C.upper()}.jsonl", [assistant(C, ts(3), "msg_n3", None, usage(1, 1, 1, 1))])
    # Session F: main transcript in "proj-z", a subagent file in "proj-a" -> slug "proj-z".
    write(tmp_path / "proj-z" / f"{F}.jsonl", [
        user(F, ts(0)),
        # inline sidechain thread: subagents bucket, not listed, not an event
        assistant(F, ts(9), "msg_i", "req_i", usage(0, 8, 0, 0), isSidechain=True),
    ])
    write(tmp_path / "proj-a" / F / "subagents" / "agent-k7.jsonl", [])
    # A .meta.json alone creates no session.
    (tmp_path / "proj-c" / C / "subagents").mkdir(parents=True)
    (tmp_path / "proj-c" / C / "subagents" / "agent-m1.meta.json").write_text("{}\n")

    result = compute(tmp_path)
    assert sorted(result) == sorted([X, E, F])

    assert result[X]["project_slug"] == "proj-a"
    assert result[X]["subagents"] == ["y1", "z9"]
    assert result[X]["summary"]["requests"] == 2  # two keyless records = two requests
    assert tokens(result, X, "subagents") == {"input": 2, "output": 2, "cache_read": 0, "cache_create": 0}
    assert result[X]["summary"]["wall_s"] == 0.0

    assert result[E]["project_slug"] == "proj-c"
    assert result[E]["subagents"] == ["q1"]
    assert result[E]["summary"]["requests"] == 1
    assert tokens(result, E, "subagents") == {"input": 3811, "output": 12, "cache_read": 0, "cache_create": 0}
    assert tokens(result, E, "main") == {"input": 0, "output": 0, "cache_read": 0, "cache_create": 0}

    assert result[F]["project_slug"] == "proj-z"
    assert result[F]["subagents"] == ["k7"]
    assert result[F]["summary"]["requests"] == 1
    assert tokens(result, F, "subagents")["output"] == 8
    assert tokens(result, F, "main")["output"] == 0
    assert result[F]["summary"]["wall_s"] == 0.0  # one event only


def test_tokens_by_model_follow_the_usage_winning_record(tmp_path):
    def progress(t, agent_id, embedded):
        return {"type": "progress", "sessionId": S, "timestamp": t,
                "data": {"type": "agent_progress", "agentId": agent_id, "message": embedded}}

    def modelled(line, model):
        line["message"]["model"] = model
        return line

    def split(out, flat, five, hour):
        return {"output_tokens": out, "cache_creation_input_tokens": flat,
                "cache_creation": {"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour}}

    write(tmp_path / "proj" / f"{S}.jsonl", [
        # m1: a streaming snapshot names claude-x, the final one (output 50) claude-y: claude-y.
        modelled(assistant(S, ts(1), "m1", None, usage(10, 1, 100, 5)), "claude-x"),
        modelled(assistant(S, ts(2), "m1", None, usage(10, 50, 100, 5)), "claude-y"),
        assistant(S, ts(3), "m2", None, usage(3, 7)),  # no model: None
        modelled(assistant(S, ts(4), "m3", None, usage()), "<synthetic>"),  # zero tokens, still a request
        # m4: three records with the same usage: the one naming a model, the smallest in
        # code-point order ("C" is 67, "c" is 99): Claude-a.
        modelled(assistant(S, ts(5), "m4", None, usage(1, 4)), "claude-b"),
        assistant(S, ts(5), "m4", None, usage(1, 4)),
        modelled(assistant(S, ts(5), "m4", None, usage(1, 4)), "Claude-a"),
        # m5: a copy without a model ties with the subagent file's record (both sidechain):
        # the subagent's claude-h.
        progress(ts(6), "a1", {"type": "assistant", "timestamp": ts(6),
                               "message": {"id": "m5", "usage": usage(2, 6)}}),
        # m6: the same DESIGN tuple (output 3, cache create 10); the larger 5-minute split wins
        # before the model is looked at: claude-p, not the smaller claude-a.
        modelled(assistant(S, ts(7), "m6", None, split(3, 10, 10, 0)), "claude-p"),
        modelled(assistant(S, ts(7), "m6", None, split(3, 10, 0, 10)), "claude-a"),
        # m7: claude-y again, with a split (5m 1 + 1h 3 = flat 4).
        modelled(assistant(S, ts(8), "m7", None, {**usage(1, 2, 3, 4), "cache_creation": {
            "ephemeral_5m_input_tokens": 1, "ephemeral_1h_input_tokens": 3}}), "claude-y"),
    ])
    write(tmp_path / "proj" / S / "subagents" / "agent-a1.jsonl", [
        modelled(assistant(S, ts(6), "m5", None, usage(2, 6), isSidechain=True), "claude-h"),
    ])

    def figures(requests, inp=0, out=0, cr=0, cc=0, five=0, hour=0):
        return {"requests": requests, "input": inp, "output": out, "cache_read": cr, "cache_create": cc,
                "cache_create_5m": five, "cache_create_1h": hour}

    result = compute(tmp_path)[S]
    assert result["tokens_by_model"] == {
        "claude-y": figures(2, 10 + 1, 50 + 2, 100 + 3, 5 + 4, 1, 3),
        None: figures(1, 3, 7),
        "<synthetic>": figures(1),
        "Claude-a": figures(1, 1, 4),
        "claude-h": figures(1, 2, 6),
        "claude-p": figures(1, 0, 3, 0, 10, 10, 0),
    }
    # The split by model adds up to the session's totals.
    assert result["summary"]["requests"] == 7
    assert tokens(compute(tmp_path), S, "total")["output"] == 50 + 7 + 4 + 6 + 3 + 2

    # Per window [start, end): m1 (its first record at 1) and m2 in [0, 4); m3 .. m7 in [4, 9).
    windows = [(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, 0, 0, 4, tzinfo=UTC)),
               (datetime(2024, 1, 1, 0, 0, 4, tzinfo=UTC), datetime(2024, 1, 1, 0, 0, 9, tzinfo=UTC))]
    first, second = compute_phase_models(tmp_path, S, windows)
    assert first == {"claude-y": figures(1, 10, 50, 100, 5), None: figures(1, 3, 7)}
    assert second == {"<synthetic>": figures(1), "Claude-a": figures(1, 1, 4), "claude-h": figures(1, 2, 6),
                      "claude-p": figures(1, 0, 3, 0, 10, 10, 0), "claude-y": figures(1, 1, 2, 3, 4, 1, 3)}
