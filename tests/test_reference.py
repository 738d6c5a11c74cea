"""Self-tests of tests/reference.py on tiny hand-built transcripts.

Every expected number below is worked out by hand in the comments, from docs/accounting.md
§2, not by running the reference.
"""

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference import compute, compute_phase_models, compute_phases

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
            # (accounting.md §2.4 is ambiguous here): only agent_progress *records* list their
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
        # m4: three records with the same usage: the first line (accounting.md §2.2: path, then line),
        # whatever the others name: claude-b, not the smaller Claude-a ("C" is 67, "c" is 99).
        modelled(assistant(S, ts(5), "m4", None, usage(1, 4)), "claude-b"),
        assistant(S, ts(5), "m4", None, usage(1, 4)),
        modelled(assistant(S, ts(5), "m4", None, usage(1, 4)), "Claude-a"),
        # m5: a copy without a model ties with the subagent file's record (both sidechain):
        # "proj/<S>.jsonl" sorts before "proj/<S>/subagents/..." ("." < "/"): the copy's, None.
        progress(ts(6), "a1", {"type": "assistant", "timestamp": ts(6),
                               "message": {"id": "m5", "usage": usage(2, 6)}}),
        # m6: the same usage tuple (output 3, cache create 10): the first line, claude-p (its
        # 5-minute split), not the smaller claude-a.
        modelled(assistant(S, ts(7), "m6", None, split(3, 10, 10, 0)), "claude-p"),
        modelled(assistant(S, ts(7), "m6", None, split(3, 10, 0, 10)), "claude-a"),
        # m7: claude-y again, with a split (5m 1 + 1h 3 = flat 4).
        modelled(assistant(S, ts(8), "m7", None, {**usage(1, 2, 3, 4), "cache_creation": {
            "ephemeral_5m_input_tokens": 1, "ephemeral_1h_input_tokens": 3}}), "claude-y"),
    ])
    write(tmp_path / "proj" / S / "subagents" / "agent-a1.jsonl", [
        modelled(assistant(S, ts(6), "m5", None, usage(2, 6), isSidechain=True), "claude-h"),
    ])

    # cost_usd (accounting.md §2.7): none of these made-up models is in genai-prices' table, so each
    # row with tokens is unpriced (None); <synthetic> has no tokens: it costs 0.
    def figures(requests, inp=0, out=0, cr=0, cc=0, five=0, hour=0, cost=None):
        return {"requests": requests, "input": inp, "output": out, "cache_read": cr, "cache_create": cc,
                "cache_create_5m": five, "cache_create_1h": hour, "web_searches": 0, "cost_usd": cost}

    result = compute(tmp_path)[S]
    assert result["tokens_by_model"] == {
        "claude-y": figures(2, 10 + 1, 50 + 2, 100 + 3, 5 + 4, 1, 3),
        None: figures(2, 3 + 2, 7 + 6),
        "<synthetic>": figures(1, cost=0.0),
        "claude-b": figures(1, 1, 4),
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
    assert second == {"<synthetic>": figures(1, cost=0.0), "claude-b": figures(1, 1, 4), None: figures(1, 2, 6),
                      "claude-p": figures(1, 0, 3, 0, 10, 10, 0), "claude-y": figures(1, 1, 2, 3, 4, 1, 3)}


def test_iterations_make_parts_with_their_own_models(tmp_path):
    def modelled(line, model):
        line["message"]["model"] = model
        return line

    def it(inp, out, cr, cc=None, five=None, hour=None, model=None):
        """One usage.iterations object; cc None leaves the flat field out."""
        obj = {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": cr}
        if cc is not None:
            obj["cache_creation_input_tokens"] = cc
        if five is not None or hour is not None:
            obj["cache_creation"] = {"ephemeral_5m_input_tokens": five or 0, "ephemeral_1h_input_tokens": hour or 0}
        if model is not None:
            obj["model"] = model
        return obj

    # r1: a refusal fallback.  The top-level usage is only the answering attempt's:
    # in 30, out 200, cr 1000, cc 50 (flat).
    top_r1 = {**usage(30, 200, 1000, 50), "iterations": [
        # refused attempt on claude-opus-5: in 20, out 5, cr 1000, cc = flat 40 (split 5m 10, 1h 30)
        it(20, 5, 1000, 40, 10, 30, model="claude-opus-5"),
        # the answer, no model of its own -> the message's claude-opus-4-6: in 30, out 200,
        # cr 1000, cc = no flat field -> 5m 50 + 1h 0 = 50
        it(30, 200, 1000, None, 50, 0),
    ], "cache_creation": {"ephemeral_5m_input_tokens": 50, "ephemeral_1h_input_tokens": 0}}
    # Sums: in 20+30 = 50 >= 30, out 5+200 = 205 >= 200, cr 2000 >= 1000, cc 40+50 = 90 >= 50:
    # every field covers the top level -> two parts, request tokens 50/205/2000/90.
    # r2: sums fall short in one field -> one part (the top level, the message's model):
    # in 6+6 = 12 >= 10, but out 60+30 = 90 < 100.
    top_r2 = {**usage(10, 100), "iterations": [it(6, 60, 0, 0, model="claude-opus-5"), it(6, 30, 0, 0, model="")]}
    # r3: an iterations array with no object in it -> one part: in 1, out 2.
    top_r3 = {**usage(1, 2), "iterations": ["x", 5]}
    # r4: an empty iterations array -> one part; the message names no model -> None: in 4, out 8.
    top_r4 = {**usage(4, 8), "iterations": []}
    write(tmp_path / "proj" / f"{A}.jsonl", [
        user(A, ts(0)),
        # An earlier streaming snapshot of r1 without iterations (out 1 < 200): not the chosen
        # record, so its lack of iterations does not matter.
        modelled(assistant(A, ts(1), "r1", None, usage(30, 1, 1000, 50)), "claude-opus-4-6"),
        modelled(assistant(A, ts(2), "r1", None, top_r1), "claude-opus-4-6"),
        modelled(assistant(A, ts(3), "r2", None, top_r2), "claude-opus-4-6"),
        modelled(assistant(A, ts(4), "r3", None, top_r3), "claude-opus-4-6"),
        assistant(A, ts(5), "r4", None, top_r4),
    ])
    result = compute(tmp_path)[A]
    # The session counts each request once: r1 .. r4.
    assert result["summary"]["requests"] == 4
    # main = total: in 50+10+1+4 = 65, out 205+100+2+8 = 315, cr 2000, cc 90.
    assert result["summary"]["tokens"]["main"] == {"input": 65, "output": 315, "cache_read": 2000, "cache_create": 90}
    assert result["summary"]["tokens"]["total"] == result["summary"]["tokens"]["main"]
    # Tokens only here; the cost of parts is the last test's subject.
    # (and no web searches: tests/test_web_searches.py)
    rows = {model: {k: v for k, v in row.items() if k not in ("cost_usd", "web_searches")}
            for model, row in result["tokens_by_model"].items()}
    assert {row["web_searches"] for row in result["tokens_by_model"].values()} == {0}
    assert rows == {
        # r1's refused attempt only: one part.
        "claude-opus-5": {"requests": 1, "input": 20, "output": 5, "cache_read": 1000, "cache_create": 40,
                          "cache_create_5m": 10, "cache_create_1h": 30},
        # r1's answer (30/200/1000/50, 5m 50) + r2 (10/100) + r3 (1/2): three parts.
        "claude-opus-4-6": {"requests": 3, "input": 41, "output": 302, "cache_read": 1000, "cache_create": 50,
                            "cache_create_5m": 50, "cache_create_1h": 0},
        None: {"requests": 1, "input": 4, "output": 8, "cache_read": 0, "cache_create": 0,
               "cache_create_5m": 0, "cache_create_1h": 0},
    }
    # Five parts in all for four requests; the rows add up to the session's tokens.
    assert sum(row["requests"] for row in rows.values()) == 5
    assert sum(row["output"] for row in rows.values()) == 315


def test_a_copied_project_folder_is_one_timeline(tmp_path):
    def tool_result(text):
        return [{"type": "tool_result", "tool_use_id": "t", "content": text}]

    lines = [
        user(A, ts(0), "start", uuid="u1"),                                    # e1 @0
        assistant(A, ts(10), "m1", None, usage(1, 2), uuid="u2"),               # e2 @10: claude +10
        user(A, ts(15), tool_result("abcd"), uuid="u3"),                        # e3 @15: tool +5, 4 bytes
        {"type": "system", "subtype": "compact_boundary", "sessionId": A, "timestamp": ts(16), "uuid": "u4"},
        # An empty-string uuid is no uuid: this line counts in every file it is in.
        {"type": "system", "subtype": "compact_boundary", "sessionId": A, "timestamp": ts(17), "uuid": ""},
        user(A, ts(20), "summary...", isCompactSummary=True, uuid="u5"),       # e4 @20: claude +5
        user(A, ts(30), "thanks", uuid="u6"),                                   # e5 @30: human +10
        # u3 again later in the same file: not counted (it would be an event @35, tool +5,
        # and 4 more bytes).
        user(A, ts(35), tool_result("abcd"), uuid="u3"),
    ]
    # "proj-a" < "proj-b": the copy in proj-a comes first in the timeline; every line of
    # proj-b's copy has a uuid met before (u1..u6, u3) except the "" one, and its one extra
    # line u7 counts.
    write(tmp_path / "proj-b" / f"{A}.jsonl", lines + [
        # e6 @40: H runs across files, so H = 30 (from proj-a's e5) and the gap [30, 40] is
        # tool +10 (were H restarted per file, e6 would be proj-b's first event: no gap).  3 bytes.
        user(A, ts(40), tool_result("xyz"), uuid="u7"),
    ])
    write(tmp_path / "proj-a" / f"{A}.jsonl", lines)
    result = compute(tmp_path)
    assert list(result) == [A]
    summary = result[A]["summary"]
    # claude 10 + 5 = 15; tool 5 + 10 = 15; human 10; wall = 40 - 0 = 40 = the sum.
    assert (summary["wall_s"], summary["claude_s"], summary["tool_s"], summary["human_s"], summary["away_s"]) == \
        (40.0, 15.0, 15.0, 10.0, 0.0)
    # compactions: u4 once + the ""-uuid line once per file (2) = 3.
    assert summary["compactions"] == 3
    # tool_result_bytes: u3 once (4) + u7 (3) = 7.
    assert summary["tool_result_bytes"] == 7
    # m1 in both files is one request (the key is global): in 1, out 2.
    assert summary["requests"] == 1
    assert tokens(result, A, "main") == {"input": 1, "output": 2, "cache_read": 0, "cache_create": 0}
    assert result[A]["project_slug"] == "proj-a"

    # Phases over the same timeline.  [0, 40): every gap lies inside it whole (e6's gap
    # [30, 40] ends at 40): claude 15, tool 15, human 10; bytes of the user lines stamped in
    # it: u3 once = 4.  [40, 41): no gap overlaps it (0 s); u7's 3 bytes.
    windows = [(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, 0, 0, 40, tzinfo=UTC)),
               (datetime(2024, 1, 1, 0, 0, 40, tzinfo=UTC), datetime(2024, 1, 1, 0, 0, 41, tzinfo=UTC))]
    first, second = compute_phases(tmp_path, A, windows)
    assert (first["claude_s"], first["tool_s"], first["human_s"], first["tool_result_bytes"]) == (15.0, 15.0, 10.0, 4)
    assert first["requests"] == 1  # m1 @10
    assert (second["claude_s"], second["tool_s"], second["human_s"], second["tool_result_bytes"]) == (0.0, 0.0, 0.0, 3)


def test_cost_of_parts_at_their_request_time(tmp_path):
    """accounting.md §2.7.  Rates per million tokens as genai-prices 0.2.3 holds them (printed from
    genai_prices.data when this test was written):
      claude-opus-4-6, before 2026-03-13 (tiered: above 200,000 input tokens, every token at
        the tier rate): input $5 / $10, output $25 / $37.5, cache read $0.5 / $1,
        cache write (5m) $6.25 / $12.5, 1h write $10 / $20;
      claude-opus-4-6 from 2026-03-13: flat $5, $25, $0.5, $6.25, $10;
      claude-opus-5: $5, $25, $0.5, $6.25, $10; with {"speed": "fast"}: $10, $50, $1, $12.5, $20.
    The package's input tokens = input + cache read + cache create; it prices the input
    minus the cache tokens at the input rate, and the writes minus the 1h ones at the 5m rate.
    """
    P_ = "a0000000-0000-4000-8000-000000000001"  # opus-4-6 before 2026-03-13
    Q_ = "a0000000-0000-4000-8000-000000000002"  # opus-4-6 from 2026-03-13
    R_ = "a0000000-0000-4000-8000-000000000003"  # opus-5, fast and standard
    U_ = "a0000000-0000-4000-8000-000000000004"  # unknown, null, <synthetic>, no timestamp
    V_ = "a0000000-0000-4000-8000-000000000005"  # only an unpriced part
    W_ = "a0000000-0000-4000-8000-000000000006"  # a model only an override prices
    I_ = "a0000000-0000-4000-8000-000000000007"  # two parts of one request

    def line(session, t, msg_id, use, model=None):
        out = assistant(session, t, msg_id, None, use)
        if model is not None:
            out["message"]["model"] = model
        return out

    def split(inp, out, cr, five, hour):
        return {**usage(inp, out, cr, five + hour),
                "cache_creation": {"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour}}

    long_context = split(1_000, 2_000, 180_000, 15_000, 5_000)  # input 1,000 + 180,000 + 20,000 = 201,000
    write(tmp_path / "p" / f"{P_}.jsonl", [
        # p1, 2026-03-12 (tiered, 201,000 > 200,000: every token at the tier rate):
        #   input 1,000 x $10 = $0.01; cache read 180,000 x $1 = $0.18; 5m writes 15,000 x $12.5
        #   = $0.1875; 1h writes 5,000 x $20 = $0.10; output 2,000 x $37.5 = $0.075 -> $0.5525
        line(P_, "2026-03-12T10:00:00Z", "p1", long_context, "claude-opus-4-6"),
        # p2, 150,000 input: the two requests' inputs sum above 200,000, but the tier is the
        # request's own: base rates.  150,000 x $5 = $0.75; 1,000 x $25 = $0.025 -> $0.775
        line(P_, "2026-03-12T10:01:00Z", "p2", usage(150_000, 1_000), "claude-opus-4-6"),
    ])
    write(tmp_path / "p" / f"{Q_}.jsonl", [
        # q1 = p1's usage on 2026-03-13 (flat): 1,000 x $5 = $0.005; 180,000 x $0.5 = $0.09;
        #   15,000 x $6.25 = $0.09375; 5,000 x $10 = $0.05; 2,000 x $25 = $0.05 -> $0.28875
        line(Q_, "2026-03-13T00:00:00Z", "q1", long_context, "claude-opus-4-6"),
    ])
    write(tmp_path / "p" / f"{R_}.jsonl", [
        # r1 in fast mode: 1,000 x $10 = $0.01; cache read 10,000 x $1 = $0.01; 1,000 x $50
        #   = $0.05 -> $0.07
        line(R_, "2026-05-01T00:00:00Z", "r1", {**usage(1_000, 1_000, 10_000), "speed": "fast"}, "claude-opus-5"),
        # r2: a snapshot says fast, but the chosen record (output 1,000 > 1) does not:
        #   1,000 x $5 = $0.005; 10,000 x $0.5 = $0.005; 1,000 x $25 = $0.025 -> $0.035
        line(R_, "2026-05-01T00:00:50Z", "r2", {**usage(1_000, 1, 10_000), "speed": "fast"}, "claude-opus-5"),
        line(R_, "2026-05-01T00:01:00Z", "r2", {**usage(1_000, 1_000, 10_000), "speed": "standard"},
             "claude-opus-5"),
    ])
    write(tmp_path / "p" / f"{U_}.jsonl", [
        # u1: a model the package does not know, with tokens: unpriced.
        line(U_, "2026-05-01T00:00:00Z", "u1", usage(100, 10), "claude-bogus-9"),
        # u2: no model, with tokens: unpriced (listed as None).
        line(U_, "2026-05-01T00:00:01Z", "u2", usage(50)),
        # u3: <synthetic>, no tokens: costs 0, not unpriced.
        line(U_, "2026-05-01T00:00:02Z", "u3", usage(), "<synthetic>"),
        # u4: 1,000,000 input x $5 = $5
        line(U_, "2026-05-01T00:00:03Z", "u4", usage(1_000_000), "claude-opus-5"),
        # u5: no timestamp: priced now; opus-5's price has no date: 40,000 output x $25 = $1
        line(U_, None, "u5", usage(0, 40_000), "claude-opus-5"),
    ])
    write(tmp_path / "p" / f"{V_}.jsonl", [line(V_, "2026-05-01T00:00:00Z", "v1", usage(5, 5))])
    write(tmp_path / "p" / f"{W_}.jsonl", [
        line(W_, "2026-05-01T00:00:00Z", "w1", split(1_000, 2_000, 10_000, 1_000, 2_000), "my-model"),
        # w2: 5m 0 + 1h 300 do not add up to the flat cache_create (100): accounting.md §2.7, all of
        # its cache writes count as 5m.
        line(W_, "2026-05-01T00:00:01Z", "w2", {**usage(0, 0, 0, 100), "cache_creation": {
            "ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 300}}, "my-model"),
    ])
    write(tmp_path / "p" / f"{I_}.jsonl", [
        # i1, 2026-03-01: two opus-4-6 iterations (the second names no model: the message's)
        # of 120,000 input each; their sum (240,000) would be tiered, each part is not:
        #   per part 120,000 x $5 = $0.6 + 1,000 x $25 = $0.025 -> $0.625; two parts -> $1.25
        line(I_, "2026-03-01T00:00:00Z", "i1", {**usage(120_000, 1_000), "iterations": [
            {**usage(120_000, 1_000), "model": "claude-opus-4-6"}, usage(120_000, 1_000)]}, "claude-opus-4-6"),
    ])

    result = compute(tmp_path)
    # P: $0.5525 + $0.775 = $1.3275
    assert result[P_]["cost"] == {"usd": 1.3275, "unknown_models": [], "complete": True}
    assert result[P_]["tokens_by_model"]["claude-opus-4-6"]["cost_usd"] == 1.3275
    assert result[Q_]["cost"] == {"usd": 0.28875, "unknown_models": [], "complete": True}
    # R: $0.07 + $0.035 = $0.105
    assert result[R_]["cost"] == {"usd": 0.105, "unknown_models": [], "complete": True}
    # U: what could be priced: $0 + $5 + $1 = $6; unpriced: None (first), claude-bogus-9.
    assert result[U_]["cost"] == {"usd": 6.0, "unknown_models": [None, "claude-bogus-9"], "complete": False}
    assert {m: row["cost_usd"] for m, row in result[U_]["tokens_by_model"].items()} == {
        "claude-bogus-9": None, None: None, "<synthetic>": 0.0, "claude-opus-5": 6.0}
    # V: some part unpriced and none priced: no amount at all.
    assert result[V_]["cost"] == {"usd": None, "unknown_models": [None], "complete": False}
    assert result[V_]["tokens_by_model"][None]["cost_usd"] is None
    assert result[W_]["cost"] == {"usd": None, "unknown_models": ["my-model"], "complete": False}
    assert result[I_]["cost"] == {"usd": 1.25, "unknown_models": [], "complete": True}
    assert result[I_]["tokens_by_model"]["claude-opus-4-6"]["requests"] == 2  # two parts
    assert result[I_]["tokens_by_model"]["claude-opus-4-6"]["cost_usd"] == 1.25

    # An override (RETROD_PRICES) prices the models it names, flat, and leaves the others.
    override = {
        "my-model": {"input": 2, "output": 10, "cache_read": 0.2, "cache_create_5m": 2.5, "cache_create_1h": 4},
        "claude-opus-4-6": {"input": 1, "output": 1, "cache_read": 1, "cache_create_5m": 1, "cache_create_1h": 1},
    }
    priced = compute(tmp_path, prices_override=override)
    # W: w1 = 1,000 x 2 + 2,000 x 10 + 10,000 x 0.2 + 1,000 (5m) x 2.5 + 2,000 (1h) x 4
    #       = 2,000 + 20,000 + 2,000 + 2,500 + 8,000 = 34,500 per million = $0.0345;
    #    w2 = 100 (all 5m) x 2.5 = 250 per million = $0.00025 -> $0.03475
    assert priced[W_]["cost"] == {"usd": 0.03475, "unknown_models": [], "complete": True}
    # P, flat $1 for every token, no tier: p1 1,000 + 2,000 + 180,000 + 20,000 = 203,000 ->
    # $0.203; p2 151,000 -> $0.151; -> $0.354
    assert priced[P_]["cost"]["usd"] == 0.354
    # U: the override names neither claude-bogus-9 nor opus-5: unchanged.
    assert priced[U_]["cost"] == result[U_]["cost"]

    # Per phase window: r1 (00:00:00) in the first, r2 (its earliest record 00:00:50) in the second.
    windows = [(datetime(2026, 5, 1, tzinfo=UTC), datetime(2026, 5, 1, 0, 0, 30, tzinfo=UTC)),
               (datetime(2026, 5, 1, 0, 0, 30, tzinfo=UTC), datetime(2026, 5, 1, 0, 2, tzinfo=UTC))]
    first, second = compute_phase_models(tmp_path, R_, windows, with_cost=True)
    assert first["cost"] == {"usd": 0.07, "unknown_models": [], "complete": True}
    assert first["tokens_by_model"]["claude-opus-5"]["cost_usd"] == 0.07
    assert second["cost"] == {"usd": 0.035, "unknown_models": [], "complete": True}
    # Without with_cost, the rows alone, as before.
    assert compute_phase_models(tmp_path, R_, windows)[1] == second["tokens_by_model"]
