"""The work of `retrod mcp`'s tools, without the MCP SDK: each tool does what the command of the
same purpose does, through the same functions. The session is resolved by resolve.py (the server
is started by Claude Code, so the rule of the Claude Code process above applies), phases are
written by tracking.py, figures come from report/model.py and the retrospective is produced and
saved by report/retrospective.py, each after the session's files are brought up to date
(Ingester.refresh), as `retrod report` does. `server.py` binds this to the SDK.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import psycopg
import structlog
from psycopg.pq import TransactionStatus

from .. import resolve, tracking
from ..basics.errors import UserError
from ..basics.format import count, duration, instant, share, usd
from ..basics.stored_text import one_line, quoted
from ..basics.verdicts import VERDICTS, shown
from ..history import brief, lesson_data, trends
from ..ingest.ingester import Ingester
from ..report import model, plan, retrospective, shapes
from ..report.markdown import cost_cell
from ..report.prices import load as load_prices
from ..settings import Settings
from ..store.db import configure
from ..store.migrate import migrate
from ..store.store import Store

log = structlog.get_logger(__name__)

CONNECT_TIMEOUT_S = 5


class OneConnection:
    """The server's one database connection: opened when first needed, and opened again on the
    next call after the database went away (the call that met the outage fails, the next works).
    To the store it is a pool of one."""

    def __init__(self, url: str, prepare: Callable[[], None] | None = None) -> None:
        """`prepare`: run before each connect (the private cluster started again if it was stopped)."""
        self.url = url
        self._prepare = prepare
        self._conn: psycopg.Connection | None = None
        self._migrated = False
        self._lock = threading.RLock()  # tool calls run on worker threads, the ingester commits on its own

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """As a pool's: the block's transaction is committed when it ends, rolled back when it fails."""
        with self._lock:
            conn = self._conn
            if conn is None or conn.closed:
                conn = self._conn = self._open()
            try:
                yield conn
                if conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.commit()
            except BaseException:
                try:
                    if not conn.broken:
                        conn.rollback()
                except psycopg.Error:
                    pass
                raise
            finally:
                if conn.broken or conn.closed:
                    conn.close()
                    self._conn = None

    def _open(self) -> psycopg.Connection[Any]:
        if self._prepare is not None:
            self._prepare()
        if not self._migrated:  # once per server: a database that was away when it started is migrated later
            with psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn:
                migrate(conn)
            self._migrated = True
        conn = psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S)
        configure(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _tasks_text(tasks: list[shapes.Task]) -> str:
    """The plan's tasks in the answer's text: how many, the current one and the costliest, each
    with its number (`phase log --from-task N`) and cost."""
    if not tasks:
        return ""

    def named(task: shapes.Task) -> str:
        return f"task {task['number']} {quoted(task['name'])} ({cost_cell(task['cost'])})"

    text = f"; {len(tasks)} task{'s' if len(tasks) > 1 else ''} of Claude's plan worked on"
    current = next((t for t in tasks if t["ended_at"] is None), None)
    if current is not None:
        text += f", current: {named(current)}"
    costliest = max(tasks, key=lambda t: (t["cost"]["usd"] or 0, t["tokens"]["output"]))
    return text + f", costliest: {named(costliest)}"


def _rule(found: resolve.Resolved) -> str:
    return "the session argument" if found.explicit else found.rule


def _phase_row(row: dict) -> dict:
    return {"number": row["number"], "task": row["task"], "phase": row["phase"], "verdict": row["verdict"],
            "started_at": instant(row["started_at"]), "ended_at": instant(row["ended_at"]),
            "actions_summary": row["actions_summary"], "subagents": row["subagents"],
            "useful_info": row["useful_info"], "lessons_learned": row["lessons_learned"], "notes": row["notes"]}


Result = tuple[dict[str, Any], str]  # (structured content, the short text beside it)


class Tools:
    """What each tool does, without the protocol: (structured content, short text), or an
    exception that server.py turns into a tool error of one sentence (`one_sentence`)."""

    def __init__(self, settings: Settings, db: OneConnection) -> None:
        self.settings = settings
        self.db = db

    def _resolve(self, conn: psycopg.Connection, given: str | None) -> resolve.Resolved:
        return resolve.resolve(given, roots=self.settings.projects_roots(),
                               known=lambda prefix: model.known_sessions(conn, prefix))

    def _refresh(self, session: str) -> None:
        """The session's files read up to now, as `retrod report` does first (a team's reader
        writes nothing: it reads what the members' daemons wrote)."""
        with self.db.connection() as conn:
            writable = tracking.may_write(conn)
        if writable:
            Ingester(Store(self.db, self.settings.host_id), self.settings.projects_roots(),
                     self.settings.batch_bytes).refresh(session)

    def start_tracking(self, description: str, session: str | None) -> Result:
        with self.db.connection() as conn:
            found = self._resolve(conn, session)
            row = tracking.track_start(conn, found.uuid, description)
        return ({"session": found.uuid, "found_by": _rule(found), "description": row["description"]},
                f"tracking session {found.uuid}: {quoted(row['description'])} (session found by {_rule(found)})")

    def start_phase(self, task: str, phase: str, session: str | None) -> Result:
        with self.db.connection() as conn:
            found = self._resolve(conn, session)
            row = tracking.phase_start(conn, found.uuid, task, phase)
        started = instant(row["started_at"])
        return ({"session": found.uuid, "found_by": _rule(found), "task": task, "phase": phase,
                 "started_at": started, "warnings": row["warnings"]},
                f"phase {quoted(task)} / {quoted(phase)} started at {started}"
                + "".join(f"; {w}" for w in row["warnings"]))

    def end_phase(self, verdict: str, notes: tracking.PhaseNotes, session: str | None) -> Result:
        with self.db.connection() as conn:
            found = self._resolve(conn, session)
            row = tracking.phase_end(conn, found.uuid, verdict, notes)
        return ({"session": found.uuid, "found_by": _rule(found), "verdict": verdict,
                 "started_at": instant(row["started_at"]), "ended_at": instant(row["ended_at"])},
                f"phase ended at {instant(row['ended_at'])}: {verdict}")

    def log_phase(self, task: str | None, phase: str, started_at: str | None, ended_at: str | None, verdict: str,
                  notes: tracking.PhaseNotes, session: str | None, from_task: int | None = None) -> Result:
        """A whole phase with its times; or, with `from_task`, task N of the report's plan as phases,
        one per window (`phase log --from-task`, accounting.md §2.9): `ended_at` then ends a task still
        current, and `task` names the phases (default: the task's name)."""
        if from_task is not None:
            return self._log_task(from_task, task, phase, started_at, ended_at, verdict, notes, session)
        if task is None or started_at is None or ended_at is None:
            raise tracking.TrackingError("log_phase needs task, started_at and ended_at (or from_task)")
        start, end = tracking.parse_time(started_at), tracking.parse_time(ended_at)
        with self.db.connection() as conn:
            found = self._resolve(conn, session)
            row = tracking.phase_log(conn, found.uuid, task, phase, start, end, verdict, notes)
        return ({"session": found.uuid, "found_by": _rule(found), "task": task, "phase": phase,
                 "started_at": instant(start), "ended_at": instant(end), "verdict": verdict,
                 "warnings": row["warnings"],
                 "phases": [{"started_at": instant(start), "ended_at": instant(end)}]},
                f"phase {quoted(task)} / {quoted(phase)} logged, {instant(start)} → {instant(end)}: {verdict}"
                + "".join(f"; {w}" for w in row["warnings"]))

    def _log_task(self, number: int, name: str | None, phase: str, started_at: str | None, ended_at: str | None,
                  verdict: str, notes: tracking.PhaseNotes, session: str | None) -> Result:
        if started_at is not None:
            raise tracking.TrackingError("started_at cannot be given with from_task: the task's windows give the times")
        end = None if ended_at is None else tracking.parse_time(ended_at)
        with self.db.connection() as conn:
            found = self._resolve(conn, session)
        self._refresh(found.uuid)
        with self.db.connection() as conn:
            task, windows = plan.task_windows(model.plan(conn, found.uuid), number, end)
            name = task.name if name is None else name
            row = tracking.phase_log_windows(conn, found.uuid, name, phase, windows, verdict, notes)
        logged = [{"started_at": instant(s), "ended_at": instant(e)} for s, e in windows]
        return ({"session": found.uuid, "found_by": _rule(found), "task": name, "phase": phase,
                 "started_at": logged[0]["started_at"], "ended_at": logged[-1]["ended_at"], "verdict": verdict,
                 "warnings": row["warnings"], "phases": logged},
                f"task {number} logged as {len(logged)} phase{'s' if len(logged) > 1 else ''} "
                f"{quoted(name)} / {quoted(phase)}: "
                + ", ".join(f"{w['started_at']} → {w['ended_at']}" for w in logged) + f": {verdict}"
                + "".join(f"; {w}" for w in row["warnings"]))

    def list_phases(self, session: str | None, member: str | None = None) -> Result:
        with self.db.connection() as conn:
            found = self._resolve(conn, session)
            rows = tracking.list_phases(conn, found.uuid, member)
        phases = [_phase_row(row) for row in rows]
        lines = [f"{p['number']}. {p['started_at']} → {p['ended_at'] or 'open'}  {shown(p['verdict'])}  "
                 f"{quoted(p['task'])} / {quoted(p['phase'])}" for p in phases]
        return ({"session": found.uuid, "found_by": _rule(found), "phases": phases},
                "\n".join(lines) or f"no phases logged for {found.uuid}")

    def session_stats(self, session: str | None, member: str | None = None) -> Result:
        """The report's own figures (model.stats: the queries `retrod report` runs for them)."""
        with self.db.connection() as conn:
            found = self._resolve(conn, session)
        self._refresh(found.uuid)
        with self.db.connection() as conn:
            figures = model.stats(conn, found.uuid, self.settings.away_after_s, load_prices(self.settings.prices),
                                  member)
        open_phase = cast(shapes.Phase | None, figures["open_phase"])  # (stats' phase_figures: with its figures)
        stats = {"session": found.uuid, "found_by": _rule(found), **figures,
                 "open_phase": open_phase and {k: open_phase[k] for k in (
                     "task", "phase", "started_at", "tokens", "requests", "claude_s", "tool_s", "human_s", "away_s",
                     "tool_use", "cost")}}
        efficiency = figures["tool_use"]["efficiency"]
        text = (f"session {found.uuid}: {count(figures['tokens']['total']['output'])} output tokens,"
                f" {count(figures['requests'])} requests, wall clock {duration(figures['wall_s'])}"
                f" (Claude {duration(figures['claude_s'])}, tool {duration(figures['tool_s'])},"
                f" human {duration(figures['human_s'])}, away {duration(figures['away_s'])}), tool-use efficiency"
                f" {share(efficiency)}")
        cache = figures["cache"]
        if cache["waste_usd"]:
            text += f", prompt-cache waste {usd(cache['waste_usd'])}"
        if cache["live"]["state"] != "none":
            text += f", cache {cache['live']['state']}"
        if open_phase:
            text += (f"; open phase {quoted(open_phase['task'])} / {quoted(open_phase['phase'])} so far:"
                     f" {count(open_phase['tokens']['output'])} output tokens,"
                     f" {count(open_phase['requests'])} requests")
        return stats, text + _tasks_text(figures["plan"]["tasks"])

    def retrospective(self, session: str | None, close: bool, member: str | None = None) -> Result:
        prices = load_prices(self.settings.prices)  # a bad price file is refused before any work
        with self.db.connection() as conn:
            found = self._resolve(conn, session)
        self._refresh(found.uuid)
        with self.db.connection() as conn:
            report, text = retrospective.produce(conn, found.uuid, close=close,
                                                 reports_dir=self.settings.reports_dir.absolute(),
                                                 away_after_s=self.settings.away_after_s, prices=prices,
                                                 member=member)
        warnings = [report["not_saved"]] if "not_saved" in report else []
        return ({"session": found.uuid, "found_by": _rule(found), "saved_to": report.get("saved_to"),
                 "warnings": warnings, "markdown": text}, "".join(f"warning: {w}\n\n" for w in warnings) + text)

    def sessions(self, project: str | None, limit: int) -> Result:
        """`retrod sessions --json`: the same object, each session with its cost."""
        with self.db.connection() as conn:
            listing = tracking.recent_sessions(conn, project=project, since=None, limit=limit)
            prices = load_prices(self.settings.prices)
            costs = model.session_costs(conn, [(r["uuid"], r["member"]) for r in listing["sessions"]], prices)
            rows = model.with_cache_waste(conn, listing["sessions"], prices)
        listed = [{**row, "started_at": instant(row["started_at"]), "cost": costs[(row["uuid"], row["member"])][1]}
                  for row in rows]
        lines = [f"{one_line(r['uuid'])}  {r['started_at'] or 'undated'}  {count(r['total_tokens'])} tokens"
                 f"  {count(r['requests'])} requests  {quoted(r['project'])}"
                 + (f"  {quoted(r['description'])}" if r["description"] else "") for r in listed]
        if listing["more"]:
            lines.append(f"… and {count(listing['more'])} more (raise `limit`)")
        said = resolve.matched_line(project, listing.get("projects_matched")).removeprefix("retrod: ").strip()
        text = "\n".join(([said] if said else []) + lines) or "no sessions" + (" match" if project else " yet")
        return {**listing, "sessions": listed}, text

    def brief(self, project: str | None, sessions: int, session: str | None) -> Result:
        """`retrod brief`: the project of the server's working folder (Claude Code starts it in
        the project's folder), or `project`; `session` (default: the one this server runs in, when
        it can be told) is left out, as the hook leaves out the session it starts."""
        with self.db.connection() as conn:
            try:
                asking: str | None = self._resolve(conn, session).uuid
            except resolve.SessionError:
                asking = None  # a first session in a new folder: nothing to leave out
            data = brief.brief(conn, folder=None if project else _cwd(), project=project,
                               sessions=sessions, exclude=asking,
                               prices=load_prices(self.settings.prices), away_after_s=self.settings.away_after_s)
        return data, brief.render(data) or (
            f"no past sessions of {quoted(data['project']) if data['project'] else 'this folder'}")

    def lessons(self, project: str | None) -> Result:
        """`retrod lessons`: the same JSON, for the project of the server's working folder or `project`."""
        with self.db.connection() as conn:
            data = lesson_data.lessons(conn, folder=None if project else _cwd(), project=project,
                                       prices=load_prices(self.settings.prices),
                                       away_after_s=self.settings.away_after_s)
        return cast(dict, data), lesson_data.render(data)

    def trends(self, by: str, project: str | None, since: str | None, split: str | None, tz: str | None,
               member: str | None = None) -> Result:
        """`retrod trends`: the same JSON (the web dashboard's /api/trends serves it too)."""
        zone = trends.zone_of(tz)
        with self.db.connection() as conn:
            data = trends.trends(conn, by=by, project=project,
                                 since=trends.parse_since(since, zone) if since else None, split=split,
                                 prices=load_prices(self.settings.prices), tz=zone, member=member,
                                 away_after_s=self.settings.away_after_s)
        said = resolve.matched_line(project, data.get("projects_matched")).removeprefix("retrod: ")
        return data, said + trends.render(data)


def _cwd() -> Path | None:
    try:
        return Path.cwd()
    except OSError:
        return None


# The commands' errors name their own flags; a tool's name the tool's inputs.
_IN_TOOL_TERMS = (("`retrod phase start --task T --phase P`", "start_phase"),
                  ("`retrod phase end --verdict VERDICT`", "end_phase"),
                  ("pass --session UUID", "pass `session`"), ("pass --session to choose", "pass `session` to choose"),
                  ("--description", "description"), ("--task", "task"), ("--phase", "phase"),
                  ("--actions", "actions_summary"), ("--lessons", "lessons_learned"), ("--useful-info", "useful_info"),
                  ("--subagents", "subagents"), ("--notes", "notes"), ("--from-task N", "from_task"),
                  ("--end TIME", "`ended_at`"), ("--end", "`ended_at`"), ("--start", "`started_at`"),
                  ("--project", "`project`"))


# What a refused input needs beyond its name: the valid values, the form of a time.
_INPUT_HINTS = {"verdict": f"use one of: {', '.join(VERDICTS)}",
                "started_at": "use ISO 8601, e.g. 2026-11-29T14:05:00+01:00",
                "ended_at": "use ISO 8601, e.g. 2026-11-29T14:05:00+01:00"}


_LIMITS = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}


def invalid_input(errors: Iterable[Mapping[str, Any]]) -> str:
    """Inputs that fail a tool's schema (pydantic's errors, as the SDK reports them: several lines
    and a URL) as one sentence naming each input, like every other refusal; never the values
    given (they are the caller's)."""
    parts = []
    for error in errors:
        name = ".".join(str(part) for part in error.get("loc", ())) or "the input"
        kind, limits = str(error.get("type", "")), error.get("ctx") or {}
        limit = next((key for key in _LIMITS if key in limits), None)
        if kind == "missing":
            text = f"{name} is required"
        elif limit is not None:
            text = f"{name} must be {_LIMITS[limit]} {limits[limit]}"
        elif kind.startswith("int_"):
            text = f"{name} must be a whole number"
        elif kind.startswith("bool_"):
            text = f"{name} must be true or false"
        elif kind.startswith("string_"):
            text = f"{name} must be a string"
        else:  # pydantic's own words, "Input should be ...", with the input named
            words = " ".join(str(error.get("msg", "is not valid")).split())
            text = f"{name} {words.removeprefix('Input ')}" if words.startswith("Input ") else f"{name}: {words}"
        hint = _INPUT_HINTS.get(name)
        parts.append(f"{text}; {hint}" if hint else text)
    return "; ".join(dict.fromkeys(parts)) or "the inputs are not valid"


def one_sentence(exc: BaseException) -> str:
    """A tool error's text: one line, never a traceback."""
    message = " ".join(str(exc).split())
    for command_words, tool_words in _IN_TOOL_TERMS:
        message = message.replace(command_words, tool_words)
    if isinstance(exc, psycopg.OperationalError):
        return (f"the database is not reachable ({message or type(exc).__name__}); "
                "this call did nothing, try again once it is back")
    if isinstance(exc, UserError):  # the user's to fix, whichever room raised it (basics/errors.py)
        return exc.prefix + message.replace("--member ROLE", "`member`")
    if isinstance(exc, (psycopg.Error, OSError, RuntimeError)):  # (ClusterError is a RuntimeError)
        return message or type(exc).__name__
    return f"internal error ({type(exc).__name__}): {message}"
