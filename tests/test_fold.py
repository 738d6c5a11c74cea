"""The pure fold on hand-made lines, with figures worked out by hand (accounting.md §2.2–2.4).

An in-memory fake stands in for the store: it merges fold results the way the SQL upserts do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from retrod.transcript.fold import INLINE_AGENT, UNNAMED_AGENT, FoldState, Request, Source, fold
from retrod.transcript.parser import parse_line

A = "aaaaaaaa-0000-4000-8000-000000000000"
B = "bbbbbbbb-0000-4000-8000-000000000000"
T0 = "2026-01-01T00:00:{:02d}Z"


def ts(second: int) -> str:
    return T0.format(second)


def line(**fields) -> bytes:
    return json.dumps(fields).encode()


def assistant(key: str, second: int | None, output: int, session: str = A, tool_use: bool = False, **extra) -> bytes:
    content = [{"type": "tool_use", "id": f"toolu_{key}_{second}", "name": "Bash", "input": {}}] if tool_use else []
    return line(type="assistant", sessionId=session, requestId=key,
                timestamp=ts(second) if second is not None else None,
                message={"id": key, "content": content,
                         "usage": {"input_tokens": 3, "output_tokens": output, "cache_read_input_tokens": 100}},
                **extra)


def user(second: int, session: str = A, tool_result: bool = False, **extra) -> bytes:
    content = [{"type": "tool_result", "tool_use_id": "t", "content": "abcd"}] if tool_result else "hello"
    return line(type="user", sessionId=session, timestamp=ts(second), message={"content": content}, **extra)


def bucket_of(agent: str) -> str:
    """accounting.md §2.2 buckets, as the report's SQL applies them."""
    if agent == "":
        return "main"
    return "compaction" if agent.startswith("acompact") else "subagents"


@dataclass
class FakeStore:
    """Merges fold results like the store's upserts: requests by key, the rest by union."""

    requests: dict[str, Request] = field(default_factory=dict)
    events: list = field(default_factory=list)
    states: dict[str, FoldState] = field(default_factory=dict)
    subagents: set = field(default_factory=set)

    def feed(self, source: Source, lines: list[bytes], start: int = 0) -> None:
        entries = [(start + i, parse_line(raw)) for i, raw in enumerate(lines)]
        result = fold(source, self.states.get(source.name, FoldState()), entries)
        self.states[source.name] = result.state
        for key, request in result.requests.items():
            if key in self.requests:
                self.requests[key].merge(request)
            else:
                self.requests[key] = request
        self.events += result.events
        self.subagents |= {(source.session_uuid, agent) for agent in result.subagents}

    def tokens(self, session: str, bucket: str, what: str = "output") -> int:
        return sum(getattr(r.usage, what) for r in self.requests.values()
                   if r.session_uuid == session and bucket_of(r.agent) == bucket)

    def seconds(self, kind: str) -> float:
        return sum(e.gap_us for e in self.events if e.kind == kind) / 1e6


def main(session: str = A, name: str = "main-a") -> Source:
    return Source("main", "-p", session, "", name)


def subagent(agent: str, session: str = A) -> Source:
    return Source("subagent", "-p", session, agent, f"sub-{agent}")


def test_streaming_snapshots_count_once_with_the_largest_output() -> None:
    store = FakeStore()
    store.feed(main(), [assistant("r1", 1, 1), assistant("r1", 1, 1), assistant("r1", 2, 57)])
    (request,) = store.requests.values()
    assert request.usage.output == 57 and request.usage.input == 3 and request.usage.cache_read == 100
    assert request.ts_us == 1767225601_000000  # the earliest record's time


def test_main_record_beats_a_replayed_sidechain_copy() -> None:
    store = FakeStore()
    store.feed(subagent("a1"), [assistant("r1", 1, 90)])  # read first, larger output
    store.feed(main(), [assistant("r1", 5, 10)])
    (request,) = store.requests.values()
    assert request.usage.output == 10  # not sidechain wins before output size
    assert request.agent == "" and not request.attr_sidechain


def test_copied_history_stays_with_the_session_that_produced_it() -> None:
    store = FakeStore()
    # Session B's file copies A's message, with an earlier timestamp; still A's.
    store.feed(main(B, "main-b"), [assistant("r1", 1, 5, session=A)])
    assert store.requests["r1"].session_uuid == B  # alone, the copy counts where it was found
    store.feed(main(A, "main-a"), [assistant("r1", 9, 5, session=A)])
    assert store.requests["r1"].session_uuid == A
    assert store.tokens(B, "main") == 0


def test_time_classification_across_chunks() -> None:
    lines = [
        user(0),                                   # first event: no gap
        assistant("r1", 2, 1),                     # claude 2
        user(5, tool_result=True),                 # tool 3
        assistant("r2", 4, 1),                     # earlier than the high-water mark 5: no gap
        user(10, isCompactSummary=True),           # claude 5, from the high-water mark (not from 4)
        line(type="system", subtype="compact_boundary", sessionId=A, timestamp=ts(11)),  # not an event
        user(20),                                  # human 10
        user(21, session=B),                       # copied history: not an own line
        user(30, isSidechain=True),                # inline sidechain: not an own line
    ]
    one_pass, chunked = FakeStore(), FakeStore()
    one_pass.feed(main(), lines)
    chunked.feed(main(), lines[:3])
    chunked.feed(main(), lines[3:], start=3)
    for store in (one_pass, chunked):
        assert (store.seconds("claude"), store.seconds("tool"), store.seconds("human")) == (7.0, 3.0, 10.0)
        assert [e.offset for e in store.events if e.compaction] == [5]  # a row of its own, no event
        timed = [e.ts_us for e in store.events if e.ts_us is not None and not e.sub]
        assert max(timed) - min(timed) == 20_000_000
        # the inline sidechain line is a line of the subagent timeline (§2.3), placed by the store
        assert [(e.offset, e.kind, e.gap_class) for e in store.events if e.sub] == [(8, None, "human")]
        assert sum(e.tool_result_bytes for e in store.events) == 4


def test_inline_sidechain_and_unnamed_progress_count_as_subagents_but_are_not_listed() -> None:
    store = FakeStore()
    progress = line(type="progress", sessionId=A, timestamp=ts(3), data={
        "type": "agent_progress", "message": {"type": "assistant", "requestId": "r3",
                                              "message": {"id": "r3", "usage": {"output_tokens": 7}}}})
    store.feed(main(), [assistant("r1", 1, 5), assistant("r2", 2, 6, isSidechain=True), progress])
    agents = {r.key: r.agent for r in store.requests.values()}
    assert agents == {"r1": "", "r2": INLINE_AGENT, "r3": UNNAMED_AGENT}
    assert (store.tokens(A, "main"), store.tokens(A, "subagents")) == (5, 13)
    assert store.subagents == set()


def test_agent_progress_copy_of_a_subagent_file_record_counts_once() -> None:
    store = FakeStore()
    progress = line(type="progress", sessionId=A, timestamp=ts(4), parentToolUseID="toolu_task", data={
        "type": "agent_progress", "agentId": "a1",
        "message": {"type": "assistant", "timestamp": ts(3), "requestId": "r9",
                    "message": {"id": "r9", "usage": {"output_tokens": 1, "input_tokens": 3}}}})
    store.feed(main(), [progress])
    store.feed(subagent("a1"), [assistant("r9", 3, 400)])
    (request,) = store.requests.values()
    assert request.usage.output == 400 and request.agent == "a1"
    assert store.subagents == {(A, "a1")}


def test_compaction_agent_tokens_go_to_the_compaction_bucket_and_it_is_not_listed() -> None:
    store = FakeStore()
    store.feed(subagent("acompact-fffbd0"), [assistant("rc", 1, 6)])
    assert store.tokens(A, "compaction") == 6
    assert store.subagents == set()


def test_records_without_any_id_are_requests_of_their_own() -> None:
    store = FakeStore()
    keyless = line(type="assistant", timestamp=ts(1), message={"usage": {"output_tokens": 2}})
    store.feed(main(), [keyless, keyless])
    assert len(store.requests) == 2 and store.tokens(A, "main") == 4


def test_bad_lines_are_counted_and_skipped() -> None:
    store = FakeStore()
    store.feed(main(), [b"oops", assistant("r1", 1, 5), b"[]"])
    assert store.states["main-a"].bad_lines == 2 and store.states["main-a"].lines == 3
    assert store.tokens(A, "main") == 5


def test_tool_results_count_only_on_user_lines() -> None:
    """Found in review: a tool_result block on an assistant line is not tool output read."""
    store = FakeStore()
    odd = line(type="assistant", sessionId=A, timestamp=ts(1), message={
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "0123456789"}]})
    store.feed(main(), [odd, user(2, tool_result=True)])
    assert sum(e.tool_result_bytes for e in store.events) == 4


def test_a_requests_model_is_its_usage_winning_records_in_any_order() -> None:
    import itertools

    def record(output: int, model: str | None, below: str) -> tuple[Source, bytes]:
        data = json.loads(assistant("k", 1, output))
        if model is not None:
            data["message"]["model"] = model
        return Source("main", "-p", A, "", f"h:{below}", below), json.dumps(data).encode()

    # The largest output wins whatever it names; among the tied final snapshots, the first by its
    # file's path below the root (§2.2), whatever model it names: alpha's, in `-p/b.jsonl`.
    records = [record(5, "claude-small", "-p/a.jsonl"), record(9, "claude-b", "-p/c.jsonl"),
               record(9, None, "-p/d.jsonl"), record(9, "Zeta", "-p/e.jsonl"), record(9, "alpha", "-p/b.jsonl")]
    for order in itertools.permutations(records):
        store = FakeStore()
        for source, raw in order:
            store.feed(source, [raw])
        assert (store.requests["k"].model, store.requests["k"].usage.output) == ("alpha", 9), order
    # A record naming no model beats a smaller snapshot that names one: the model is unknown.
    store = FakeStore()
    for source, raw in (record(5, "claude-b", "-p/a.jsonl"), record(9, None, "-p/b.jsonl")):
        store.feed(source, [raw])
    assert store.requests["k"].model == ""
