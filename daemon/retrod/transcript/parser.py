"""A typed view of one transcript line. Never raises on bad input.

A line is decoded once, straight into the structs below: msgspec builds only the declared
fields and skips the rest (file contents echoed in `toolUseResult`, thinking text, snapshots)
without creating Python objects. Real files sometimes put an odd type in a field; such a line
fails that strict decode and is decoded again leniently, field by field, into the same structs,
so that one odd field makes that field absent rather than the whole line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

import msgspec
from msgspec import Struct

from .keys import indexable

TASK_TOOL_NAMES = frozenset({"Task", "Agent"})


class _ServerToolUse(Struct):
    """What the API's own tools did for a request part (accounting.md §2.2 web searches). Any type: a
    value that is no count (a bool, a string) counts 0 rather than spoiling the line's decode."""

    web_search_requests: Any = None


class _Iteration(Struct):
    """One part of a request (accounting.md §2.2 iterations): a refused attempt, the fallback that
    answered, an advisor call, a server-side compaction."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_creation: dict[str, Any] | None = None
    model: str | None = None
    server_tool_use: _ServerToolUse | None = None


class _Usage(Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_creation: dict[str, Any] | None = None
    iterations: list[_Iteration] | None = None
    speed: str | None = None
    server_tool_use: _ServerToolUse | None = None


class _ResultItem(Struct):
    type: str | None = None
    text: str | None = None


class _Block(Struct):
    type: str | None = None
    id: str | None = None
    name: str | None = None
    tool_use_id: str | None = None
    input: Any = None  # any JSON: compared whole (accounting.md §2.6); Task/Agent inputs also name a subagent
    content: str | list[_ResultItem] | None = None
    is_error: bool | None = None


class _Reason(Struct):
    type: str | None = None


class _Diagnostics(Struct):
    """The API's cache diagnosis (Claude Code 2.1.217+), accounting.md §2.8."""

    cache_miss_reason: str | _Reason | None = None


class _Message(Struct):
    id: str | None = None
    model: str | None = None
    usage: _Usage | None = None
    content: str | list[_Block] | None = None
    diagnostics: _Diagnostics | None = None


class _CreatedTask(Struct):
    id: str | None = None


class _AgentRef(Struct):
    """What retrod reads of a user line's `toolUseResult`: the subagent it answers for, whether the
    call failed by its own account, and the task a TaskCreate made (accounting.md §2.9)."""

    agentId: str | None = None
    success: bool | None = None
    task: _CreatedTask | None = None


class _ForkRef(Struct):
    sessionId: str | None = None


class _Line(Struct):
    type: str | None = None
    subtype: str | None = None
    sessionId: str | None = None
    isSidechain: bool | None = None
    isCompactSummary: bool | None = None
    timestamp: str | None = None
    uuid: str | None = None
    requestId: str | None = None
    cwd: str | None = None
    parentToolUseID: str | None = None
    message: _Message | None = None
    data: _Progress | None = None
    toolUseResult: _AgentRef | str | None = None
    forkedFrom: _ForkRef | None = None
    sessionKind: str | None = None


class _Progress(Struct):
    type: str | None = None
    agentId: str | None = None
    message: _Line | None = None  # the record an agent_progress line copies


_line_decoder = msgspec.json.Decoder(_Line)


@cache
def _hints(struct: type[Struct]) -> dict[str, Any]:
    return get_type_hints(struct)


def _lenient(value: Any, typ: Any) -> Any:
    """Decoded JSON as `typ`; each part that does not fit is absent (None, or left out of a list)."""
    try:
        return msgspec.convert(value, typ)
    except (msgspec.ValidationError, UnicodeEncodeError):
        pass  # UnicodeEncodeError: a lone surrogate (from the standard library's decoder) where no string fits
    for member in get_args(typ) if get_origin(typ) in (Union, UnionType) else (typ,):
        if isinstance(value, dict) and isinstance(member, type) and issubclass(member, Struct):
            hints = _hints(member)
            return member(**{name: _lenient(value.get(name), hints[name]) for name in member.__struct_fields__})
        if isinstance(value, list) and get_origin(member) is list:
            (item,) = get_args(member)
            return [x for x in (_lenient(v, item) for v in value) if x is not None]
    return None


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def storable_text(value: Any) -> str | None:
    """A non-empty string, else absent; made storable (PostgreSQL text holds no NUL and no lone
    surrogate, which JavaScript can write): those characters become U+FFFD."""
    if type(value) is not str or not value:
        return None
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def storable_id(value: Any) -> str | None:
    """An id, name or path that keys rows (session, agent, tool_use and line ids, models, tool
    names, input paths): storable text, made indexable."""
    text = storable_text(value)
    return None if text is None else indexable(text)


def named_session(value: Any) -> str | None:
    """The session a `sessionId` names (accounting.md §2.1): the part before its first `#` (workflow
    agents write `<session>#<anything>`); none when that part is empty or the value no string."""
    if type(value) is not str:
        return None
    return storable_id(value.split("#", 1)[0])


def storable_key(value: Any) -> str | None:
    """A request key as storable text that stays exact (accounting.md §2.2: two different ids are never
    one request): backslash, NUL and lone surrogates are escaped, never replaced; made indexable."""
    if type(value) is not str or not value:
        return None
    if value.isascii() and "\x00" not in value and "\\" not in value:
        return indexable(value, keep_start=False)
    escaped = "".join(_KEY_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c)
                      for c in value)
    return indexable(escaped, keep_start=False)


_KEY_ESCAPES = {"\\": "\\\\", "\x00": "\\0"}


# Claude Code is JavaScript: a count of 2**53 or more cannot come from it.
_MAX_COUNT = 2**53


def _count(value: Any) -> int:
    """Token counts: anything but a plausible non-negative integer (bool and float included) is 0."""
    return value if type(value) is int and 0 <= value < _MAX_COUNT else 0


_TS = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))?"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def parse_timestamp(value: Any) -> int | None:
    """RFC 3339 (no offset = UTC) to integer microseconds since the epoch; else None."""
    if not isinstance(value, str):
        return None
    # Claude Code writes "2026-01-01T00:00:00.000Z": its minute is looked up, not computed.
    if len(value) == 24 and value[23] == "Z" and value[16] == ":" and value[19] == ".":
        second, millis = value[17:19], value[20:23]
        if second.isascii() and second.isdigit() and millis.isascii() and millis.isdigit() and second < "60":
            minute = _minute_us(value[:16])
            if minute is not None:
                return minute + int(second) * 1_000_000 + int(millis) * 1000
    return _parse_rfc3339(value)


@lru_cache(maxsize=1 << 14)
def _minute_us(minute: str) -> int | None:
    return _parse_rfc3339(minute + ":00Z")


def _parse_rfc3339(value: str) -> int | None:
    m = _TS.fullmatch(value)
    if m is None:
        return None
    year, month, day, hour, minute, second, frac, sign, off_h, off_m = m.groups()
    if sign and (int(off_h) > 23 or int(off_m) > 59):
        return None
    if not 1970 <= int(year) <= 9998:  # no transcript predates 1970; 9999 would overflow with an offset
        return None
    try:
        dt = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                      tzinfo=UTC)
    except ValueError:
        return None
    us = (dt - _EPOCH) // _US
    if frac:
        us += int(frac[:6].ljust(6, "0"))
    if sign:
        offset = (int(off_h) * 60 + int(off_m)) * 60_000_000
        us += -offset if sign == "+" else offset
    return us


@dataclass(slots=True, frozen=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_create: int = 0
    cache_create_5m: int = 0
    cache_create_1h: int = 0
    web_searches: int = 0  # server_tool_use.web_search_requests (§2.2): priced apart (§2.7), no token


@dataclass(slots=True, frozen=True)
class Part:
    """A part of a request (accounting.md §2.2 iterations): its model and its tokens."""

    model: str | None
    usage: Usage


@dataclass(slots=True, frozen=True)
class ToolUse:
    id: str | None
    name: str | None
    input: Any = None  # as decoded; only the calls accounting.md §2.6 counts are fingerprinted (fold)
    description: str | None = None  # Task/Agent input only
    subagent_type: str | None = None


SIBLING_ERROR_TEXT = "Sibling tool call errored"
# What Claude Code answers a call the person declined at its permission prompt (optionally
# followed by what they said): a refusal, not a tool error (issue 20).
REJECTED_TEXT = "The user doesn't want to proceed with this tool use"


@dataclass(slots=True, frozen=True)
class ToolResult:
    tool_use_id: str | None
    bytes: int  # accounting.md §2.4 tool_result_bytes of this block
    failed: bool = False  # is_error is true
    sibling: bool = False  # a text of it says SIBLING_ERROR_TEXT (accounting.md §2.6 sibling_error)
    ts_us: int | None = None  # its line's timestamp
    rejected: bool = False  # failed, saying REJECTED_TEXT: the person declined the call
    refused: bool = False  # its line's toolUseResult says success: false (accounting.md §2.9)
    task_id: str | None = None  # the task a TaskCreate made, as its result tells (accounting.md §2.9)


# accounting.md §2.9: a TaskCreate's result text starts "Task #<id> created successfully".
_CREATED_TASK = re.compile(r"Task #(\S+) created successfully")


@dataclass(slots=True)
class Message:
    """What an entry's `message` (or an agent_progress embedded message) carries."""

    type: str | None = None
    session_id: str | None = None  # the session its sessionId names (named_session)
    timestamp: int | None = None
    key: str | None = None  # first of message.id, requestId, uuid
    model: str | None = None  # message.model ("<synthetic>" for Claude Code's own entries)
    usage: Usage | None = None  # set only when message.usage is an object
    # usage.iterations, when they are the request's tokens (accounting.md §2.2); None: one part, the
    # top-level usage and the message's model
    parts: tuple[Part, ...] | None = None
    fast: bool = False  # usage.speed is "fast" (fast mode: priced apart, §2.7)
    uuid: str | None = None  # its uuid (an embedded message's: a subagent timeline counts it once, §2.3)
    compact_summary: bool = False  # isCompactSummary: its gap is compaction time (§2.3)
    cache_miss_reason: str | None = None  # message.diagnostics.cache_miss_reason (§2.8)
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)


@dataclass(slots=True)
class Entry:
    """One transcript line, with absent or mistyped fields as None/False."""

    msg: Message
    uuid: str | None = None  # the line's own uuid: a line counts once per session timeline (§2.3)
    cwd: str | None = None  # the working folder Claude Code ran in: the project's real path
    subtype: str | None = None
    is_sidechain: bool = False
    result_agent_id: str | None = None  # toolUseResult.agentId (links a subagent to its tool_use)
    parent_tool_use_id: str | None = None
    progress_agent_id: str | None = None  # data.agentId of an agent_progress line
    embedded: Message | None = None  # the message an agent_progress line copies
    forked_from: str | None = None  # the session forkedFrom.sessionId names: a marked fork copy's (§2.1)
    bg: bool = False  # sessionKind is "bg": a background session's process wrote the line (§2.1 unmarked)

    @property
    def type(self) -> str | None:
        return self.msg.type


def _usage(u: _Usage | _Iteration) -> Usage:
    c5m = c1h = 0
    cc = u.cache_creation
    if cc is not None:
        c5m = _count(cc.get("ephemeral_5m_input_tokens"))
        c1h = _count(cc.get("ephemeral_1h_input_tokens"))
    flat = u.cache_creation_input_tokens
    return Usage(
        input=_count(u.input_tokens),
        output=_count(u.output_tokens),
        cache_read=_count(u.cache_read_input_tokens),
        cache_create=_count(flat) if flat is not None else c5m + c1h,
        cache_create_5m=c5m,
        cache_create_1h=c1h,
        web_searches=_count(u.server_tool_use.web_search_requests) if u.server_tool_use is not None else 0,
    )


def _parts(u: _Usage, top: Usage, model: str | None) -> tuple[Part, ...] | None:
    """accounting.md §2.2: the iterations are the request's parts when there is at least one and their
    sums reach the top-level usage in each of the four fields; else the request is one part.
    One iteration that says what the top level says is that one part (None)."""
    if not u.iterations:
        return None
    parts = tuple(Part(storable_id(it.model) or model, _usage(it)) for it in u.iterations)
    for field_name in ("input", "output", "cache_read", "cache_create"):
        if sum(getattr(p.usage, field_name) for p in parts) < getattr(top, field_name):
            return None
    if len(parts) == 1 and parts[0] == Part(model, top):
        return None
    return parts


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _result_texts(content: str | list[_ResultItem] | None) -> list[str]:
    if isinstance(content, str):
        return [content]
    if content is None:
        return []
    return [item.text for item in content if item.type == "text" and item.text is not None]


def _tool_result(block: _Block, ts_us: int | None) -> ToolResult:
    texts = _result_texts(block.content)
    failed = block.is_error is True
    return ToolResult(storable_id(block.tool_use_id), sum(map(_utf8_len, texts)), failed,
                      failed and any(SIBLING_ERROR_TEXT in text for text in texts), ts_us,
                      failed and any(REJECTED_TEXT in text for text in texts))


def _created_task(content: str | list[_ResultItem] | None) -> str | None:
    """The id in a result text `Task #<id> created successfully…`: the content when a string, else
    the first text element's (accounting.md §2.9)."""
    if isinstance(content, list):
        content = next((item.text for item in content if item.type == "text"), None)
    if not isinstance(content, str) or not content.startswith("Task #"):
        return None
    found = _CREATED_TASK.match(content)
    return storable_id(found.group(1)) if found else None


def _with_outcome(result: ToolResult, block: _Block, ref: _AgentRef | None) -> ToolResult:
    """A result with what its line's toolUseResult says of it (accounting.md §2.9)."""
    task_id = storable_id(ref.task.id) if ref is not None and ref.task is not None else None
    refused = ref is not None and ref.success is False
    if task_id is None:
        task_id = _created_task(block.content)
    if task_id is None and not refused:
        return result
    return replace(result, refused=refused, task_id=task_id)


def _task_text(tool_input: Any, key: str) -> str | None:
    return storable_text(tool_input.get(key)) if isinstance(tool_input, dict) else None


def _cache_miss_reason(diagnostics: _Diagnostics | None) -> str | None:
    """accounting.md §2.8: a string, or an object whose `type` is a string; an empty one is none."""
    reason = diagnostics.cache_miss_reason if diagnostics is not None else None
    if isinstance(reason, _Reason):
        reason = reason.type
    return storable_id(reason)


def _message(kind: str | None, session_id: str | None, timestamp: str | None, uuid: str | None,
             request_id: str | None, body: _Message | None, compact_summary: bool | None = None,
             outcome: _AgentRef | None = None) -> Message:
    """`outcome`: the line's toolUseResult, which speaks for its tool_result blocks."""
    msg = Message(type=storable_text(kind), session_id=named_session(session_id),
                  timestamp=parse_timestamp(timestamp), uuid=storable_key(uuid),
                  compact_summary=compact_summary is True)
    msg.key = (body and storable_key(body.id)) or storable_key(request_id) or msg.uuid
    if body is None:
        return msg
    msg.model = storable_id(body.model)
    msg.cache_miss_reason = _cache_miss_reason(body.diagnostics)
    if body.usage is not None:
        msg.usage = _usage(body.usage)
        msg.parts = _parts(body.usage, msg.usage, msg.model)
        msg.fast = body.usage.speed == "fast"
    if not isinstance(body.content, list):
        return msg  # a plain-text message
    for block in body.content:
        if block.type == "tool_use":
            name = storable_id(block.name)
            task = block.input if name in TASK_TOOL_NAMES else None
            msg.tool_uses.append(ToolUse(
                id=storable_id(block.id),
                name=name,
                input=block.input,
                description=_task_text(task, "description"),
                subagent_type=_task_text(task, "subagent_type"),
            ))
        elif block.type == "tool_result":
            msg.tool_results.append(_with_outcome(_tool_result(block, msg.timestamp), block, outcome))
    return msg


def _decode_line(raw: bytes) -> _Line | None:
    try:
        return _line_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    # An odd field, a line that is not an object, or JSON that msgspec refuses: lone surrogate
    # escapes (\ud800), which JavaScript writes and Python's json accepts. Bytes that are not
    # UTF-8 make a bad line (accounting.md §2.1), here as in msgspec.
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_not_json)
    except ValueError:  # UnicodeDecodeError included
        return None
    return _lenient(value, _Line) if isinstance(value, dict) else None


def parse_line(raw: bytes) -> Entry | None:
    """Parse one complete line (without its newline). None when it is not a JSON object, or
    not UTF-8 (accounting.md §2.1): msgspec checks only the strings it decodes, not those it skips,
    so the line is checked first (~3 GB/s, and only lines that are not plain ASCII)."""
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        line = _decode_line(raw)
    except RecursionError:  # nesting deeper than any decoder will go: not a line we can read
        return None
    return None if line is None else _entry(line)


def _entry(line: _Line) -> Entry:
    kind = storable_text(line.type)
    ref = line.toolUseResult if kind == "user" and isinstance(line.toolUseResult, _AgentRef) else None
    msg = _message(kind, line.sessionId, line.timestamp, line.uuid, line.requestId, line.message,
                   line.isCompactSummary, ref)
    entry = Entry(
        msg=msg,
        uuid=msg.uuid,  # exact, as a request key: two lines are one only when equal
        cwd=storable_text(line.cwd),
        subtype=storable_text(line.subtype),
        is_sidechain=line.isSidechain is True,
        parent_tool_use_id=storable_id(line.parentToolUseID),
        forked_from=named_session(line.forkedFrom.sessionId) if line.forkedFrom is not None else None,
        bg=line.sessionKind == "bg",
    )
    if ref is not None:
        entry.result_agent_id = storable_id(ref.agentId)
    elif kind == "progress":
        progress = line.data
        if progress is not None and progress.type == "agent_progress":
            entry.progress_agent_id = storable_id(progress.agentId)
            inner = progress.message
            if inner is not None:
                entry.embedded = _message(inner.type, inner.sessionId, inner.timestamp, inner.uuid,
                                          inner.requestId, inner.message, inner.isCompactSummary)
    return entry
