"""The SDK side of `retrod mcp`: each tool's typed, documented inputs and outputs, registered on
the SDK's MCPServer, and the server run on stdio. The work is tools.Tools'. This module imports
the SDK (the `mcp` extra): only the `mcp` command imports it, once it knows the extra is there."""

# No `from __future__ import annotations`: the SDK reads the tools' annotations to make their schemas.

from collections.abc import Callable
from contextlib import ExitStack
from importlib.metadata import version
from typing import Annotated, Any

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from .. import tracking
from ..basics.verdicts import VERDICTS
from ..settings import Settings
from ..store.db import cluster_for
from .tools import OneConnection, Result, Tools, invalid_input, one_sentence

log = structlog.get_logger(__name__)

# -- inputs ----------------------------------------------------------------------------------

Session = Annotated[str | None, Field(description=(
    "A session uuid or a unique prefix of one. Default: the session this server runs in, found as"
    " the `retrod` command finds it (CLAUDE_CODE_SESSION_ID, else the Claude Code process that started"
    " this server, else the newest transcript of the working folder's project); `found_by` says which"))]
Member = Annotated[str | None, Field(description=(
    "On a team's database, for a reader: the member (database role) whose session it is, when"
    " several members hold its id"))]
Verdict = Annotated[str, Field(description=f"The phase's outcome, one of: {', '.join(VERDICTS)}",
                               json_schema_extra={"enum": list(VERDICTS)})]
Task = Annotated[str, Field(description="The task the phase belongs to, e.g. 'flaky test'")]
Phase = Annotated[str, Field(description="The phase of that task, e.g. 'investigate'")]
Time = Annotated[str, Field(description="ISO 8601, e.g. 2026-11-29T14:05:00+01:00; without an offset: the"
                                        " server's local time")]
OptionalTask = Annotated[str | None, Field(description=(
    "The task the phase belongs to, e.g. 'flaky test' (required without from_task; with it, default: the"
    " task's name)"))]
OptionalTime = Annotated[str | None, Field(description=(
    "ISO 8601, e.g. 2026-11-29T14:05:00+01:00; without an offset: the server's local time (required"
    " without from_task; never with it)"))]
EndTime = Annotated[str | None, Field(description=(
    "ISO 8601, e.g. 2026-11-29T14:05:00+01:00; without an offset: the server's local time (required"
    " without from_task; with it, only for a task still current: ends its last phase)"))]
FromTask = Annotated[int | None, Field(strict=True, ge=1, description=(
    "Log task N of the report's plan (plan.tasks, 1 the first: Claude's own TodoWrite / TaskCreate"
    " plan) as phases, one per window"))]
Actions = Annotated[str | None, Field(description="What was done, one line")]
Subagents = Annotated[str | None, Field(description="Subagents used")]
UsefulInfo = Annotated[str | None, Field(description="Facts worth keeping")]
Lessons = Annotated[str | None, Field(description="What to do differently next time")]
Notes = Annotated[str | None, Field(description="Anything else")]

# -- outputs ---------------------------------------------------------------------------------


class Found(BaseModel):
    session: str = Field(description="The session's uuid")
    found_by: str = Field(description="How the session was found: 'the session argument', or the rule that found it")


class Tracked(Found):
    description: str | None = Field(description="What the session is for (names the saved report)")


class PhaseStarted(Found):
    task: str
    phase: str
    started_at: str = Field(description="ISO 8601, UTC")
    warnings: list[str] = Field(description="Accepted, but worth a word: e.g. a phase before the session's first line")


class PhaseEnded(Found):
    verdict: str
    started_at: str = Field(description="ISO 8601, UTC")
    ended_at: str = Field(description="ISO 8601, UTC")


class LoggedWindow(BaseModel):
    started_at: str = Field(description="ISO 8601, UTC")
    ended_at: str = Field(description="ISO 8601, UTC")


class PhaseLogged(PhaseStarted):
    ended_at: str = Field(description="ISO 8601, UTC")
    verdict: str
    phases: list[LoggedWindow] = Field(description=(
        "Each phase logged: one, or with from_task one per window of the task"))


class PhaseRow(BaseModel):
    number: int = Field(description="1 for the first phase of the session, in start order")
    task: str
    phase: str
    verdict: str = Field(description="'pending' while the phase is open")
    started_at: str
    ended_at: str | None = Field(description="null while the phase is open")
    actions_summary: str | None
    subagents: str | None
    useful_info: str | None
    lessons_learned: str | None
    notes: str | None


class Phases(Found):
    phases: list[PhaseRow]


class Tokens(BaseModel):
    input: int
    output: int
    cache_read: int
    cache_create: int


class ToolUse(BaseModel):
    calls: int = Field(description="Tool calls counted")
    productive: int = Field(description="Calls no waste signal applies to")
    efficiency: float | None = Field(description="productive / calls; null without calls")
    signals: dict[str, int] = Field(description="Calls by waste signal")


class Cost(BaseModel):
    usd: float | None = Field(description="Estimated at API list prices (genai-prices, each request part at its"
                                          " day, size and speed); null when nothing could be priced")
    unknown_models: list[str | None] = Field(description="Models with tokens no price knows (left out of usd);"
                                                         " null: a line that named none")
    complete: bool


class OpenPhase(BaseModel):
    """The open phase's figures so far: its window [started_at, now)."""

    task: str
    phase: str
    started_at: str
    tokens: Tokens
    requests: int
    claude_s: float
    tool_s: float
    human_s: float
    away_s: float
    tool_use: ToolUse
    cost: Cost


class Stats(Found):
    started_at: str | None
    ended_at: str | None = Field(description="The session's last line so far")
    tokens: dict[str, Tokens] = Field(description="By bucket: main, subagents, compaction, total")
    tokens_by_model: list[dict[str, Any]] = Field(description=(
        "By model, as the report's summary.tokens_by_model (tokens, requests, cost_usd)"))
    wall_s: float
    claude_s: float
    tool_s: float
    human_s: float
    away_s: float = Field(description="Human gaps longer than RETROD_AWAY_AFTER_S")
    requests: int
    tool_calls: int
    tool_use: ToolUse
    cost: Cost
    split_requests: int = Field(description="Requests of several parts (a refused attempt and its fallback)")
    member: str = Field(description="The database role whose session this is (a team's member)")
    phases: int = Field(description="Phases logged")
    open_phase: OpenPhase | None = Field(description="The open phase's figures so far; null when none is open")
    cache: dict[str, Any] = Field(description=(
        "Prompt-cache figures, as the report's summary.cache: read, create, hit_ratio, misses by cause"
        " (compaction, model, expired, invalidated: count, rewritten, extra_usd), waste_usd, live (state"
        " warm/cold/none, ttl_s, seconds_left, prefix_tokens, rewrite_usd) and the costliest misses"))
    plan: dict[str, Any] = Field(description=(
        "The tasks of Claude's own plan (TodoWrite or TaskCreate / TaskUpdate), as the report's plan: family,"
        " calls, tasks (number, name, status, windows, started_at, ended_at, tokens, tokens_by_model, cost,"
        " requests, claude_s, tool_s, human_s, away_s, tool_use, cache, subagents; a task still current has an"
        " open last window) and tasks_never_started; task N is `phase log --from-task N`'s"))


class Retrospective(Found):
    saved_to: str | None = Field(description="Where the Markdown was saved (RETROD_REPORTS_DIR)")
    warnings: list[str] = Field(description="E.g. why it could not be saved (the Markdown is still answered)")
    markdown: str


PROJECT = ("A project: its working folder (or a folder inside it), its Claude Code folder name, or a"
           " case-sensitive part of either (then every project it is a part of, named in projects_matched)")


class SessionRow(BaseModel):
    uuid: str
    member: str = Field(description="The database role whose session it is (a team's reader sees several)")
    project: str = Field(description="Its project: the working folder, else its Claude Code folder name")
    project_slug: str | None
    project_path: str | None
    started_at: str | None = Field(description="null: undated (no event at all, accounting.md §2.3)")
    wall_s: float
    total_tokens: int
    requests: int
    cost: dict[str, Any] = Field(description="Estimated as its report estimates it: usd, unknown_models, complete")
    tool_calls: int
    efficiency: float | None
    tracked: bool
    description: str | None
    phases: int
    cache_waste_usd: float = Field(description="What re-writing a lost prompt cache cost, compactions aside"
                                               " (the report's summary.cache.waste_usd)")


MATCHED = Field(None, description="The projects `project` took when read as a part of their names")


class SessionList(BaseModel):
    sessions: list[SessionRow] = Field(description="Newest first")
    more: int = Field(description="How many more match beyond `limit`")
    projects_matched: list[str] | None = MATCHED


class Brief(BaseModel):
    project: str | None = Field(description="The project folder (or the name asked) the sessions are of")
    projects_matched: list[str] | None = MATCHED
    sessions_asked: int
    sessions: list[dict[str, Any]] = Field(description=(
        "Newest first: session, started_at, description, cost, tool_use, output_tokens, wall_s, claude_s, verdicts;"
        " empty when the project has no history"))
    patterns: list[dict[str, Any]] = Field(description=(
        "The waste patterns the brief names (accounting.md §2.10), in its order: pattern, mode, status, back"))
    pattern_rows: list[dict[str, Any]] = Field(description="Their figures: the lessons row, the recent sessions' side")
    project_lessons: list[dict[str, Any]] = Field(description=(
        "The project's 10 newest distinct lessons: lesson, task, phase, session, at, age_days"))
    lessons: list[dict[str, Any]] = Field(description=(
        "Lessons and notes of their phases, newest first, each once: kind, text, task, phase, verdict, session, at"))
    waste_phases: list[dict[str, Any]] = Field(description="The newest phases judged avoidable_waste or"
                                                           " exploratory_waste, with their cost, Claude time and"
                                                           " tool use")
    waste_phases_total: int = Field(description="How many phases of these sessions were judged waste")
    recurring_waste: list[dict[str, Any]] = Field(description=(
        "Waste signals in more than one of the sessions: signal, count, sessions, words, habit, example (the path or"
        " call hit most), example_count"))
    direction: dict[str, Any] | None = Field(description="Cost per session and efficiency, newer half against older")
    prices: dict[str, Any]


class LessonsAnswer(BaseModel):
    project: str | None = Field(description="The project folder (or the name asked)")
    projects_matched: list[str] | None = MATCHED
    answer: str = Field(description="One line: how many patterns fell by half or more since retrod named them")
    patterns: list[dict[str, Any]] = Field(description=(
        "One row per pattern given to the project's sessions: pattern, family, what, example, first_given,"
        " sessions_given, baseline, before, after ({sessions, count, base, rate}), status, back"))
    lessons: list[dict[str, Any]] = Field(description=(
        "One row per lesson of the project's phases: lesson, logged, baseline, before, after, status, back,"
        " waste_phase_share"))


class Trends(BaseModel):
    by: str
    time_zone: str = Field(description="The zone periods are cut in")
    split: str | None
    member: str
    project: str | None
    machine: str | None = Field(default=None, description="Only this machine's figures (the command never filters)")
    projects_matched: list[str] | None = MATCHED
    since: str | None
    attribution: str = Field(description="How a session is given to a period: wholly to the one it started in")
    prices: dict[str, Any]
    periods: list[dict[str, Any]] = Field(description=(
        "Oldest first, empty ones included: period, start, end, sessions, requests, tokens (by bucket), cost,"
        " cost_per_session, wall_s, claude_s, tool_s, human_s, away_s, tool_use, top_waste, verdicts,"
        " tokens_by_model, change (from the period before); projects with split=project, machines (each a"
        " host id's share: they add up to the period) with split=machine; pattern_rates (per 100 calls) when"
        " `patterns`"))
    patterns: list[str] | None = Field(default=None, description=(
        "For one project: the waste signals its briefs named, most occurrences first (at most 3); each period's"
        " pattern_rates gives their rate (accounting.md §2.10)"))
    total: dict[str, Any] = Field(description="The same figures over every period")


# -- the server ------------------------------------------------------------------------------

INSTRUCTIONS = (
    "retrod measures where this Claude Code session's tokens and time go. Track the session"
    " (start_tracking), log each phase of work with an honest verdict as it ends (start_phase,"
    " end_phase; log_phase for one already over), look at the figures so far (session_stats), and"
    " at the end present the retrospective (retrospective with close=true).")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


class _MCPServer(MCPServer[Any]):
    """Inputs that fail a tool's schema are refused in one sentence naming the input, as every
    other refusal: the SDK answers pydantic's report, several lines and a URL."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            message = invalid_input(exc.__cause__.errors(include_url=False))
            log.warning("tool call refused", tool=name, error=message)
            raise ToolError(f"Error executing tool {name}: {message}") from exc.__cause__


def server(tools: Tools) -> MCPServer:
    app: MCPServer = _MCPServer("retrod", instructions=INSTRUCTIONS, log_level="WARNING", version=version("retrod"))

    def answer(work: Callable[[], Result]) -> CallToolResult:
        try:
            structured, text = work()
        except Exception as exc:  # noqa: BLE001 - every failure is a tool error of one sentence, never a crash
            message = one_sentence(exc)
            log.warning("tool call failed", error=message)
            raise ToolError(message) from None
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)

    @app.tool(annotations=WRITES)
    def start_tracking(description: Annotated[str, Field(description=(
                           "What the session is for, one line (names the saved report)"))],
                       session: Session = None) -> Annotated[CallToolResult, Tracked]:
        """Start tracking the session (or describe it again): its row in cc_sessions."""
        return answer(lambda: tools.start_tracking(description, session))

    @app.tool(annotations=WRITES)
    def start_phase(task: Task, phase: Phase, session: Session = None) -> Annotated[CallToolResult, PhaseStarted]:
        """Open a phase now. One phase is open at a time, and phases never overlap: end the open one first."""
        return answer(lambda: tools.start_phase(task, phase, session))

    @app.tool(annotations=WRITES)
    def end_phase(verdict: Verdict, actions_summary: Actions = None, subagents: Subagents = None,
                  useful_info: UsefulInfo = None, lessons_learned: Lessons = None, notes: Notes = None,
                  session: Session = None) -> Annotated[CallToolResult, PhaseEnded]:
        """End the open phase now, with its verdict (prefer the harsher one when in doubt) and what was learned."""
        phase_notes = tracking.PhaseNotes(actions_summary, subagents, useful_info, lessons_learned, notes)
        return answer(lambda: tools.end_phase(verdict, phase_notes, session))

    @app.tool(annotations=WRITES)
    def log_phase(phase: Phase, verdict: Verdict, task: OptionalTask = None, started_at: OptionalTime = None,
                  ended_at: EndTime = None, from_task: FromTask = None,
                  actions_summary: Actions = None, subagents: Subagents = None, useful_info: UsefulInfo = None,
                  lessons_learned: Lessons = None, notes: Notes = None,
                  session: Session = None) -> Annotated[CallToolResult, PhaseLogged]:
        """Log a whole phase that is over, with its times (task, started_at, ended_at); or, with
        from_task N, task N of the report's plan (plan.tasks, 1 the first) as phases, one per window,
        when that task completes. Refused whole if any would overlap another phase of the session."""
        phase_notes = tracking.PhaseNotes(actions_summary, subagents, useful_info, lessons_learned, notes)
        return answer(lambda: tools.log_phase(task, phase, started_at, ended_at, verdict, phase_notes, session,
                                              from_task))

    @app.tool(annotations=READ_ONLY)
    def list_phases(session: Session = None, member: Member = None) -> Annotated[CallToolResult, Phases]:
        """The session's phases, numbered in start order (times in UTC)."""
        return answer(lambda: tools.list_phases(session, member))

    @app.tool(annotations=READ_ONLY)
    def session_stats(session: Session = None, member: Member = None) -> Annotated[CallToolResult, Stats]:
        """The session's figures so far, fresh (its transcripts are read up to now first): tokens by bucket,
        Claude / tool / human / away time, requests, tool-use efficiency, estimated cost, the open
        phase's figures so far, and each task of Claude's plan with its figures. The same figures as
        `retrod report`."""
        return answer(lambda: tools.session_stats(session, member))

    @app.tool(annotations=WRITES)
    def retrospective(session: Session = None,
                      close: Annotated[bool, Field(strict=True, description=(
                          "End open phases (keeping their verdict 'pending') and the session now"))] = False,
                      member: Member = None) -> Annotated[CallToolResult, Retrospective]:
        """The session's retrospective in Markdown, saved as `retrod report` saves it; it also fills the
        session's totals into cc_sessions."""
        return answer(lambda: tools.retrospective(session, close, member))

    @app.tool(annotations=READ_ONLY)
    def sessions(project: Annotated[str | None, Field(description=PROJECT)] = None,
                 limit: Annotated[int, Field(ge=1, le=10_000, description="At most this many")] = 20,
                 ) -> Annotated[CallToolResult, SessionList]:
        """Recent sessions across projects, newest first, with their totals."""
        return answer(lambda: tools.sessions(project, limit))

    @app.tool(annotations=READ_ONLY)
    def brief(project: Annotated[str | None, Field(description=(
                  "One project: its working folder, its Claude Code folder name, or a part that names it alone;"
                  " default: the project of the"
                  " folder Claude Code runs in"))] = None,
              sessions: Annotated[int, Field(ge=1, le=100, description="How many past sessions")] = 5,
              session: Session = None) -> Annotated[CallToolResult, Brief]:
        """What this project's past sessions teach, newest first: their lessons and notes, the phases judged waste
        and what they cost, the waste signals that keep recurring (with an example each), and each session's cost
        and tool-use efficiency with their direction. The session asking is left out."""
        return answer(lambda: tools.brief(project, sessions, session))

    @app.tool(annotations=READ_ONLY)
    def lessons(project: Annotated[str | None, Field(description=(
                    "One project: its working folder, its Claude Code folder name, or a part that names it alone;"
                    " default: the project of the folder Claude Code runs in"))] = None,
                ) -> Annotated[CallToolResult, LessonsAnswer]:
        """Whether what retrod tells each new session works: per waste pattern the brief named and per lesson
        logged, the rate before retrod first named it against since, and its status (working, not working,
        too early, unclear), with a one-line answer."""
        return answer(lambda: tools.lessons(project))

    @app.tool(annotations=READ_ONLY)
    def trends(by: Annotated[str, Field(description="The period: day, week or month",
                                        json_schema_extra={"enum": ["day", "week", "month"]})] = "week",
               project: Annotated[str | None, Field(description=PROJECT)] = None,
               since: Annotated[str | None, Field(description=(
                   "Sessions started at or after this ISO 8601 date or time (no offset: in the periods' zone)"
               ))] = None,
               split: Annotated[str | None, Field(
                   description="Each period per project, per model or per machine (host id) too",
                   json_schema_extra={"enum": ["project", "model", "machine", None]})] = None,
               tz: Annotated[str | None, Field(description=(
                   "The time zone periods are cut in, e.g. Europe/Berlin; default: the server's local one"))] = None,
               member: Member = None) -> Annotated[CallToolResult, Trends]:
        """Per day, week or month: sessions, estimated cost, tokens, Claude/tool/human/away time, tool calls and their
        efficiency, the verdicts of logged phases and the top waste signals, with the change from the period before.
        Each session counts wholly in the period it started in; every figure is a sum of per-session reports."""
        return answer(lambda: tools.trends(by, project, since, split, tz, member))

    return app


def serve(settings: Settings) -> int:
    """Run the server on stdin/stdout until the client closes them."""
    with ExitStack() as stack:
        if settings.database_url is not None:
            url = settings.database_url
        else:  # the private cluster, kept running while the server runs (as by any user of it)
            cluster = cluster_for(settings)
            stack.enter_context(cluster.in_use())
            url = cluster.url()
        db = OneConnection(url, prepare=None if settings.database_url is not None else cluster.keep_running)
        stack.callback(db.close)
        server(Tools(settings, db)).run("stdio")
    return 0
