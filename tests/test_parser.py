"""The parser never raises, and reads odd real-world shapes as accounting.md §2.1–2.2 say."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrod.transcript.parser import parse_line, parse_timestamp


@pytest.mark.parametrize(("text", "us"), [
    ("1970-01-01T00:00:00Z", 0),
    ("1970-01-01T00:00:01.5z", 1_500_000),
    ("1970-01-01 00:00:00.1234567Z", 123_456),  # digits past microseconds are dropped
    ("1970-01-01T01:00:00+01:00", 0),
    ("1970-01-01T00:00:00-00:30", 1_800_000_000),
    ("1970-01-01T00:00:02", 2_000_000),  # no offset = UTC
])
def test_timestamps(text: str, us: int) -> None:
    assert parse_timestamp(text) == us


@pytest.mark.parametrize("bad", [None, 17, "", "yesterday", "2026-02-30T00:00:00Z", "2026-01-01T25:00:00Z",
                                 "2026-01-01", "2026-01-01T00:00:60Z", "２０２６-01-01T00:00:00Z",
                                 "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+01:60",
                                 "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_bad_timestamps_are_absent(bad: object) -> None:
    assert parse_timestamp(bad) is None


@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9998, 12, 31)),
       st.sampled_from(["", "60", "6a", "٣0"]))
def test_the_usual_timestamp_shape_reads_as_datetime_does(moment: datetime, bad_second: str) -> None:
    """Claude Code's own "…T12:34:56.789Z" takes a shortcut (its minute is cached): it must agree
    with the standard library, and fall back to the full parse for a second that is not one."""
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    expected = (moment.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
        microseconds=1) // 1000 * 1000
    assert parse_timestamp(text) == expected
    if bad_second:
        assert parse_timestamp(text[:17] + bad_second + text[19:]) is None


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b"42", b'"text"', b"{", b"\xff\xfe",
                                 b'{"type": NaN}', b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"])
def test_non_objects_are_bad_lines(raw: bytes) -> None:
    assert parse_line(raw) is None


def test_usage_values_that_are_not_counts_are_zero() -> None:
    line = {"type": "assistant", "requestId": "r", "message": {"usage": {
        "input_tokens": True, "output_tokens": 2.0, "cache_read_input_tokens": -1,
        "cache_creation_input_tokens": "9",
        "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 4}}}}
    usage = parse_line(json.dumps(line).encode()).msg.usage
    assert (usage.input, usage.output, usage.cache_read) == (0, 0, 0)
    assert usage.cache_create == 7  # the flat field is not an integer: 5m + 1h
    assert (usage.cache_create_5m, usage.cache_create_1h) == (3, 4)


def test_flat_cache_creation_wins_when_it_is_an_integer() -> None:
    line = {"type": "assistant", "message": {"usage": {
        "cache_creation_input_tokens": 10,
        "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 4}}}}
    assert parse_line(json.dumps(line).encode()).msg.usage.cache_create == 10


def test_usage_that_is_not_an_object_makes_no_record() -> None:
    line = {"type": "assistant", "message": {"id": "m", "usage": "lots"}}
    assert parse_line(json.dumps(line).encode()).msg.usage is None


def test_key_is_first_of_message_id_request_id_uuid() -> None:
    def key(**fields):
        return parse_line(json.dumps({"type": "assistant", **fields}).encode()).msg.key

    assert key(message={"id": "msg"}, requestId="req", uuid="u") == "msg"
    assert key(message={"id": ""}, requestId="req", uuid="u") == "req"
    assert key(message={"id": 7}, requestId=None, uuid="u") == "u"
    assert key(message={}, requestId=[], uuid=3) is None


def test_tool_result_bytes_in_utf8_with_lone_surrogates() -> None:
    # "é" is 2 bytes, "€" 3, a lone surrogate 3 (written by JavaScript as an escape).
    raw = (b'{"type":"user","message":{"content":['
           b'{"type":"tool_result","tool_use_id":"t1","content":"\\u00e9\\u20ac\\ud800"},'
           b'{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"abc"},'
           b'{"type":"image","source":{}},{"type":"text","text":5}]},'
           b'{"type":"tool_result","tool_use_id":"t3","content":{"odd":1}}]}}')
    entry = parse_line(raw)
    assert [(r.tool_use_id, r.bytes) for r in entry.msg.tool_results] == [("t1", 8), ("t2", 3), ("t3", 0)]


def test_one_odd_block_does_not_hide_the_others() -> None:
    raw = json.dumps({"type": "assistant", "message": {"content": [
        "stray string", {"type": "tool_use", "id": "toolu_1", "name": "Task",
                         "input": {"description": "look", "subagent_type": "Explore"}}]}}).encode()
    (tool_use,) = parse_line(raw).msg.tool_uses
    assert (tool_use.id, tool_use.name, tool_use.description, tool_use.subagent_type) == (
        "toolu_1", "Task", "look", "Explore")


def test_task_prefixed_tools_are_not_task() -> None:
    raw = json.dumps({"type": "assistant", "message": {"content": [
        {"type": "tool_use", "id": "x", "name": "TaskCreate", "input": {"description": "d"}}]}}).encode()
    assert parse_line(raw).msg.tool_uses[0].description is None


def test_agent_progress_embeds_its_record() -> None:
    raw = json.dumps({"type": "progress", "timestamp": "2026-01-01T00:00:01Z", "sessionId": "s",
                      "parentToolUseID": "toolu_p", "data": {
                          "type": "agent_progress", "agentId": "a1", "message": {
                              "type": "assistant", "timestamp": "2026-01-01T00:00:00Z", "requestId": "req",
                              "message": {"id": "msg", "usage": {"output_tokens": 4}}}}}).encode()
    entry = parse_line(raw)
    assert entry.progress_agent_id == "a1" and entry.parent_tool_use_id == "toolu_p"
    assert entry.embedded.key == "msg" and entry.embedded.usage.output == 4
    assert entry.embedded.timestamp == 1767225600_000000


def test_tool_use_result_string_is_not_a_link() -> None:
    raw = json.dumps({"type": "user", "toolUseResult": "Error: boom", "message": {"content": []}}).encode()
    assert parse_line(raw).result_agent_id is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "message", "usage", "content", "data", "id", "timestamp", "sessionId",
                         "toolUseResult", "input_tokens", "output_tokens", "tool_use_id", "text",
                         "agentId", "requestId", "isSidechain", "cache_creation"]) | st.text(max_size=3),
        inner, max_size=6),
    max_leaves=30)


@given(json_values)
def test_never_raises_on_any_json(value: object) -> None:
    parse_line(json.dumps(value).encode())


@given(st.binary(max_size=200))
def test_never_raises_on_any_bytes(raw: bytes) -> None:
    parse_line(raw)


@pytest.mark.parametrize("raw", [
    r'{"type":"user","isSidechain":"\ud800","timestamp":"2026-01-01T00:00:00Z"}',
    r'{"type":"user","message":"x\ud800","timestamp":"2026-01-01T00:00:00Z"}',
    r'{"type":"system","data":"\ud800","timestamp":"2026-01-01T00:00:00Z"}',
    (r'{"type":"assistant","timestamp":"2026-01-01T00:00:00Z","message":{"content":['
     r'{"type":"tool_use","id":"t1","name":"Task","input":"ls \ud800"}]}}'),
])
def test_a_lone_surrogate_where_no_string_fits_makes_that_field_absent(raw: str) -> None:
    """Found in review: such a line raised from the lenient decode, and its file stopped there."""
    entry = parse_line(raw.encode())
    assert entry is not None and entry.msg.timestamp == 1767225600_000000
    assert not entry.is_sidechain and entry.embedded is None
    if entry.msg.tool_uses:
        assert entry.msg.tool_uses[0].id == "t1" and entry.msg.tool_uses[0].description is None


@pytest.mark.parametrize(("model", "stored"), [
    ("claude-opus-4-6", "claude-opus-4-6"), ("<synthetic>", "<synthetic>"), ("", None), (None, None),
    (42, None), (["claude"], None), ("a\x00b\ud800", "a\ufffdb\ufffd"),  # storable: NUL, lone surrogate
])
def test_message_model_of_a_line_and_of_an_agent_progress_copy(model: object, stored: str | None) -> None:
    message = {"id": "m", "usage": {"output_tokens": 1}}
    if model is not None:
        message["model"] = model
    own = parse_line(json.dumps({"type": "assistant", "message": message}).encode())
    assert own.msg.model == stored
    assert own.msg.usage.output == 1  # an odd model makes only the model absent
    copy = parse_line(json.dumps({"type": "progress", "data": {
        "type": "agent_progress", "agentId": "a1", "message": {"type": "assistant", "message": message}}}).encode())
    assert copy.embedded.model == stored
