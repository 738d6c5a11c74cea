"""The report's JSON, declared: the one place its keys are defined (`retrod report --format json`,
and the parts of it other answers reuse: `model.stats`' session_stats, trends' and the brief's
token, cost, tool-use and cache figures). `report/model.py` builds them, annotated with these, so
mypy checks every key it writes; docs/reference.md lists every key (tests/test_shapes.py).

A key order here is the JSON's: where the code writes a group of keys by looping over a shape's
own keys (`TOKEN_FIELDS`, `SIGNALS`, `cache.CAUSES`), the loop reads them from here."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class Tokens(TypedDict):
    input: int
    output: int
    cache_read: int
    cache_create: int


class TokensByBucket(TypedDict):
    main: Tokens
    subagents: Tokens
    compaction: Tokens
    total: Tokens


class ModelTokens(TypedDict):
    """`tokens_by_model[]`: a model's request parts, tokens, searches and cost (prices.summarize)."""

    model: str | None
    requests: int
    input: int
    output: int
    cache_read: int
    cache_create: int
    cache_create_5m: int
    cache_create_1h: int
    web_searches: int
    fast_requests: int
    cost_usd: float | None


class Cost(TypedDict):
    usd: float | None
    unknown_models: list[str | None]
    complete: bool


class Signals(TypedDict):
    """Calls by waste signal (accounting.md §2.6), in the signals' order."""

    sibling_error: int
    error_retry: int
    persisted_output_read: int
    post_write_read: int
    duplicate: int
    re_read: int


class ToolUse(TypedDict):
    calls: int
    productive: int
    efficiency: float | None
    signals: Signals


class CauseMisses(TypedDict):
    count: int
    rewritten: int
    extra_usd: float


class Misses(TypedDict):
    """Prompt-cache misses by cause (accounting.md §2.8), in the causes' order."""

    compaction: CauseMisses
    model: CauseMisses
    expired: CauseMisses
    invalidated: CauseMisses


class Cache(TypedDict):
    """`cache` of the summary, a phase, a subagent or a task of the plan (cache.figures)."""

    read: int
    create: int
    hit_ratio: float | None
    misses: Misses
    waste_usd: float


class LiveCache(TypedDict):
    """`summary.cache.live`: the main conversation's cache as of the report (cache.live)."""

    state: str
    ttl_s: int | None
    seconds_left: float | None
    prefix_tokens: int | None
    rewrite_usd: float | None
    last_request_at: str | None


class Miss(TypedDict):
    """A miss of `cache_misses[]` and `summary.cache.costliest[]` (cache.listed)."""

    at: str
    agent: str
    cause: str
    reason: str | None
    rewritten: int
    extra_usd: float
    pause_s: float
    prefix_before: int


class SessionCache(Cache):
    live: LiveCache
    costliest: list[Miss]


class Prices(TypedDict):
    source: str
    version: str
    override: str | None


class Session(TypedDict):
    uuid: str
    member: str
    project_slug: str | None
    project_path: str | None
    description: str | None
    started_at: str | None
    ended_at: str | None
    transcripts: int
    transcripts_deleted: int
    bad_lines: int


class Persisted(TypedDict):
    count: int
    bytes: int


class Summary(TypedDict):
    wall_s: float
    claude_s: float
    tool_s: float
    human_s: float
    away_s: float
    away_after_s: float
    requests: int
    split_requests: int
    compactions: int
    tool_calls: int
    web_searches: int
    tool_result_bytes: int
    tool_result_tokens_est: int
    persisted_outputs: Persisted
    phases: int
    tokens: TokensByBucket
    tokens_by_model: list[ModelTokens]
    cost: Cost
    tool_use: ToolUse
    cache: SessionCache
    tool_use_by_agent: dict[str, ToolUse]


class RateLimit(TypedDict):
    used_pct: float
    resets_at: str | None
    max_used_pct: float | None
    max_resets_at: str | None


class RateLimits(TypedDict):
    five_hour: RateLimit | None
    seven_day: RateLimit | None


class ClaudeCode(TypedDict):
    """`claude_code`: what Claude Code's status line last reported of the session."""

    version: str | None
    cost_usd: float | None
    duration_s: float | None
    api_duration_s: float | None
    rate_limits: RateLimits
    first_seen: str | None
    updated_at: str | None


class Tool(TypedDict):
    name: str
    calls: int
    failed: int
    rejected: int
    result_bytes: int
    median_result_bytes: float | int | None
    result_s: float
    median_result_s: float | None


class WasteExample(TypedDict):
    at: str | None
    tool: str
    detail: str | None
    agent: str


class Waste(TypedDict):
    """`waste.<signal>`."""

    count: int
    examples: list[WasteExample]


class Group(TypedDict):
    """The phases of a verdict (`verdicts.<verdict>`) or of a task name (`tasks.<task>`), summed."""

    phases: int
    tokens: Tokens
    claude_s: float
    tool_use: ToolUse
    cost: Cost


class VerdictGroup(Group):
    output_share: float


class TaskGroup(Group):
    verdicts: dict[str, int]


class Outside(TypedDict):
    """`outside_phases`: the session's figures less its phases'."""

    tokens: Tokens
    requests: int
    claude_s: float
    tool_s: float
    human_s: float
    away_s: float
    output_share: float
    tool_use: ToolUse
    cost: Cost


class WindowFigures(TypedDict):
    """What a phase and a task both show of their windows (accounting.md §2.5)."""

    tokens: Tokens
    tokens_by_model: list[ModelTokens]
    cost: Cost
    requests: int
    tool_turns: int
    text_turns: int
    claude_s: float
    tool_s: float
    human_s: float
    away_s: float
    tool_use: ToolUse


class Figures(WindowFigures):
    """A window's figures (accounting.md §2.5): a phase's, or a task's over its windows."""

    tool_result_bytes: int
    tool_result_tokens_est: int


class Phase(Figures):
    """`phases[]` (and the open phase of session_stats, and the brief's waste phases' figures);
    `cache` in the report only."""

    task: str
    phase: str
    verdict: str
    started_at: str
    ended_at: str | None
    actions_summary: str | None
    subagents: str | None
    useful_info: str | None
    lessons_learned: str | None
    notes: str | None
    cache: NotRequired[Cache]


class OpenPhase(TypedDict):
    """session_stats' open phase without its figures (the status line's)."""

    task: str
    phase: str
    verdict: str
    started_at: str


class Subagent(TypedDict):
    agent_id: str
    agent_type: str
    description: str
    matched_by: str
    tokens: Tokens
    requests: int
    tool_use: ToolUse
    cache: Cache
    seconds: float
    started_at: str | None
    phase: str | None
    verdict: str | None
    task: int | None


class Window(TypedDict):
    start: str | None
    end: str | None


class Task(WindowFigures):
    """`plan.tasks[]`: a task of Claude's plan (accounting.md §2.9) with its windows' figures."""

    number: int
    name: str
    status: str
    windows: list[Window]
    started_at: str | None
    ended_at: str | None
    cache: Cache
    subagents: list[str]


class NeverStarted(TypedDict):
    name: str
    status: str


class Plan(TypedDict):
    family: str | None
    calls: int
    tasks: list[Task]
    tasks_never_started: list[NeverStarted]


class Report(TypedDict):
    """`retrod report --format json`."""

    session: Session
    summary: Summary
    prices: Prices
    claude_code: ClaudeCode | None
    tools: list[Tool]
    waste: dict[str, Waste]
    verdicts: dict[str, VerdictGroup]
    outside_phases: Outside | None
    tasks: dict[str, TaskGroup]
    phases: list[Phase]
    subagents: list[Subagent]
    plan: Plan
    lessons: list[str | None]
    cache_misses: list[Miss]


class Totals(TypedDict):
    """A session's totals as `build` and `stats` read them (`cache` and `plan`: when asked for)."""

    wall_s: float
    claude_s: float
    tool_s: float
    human_s: float
    away_s: float
    requests: int
    split_requests: int
    tool_calls: int
    tokens: TokensByBucket
    tokens_by_model: list[ModelTokens]
    cost: Cost
    tool_use: ToolUse
    cache: NotRequired[SessionCache]
    plan: NotRequired[Plan]


class Stats(Totals):
    """`model.stats`: a look mid-session (the MCP tool session_stats, the status line)."""

    member: str
    started_at: str | None
    ended_at: str | None
    phases: int
    open_phase: Phase | OpenPhase | None


class Retrospective(Report):
    """The report as retrospective.write answers it: after the text is made, where it was saved
    (`saved_to`) or why it could not be (`not_saved`); neither is in the JSON."""

    saved_to: NotRequired[str]
    not_saved: NotRequired[str]
