"""The figures `retrod statusline` shows, as the daemon works them out (issue 21).

The command itself stays light (statusline/client.py: the standard library only, no pricing):
the daemon, which has the database open and the prices loaded, answers with figures and the
command lays them out. What it answers:

- the session's figures, by `model.stats` — the same queries and prices as `retrod report`
  (its summary) and `retrod mcp`'s session_stats, so the cost is the report's to the micro-dollar;
- when no phase is open, the current task of Claude's plan (accounting.md §2.9) and its cost so far
  (its windows' requests priced as the report prices the task's), the plan derived again only
  when its calls changed;
- the main stream's prompt cache (accounting.md §2.8's live state, the report's `summary.cache.live`),
  read from the stream's last few requests only: the command counts the time left down itself,
  from the last request's time, so that a timed refresh moves it;
- today's cost across all of the member's sessions, the day's bounds given by the command (the
  user's local day, which the daemon's time zone need not share);
- and it keeps what only the status line sees (Claude Code's own cost estimate, the rate-limit
  use) in retrod.session_status, one row per session and member, for the report to show.
"""

from __future__ import annotations

import math
import re
import threading
from datetime import UTC, datetime

import psycopg
import structlog
from psycopg import Connection
from psycopg.rows import dict_row

from ..report import cache, model
from ..report import prices as pricing
from ..report.plan import Task
from ..store.queries import generic_plans, one, q
from . import shapes

log = structlog.get_logger(__name__)

# Claude Code's session ids are uuids; anything else names no session (and never reaches a glob).
SESSION_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_LATEST_EPOCH_S = 253402300799  # 9999-12-31: later is no time PostgreSQL or Python keeps


def session_id(text: str | None) -> str | None:
    return text.lower() if text and SESSION_ID.fullmatch(text) else None


def _number(text: str | None, low: float, high: float) -> float | None:
    """A figure from the request, when it is a finite number in [low, high]; None otherwise
    (Claude Code's JSON may hold anything: a bad field is dropped, never stored)."""
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) and low <= value <= high else None


def status_fields(request: dict[str, str]) -> dict:
    """What the status line reported, checked: the parameters of save_session_status."""
    def whole(name: str) -> int | None:
        value = _number(request.get(name), 0, 2**53)
        return None if value is None else int(value)

    version = request.get("cc_version")
    return {
        "cc_version": version[:100] if version else None,
        "cc_cost_usd": _number(request.get("cc_cost_usd"), 0, 1e9),
        "cc_duration_ms": whole("cc_duration_ms"),
        "cc_api_duration_ms": whole("cc_api_duration_ms"),
        **{f"{w}_{k}": _number(request.get(f"{w}_{k}"), *bounds)
           for w in ("five_hour", "seven_day")
           for k, bounds in (("pct", (0, 1000)), ("resets_at", (1, _LATEST_EPOCH_S)))},
    }


def day_bounds(request: dict[str, str]) -> tuple[datetime, datetime] | None:
    """The command's local day, [start, end), as it sent it (seconds since the epoch)."""
    start = _number(request.get("day_start"), 0, _LATEST_EPOCH_S)
    end = _number(request.get("day_end"), 0, _LATEST_EPOCH_S)
    if start is None or end is None or not 0 < end - start <= 2 * 86400:  # a day, DST included
        return None
    return datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)


def save_status(conn: Connection, session: str, fields: dict) -> bool:
    """Keep what the status line reported; False when it could not be (logged: the figures are
    still answered; a team's reader role may not write, a database may be read-only)."""
    if all(value is None for value in fields.values()):
        return True
    try:
        with conn.transaction():
            conn.execute(q("statusline_save_session_status"), {"session": session, **fields})
    except psycopg.Error as exc:
        log.warning("status line figures not kept", session=session, error=" ".join(str(exc).split()))
        return False
    return True


def live_cache(conn: Connection, session: str, member: str, now: datetime,
               prices: pricing.Prices) -> shapes.Cache | None:
    """The main stream's cache as of `now` (cache.live, as the report's `summary.cache.live`), with
    the last request's time in seconds since the epoch; None when the stream has no element."""
    with conn.cursor() as cur:  # tuples, as cache.walk reads them
        rows = cur.execute(q("statusline_session_cache_main_tail"), {"session": session, "member": member}).fetchall()
    _, last = cache.walk(rows, (), prices)  # (no boundaries: only the last element and its lifetime are used)
    if last is None:
        return None
    live = cache.live(last, now, prices)
    return {"state": live["state"], "ttl_s": live["ttl_s"], "seconds_left": live["seconds_left"],
            "prefix_tokens": live["prefix_tokens"], "rewrite_usd": live["rewrite_usd"],
            "last_request_at": last.at.timestamp()}


# The current task of each session's plan, kept with the key of the plan calls it was derived
# from: a long session's plan is thousands of calls (0.4 s to read and derive on the ~200 MB
# benchmark session), and most messages add none. The key changes with any call stored, any
# result read; the cost is read afresh each time (an open window grows).
_CURRENT: dict[tuple, tuple[tuple, tuple[int, Task] | None]] = {}  # by database, session and member
_CURRENT_LOCK = threading.Lock()
_CURRENT_KEPT = 64


def current_task(conn: Connection, session: str, member: str, prices: pricing.Prices) -> shapes.CurrentTask | None:
    """The task in progress after the last plan call (accounting.md §2.9) and its cost so far."""
    with conn.cursor() as cur:
        key = tuple(cur.execute(q("statusline_session_plan_key"),
                                {"session": session, "member": member}).fetchone() or ())
    whose = (conn.info.host, conn.info.port, conn.info.dbname, session, member)
    with _CURRENT_LOCK:
        kept = _CURRENT.get(whose)
    if kept is None or kept[0] != key:
        kept = (key, model.current_task(model.plan(conn, session, member)))
        with _CURRENT_LOCK:
            _CURRENT.pop(whose, None)
            _CURRENT[whose] = kept  # (the latest last: the oldest go first)
            while len(_CURRENT) > _CURRENT_KEPT:
                del _CURRENT[next(iter(_CURRENT))]
    if kept[1] is None:
        return None
    number, task = kept[1]
    cost = model.windows_cost(conn, session, member, task.windows, prices)
    return {"number": number, "name": task.name, "started_at": task.windows[-1][0].timestamp(),
            "cost_usd": cost["usd"], "cost_complete": cost["complete"]}


def figures(conn: Connection, session: str | None, day: tuple[datetime, datetime] | None,
            away_after_s: float = model.AWAY_AFTER_S, prices: pricing.Prices = pricing.DEFAULT,
            now: datetime | None = None) -> shapes.Figures:
    """The status line's figures: `session` (None: the database knows nothing of it) and `today`
    (None: no day given). Times are seconds since the epoch, for a command that has no datetime."""
    now = datetime.now(UTC) if now is None else now
    with generic_plans(conn):
        return _figures(conn, session, day, away_after_s, prices, now)


def _figures(conn: Connection, session: str | None, day: tuple[datetime, datetime] | None, away_after_s: float,
             prices: pricing.Prices, now: datetime) -> shapes.Figures:
    out: shapes.Figures = {"session": None, "today": None}
    member = None
    if session is not None:
        stats = model.stats(conn, session, away_after_s, prices, phase_figures=False, cache_figures=False,
                            task_figures=False)
        member = stats["member"]
        if stats["started_at"] is not None or stats["phases"]:  # else: nothing of it stored yet
            use, open_phase = stats["tool_use"], stats["open_phase"]
            task = current_task(conn, session, member, prices) if open_phase is None else None
            out["session"] = {
                "cost_usd": stats["cost"]["usd"], "cost_complete": stats["cost"]["complete"],
                "requests": stats["requests"],
                "wall_s": stats["wall_s"], "claude_s": stats["claude_s"], "tool_s": stats["tool_s"],
                "human_s": stats["human_s"], "away_s": stats["away_s"],
                "tool_calls": use["calls"], "productive": use["productive"], "efficiency": use["efficiency"],
                "phases": stats["phases"],
                "open_phase": None if open_phase is None else {
                    "task": open_phase["task"], "phase": open_phase["phase"],
                    "started_at": datetime.fromisoformat(open_phase["started_at"]).timestamp()},
                "current_task": task,
                "cache": live_cache(conn, session, member, now, prices),
            }
    if day is not None:
        with conn.cursor(row_factory=dict_row) as cur:
            member = member or one(cur.execute(q("statusline_current_member")))["member"]
            rows = cur.execute(q("statusline_member_tokens_by_model_between"),
                               {"member": member, "start": day[0], "end": day[1]}).fetchall()
        _, cost = pricing.by_model(rows, prices)
        out["today"] = {"cost_usd": cost["usd"], "cost_complete": cost["complete"],
                        "requests": sum(int(row["requests"]) for row in rows)}
    return out
