"""The pure fold: transcript lines in, rows to upsert out (accounting.md §2). No I/O here.

The same function serves backfill and live tailing: `fold` takes the state saved with the file's
offset and returns the next state, so any chunking of a file gives the same rows as one pass.
Every row it emits merges with the stored one by an order-independent rule (max, min, union),
which is what makes re-reads and interleaved files idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Literal

import msgspec

from .keys import PLACE_KEY_BYTES, indexable
from .parser import Entry, Message, Part, ToolResult, Usage
from .plan import PLAN_TOOLS, plan_input
from .tool_input import example_text, fingerprint, input_detail, input_path

INLINE_AGENT = "<inline>"  # isSidechain lines of a main transcript (Claude Code 1.0.x)
UNNAMED_AGENT = "<unnamed>"  # agent_progress copies without data.agentId
THREADS = (INLINE_AGENT, UNNAMED_AGENT)  # in attribution ties they rank after every named agent
COMPACTION_PREFIX = "acompact"
SourceKind = Literal["main", "subagent", "agent_root"]


@dataclass(frozen=True, slots=True)
class Source:
    """What a transcript file is, from its path (see discovery)."""

    kind: SourceKind
    slug: str
    session_uuid: str  # for a project-level agent file: its first sessionId (see first_session_id)
    agent_id: str = ""  # "" for a main transcript
    name: str = ""  # host-qualified path; keys the requests of records that carry no id
    below: str = ""  # the path below the projects root: breaks ties between records (§2.2)


# The fold's rules for what lines already read are stored as. A file whose state was saved
# under older rules is read again from its start, keeping its rows (ingest): migration 0009 does
# it once for the models, and this catches a daemon from before it, still running during the
# upgrade, reading the files again under its own rules (its states carry no `rules`).
# 1: requests carry their model, and tool calls are kept with their waste signals (0010).
# 2: requests carry their parts (iterations) and fast mode (0013); lines their uuid, and
#    compaction boundaries are rows, so that copies of a main transcript count once (0014).
# 3: plan calls carry their input, results whether they failed by their own account and the
#    task a TaskCreate made (0025); a sessionId `<session>#…` names its session (workflow agents),
#    subagent timelines (§2.3) and fork copies (§2.1); requests carry Claude Code's cache-miss
#    reason and their place when keyless, and every stream's compaction boundaries are kept with
#    their time (0024, §2.8).
# 4: a main transcript's unmarked candidate lines are kept with their uuid, and its candidate span
#    (§2.1 unmarked fork copies; 0026).
# 5: requests and their parts carry their web searches (§2.2, §2.7; 0027).
# 6: a call without a path keeps its example text (§2.10; 0028).
# 7: requests carry the place (path below the root, line) of the record whose usage counts,
#    which breaks ties on the usage tuple (§2.2; 0035).
# 8: an unmarked candidate line with a uuid keeps its subagent link and its working folder on
#    its holder row, and lists no subagent (its record's agent is there): a fork copy's give the
#    fork nothing (§2.1, §2.4, §4; 0036).
RULES = 8
# A file read under rules below this is read again forgetting its per-file rows (events, calls,
# subagents, links; requests stay counted), not keeping them: lines the file once counted as its
# own may be fork copies under rules 3.
FORGET_BELOW_RULES = 3
# The same for a main transcript: under rules 8 the subagents and links of its lines that may be
# fork copies are no longer its own rows (a subagent's file keeps its own).
FORGET_MAIN_BELOW_RULES = 8


@dataclass(slots=True)
class FoldState:
    """What must survive between chunks of one file; saved with its offset."""

    high_water_us: int | None = None  # the latest event time so far: the next gap starts there
    first_event_us: int | None = None  # the earliest (lines are not always in time order)
    # §4: the working folder of the first own line without a uuid that has one, and its offset
    # (a line with a uuid may be a fork copy: its holder row carries its folder, and the store
    # works the file's first own folder out, files.cwd)
    cwd: str | None = None
    cwd_offset: int | None = None
    # the working folder of the last line with a uuid (a holder) so far: a holder's row carries its
    # own only when it differs (held_cwd: whether any holder was seen)
    held_cwd: str | None = None
    held_cwd_seen: bool = False
    # §2.1 unmarked fork copies: the earliest and latest timestamp of the file's unmarked
    # candidate lines (any type), which rank the sessions holding a uuid
    span_first_us: int | None = None
    span_last_us: int | None = None
    bad_lines: int = 0
    lines: int = 0
    rules: int = RULES  # the RULES this state was folded under

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict | None) -> FoldState:
        known = {k: v for k, v in (data or {}).items() if k in cls.__slots__}
        known.setdefault("rules", 0)  # saved before RULES, or by a retrod that knows none
        return cls(**known)


_NO_TS = 1 << 62  # a missing timestamp sorts last


@dataclass(slots=True)
class Request:
    key: str
    session_uuid: str
    agent: str
    ts_us: int | None  # earliest timestamp of its records
    attr_sidechain: bool
    attr_foreign: bool
    attr_ts_us: int | None
    usage_main: bool  # the chosen usage comes from a non-sidechain record
    usage: Usage  # the top-level usage of the record whose usage counts (it ranks the records)
    has_tool_use: bool
    model: str = ""  # message.model of the record whose usage counts; "" when it names none
    parts: str | None = None  # that record's parts as JSON (parts_json); None: one part, the above
    fast: bool = False  # that record's usage.speed is "fast"
    reason: str | None = None  # that record's message.diagnostics.cache_miss_reason (§2.8)
    # A request without a key (a record of its own): its file and offset, which order it among
    # the keyless requests of its timestamp (§2.8); None for a keyed request.
    place_path: str | None = None
    place_offset: int | None = None
    # The place of the record whose usage counts: its file's path below the projects root and
    # its line's offset (line order), which break ties on the usage tuple (§2.2).
    usage_path: str = ""
    usage_offset: int = 0
    # The owner among the records that are not on an unmarked candidate line with a uuid (§2.1:
    # such a line may turn out a fork copy, which ranks as foreign; the store re-ranks those
    # records, Holder.key, against this one). base_session None: no such record.
    base_session: str | None = None
    base_agent: str = ""
    base_sidechain: bool = False
    base_foreign: bool = False
    base_ts_us: int | None = None

    def attribution_rank(self) -> tuple:
        ts = _NO_TS if self.attr_ts_us is None else self.attr_ts_us
        return (self.attr_sidechain, self.attr_foreign, ts, self.session_uuid, self.agent in THREADS,
                self.agent)

    def base_rank(self) -> tuple:
        ts = _NO_TS if self.base_ts_us is None else self.base_ts_us
        return (self.base_session is None, self.base_sidechain, self.base_foreign, ts, self.base_session or "",
                self.base_agent in THREADS, self.base_agent)

    def usage_rank(self) -> tuple:
        u = self.usage
        return (self.usage_main, u.output, u.input, u.cache_create, u.cache_read)

    def usage_beaten_by(self, other: Request) -> bool:
        """Whether `other`'s record is the one whose usage (and model, parts, speed) counts: the
        largest usage tuple, then the first by its file's path below the projects root
        (code-point), then line (§2.2) — so any order of arrival picks the same record
        (upsert_requests orders the same way)."""
        mine, theirs = self.usage_rank(), other.usage_rank()
        if theirs != mine:
            return theirs > mine
        return (other.usage_path, other.usage_offset) < (self.usage_path, self.usage_offset)

    def merge(self, other: Request) -> None:
        """Fold another record of the same request in (accounting.md §2.2)."""
        if self.usage_beaten_by(other):
            self.usage_main, self.usage, self.model = other.usage_main, other.usage, other.model
            self.parts, self.fast, self.reason = other.parts, other.fast, other.reason
            self.usage_path, self.usage_offset = other.usage_path, other.usage_offset
        if other.attribution_rank() < self.attribution_rank():
            self.session_uuid, self.agent = other.session_uuid, other.agent
            self.attr_sidechain, self.attr_foreign = other.attr_sidechain, other.attr_foreign
            self.attr_ts_us = other.attr_ts_us
        if other.base_rank() < self.base_rank():
            self.base_session, self.base_agent = other.base_session, other.base_agent
            self.base_sidechain, self.base_foreign = other.base_sidechain, other.base_foreign
            self.base_ts_us = other.base_ts_us
        if other.ts_us is not None and (self.ts_us is None or other.ts_us < self.ts_us):
            self.ts_us = other.ts_us
        self.has_tool_use = self.has_tool_use or other.has_tool_use


@dataclass(frozen=True, slots=True)
class Event:
    """An own line of a main transcript that §2.3/§2.4 count: a user or assistant line (with a
    timestamp, a tool result or a uuid), or a compaction boundary. Its gap is the file's own
    (prev_us, kind, gap_us): a session with several main transcripts has one timeline, which the
    store works out across them (the line's uuid counts once; the high-water mark runs on)."""

    offset: int
    ts_us: int | None
    prev_us: int | None  # the high-water mark before it: the gap is [prev_us, ts_us]
    kind: str | None  # claude / tool / human; None when it closes no gap (first, untimed, not later)
    gap_us: int
    tool_result_bytes: int
    line_uuid: str | None = None
    gap_class: str | None = None  # what the gap before it is when there is one (kind's class)
    compaction: bool = False  # a compact_boundary line: no event, counted in `compactions`
    # A line of the subagent timeline (§2.3: a timestamped user/assistant line of a subagent file
    # or an isSidechain one, or a message an agent_progress line embeds): it counts only while its
    # session has no main event, placed by the store across the session's files (no gap here).
    sub: bool = False


@dataclass(frozen=True, slots=True)
class Boundary:
    """A compact_boundary line with a timestamp in a stream's own transcript (accounting.md §2.8): a
    main transcript's lines but its isSidechain ones (copied history and fork copies included;
    agent ""), every line of an agent's own file (agent = the file's id)."""

    offset: int
    agent: str
    ts_us: int


class Holder(msgspec.Struct, omit_defaults=True):
    """An unmarked candidate line of a main transcript with a uuid (§2.1: neither copied history,
    nor sidechain, nor marked): the store decides across sessions which one wrote the uuid. With
    the record on it, if any (its own, or the one an agent_progress line embeds: a line holds one
    at most), which ranks as foreign (§2.2) when the line turns out a fork copy; key None: none.
    One row of retrod.line_holders (migration 0030). (A struct whose defaults are left out of its
    JSON: most lines hold no record, link or change of folder, and every line with a uuid is one.)"""

    offset: int
    uuid: str
    bg: bool  # stamped sessionKind "bg"
    key: str | None = None
    sidechain: bool | None = None
    ts_us: int | None = None
    agent: str | None = None
    # §2.4: the subagent link on the line (toolUseResult.agentId, or an agent_progress line's),
    # which counts in the session while the line is no fork copy
    link_agent: str | None = None
    link_tool_use: str | None = None
    # §4: the line's working folder when it differs from the holder before it in the file (the
    # first holder's always): cwd_changed; a holder's folder is that of the last one at or before it
    cwd_changed: bool = False
    cwd: str | None = None

    def hold(self, key: str, sidechain: bool, ts_us: int | None, agent: str) -> None:
        self.key, self.sidechain, self.ts_us, self.agent = key, sidechain, ts_us, agent


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str | None
    ts_us: int | None
    description: str | None
    subagent_type: str | None
    offset: int | None = None  # its line's: a fork copy's (§2.1) is set aside by the store


@dataclass(frozen=True, slots=True)
class Call:
    """A tool_use block accounting.md §2.6 counts: an own assistant line of a main transcript (agent "")
    or a line of a subagent file that is not copied history (agent = the file's id)."""

    id: str
    agent: str
    offset: int
    block: int  # among the line's tool_use blocks: the agent's order is file order, then block order
    name: str
    input_hash: str  # fingerprint of the name and the canonical input
    path: str | None
    detail: str | None  # a short form of an input without a path
    ts_us: int | None
    plan: dict | None = None  # a plan call's input of the main thread (accounting.md §2.9; plan.plan_input)
    example: str | None = None  # accounting.md §2.10's example text of a call without a path


@dataclass(slots=True)
class Span:
    """A subagent seen in this chunk: its earliest and latest timestamps."""

    min_us: int | None = None
    max_us: int | None = None

    def add(self, ts_us: int | None) -> None:
        if ts_us is None:
            return
        if self.min_us is None or ts_us < self.min_us:
            self.min_us = ts_us
        if self.max_us is None or ts_us > self.max_us:
            self.max_us = ts_us


@dataclass(slots=True)
class FoldResult:
    state: FoldState
    requests: dict[str, Request] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    tool_calls: dict[str, ToolCall] = field(default_factory=dict)
    subagents: dict[str, Span] = field(default_factory=dict)
    links: set[tuple[str, str]] = field(default_factory=set)  # (agent_id, tool_use_id)
    calls: dict[str, Call] = field(default_factory=dict)  # the first of each id in this chunk
    results: dict[str, ToolResult] = field(default_factory=dict)  # the first of each id in this chunk
    boundaries: list[Boundary] = field(default_factory=list)
    holders: list[Holder] = field(default_factory=list)  # with the records on their lines


def first_session_id(entries: Iterable[Entry | None]) -> str | None:
    """The session a project-level `agent-<id>.jsonl` belongs to (Claude Code 2.0.x)."""
    for entry in entries:
        if entry is not None and entry.msg.session_id is not None:
            return entry.msg.session_id
    return None


def fold(source: Source, state: FoldState, entries: list[tuple[int, Entry | None]]) -> FoldResult:
    """Fold parsed lines `(byte offset, entry or None for a bad line)` of one file."""
    state = FoldState(**state.to_json())
    state.rules = RULES  # from here on (a file read under older rules was rewound to its start)
    out = FoldResult(state=state)
    if source.kind != "main" and not source.agent_id.startswith(COMPACTION_PREFIX):
        out.subagents[source.agent_id] = Span()  # listed as soon as its file exists
    for offset, entry in entries:
        state.lines += 1
        if entry is None:
            state.bad_lines += 1
        else:
            _fold_entry(source, state, out, offset, entry)
    return out


def _is_foreign(session_id: str | None, session: str) -> bool:
    return session_id is not None and session_id != session


def is_marked_fork_copy(source: Source, entry: Entry) -> bool:
    """§2.1: a main transcript's line, neither copied history nor sidechain, whose forkedFrom
    names another session: a fork's copy of what that session wrote (`--fork-session`, `/branch`)."""
    session = source.session_uuid
    return (source.kind == "main" and not entry.is_sidechain and not _is_foreign(entry.msg.session_id, session)
            and _is_foreign(entry.forked_from, session))


def _fold_entry(source: Source, state: FoldState, out: FoldResult, offset: int, entry: Entry) -> None:
    session = source.session_uuid
    msg = entry.msg
    in_subagent_file = source.kind != "main"
    sidechain = in_subagent_file or entry.is_sidechain
    # copied history, or a fork copy: counts like copied history everywhere (§2.1)
    foreign = _is_foreign(msg.session_id, session) or is_marked_fork_copy(source, entry)
    # an unmarked candidate line with a uuid: it may turn out a fork copy (§2.1), the store decides
    held: Holder | None = None
    if source.kind == "main" and not sidechain and not foreign and entry.uuid is not None:
        held = Holder(offset, entry.uuid, entry.bg)
        if not state.held_cwd_seen or entry.cwd != state.held_cwd:
            held.cwd_changed, held.cwd = True, entry.cwd
            state.held_cwd, state.held_cwd_seen = entry.cwd, True
        out.holders.append(held)

    if in_subagent_file and source.agent_id in out.subagents:
        out.subagents[source.agent_id].add(msg.timestamp)
    if sidechain and not foreign:
        _add_sub_event(out, offset, msg, msg.timestamp)

    if (msg.type == "system" and entry.subtype == "compact_boundary" and msg.timestamp is not None
            and (in_subagent_file or not entry.is_sidechain)):
        out.boundaries.append(Boundary(offset, source.agent_id if in_subagent_file else "", msg.timestamp))

    if msg.type == "assistant" and msg.usage is not None:
        if in_subagent_file:
            agent = source.agent_id
        else:
            agent = INLINE_AGENT if entry.is_sidechain else ""
        _add_record(out, source, offset, msg, msg.usage, msg.timestamp, sidechain, foreign, agent, held)

    if entry.embedded is not None:
        _fold_agent_progress(source, out, offset, entry, entry.embedded, held)

    if entry.result_agent_id and msg.tool_results and msg.tool_results[0].tool_use_id and not foreign:
        _add_link(out, held, entry.result_agent_id, msg.tool_results[0].tool_use_id)

    if msg.type == "assistant" and msg.tool_uses and not foreign and (in_subagent_file or not entry.is_sidechain):
        _add_calls(out, source.agent_id if in_subagent_file else "", offset, msg)
    elif msg.type == "user":
        for result in msg.tool_results:
            _add_result(out, result)

    if source.kind == "main" and not sidechain and not foreign:
        _widen_span(state, entry)
        if held is None and state.cwd is None and entry.cwd is not None:
            state.cwd, state.cwd_offset = entry.cwd, offset
        _fold_own_line(state, out, offset, entry)


def _widen_span(state: FoldState, entry: Entry) -> None:
    """An unmarked candidate line (§2.1): its time widens the file's candidate span (its uuid,
    if any, is kept to be ranked against the other sessions holding it: _fold_entry's Holder)."""
    ts = entry.msg.timestamp
    if ts is not None:
        if state.span_first_us is None or ts < state.span_first_us:
            state.span_first_us = ts
        if state.span_last_us is None or ts > state.span_last_us:
            state.span_last_us = ts


def _fold_agent_progress(source: Source, out: FoldResult, offset: int, entry: Entry, embedded: Message,
                         held: Holder | None) -> None:
    ts = embedded.timestamp if embedded.timestamp is not None else entry.msg.timestamp
    foreign = (_is_foreign(embedded.session_id or entry.msg.session_id, source.session_uuid)
               or is_marked_fork_copy(source, entry))  # (a fork's copy of a progress line: its record too)
    agent = entry.progress_agent_id
    if agent and not foreign and entry.parent_tool_use_id:
        _add_link(out, held, agent, entry.parent_tool_use_id)
    if not foreign:
        _add_sub_event(out, offset, embedded, ts)
    if embedded.type != "assistant" or embedded.usage is None:
        return
    _add_record(out, source, offset, embedded, embedded.usage, ts, True, foreign, agent or UNNAMED_AGENT,
                None if foreign else held)
    if agent and not foreign and not agent.startswith(COMPACTION_PREFIX) and held is None:
        # listed through its copied records (a holder's is on its row: listed while no fork copy)
        out.subagents.setdefault(agent, Span()).add(ts)


def _add_link(out: FoldResult, held: Holder | None, agent: str, tool_use_id: str) -> None:
    """A subagent link (§2.4): the file's, or its holder line's (counted while no fork copy)."""
    if held is None:
        out.links.add((agent, tool_use_id))
    else:
        held.link_agent, held.link_tool_use = agent, tool_use_id


def _add_sub_event(out: FoldResult, offset: int, msg: Message, ts: int | None) -> None:
    """A line of the subagent timeline (§2.3), when it is a timestamped user or assistant message
    (a line's own, or the one an agent_progress line embeds: a line is never both)."""
    if ts is not None and msg.type in ("user", "assistant"):
        out.events.append(Event(offset, ts, None, None, 0, 0, msg.uuid, _classify_message(msg), sub=True))


def _add_record(out: FoldResult, source: Source, offset: int, msg: Message, usage: Usage, ts: int | None,
                sidechain: bool, foreign: bool, agent: str, held: Holder | None = None) -> None:
    key = msg.key or indexable(f"@{source.name}@{offset}", PLACE_KEY_BYTES, keep_start=False)
    keyless = msg.key is None
    record = Request(
        key=key,
        session_uuid=source.session_uuid,
        agent=agent,
        ts_us=ts,
        attr_sidechain=sidechain,
        attr_foreign=foreign,
        attr_ts_us=ts,
        usage_main=not sidechain,
        usage=usage,
        has_tool_use=bool(msg.tool_uses),
        model=msg.model or "",
        parts=parts_json(msg.parts),
        fast=msg.fast,
        reason=msg.cache_miss_reason,
        place_path=indexable(source.name, PLACE_KEY_BYTES) if keyless else None,
        place_offset=offset if keyless else None,
        usage_path=source.below,
        usage_offset=offset,
    )
    if held is not None:
        held.hold(key, sidechain, ts, agent)
    else:
        record.base_session, record.base_agent = source.session_uuid, agent
        record.base_sidechain, record.base_foreign, record.base_ts_us = sidechain, foreign, ts
    known = out.requests.get(key)
    if known is None:
        out.requests[key] = record
    else:
        known.merge(record)


def _add_calls(out: FoldResult, agent: str, offset: int, msg: Message) -> None:
    for block, tool_use in enumerate(msg.tool_uses):
        if tool_use.id is None or tool_use.id in out.calls:
            continue
        name = tool_use.name or ""
        path = input_path(tool_use.input)
        # accounting.md §2.9: the plan is the main thread's; a subagent's todo list is its own
        plan = plan_input(name, tool_use.input) if agent == "" and name in PLAN_TOOLS else None
        out.calls[tool_use.id] = Call(tool_use.id, agent, offset, block, name, fingerprint(name, tool_use.input),
                                      path, None if path else input_detail(tool_use.input), msg.timestamp, plan,
                                      None if path else example_text(name, tool_use.input))


def _add_result(out: FoldResult, result: ToolResult) -> None:
    """The first tool_result block for an id in a user line of the file (accounting.md §2.6: "any user
    line (own or not) of the same file"): own, sidechain or copied."""
    if result.tool_use_id is not None and result.tool_use_id not in out.results:
        out.results[result.tool_use_id] = result


def _fold_own_line(state: FoldState, out: FoldResult, offset: int, entry: Entry) -> None:
    msg = entry.msg
    if msg.type == "system":
        if entry.subtype == "compact_boundary":
            out.events.append(Event(offset, None, None, None, 0, 0, entry.uuid, None, compaction=True))
        return
    if msg.type == "assistant":
        for tool_use in msg.tool_uses:
            if tool_use.id is None:
                continue
            call = ToolCall(tool_use.id, tool_use.name, msg.timestamp, tool_use.description,
                            tool_use.subagent_type, offset)
            known = out.tool_calls.get(tool_use.id)
            if known is None or _earlier(call.ts_us, known.ts_us):
                out.tool_calls[tool_use.id] = call
    elif msg.type != "user":
        return
    result_bytes = sum(result.bytes for result in msg.tool_results) if msg.type == "user" else 0
    ts = msg.timestamp
    gap_class = _classify(entry)
    if ts is None:
        # No event; kept when it counts for something: its tool output, or its uuid (a copy of
        # the line elsewhere in the session's timeline does not count again).
        if result_bytes or entry.uuid is not None:
            out.events.append(Event(offset, None, None, None, 0, result_bytes, entry.uuid, gap_class))
        return
    # accounting.md §2.3: gaps run from the high-water mark, so a line stamped earlier than the one
    # before it does not make the next gap count the same time twice. Whether a long human gap
    # is `away` is decided when the figures are read (RETROD_AWAY_AFTER_S may change).
    high = state.high_water_us
    later = high is not None and ts > high
    gap = ts - high if later and high is not None else 0
    out.events.append(Event(offset, ts, high, gap_class if later else None, gap, result_bytes, entry.uuid,
                            gap_class))
    if high is None or ts > high:
        state.high_water_us = ts
    if state.first_event_us is None or ts < state.first_event_us:
        state.first_event_us = ts


def _classify(entry: Entry) -> str:
    return _classify_message(entry.msg)


def _classify_message(msg: Message) -> str:
    """§2.3: the class of the gap a user or assistant message closes (`human` may turn `away`
    when the figures are read)."""
    if msg.type == "assistant":
        return "claude"
    if msg.tool_results:
        return "tool"
    if msg.compact_summary:
        return "claude"
    return "human"


_encode = msgspec.json.Encoder().encode


def parts_json(parts: tuple[Part, ...] | None) -> str | None:
    """A request's parts as the store keeps them: one JSON text (jsonb in request_parts)."""
    if parts is None:
        return None
    return _encode([_part_json(p) for p in parts]).decode()


def _part_json(p: Part) -> dict:
    """A part's object; `web_searches` only when it has some (absent reads 0)."""
    out = {"model": p.model or "", "input": p.usage.input, "output": p.usage.output,
           "cache_read": p.usage.cache_read, "cache_create": p.usage.cache_create,
           "cache_create_5m": p.usage.cache_create_5m, "cache_create_1h": p.usage.cache_create_1h}
    if p.usage.web_searches:
        out["web_searches"] = p.usage.web_searches
    return out


def _earlier(a: int | None, b: int | None) -> bool:
    return a is not None and (b is None or a < b)
