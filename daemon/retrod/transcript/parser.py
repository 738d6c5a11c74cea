"""A typed view of one transcript line. Never raises on bad input.

msgspec decodes only the fields declared below; everything else (file contents echoed in
`toolUseResult`, thinking text, snapshots) is skipped without building Python objects. Fields
whose shape varies in real files are kept as `Raw` and decoded on demand, each on its own, so
that one odd field makes that field absent rather than the whole line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec
from msgspec import Raw, Struct

TASK_TOOL_NAMES = frozenset({"Task", "Agent"})
_EMPTY = Raw()


class _Line(Struct):
    type: Any = None
    subtype: Any = None
    sessionId: Any = None
    isSidechain: Any = None
    isCompactSummary: Any = None
    timestamp: Any = None
    uuid: Any = None
    requestId: Any = None
    parentToolUseID: Any = None
    message: Raw = _EMPTY
    data: Raw = _EMPTY
    toolUseResult: Raw = _EMPTY


class _Message(Struct):
    id: Any = None
    usage: Raw = _EMPTY
    content: Raw = _EMPTY


class _Usage(Struct):
    input_tokens: Any = None
    output_tokens: Any = None
    cache_read_input_tokens: Any = None
    cache_creation_input_tokens: Any = None
    cache_creation: Any = None


class _Block(Struct):
    type: Any = None
    id: Any = None
    name: Any = None
    tool_use_id: Any = None
    input: Raw = _EMPTY
    content: Raw = _EMPTY


class _TaskInput(Struct):
    description: Any = None
    subagent_type: Any = None


class _AgentRef(Struct):
    agentId: Any = None


class _Progress(Struct):
    type: Any = None
    agentId: Any = None
    message: Raw = _EMPTY


_line_decoder = msgspec.json.Decoder(_Line)
_decoders: dict[type, msgspec.json.Decoder] = {}


def _as(value: Any, typ: type) -> Any:
    """Decode a Raw (or convert an already-decoded object) into `typ`; None when it does not fit."""
    if value is None or value is _EMPTY:
        return None
    try:
        if isinstance(value, Raw):
            if not value or (len(value) == 4 and bytes(value) == b"null"):
                return None
            decoder = _decoders.get(typ)
            if decoder is None:
                decoder = _decoders[typ] = msgspec.json.Decoder(typ)
            return decoder.decode(value)
        return msgspec.convert(value, typ)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeEncodeError):
        # UnicodeEncodeError: a lone surrogate, from the standard-library path, met a Raw field.
        return _as_slow(value, typ)


def _as_slow(value: Any, typ: type) -> Any:
    # msgspec rejects lone surrogate escapes (\ud800) that Python's json accepts and that
    # JavaScript writes; fall back to the standard library for that value only.
    if isinstance(value, Raw):
        try:
            value = json.loads(bytes(value).decode("utf-8", "surrogateescape"), parse_constant=_not_json)
        except ValueError:
            return None
    if typ is Any:
        return value
    if not isinstance(value, dict) or not isinstance(typ, type) or not issubclass(typ, Struct):
        return None
    return typ(**{name: value.get(name) for name in typ.__struct_fields__ if name in value})


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def storable_text(value: Any) -> str | None:
    """A non-empty string, else absent; made storable (PostgreSQL text holds no NUL and no lone
    surrogate, which JavaScript can write): those characters become U+FFFD."""
    if not isinstance(value, str) or not value:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


# Claude Code is JavaScript: a count of 2**53 or more cannot come from it.
_MAX_COUNT = 2**53


def _count(value: Any) -> int:
    """Token counts: anything but a plausible non-negative integer (bool and float included) is 0."""
    return value if type(value) is int and 0 <= value < _MAX_COUNT else 0


_TS = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))?"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)


def parse_timestamp(value: Any) -> int | None:
    """RFC 3339 (no offset = UTC) to integer microseconds since the epoch; else None."""
    if not isinstance(value, str):
        return None
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
                      tzinfo=timezone.utc)
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


@dataclass(slots=True, frozen=True)
class ToolUse:
    id: str | None
    name: str | None
    description: str | None = None  # Task/Agent input only
    subagent_type: str | None = None


@dataclass(slots=True)
class Message:
    """What an entry's `message` (or an agent_progress embedded message) carries."""

    type: str | None = None
    session_id: str | None = None
    timestamp: int | None = None
    key: str | None = None  # first of message.id, requestId, uuid
    usage: Usage | None = None  # set only when message.usage is an object
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_results: list[tuple[str | None, int]] = field(default_factory=list)  # (tool_use_id, bytes)


@dataclass(slots=True)
class Entry:
    """One transcript line, with absent or mistyped fields as None/False."""

    msg: Message
    subtype: str | None = None
    is_sidechain: bool = False
    is_compact_summary: bool = False
    result_agent_id: str | None = None  # toolUseResult.agentId (links a subagent to its tool_use)
    parent_tool_use_id: str | None = None
    progress_agent_id: str | None = None  # data.agentId of an agent_progress line
    embedded: Message | None = None  # the assistant message an agent_progress line copies

    @property
    def type(self) -> str | None:
        return self.msg.type


def _usage(raw: Any) -> Usage | None:
    u = _as(raw, _Usage)
    if u is None:
        return None
    c5m = c1h = 0
    cc = u.cache_creation
    if isinstance(cc, dict):
        c5m = _count(cc.get("ephemeral_5m_input_tokens"))
        c1h = _count(cc.get("ephemeral_1h_input_tokens"))
    flat = u.cache_creation_input_tokens
    cache_create = _count(flat) if type(flat) is int else c5m + c1h
    return Usage(
        input=_count(u.input_tokens),
        output=_count(u.output_tokens),
        cache_read=_count(u.cache_read_input_tokens),
        cache_create=cache_create,
        cache_create_5m=c5m,
        cache_create_1h=c1h,
    )


def _blocks(raw: Any) -> list[_Block]:
    if isinstance(raw, Raw) and bytes(memoryview(raw)[:1]) != b"[":
        return []  # a plain-text message: skip decoding its string
    blocks = _as(raw, list[_Block])
    if blocks is not None:
        return blocks
    items = _as(raw, list[Any]) or []  # one odd element must not hide the others
    return [b for b in (_as(item, _Block) for item in items) if b is not None]


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _tool_result_bytes(raw: Any) -> int:
    content = _as(raw, Any)
    if isinstance(content, str):
        return _utf8_len(content)
    if isinstance(content, list):
        return sum(
            _utf8_len(item["text"])
            for item in content
            if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str)
        )
    return 0


def _message(kind: Any, session_id: Any, timestamp: Any, uuid: Any, request_id: Any, raw: Any) -> Message:
    msg = Message(type=storable_text(kind), session_id=storable_text(session_id), timestamp=parse_timestamp(timestamp))
    body = _as(raw, _Message)
    msg.key = (body and storable_text(body.id)) or storable_text(request_id) or storable_text(uuid)
    if body is None:
        return msg
    msg.usage = _usage(body.usage)
    for block in _blocks(body.content):
        if block.type == "tool_use":
            name = storable_text(block.name)
            task = _as(block.input, _TaskInput) if name in TASK_TOOL_NAMES else None
            msg.tool_uses.append(
                ToolUse(
                    id=storable_text(block.id),
                    name=name,
                    description=task and storable_text(task.description),
                    subagent_type=task and storable_text(task.subagent_type),
                )
            )
        elif block.type == "tool_result":
            msg.tool_results.append((storable_text(block.tool_use_id), _tool_result_bytes(block.content)))
    return msg


def _decode_line(raw: bytes) -> _Line | None:
    try:
        return _line_decoder.decode(raw)
    except msgspec.ValidationError:
        return None  # valid JSON, but not an object
    except msgspec.DecodeError:
        obj = _as_slow(Raw(raw), _Line) if raw.strip()[:1] == b"{" else None
        return obj


def parse_line(raw: bytes) -> Entry | None:
    """Parse one complete line (without its newline). None when it is not a JSON object."""
    try:
        return _parse(raw)
    except RecursionError:  # nesting deeper than any decoder will go: not a line we can read
        return None


def _parse(raw: bytes) -> Entry | None:
    line = _decode_line(raw)
    if line is None:
        return None
    kind = storable_text(line.type)
    entry = Entry(
        msg=_message(kind, line.sessionId, line.timestamp, line.uuid, line.requestId, line.message),
        subtype=storable_text(line.subtype),
        is_sidechain=line.isSidechain is True,
        is_compact_summary=line.isCompactSummary is True,
        parent_tool_use_id=storable_text(line.parentToolUseID),
    )
    if kind == "user":
        ref = _as(line.toolUseResult, _AgentRef)
        entry.result_agent_id = ref and storable_text(ref.agentId)
    elif kind == "progress":
        progress = _as(line.data, _Progress)
        if progress is not None and progress.type == "agent_progress":
            entry.progress_agent_id = storable_text(progress.agentId)
            inner = _as(progress.message, _Line)
            if inner is not None:
                entry.embedded = _message(
                    inner.type, inner.sessionId, inner.timestamp, inner.uuid, inner.requestId, inner.message
                )
    return entry
