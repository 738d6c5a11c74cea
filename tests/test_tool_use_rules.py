"""accounting.md §2.6 (tool calls and waste signals) on tiny hand-written transcripts, each checked
three ways: tests/reference_tools.py (the independent oracle), retrod reading the files in one
pass, and retrod reading them in small chunks, files interleaved, with a scan after each.

Every expected number is worked out by hand in the comments from accounting.md §2.6 (and the choices
C1-C18 in the oracle's docstring), not by running either implementation.
Times are seconds after 2024-01-01T00:00:00Z.  Signal names are abbreviated in the comments:
SIB sibling_error, ERR error_retry, POR persisted_output_read, PWR post_write_read, DUP duplicate,
RR re_read, ok = productive.
"""

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference import compute
from reference_tools import SIGNALS, compute_tool_use
from tool_use_engines import ENGINES, engine_for

FIXTURES = Path(__file__).parent / "fixtures" / "claude-projects"

A = "aaaaaaaa-0000-4000-8000-0000000000a1"
B = "bbbbbbbb-0000-4000-8000-0000000000b2"
BASE = datetime(2024, 1, 1, tzinfo=UTC)
BASE_US = 1_704_067_200 * 1_000_000  # 2024-01-01T00:00:00Z in microseconds since the epoch
NO_INPUT = object()  # a tool_use block without an "input" key
TOOL_RESULTS = f"/home/u/.claude/projects/proj/{A}/tool-results/toolu_01.txt"


@pytest.fixture(params=ENGINES)
def tool_use(request, tmp_path):
    """tool_use(projects_dir, session, windows=None) of the oracle, or of retrod."""
    with engine_for(request.param, request) as engine:
        yield engine


# ---------------------------------------------------------------------------
# Transcript builders
# ---------------------------------------------------------------------------


def write(path: Path, lines) -> None:
    """One JSON line per dict; a str is written as it is (already JSON text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")


def ts(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def us(seconds: float) -> int:
    return BASE_US + round(seconds * 1_000_000)


def tu(call_id, name, inp=NO_INPUT):
    block = {"type": "tool_use", "id": call_id, "name": name}
    if inp is not NO_INPUT:
        block["input"] = inp
    return block


def tr(call_id, content="ok", error=None):
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    if error is not None:
        block["is_error"] = error
    return block


def asst(t, *blocks, session=A, **extra):
    line = {"type": "assistant", "sessionId": session,
            "message": {"role": "assistant", "content": list(blocks)}}
    if t is not None:
        line["timestamp"] = ts(t)
    line.update(extra)
    return line


def usr(t, *blocks, session=A, **extra):
    line = {"type": "user", "sessionId": session, "message": {"role": "user", "content": list(blocks)}}
    if t is not None:
        line["timestamp"] = ts(t)
    line.update(extra)
    return line


def sequence(steps, session=A, **extra):
    """Lines for a list of (name, input, outcome): call i at 10*i s, its result 1 s later.

    outcome: "ok" (plain result), "fail" (is_error true), "sibling" (is_error true with the
    sibling text), None (no result line at all).
    """
    lines = []
    for i, (name, inp, outcome) in enumerate(steps):
        call_id = f"{session[:1]}{i}"
        lines.append(asst(10 * i, tu(call_id, name, inp), session=session, **extra))
        if outcome == "ok":
            lines.append(usr(10 * i + 1, tr(call_id, "fine"), session=session, **extra))
        elif outcome == "fail":
            lines.append(usr(10 * i + 1, tr(call_id, "Exit code 1", True), session=session, **extra))
        elif outcome == "sibling":
            lines.append(usr(10 * i + 1, tr(call_id, "<tool_use_error>Sibling tool call errored</tool_use_error>",
                                            True), session=session, **extra))
    return lines


def counts(**nonzero):
    """The signals dict with every kind, zeros included."""
    return {kind: nonzero.get(kind, 0) for kind in SIGNALS}


def fig(calls, productive, **signals):
    return {"calls": calls, "productive": productive,
            "efficiency": productive / calls if calls else None, "signals": counts(**signals)}


def signals_of(result, agent=""):
    return [c["signal"] for c in result["calls"] if c["agent"] == agent]


def main_file(tmp_path, session=A):
    return tmp_path / "proj" / f"{session}.jsonl"


def sub_file(tmp_path, agent, session=A):
    return tmp_path / "proj" / session / "subagents" / f"agent-{agent}.jsonl"


# ---------------------------------------------------------------------------
# Every signal, N times, in one agent
# ---------------------------------------------------------------------------


def test_every_signal_counted_exactly_n_times(tmp_path, tool_use):
    ls, a, b = {"command": "ls"}, {"file_path": "/a"}, {"file_path": "/b"}
    write(main_file(tmp_path), sequence([
        ("Read", a, "ok"),  # 0 ok: first Read of /a
        ("Read", a, "ok"),  # 1 DUP: same name+input as 0 (ok), nothing between; DUP beats RR
        ("Read", {"file_path": "/a", "offset": 10}, "ok"),  # 2 RR: other input; 0 read /a, no write
        ("Bash", ls, "sibling"),  # 3 SIB: failed + sibling text; beats ERR (next call is Bash too)
        ("Bash", ls, "fail"),  # 4 ERR: failed, next call (5) is Bash; not DUP (3 failed)
        ("Bash", ls, "ok"),  # 5 ok: earlier Bash ls (3, 4) both failed
        ("Bash", ls, "ok"),  # 6 DUP: 5 did not fail, nothing between
        ("Edit", {"file_path": "/a", "old_string": "x", "new_string": "y"}, "ok"),  # 7 ok: a write of /a
        ("Bash", ls, "ok"),  # 8 ok: the write 7 lies between 5/6 and 8
        ("Read", a, "ok"),  # 9 PWR: latest earlier call naming /a is the write 7
        ("Read", {"file_path": TOOL_RESULTS}, "ok"),  # 10 POR
        ("Read", {"file_path": TOOL_RESULTS}, "ok"),  # 11 POR: beats DUP (priority 3 < 5)
        ("Glob", {"pattern": "*"}, "fail"),  # 12 ok: failed, but next call (13) is a Read
        ("Read", b, "fail"),  # 13 ok: failed, next call is a Write
        ("Write", {"file_path": "/b", "content": "z"}, "fail"),  # 14 ok: failed -> not a write
        ("Read", b, "ok"),  # 15 ok: 13 failed (no RR, no DUP); latest naming /b (14) no write
        ("Write", {"file_path": "/b", "content": "z"}, "fail"),  # 16 ok: 14 failed -> no DUP
        ("Read", {"file_path": "/b", "limit": 5}, "ok"),  # 17 RR: 15 read /b; 16 failed, no write
        ("Bash", {"command": "false"}, "fail"),  # 18 ok: failed but the agent's LAST call
    ]))
    result = tool_use(tmp_path, A)
    D, R, S, E, P, W = "duplicate", "re_read", "sibling_error", "error_retry", "persisted_output_read", \
        "post_write_read"
    assert signals_of(result) == [None, D, R, S, E, None, D, None, None, W, P, P, None, None, None, None,
                                  None, R, None]
    # 19 calls: SIB 1, ERR 1, POR 2, PWR 1, DUP 2, RR 2 -> 9 signals, 10 productive.
    expected = fig(19, 10, sibling_error=1, error_retry=1, persisted_output_read=2, post_write_read=1,
                   duplicate=2, re_read=2)
    assert result["summary"] == expected
    assert result["agents"] == {"": expected}
    assert result["phases"] == []


# ---------------------------------------------------------------------------
# The edges named in the issue
# ---------------------------------------------------------------------------


def test_a_failed_call_that_is_the_agents_last_is_no_error_retry(tmp_path, tool_use):
    write(main_file(tmp_path), [
        # The main thread's last call fails; the next Bash in time is another agent's.
        asst(10, tu("m1", "Bash", {"command": "make"})),
        usr(11, tr("m1", "boom", True)),  # m1: ok (last call of agent "")
    ])
    write(sub_file(tmp_path, "x"), [
        asst(12, tu("x1", "Bash", {"command": "make"}), isSidechain=True),
        usr(13, tr("x1", "boom", True), isSidechain=True),  # x1: ERR, next call of x is Bash (x2)
        # A text line and a user prompt between do not matter: "the agent's NEXT CALL".
        asst(14, {"type": "text", "text": "retrying"}, isSidechain=True),
        usr(15, isSidechain=True),
        # Two calls in one line: block order. x2 fails, the next call x3 is a Bash -> ERR.
        asst(16, tu("x2", "Bash", {"command": "make -j"}), tu("x3", "Bash", {"command": "make -j2"}),
             isSidechain=True),
        usr(17, tr("x2", "boom", True), tr("x3", "boom", True), isSidechain=True),  # x3: last of x -> ok
    ])
    result = tool_use(tmp_path, A)
    assert signals_of(result, "") == [None]
    assert signals_of(result, "x") == ["error_retry", "error_retry", None]
    assert result["summary"] == fig(4, 2, error_retry=2)
    assert result["agents"] == {"": fig(1, 1), "x": fig(3, 1, error_retry=2)}


def test_a_write_that_failed_between_two_reads_and_a_write_of_another_path(tmp_path, tool_use):
    p, q = {"file_path": "/p"}, {"file_path": "/q"}
    write(main_file(tmp_path), sequence([
        ("Read", p, "ok"),  # 0 ok
        ("Edit", {"file_path": "/p", "old_string": "a", "new_string": "b"}, "fail"),  # 1 ok: failed, not a write
        ("Read", {"file_path": "/p", "offset": 2}, "ok"),  # 2 RR: 0 read /p, 1 is no write
        ("Write", {"file_path": "/q", "content": "c"}, "ok"),  # 3 ok: a write of /q
        # 4: same name+input as 0, but a write (of /q) lies between -> not DUP (C10: any write);
        #    no write of /p between 2 (or 0) and 4 -> RR.
        ("Read", p, "ok"),
        ("Bash", {"command": "make"}, "ok"),  # 5 ok
        ("Edit", {"file_path": "/q", "old_string": "c", "new_string": "d"}, "ok"),  # 6 ok: a write of /q
        ("Bash", {"command": "make"}, "ok"),  # 7 ok: the write 6 lies between 5 and 7
        ("Write", {"file_path": "/p", "content": "e"}, "ok"),  # 8 ok: a write of /p
        ("Edit", {"file_path": "/p", "old_string": "e", "new_string": "f"}, "fail"),  # 9 ok (next is Read)
        # 10: latest call naming /p is the FAILED Edit 9, not a write -> not PWR (C9);
        #     earlier Reads of /p (0, 2, 4) are all before the write 8 -> not RR. ok.
        ("Read", {"file_path": "/p", "limit": 9}, "ok"),
        ("Edit", {"file_path": "/q", "old_string": "d", "new_string": "g"}, None),  # 11 ok: no result = a write (C5)
        ("Read", q, "ok"),  # 12 PWR: latest call naming /q is 11
        ("Bash", {"command": "ls"}, None),  # 13 ok (no result)
        ("Bash", {"command": "ls"}, "ok"),  # 14 DUP: 13 has no result, so it did not fail (A2)
    ]))
    result = tool_use(tmp_path, A)
    assert signals_of(result) == [None, None, "re_read", None, "re_read", None, None, None, None, None, None,
                                  None, "post_write_read", None, "duplicate"]
    # 15 calls, RR 2, PWR 1, DUP 1 -> 11 productive.
    assert result["summary"] == fig(15, 11, re_read=2, post_write_read=1, duplicate=1)


def test_a_successful_write_between_two_reads(tmp_path, tool_use):
    write(main_file(tmp_path), sequence([
        ("Read", {"file_path": "/p"}, "ok"),  # 0 ok
        ("MultiEdit", {"file_path": "/p", "edits": []}, "ok"),  # 1 ok: a write of /p
        ("Read", {"file_path": "/p"}, "ok"),  # 2 PWR (and not DUP/RR: the write 1 is between)
        ("Bash", {"command": "cat /p"}, "ok"),  # 3 ok: names no path
        ("Read", {"file_path": "/p", "offset": 1}, "ok"),  # 4 RR: latest naming /p is the Read 2
    ]))
    result = tool_use(tmp_path, A)
    assert signals_of(result) == [None, None, "post_write_read", None, "re_read"]
    assert result["summary"] == fig(5, 3, post_write_read=1, re_read=1)


def test_the_same_input_in_two_agents_is_no_duplicate(tmp_path, tool_use):
    ls, p = {"command": "ls"}, {"file_path": "/p"}
    write(main_file(tmp_path), [
        asst(10, tu("m1", "Write", {"file_path": "/p", "content": "x"})), usr(11, tr("m1")),  # ok
        asst(20, tu("m2", "Bash", ls)), usr(21, tr("m2")),  # ok
        asst(30, tu("m3", "Read", p)), usr(31, tr("m3")),  # PWR (m1 is the latest call of "" naming /p)
        asst(40, tu("m4", "Bash", {"command": "false"})), usr(41, tr("m4", "no", True)),  # ok: last of ""
    ])
    # Agent x repeats main's inputs: nothing earlier IN ITS AGENT -> all productive, no PWR after
    # main's Write.  Agent y (project-level layout, slug proj) repeats them again.
    write(sub_file(tmp_path, "x"), [
        asst(25, tu("x1", "Bash", ls), isSidechain=True), usr(25.5, tr("x1"), isSidechain=True),
        asst(26, tu("x2", "Read", p), isSidechain=True), usr(26.5, tr("x2"), isSidechain=True),
        asst(27, tu("x3", "Bash", ls), isSidechain=True),
        usr(27.5, tr("x3", "no", True), isSidechain=True),  # DUP of x1 (failed itself: no matter); last
    ])
    write(tmp_path / "proj" / "agent-y.jsonl", [
        asst(28, tu("y1", "Read", p), isSidechain=True, agentId="y"), usr(28.5, tr("y1"), isSidechain=True),
        asst(29, tu("y2", "Bash", ls), isSidechain=True, agentId="y"), usr(29.5, tr("y2"), isSidechain=True),
    ])
    result = tool_use(tmp_path, A)
    assert result["agents"] == {
        "": fig(4, 3, post_write_read=1),
        "x": fig(3, 2, duplicate=1),
        "y": fig(2, 2),
    }
    assert result["summary"] == fig(9, 7, post_write_read=1, duplicate=1)


def test_a_result_that_arrives_in_a_later_chunk(tmp_path, tool_use):
    path = main_file(tmp_path)
    call = json.dumps(asst(10, tu("c1", "Bash", {"command": "make"})))
    other = json.dumps(asst(12, tu("c2", "Grep", {"pattern": "x"})))
    result_line = json.dumps(usr(15, tr("c1", "done!", True)))
    path.parent.mkdir(parents=True)
    # Chunk 1: the call, another call, and half of c1's result line (no "\n" yet).
    path.write_bytes((call + "\n" + other + "\n" + result_line[:20]).encode())
    first = tool_use(tmp_path, A)
    c1 = first["calls"][0]
    assert (c1["id"], c1["has_result"], c1["failed"], c1["result_bytes"], c1["result_us"]) == \
        ("c1", False, False, None, None)
    assert first["tools"][0] == {"name": "Bash", "calls": 1, "failed": 0, "rejected": 0, "result_bytes": 0,
                                 "median_result_bytes": None, "result_s": 0.0, "median_result_s": None}
    # Chunk 2 completes the line: c1 failed, 5 bytes, 5 s after its call (10 -> 15).
    with path.open("ab") as f:
        f.write((result_line[20:] + "\n").encode())
    second = tool_use(tmp_path, A)
    c1 = second["calls"][0]
    assert (c1["has_result"], c1["failed"], c1["result_bytes"], c1["result_ts_us"], c1["result_us"]) == \
        (True, True, 5, us(15), 5_000_000)
    assert second["tools"][0] == {"name": "Bash", "calls": 1, "failed": 1, "rejected": 0, "result_bytes": 5,
                                  "median_result_bytes": 5, "result_s": 5.0, "median_result_s": 5.0}
    # c1 failed but the next call is a Grep: no ERR.
    assert second["summary"] == fig(2, 2)


def test_the_result_must_be_in_the_same_file_and_is_the_first_one(tmp_path, tool_use):
    write(main_file(tmp_path), [
        asst(10, tu("m1", "Task", {"prompt": "go"})),
        # Results for the subagent's call x1 here are not x1's result (another file).
        usr(11, tr("x1", "from main", True)),
        usr(12, tr("m1", "abc", False)),  # m1's first result: 3 bytes, not failed, 2 s
        usr(13, tr("m1", "second result ignored", True)),
        # C4: a result before its call is still "the first tool_result ... in the same file".
        usr(20, tr("m2", "early")),
        asst(30, tu("m2", "Bash", {"command": "ls"})),
    ])
    write(sub_file(tmp_path, "x"), [asst(11, tu("x1", "Bash", {"command": "ls"}), isSidechain=True)])
    calls = {c["id"]: c for c in tool_use(tmp_path, A)["calls"]}
    assert (calls["m1"]["failed"], calls["m1"]["result_bytes"], calls["m1"]["result_us"]) == (False, 3, 2_000_000)
    assert calls["x1"]["has_result"] is False
    # m2's result (at 20) is stamped before its call (at 30): 5 bytes, time 0 (C14).
    assert (calls["m2"]["has_result"], calls["m2"]["result_bytes"], calls["m2"]["result_us"]) == (True, 5, 0)


def test_sibling_tool_call_errored(tmp_path, tool_use):
    sib = "<tool_use_error>Sibling tool call errored</tool_use_error>"
    write(main_file(tmp_path), [
        # s1 SIB: failed, sibling text inside a text element of a list content.
        asst(10, tu("s1", "Bash", {"command": "a"})),
        usr(11, tr("s1", [{"type": "text", "text": "x"}, {"type": "text", "text": sib}], True)),
        # s2 SIB: failed, string content.
        asst(20, tu("s2", "Read", {"file_path": "/x"})), usr(21, tr("s2", sib, True)),
        # s3 ok: the text, but is_error false -> not failed.
        asst(30, tu("s3", "Bash", {"command": "b"})), usr(31, tr("s3", sib, False)),
        # s4 ok: failed, but the text is in a non-text element; next call is a Grep.
        asst(40, tu("s4", "Bash", {"command": "c"})),
        usr(41, tr("s4", [{"type": "image", "text": sib}], True)),
        # s5 ok: is_error "true" (a string) is not true -> not failed; and it is the last call.
        asst(50, tu("s5", "Grep", {"pattern": "p"})), usr(51, tr("s5", sib, "true")),
    ])
    result = tool_use(tmp_path, A)
    assert signals_of(result) == ["sibling_error", "sibling_error", None, None, None]
    assert result["summary"] == fig(5, 3, sibling_error=2)
    # Failed per tool: s1, s4 (Bash); s2 (Read); s5 is not failed.
    assert {t["name"]: t["failed"] for t in result["tools"]} == {"Bash": 2, "Grep": 0, "Read": 1}


def test_reads_of_persisted_tool_results(tmp_path, tool_use):
    write(main_file(tmp_path), sequence([
        ("Write", {"file_path": TOOL_RESULTS, "content": "x"}, "ok"),  # 0 ok (a write of that path)
        ("Read", {"file_path": TOOL_RESULTS}, "ok"),  # 1 POR: beats PWR (3 before 4)
        ("Read", {"file_path": TOOL_RESULTS}, "fail"),  # 2 ERR: failed + next is a Read; beats POR
        ("Read", {"file_path": TOOL_RESULTS, "offset": 1}, "ok"),  # 3 POR
        ("Grep", {"pattern": "x", "path": "/x/tool-results/"}, "ok"),  # 4 ok: not a Read (and no path)
        ("Read", {"file_path": "/x/tool-results"}, "ok"),  # 5 ok: no "/tool-results/" in the path
    ]))
    result = tool_use(tmp_path, A)
    assert signals_of(result) == [None, "persisted_output_read", "error_retry", "persisted_output_read",
                                  None, None]
    assert result["summary"] == fig(6, 3, persisted_output_read=2, error_retry=1)


def test_a_call_that_qualifies_for_several_signals_gets_the_first(tmp_path, tool_use):
    make = {"command": "make"}
    write(main_file(tmp_path), sequence([
        ("Bash", make, "ok"),  # 0 ok
        ("Bash", make, "sibling"),  # 1 SIB (also ERR: next is Bash; also DUP of 0)
        ("Bash", make, "fail"),  # 2 ERR (also DUP of 0: 1 failed, 0 did not)
        ("Bash", make, "ok"),  # 3 DUP of 0 (nothing between 0 and 3 is a write)
        ("Read", {"file_path": "/r"}, "ok"),  # 4 ok
        ("Read", {"file_path": "/r"}, "ok"),  # 5 DUP (also RR of 4)
    ]))
    result = tool_use(tmp_path, A)
    assert signals_of(result) == [None, "sibling_error", "error_retry", "duplicate", None, "duplicate"]
    assert result["summary"] == fig(6, 2, sibling_error=1, error_retry=1, duplicate=2)


def test_a_tool_use_id_seen_more_than_once_counts_once_where_first_seen(tmp_path, tool_use):
    write(main_file(tmp_path), [
        asst(20, tu("t1", "Bash", {"command": "a"})),
        usr(21, tr("t1", "main result")),  # t1's result in the main transcript: 11 bytes, not failed
        # t3 twice in one file (a repeated line): one call, at its first line (30).
        asst(30, tu("t3", "Grep", {"pattern": "q"})),
        asst(31, tu("t3", "Grep", {"pattern": "q"})),
    ])
    # t1 again in a subagent file, stamped EARLIER, with a failed result: the main transcript wins.
    write(sub_file(tmp_path, "x"), [
        asst(10, tu("t1", "Bash", {"command": "a"}), isSidechain=True),
        usr(11, tr("t1", "err", True), isSidechain=True),
        asst(12, tu("t2", "Grep", {}), isSidechain=True),
        usr(13, tr("t2", "xx"), isSidechain=True),
    ])
    # t2 also in a project-level agent file of slug "proj-2": ".../proj-2/agent-z.jsonl" sorts
    # before ".../proj/<A>/subagents/agent-x.jsonl" as strings ("-" < "/"), C2.  It sorts before
    # the main transcript ".../proj/<A>.jsonl" too, yet its copy of t1 still loses to the main one.
    write(tmp_path / "proj-2" / "agent-z.jsonl", [
        asst(5, tu("t1", "Bash", {"command": "a"}), isSidechain=True, agentId="z"),
        usr(6, tr("t1", "zerr", True), isSidechain=True),
        asst(50, tu("t2", "Grep", {}), isSidechain=True, agentId="z"),
        usr(51, tr("t2", "zzz", True), isSidechain=True),
    ])
    result = tool_use(tmp_path, A)
    calls = {c["id"]: c for c in result["calls"]}
    assert sorted(calls) == ["t1", "t2", "t3"]
    assert (calls["t1"]["agent"], calls["t1"]["ts_us"], calls["t1"]["failed"], calls["t1"]["result_bytes"]) == \
        ("", us(20), False, 11)
    assert (calls["t2"]["agent"], calls["t2"]["ts_us"], calls["t2"]["failed"], calls["t2"]["result_bytes"]) == \
        ("z", us(50), True, 3)
    assert (calls["t3"]["agent"], calls["t3"]["ts_us"]) == ("", us(30))
    # x keeps its entry (a subagent file of the session) with no calls.
    assert result["agents"] == {"": fig(2, 2), "x": fig(0, 0), "z": fig(1, 1)}
    assert result["summary"] == fig(3, 3)


def test_an_id_in_two_main_transcripts_counts_in_the_first_project_folder_by_name(tmp_path, tool_use):
    """accounting.md §2.6: an id in several main transcripts counts "with several
    main transcripts, the first in §2.3's order": by project folder name. `-home-me-app`
    sorts before `-home-me-app-v2`, though
    `-home-me-app-v2/<A>.jsonl` sorts first as a path ("-" < "/"). The copy in `-app` failed,
    the one in `-app-v2` did not: the call is `-app`'s, failed, its result 3 bytes."""
    for slug, (content, error) in (("-home-me-app", ("err", True)), ("-home-me-app-v2", ("fine!", None))):
        write(tmp_path / slug / f"{A}.jsonl", [asst(10, tu("t1", "Bash", {"command": "a"})),
                                                usr(11, tr("t1", content, error))])
    assert str(tmp_path / "-home-me-app-v2" / f"{A}.jsonl") < str(tmp_path / "-home-me-app" / f"{A}.jsonl")
    result = tool_use(tmp_path, A)
    (call,) = result["calls"]
    assert (call["id"], call["agent"], call["failed"], call["result_bytes"]) == ("t1", "", True, 3)
    assert result["summary"] == fig(1, 1)


def test_a_call_line_repeated_before_its_result_keeps_that_result(tmp_path, tool_use):
    # Found in review: the same call line twice in one file, its result after the second. The
    # call is the first line's; its result is the first tool_result for x1 in the file.
    call = asst(10, tu("x1", "Bash", {"command": "make"}))
    write(main_file(tmp_path), [
        call, call,
        usr(11, tr("x1", "boom", True)),  # x1: failed, 4 bytes; the next call (x2) is a Bash -> ERR
        usr(12, tr("x1", "a second result")),  # not the first: ignored
        asst(20, tu("x2", "Bash", {"command": "make"})),  # ok: the only earlier same call (x1) failed
    ])
    result = tool_use(tmp_path, A)
    x1 = result["calls"][0]
    assert (x1["id"], x1["failed"], x1["result_bytes"], x1["result_us"]) == ("x1", True, 4, 1_000_000)
    assert signals_of(result) == ["error_retry", None]
    assert result["summary"] == fig(2, 1, error_retry=1)


def test_copies_sidechains_and_other_blocks_add_no_calls(tmp_path, tool_use):
    embedded = {"type": "assistant", "sessionId": A, "timestamp": ts(6), "requestId": "req_p",
                "message": {"id": "msg_p", "role": "assistant", "content": [tu("p1", "Bash", {})],
                            "usage": {"input_tokens": 1, "output_tokens": 1}}}
    write(main_file(tmp_path), [
        asst(1, tu("o1", "Bash", {"command": "own"})),  # the only call of agent ""
        asst(2, tu("i1", "Bash", {}), isSidechain=True),  # inline sidechain: not own
        asst(3, tu("h1", "Bash", {}), session=B),  # copied history (sessionId of B)
        {"type": "progress", "sessionId": A, "timestamp": ts(4),  # agent_progress copy of agent pa
         "data": {"type": "agent_progress", "agentId": "pa", "message": embedded}},
        usr(5, tu("u1", "Bash", {})),  # a tool_use block in a user line
        asst(6, tu("", "Bash", {}), tu(7, "Bash", {}), {"type": "tool_use", "name": "Bash"},
             {"type": "server_tool_use", "id": "s1", "name": "web_search"}, "not a block"),
        {"type": "system", "sessionId": A, "timestamp": ts(7), "message": {"content": [tu("y1", "Bash", {})]}},
    ])
    write(sub_file(tmp_path, "x"), [
        asst(8, tu("h2", "Bash", {}), session=B, isSidechain=True),  # copied history in a subagent file
        asst(9, tu("x1", "Bash", {"command": "sub"}), isSidechain=True),  # agent x's only call
    ])
    result = tool_use(tmp_path, A)
    assert [(c["id"], c["agent"]) for c in result["calls"]] == [("o1", ""), ("x1", "x")]
    # pa is a listed subagent (2.4) with no calls: efficiency null.
    assert result["agents"] == {"": fig(1, 1), "pa": fig(0, 0), "x": fig(1, 1)}
    assert result["agents"]["pa"]["efficiency"] is None
    assert result["summary"] == fig(2, 2)
    # The copied history does not make a session of B.
    assert set(compute_tool_use(tmp_path)) == {A}


def test_acompact_agents_have_calls_and_an_empty_session_has_none(tmp_path, tool_use):
    write(sub_file(tmp_path, "acompact-abc123"), [
        asst(1, tu("k1", "Read", {"file_path": "/k"}), isSidechain=True),
        asst(2, tu("k2", "Read", {"file_path": "/k"}), isSidechain=True),  # DUP (k1: no result, not failed)
    ])
    write(main_file(tmp_path, B), [])  # an empty main transcript: a session with zero calls
    a = tool_use(tmp_path, A)
    assert a["agents"] == {"acompact-abc123": fig(2, 1, duplicate=1)}
    assert a["summary"] == fig(2, 1, duplicate=1)
    assert tool_use(tmp_path, B) == {"summary": fig(0, 0), "agents": {"": fig(0, 0)}, "phases": [],
                                     "tools": [], "calls": []}


def test_canonical_input(tmp_path, tool_use):
    write(main_file(tmp_path), [
        *sequence([
            ("Grep", {"pattern": "x", "path": "/s"}, "ok"),  # 0 ok
            ("Grep", {"path": "/s", "pattern": "x"}, "ok"),  # 1 DUP: key order does not matter
            ("Grep", {"pattern": "x", "path": "/s", "head_limit": 1}, "ok"),  # 2 ok
            ("Grep", {"head_limit": 1.0, "path": "/s", "pattern": "x"}, "ok"),  # 3 DUP: 1.0 == 1 (C7)
            ("Grep", {"pattern": "x", "path": "/s", "head_limit": True}, "ok"),  # 4 ok: true is not 1
            ("Grep", {"pattern": "é"}, "ok"),  # 5 ok (written as "\u00e9" by json.dumps)
            ("TaskList", NO_INPUT, "ok"),  # 6 ok
            ("TaskList", NO_INPUT, "ok"),  # 7 DUP: both inputs absent (= null, C7)
            ("TaskList", {}, "ok"),  # 8 ok: {} is not null
            ("Grep", {"pattern": [1, {"b": 2, "a": 1}]}, "ok"),  # 9 ok
        ]),
        # 10 DUP of 5: the same text written as raw UTF-8, with whitespace.
        json.dumps(asst(100, tu("raw", "Grep", {"pattern": "é"})), ensure_ascii=False, indent=None,
                   separators=(" , ", " : ")),
        # 11 DUP of 9: nested keys in another order.
        asst(110, tu("nest", "Grep", {"pattern": [1, {"a": 1, "b": 2}]})),
    ])
    result = tool_use(tmp_path, A)
    D = "duplicate"
    assert signals_of(result) == [None, D, None, D, None, None, None, D, None, None, D, D]
    assert result["summary"] == fig(12, 7, duplicate=5)
    if not tool_use.canonical_text:
        return  # retrod keeps a fingerprint of the canonical text, not the text
    inputs = {c["id"]: c["input"] for c in result["calls"]}
    assert inputs["a1"] == '{"path":"/s","pattern":"x"}'
    assert inputs["raw"] == '{"pattern":"é"}'  # ensure_ascii=False
    assert inputs["a6"] == "null"


def test_paths(tmp_path, tool_use):
    write(main_file(tmp_path), sequence([
        ("NotebookEdit", {"notebook_path": "/n.ipynb", "new_source": "x"}, "ok"),  # 0 ok: a write of /n.ipynb
        ("Read", {"file_path": "/n.ipynb"}, "ok"),  # 1 PWR
        ("Read", {"file_path": "", "notebook_path": "/n.ipynb"}, "ok"),  # 2 RR: path from notebook_path
        ("Read", {"file_path": "/n.ipynb/"}, "ok"),  # 3 ok: another path (exact strings)
        ("Grep", {"path": "/n.ipynb"}, "ok"),  # 4 ok: "path" is not a call's path
        ("Read", {"file_path": 5}, "ok"),  # 5 ok: no path
        ("Read", {"file_path": 5}, "ok"),  # 6 DUP of 5 (duplicate needs no path)
        ("Edit", {"file_path": "/e", "notebook_path": "/n.ipynb"}, "ok"),  # 7 ok: path /e (file_path first)
        ("Read", {"file_path": "/n.ipynb", "limit": 1}, "ok"),  # 8 RR: 7 wrote /e, not /n.ipynb
    ]))
    result = tool_use(tmp_path, A)
    assert [c["path"] for c in result["calls"]] == ["/n.ipynb", "/n.ipynb", "/n.ipynb", "/n.ipynb/", None,
                                                    None, None, "/e", "/n.ipynb"]
    assert signals_of(result) == [None, "post_write_read", "re_read", None, None, None, "duplicate", None,
                                  "re_read"]
    assert result["summary"] == fig(9, 5, post_write_read=1, re_read=2, duplicate=1)


# ---------------------------------------------------------------------------
# Phases, per-tool figures
# ---------------------------------------------------------------------------


def test_phase_efficiency(tmp_path, tool_use):
    write(main_file(tmp_path), [
        asst(10, tu("c1", "Bash", {"command": "ls"})), usr(11, tr("c1")),  # ok
        asst(20, tu("c2", "Bash", {"command": "ls"})), usr(21, tr("c2")),  # DUP of c1
        asst(30, tu("c3", "Read", {"file_path": "/p"})), usr(31, tr("c3")),  # ok
        asst(40, tu("c4", "Read", {"file_path": "/p", "offset": 5})), usr(41, tr("c4")),  # RR
        asst(None, tu("c5", "Bash", {"command": "pwd"})), usr(51, tr("c5")),  # ok; no time: no phase
    ])
    write(sub_file(tmp_path, "x"), [
        asst(35, tu("x1", "Bash", {"command": "ls"}), isSidechain=True),  # ok: another agent
    ])
    int_windows = [(us(0), us(25)), (us(25), us(45)), (us(45), us(100)), (us(20), us(30))]
    result = tool_use(tmp_path, A, int_windows)
    assert result["phases"] == [
        fig(2, 1, duplicate=1),  # [0, 25): c1, c2 -> 1/2
        fig(3, 2, re_read=1),  # [25, 45): c3, x1, c4 -> 2/3
        fig(0, 0),  # [45, 100): nothing; efficiency null
        fig(1, 0, duplicate=1),  # [20, 30): c2 only (30 is excluded) -> 0.0; c1 (outside) still counts
    ]
    assert result["phases"][3]["efficiency"] == 0.0
    assert result["phases"][2]["efficiency"] is None
    assert result["summary"] == fig(6, 4, duplicate=1, re_read=1)  # c5 counts in the session
    # Datetime bounds give the same windows.
    dt_windows = [(BASE + timedelta(seconds=a), BASE + timedelta(seconds=b)) for a, b in
                  [(0, 25), (25, 45), (45, 100), (20, 30)]]
    assert tool_use(tmp_path, A, dt_windows)["phases"] == result["phases"]


def test_per_tool_figures_and_medians(tmp_path, tool_use):
    write(main_file(tmp_path), [
        # Bash: 3 calls, odd count.  Sizes 1, 5, 100 -> total 106, median 5.  Times 1, 2, 10 s ->
        # total 13 s, median 2 s.  b2 failed.
        asst(0, tu("b1", "Bash", {"command": "1"})), usr(1, tr("b1", "a")),
        asst(10, tu("b2", "Bash", {"command": "2"})), usr(12, tr("b2", "abcde", True)),
        asst(20, tu("b3", "Bash", {"command": "3"})), usr(30, tr("b3", "x" * 100)),
        # Read: 5 calls, 4 with results, even count.  Sizes 2 ("é" is 2 UTF-8 bytes), 4 (text
        # elements only), 6, 100 -> total 112, median (4 + 6) / 2 = 5.  Times 1, 2, 3, 4 s -> total
        # 10 s, median 2.5 s.  r5 has no result: in calls only.
        asst(40, tu("r1", "Read", {"file_path": "/1"})), usr(41, tr("r1", "é")),
        asst(50, tu("r2", "Read", {"file_path": "/2"})),
        usr(52, tr("r2", [{"type": "text", "text": "abcd"}, {"type": "image", "source": {}}])),
        asst(60, tu("r3", "Read", {"file_path": "/3"})), usr(63, tr("r3", "abcdef")),
        asst(70, tu("r4", "Read", {"file_path": "/4"})), usr(74, tr("r4", "x" * 100)),
        asst(80, tu("r5", "Read", {"file_path": "/5"})),
        # Grep: g1's result line has no timestamp (a size, no time); g2's result is stamped before
        # its call (time 0, C14).  Sizes 3, 0 -> total 3, median 1.5.  Times [0] -> 0 s, median 0 s.
        asst(90, tu("g1", "Grep", {"pattern": "1"})), usr(None, tr("g1", "abc")),
        asst(100, tu("g2", "Grep", {"pattern": "2"})), usr(99, tr("g2", "")),
        # No name: the "" row (C6); 2 bytes, 0.5 s.  And a Task with no time and no result.
        asst(110, {"type": "tool_use", "id": "n1", "input": {}}), usr(110.5, tr("n1", "zz")),
        asst(None, tu("k1", "Task", {"prompt": "p"})),
    ])
    result = tool_use(tmp_path, A)
    assert result["tools"] == [
        {"name": "", "calls": 1, "failed": 0, "rejected": 0, "result_bytes": 2, "median_result_bytes": 2,
         "result_s": 0.5, "median_result_s": 0.5},
        {"name": "Bash", "calls": 3, "failed": 1, "rejected": 0, "result_bytes": 106, "median_result_bytes": 5,
         "result_s": 13.0, "median_result_s": 2.0},
        {"name": "Grep", "calls": 2, "failed": 0, "rejected": 0, "result_bytes": 3, "median_result_bytes": 1.5,
         "result_s": 0.0, "median_result_s": 0.0},
        {"name": "Read", "calls": 5, "failed": 0, "rejected": 0, "result_bytes": 112, "median_result_bytes": 5,
         "result_s": 10.0, "median_result_s": 2.5},
        {"name": "Task", "calls": 1, "failed": 0, "rejected": 0, "result_bytes": 0, "median_result_bytes": None,
         "result_s": 0.0, "median_result_s": None},
    ]
    # b2 fails and the next call (b3) is a Bash: ERR.  Nothing else repeats.  12 calls.
    assert result["summary"] == fig(12, 11, error_retry=1)


REFUSED = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file"
           " edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell"
           " you how to proceed.")


def test_a_call_the_person_declined_is_no_error_retried(tmp_path, tool_use):
    """Issue 20: declining a permission prompt (`git push`) is a refusal, not a tool error: no
    error_retry when Claude asks again, and a `rejected` count per tool, not `failed`."""
    write(main_file(tmp_path), [
        # p1 declined; p2 the same push again (next call, same tool): not ERR. Still failed in
        # §2.6's sense: p2 is no duplicate of a call that "did not fail".
        asst(10, tu("p1", "Bash", {"command": "git push"})), usr(11, tr("p1", REFUSED, True)),
        asst(20, tu("p2", "Bash", {"command": "git push"})), usr(21, tr("p2", "pushed")),
        # e1 a real error, retried by e2: ERR.
        asst(30, tu("e1", "Bash", {"command": "make"})), usr(31, tr("e1", "make: *** Error 2", True)),
        asst(40, tu("e2", "Bash", {"command": "make -k"})), usr(41, tr("e2", "ok")),
        # w1 a declined Write with what the person said after the marker; w2 writes it: no
        # write happened before, so the Read r1 after w2 is post_write_read of w2 alone.
        asst(50, tu("w1", "Write", {"file_path": "/a.py", "content": "x"})),
        usr(51, tr("w1", [{"type": "text", "text": REFUSED.split(" STOP")[0] + " To tell you how to proceed, the"
                                                  " user said:\nuse tabs"}], True)),
        asst(60, tu("w2", "Write", {"file_path": "/a.py", "content": "\tx"})), usr(61, tr("w2", "ok")),
        asst(70, tu("r1", "Read", {"file_path": "/a.py"})), usr(71, tr("r1", "\tx")),
        # a declined call that is not followed by the same tool: nothing either way
        asst(80, tu("g1", "Grep", {"pattern": "x"})), usr(81, tr("g1", REFUSED, True)),
    ])
    result = tool_use(tmp_path, A)
    assert signals_of(result) == [None, None, "error_retry", None, None, None, "post_write_read", None]
    assert result["summary"] == fig(8, 6, error_retry=1, post_write_read=1)
    assert {t["name"]: (t["calls"], t["failed"], t["rejected"]) for t in result["tools"]} == {
        "Bash": (4, 1, 1), "Grep": (1, 0, 1), "Read": (1, 0, 0), "Write": (2, 0, 1)}


def test_a_later_refusal_of_a_call_already_answered_changes_nothing(tmp_path, tool_use):
    """Found in review: a second tool_result of a call, a refusal, read in a later chunk must not
    mark the call declined (its result is the file's first, C4), whatever the chunking."""
    write(main_file(tmp_path), [
        asst(10, tu("q1", "Bash", {"command": "make"})), usr(11, tr("q1", "done")),
        usr(12, tr("q1", REFUSED, True)),  # a second result: not the call's
        asst(20, tu("q2", "Bash", {"command": "make test"})), usr(21, tr("q2", "boom", True)),
        usr(22, tr("q2", REFUSED, True)),  # q2 failed first: a tool error, retried by q3
        asst(30, tu("q3", "Bash", {"command": "make test"})), usr(31, tr("q3", "ok")),
    ])
    result = tool_use(tmp_path, A)
    assert signals_of(result) == [None, "error_retry", None]
    assert {t["name"]: (t["failed"], t["rejected"]) for t in result["tools"]} == {"Bash": (1, 0)}


# ---------------------------------------------------------------------------
# The real fixtures
# ---------------------------------------------------------------------------


def test_every_real_fixture_session(capsys):
    everything = compute_tool_use(FIXTURES)
    figures_2_4 = compute(FIXTURES)
    assert set(everything) == set(figures_2_4)  # the same sessions as the 2.1-2.5 oracle
    total_calls = 0
    for session, result in everything.items():
        parts = [result["summary"], *result["agents"].values()]
        for part in parts:
            assert set(part["signals"]) == set(SIGNALS)
            assert part["productive"] + sum(part["signals"].values()) == part["calls"]
            if part["calls"]:
                assert 0 <= part["efficiency"] <= 1
                assert part["efficiency"] == part["productive"] / part["calls"]
            else:
                assert part["efficiency"] is None
        summary = result["summary"]
        # The agents partition the session's calls.
        assert sum(a["calls"] for a in result["agents"].values()) == summary["calls"] == len(result["calls"])
        for kind in SIGNALS:
            assert sum(a["signals"][kind] for a in result["agents"].values()) == summary["signals"][kind]
        # The per-tool rows partition them too.
        assert sum(t["calls"] for t in result["tools"]) == summary["calls"]
        assert [t["name"] for t in result["tools"]] == sorted(t["name"] for t in result["tools"])
        for tool in result["tools"]:
            assert 0 <= tool["failed"] <= tool["calls"]
            assert tool["result_s"] >= 0 and tool["result_bytes"] >= 0
        # Agent "" holds exactly the 2.4 tool_calls (distinct ids of the own assistant lines).
        main_calls = result["agents"].get("", {"calls": 0})["calls"]
        assert main_calls == figures_2_4[session]["summary"]["tool_calls"], session
        # Each id once.
        assert len({c["id"] for c in result["calls"]}) == len(result["calls"])
        total_calls += summary["calls"]
    assert total_calls > 1000  # the corpus holds some 1,400 tool_use blocks
    # A window covering all time holds every call with a timestamp.
    whole = compute_tool_use(FIXTURES, [(0, 2**62)])
    for session, result in whole.items():
        timed = sum(1 for c in result["calls"] if c["ts_us"] is not None)
        assert result["phases"][0]["calls"] == timed, session
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_real_fixture_spot_checks():
    """A few figures checked by hand against the fixture files with grep."""
    everything = compute_tool_use(FIXTURES)
    # grep "Sibling tool call errored" finds 3 results in the corpus, all is_error true and all in
    # beddc0be (erk, 2.1.51).
    assert sum(r["summary"]["signals"]["sibling_error"] for r in everything.values()) == 3
    assert everything["beddc0be-103e-4a78-ae7d-ba6c1bad3ac8"]["summary"]["signals"]["sibling_error"] == 3
    # No fixture reads a persisted tool-results file.
    assert sum(r["summary"]["signals"]["persisted_output_read"] for r in everything.values()) == 0


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
