"""The figures the daemon answers `retrod statusline` with (figures.py builds them), declared:
the one place their keys are defined; docs/reference.md lists every key (tests/test_shapes.py).
Standard library only (typing), as the command's own modules are; client.py and render.py read
the answer as plain JSON and import nothing of this at run time."""

from __future__ import annotations

from typing import TypedDict


class OpenPhase(TypedDict):
    task: str
    phase: str
    started_at: float  # seconds since the epoch, as every time here


class CurrentTask(TypedDict):
    """The task of Claude's plan in progress when no phase is open, and its cost so far."""

    number: int
    name: str
    started_at: float
    cost_usd: float | None
    cost_complete: bool


class Cache(TypedDict):
    """The report's `summary.cache.live`, `last_request_at` in seconds since the epoch."""

    state: str
    ttl_s: int | None
    seconds_left: float | None
    prefix_tokens: int | None
    rewrite_usd: float | None
    last_request_at: float


class Session(TypedDict):
    cost_usd: float | None
    cost_complete: bool
    requests: int
    wall_s: float
    claude_s: float
    tool_s: float
    human_s: float
    away_s: float
    tool_calls: int
    productive: int
    efficiency: float | None
    phases: int
    open_phase: OpenPhase | None
    current_task: CurrentTask | None
    cache: Cache | None


class Today(TypedDict):
    cost_usd: float | None
    cost_complete: bool
    requests: int


class Figures(TypedDict):
    """The answer: `session` None when the database knows nothing of it, `today` None when no
    day was given."""

    session: Session | None
    today: Today | None
