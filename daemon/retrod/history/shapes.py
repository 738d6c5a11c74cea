"""What many sessions add up to, declared: `retrod trends --json` (trends.py), `retrod brief
--format json` (brief.py) and `retrod lessons --json` (lesson_data.py; its rows are the lessons
room's, declared in lessons.py) — the one place their keys are defined; docs/reference.md lists
every key (tests/test_shapes.py). Their figures are the report's (report/shapes.py)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ..lessons import LessonRow, Mode, PatternRow, ProjectLesson, Side
from ..report import shapes as report

# -- trends ----------------------------------------------------------------------------------


class TrendModel(report.ModelTokens):
    sessions: int
    cache_waste_usd: float


class TrendCache(report.Cache):
    waste_share: float | None


class TopWaste(TypedDict):
    signal: str
    count: int


class Figures(TypedDict):
    """A period's figures (or a project's, machine's or session's in it, or the total's)."""

    sessions: int
    requests: int
    tokens: report.TokensByBucket
    cost: report.Cost
    cost_per_session: float | None
    wall_s: float
    claude_s: float
    tool_s: float
    human_s: float
    away_s: float
    tool_result_bytes: int
    tool_use: report.ToolUse
    top_waste: list[TopWaste]
    verdicts: dict[str, int]
    tokens_by_model: list[TrendModel]
    cache: TrendCache


class Change(TypedDict):
    sessions: int
    cost_usd: float | None
    cost_per_session: float | None
    output_tokens: int
    claude_s: float | None
    efficiency: float | None
    cache_waste_usd: float | None


class ProjectFigures(Figures):
    project: str
    project_slug: str | None
    project_path: str | None


class MachineFigures(Figures):
    machine: str


class SessionFigures(Figures):
    session: str


class Period(Figures):
    period: str | None
    start: str | None
    end: str | None
    change: Change | None
    projects: NotRequired[list[ProjectFigures]]
    machines: NotRequired[list[MachineFigures]]
    per_session: NotRequired[list[SessionFigures]]  # (the brief's split)
    pattern_rates: NotRequired[dict[str, float | None]]


class TrendsHead(TypedDict):
    by: str
    time_zone: str
    split: str | None
    member: str
    project: str | None
    projects_matched: NotRequired[list[str]]
    patterns: NotRequired[list[str]]
    machine: str | None
    since: str | None
    attribution: str
    prices: report.Prices


class Trends(TrendsHead):
    periods: list[Period]
    total: Figures


# -- the brief -------------------------------------------------------------------------------


class BriefSession(TypedDict):
    session: str
    started_at: str
    description: str | None
    cost: report.Cost
    tool_use: report.ToolUse
    output_tokens: int
    wall_s: float
    claude_s: float
    verdicts: dict[str, int]


class PatternFigures(Mode):
    """`pattern_rows[]`: a named pattern with its `retrod lessons` row (None: never given), its
    recent sessions' side and its example."""

    row: PatternRow | None
    recent: Side
    example: str | None


class BriefLesson(TypedDict):
    """`lessons[]`: a lesson or note of the recent sessions' phases."""

    kind: str
    text: str
    task: str
    phase: str
    verdict: str
    session: str
    at: str


class CostliestTask(TypedDict):
    session: str
    number: int
    name: str
    status: str
    started_at: str | None
    cost: report.Cost
    claude_s: float
    calls: int
    verdicts: list[str]


class WastePhase(TypedDict):
    task: str
    phase: str
    verdict: str
    session: str
    started_at: str
    ended_at: str | None
    cost: report.Cost | None
    claude_s: float | None
    tool_use: report.ToolUse | None
    actions_summary: str | None
    lessons_learned: str | None


class Recurring(TypedDict):
    signal: str
    count: int
    sessions: int
    words: str
    habit: str
    example: str | None
    example_count: int | None


class Compared(TypedDict):
    newer: float | None
    older: float | None
    direction: str | None


class Direction(TypedDict):
    sessions_compared: int
    cost_per_session: Compared
    efficiency: Compared


class BriefPattern(TypedDict):
    pattern: str
    mode: str
    status: str | None
    back: bool


class Brief(TypedDict):
    project: str | None
    projects_matched: NotRequired[list[str]]
    sessions_asked: int
    sessions: list[BriefSession]
    patterns: list[BriefPattern]
    pattern_rows: list[PatternFigures]
    project_lessons: list[ProjectLesson]
    lessons: list[BriefLesson]
    costliest_tasks: list[CostliestTask]
    waste_phases: list[WastePhase]
    waste_phases_total: int
    recurring_waste: list[Recurring]
    direction: Direction | None
    prices: report.Prices


# -- lessons ---------------------------------------------------------------------------------


class Lessons(TypedDict):
    project: str | None
    projects_matched: NotRequired[list[str]]
    answer: str
    patterns: list[PatternRow]
    lessons: list[LessonRow]
