"""The report as data, assembled from precomputed rows only (no transcript is read here)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import cast

from psycopg import Connection
from psycopg.rows import dict_row

from ..basics.format import instant
from ..basics.verdicts import VERDICTS
from ..store.members import member_of
from ..store.queries import generic_plans, one, q
from . import cache, kept_windows, shapes
from . import prices as pricing
from .plan import Plan, PlanCall, Task, derive

# The keys of the token figures and of the waste signals, in their JSON's order (report/shapes.py)
BUCKETS: tuple[str, ...] = tuple(shapes.TokensByBucket.__annotations__)
TOKEN_FIELDS: tuple[str, ...] = tuple(shapes.Tokens.__annotations__)
SIGNALS: tuple[str, ...] = tuple(shapes.Signals.__annotations__)
PRODUCTIVE = ""  # counts by signal: the calls no signal applies to
WASTE_EXAMPLES = 3


def _seconds(us: int) -> float:
    return round(us / 1_000_000, 3)


def known_sessions(conn: Connection, prefix: str) -> list[str]:
    """Sessions the database knows (a transcript read, or tracked) whose uuid starts with
    `prefix`; at most two, enough to tell a unique prefix from an ambiguous one."""
    return [row[0] for row in conn.execute(q("report_find_sessions"), {"prefix": prefix})]


def session_costs(conn: Connection, sessions: list[tuple[str, str]],
                  prices: pricing.Prices) -> dict[tuple[str, str], tuple[list[shapes.ModelTokens], shapes.Cost]]:
    """Each (session, member)'s tokens by model and cost, priced exactly as its report prices them
    (pricing.by_model over its price groups): the lists' cost (`retrod sessions`, the web UI's)."""
    groups: dict[tuple[str, str], list[dict]] = {pair: [] for pair in sessions}
    if sessions:
        with conn.cursor(row_factory=dict_row) as cur:
            for group in cur.execute(q("report_sessions_price_groups"), {"sessions": [s for s, _m in sessions],
                                                                  "members": [m for _s, m in sessions]}):
                groups[(group["session_uuid"], group["db_role"])].append(group)
    return {pair: pricing.by_model(found, prices) for pair, found in groups.items()}


AWAY_AFTER_S = 1800.0  # accounting.md §2.3's default; RETROD_AWAY_AFTER_S


def build(conn: Connection, session: str, away_after_s: float = AWAY_AFTER_S,
          prices: pricing.Prices = pricing.DEFAULT, member: str | None = None) -> shapes.Report:
    """`away_after_s`: a human gap longer than this is `away` (decided here, at read time);
    `prices`: what the estimated costs use; `member`: whose rows (member_of)."""
    pricing.store_tiers(conn)  # the tiers the store sums by are the ones priced here
    with generic_plans(conn), conn.cursor(row_factory=dict_row) as cur:
        member = member_of(conn, session, member)
        args = {"session": session, "away_us": int(away_after_s * 1_000_000), "member": member}
        files = one(cur.execute(q("report_session_files"), args))
        compactions = one(cur.execute(q("report_session_compactions"), args))["compactions"]
        times, by_agent, summary = _summary(cur, args, prices)
        subagent_rows = cur.execute(q("report_session_subagents"), args).fetchall()
        user_row = cur.execute(q("report_user_session"), args).fetchone()
        phase_rows = cur.execute(q("report_session_phases"), args).fetchall()
        tools = [_tool(row) for row in cur.execute(q("report_session_tools"), args)]
        wasted = sorted({signal for calls in by_agent.values() for signal, n in calls.items() if n and signal})
        examples = cur.execute(q("report_session_waste_examples"),
                               {**args, "signals": wasted, "examples": WASTE_EXAMPLES}).fetchall() if wasted else []
        status = cur.execute(q("statusline_session_status"), args).fetchone()
        plan, task_figures, figures, plan_kept = _kept_windows(cur, args, _phase_windows(phase_rows))
        now = datetime.now(UTC)  # the live state's and open phases' "now"
        misses, session_cache = _cache(cur, args, summary["tokens"]["total"], prices, now)

    tokens = summary["tokens"]
    phases = [_phase(row, figures[str(row["id"])], prices) for row in phase_rows]
    for row, phase_figures in zip(phase_rows, phases, strict=True):
        phase_figures["cache"] = cache.figures(
            phase_figures["tokens"], cache.in_window(misses, row["started_at"], row["ended_at"], now))
    subagents = [_subagent(row, _phase_at(phase_rows, row["first_ts"]), by_agent.get(row["agent_id"], {}),
                           _task_at(plan.tasks, row["first_ts"]), cache.of_agent(misses, row["agent_id"]))
                 for row in subagent_rows]
    tasks = _tasks(plan, task_figures, prices, [(s["agent_id"], s["task"]) for s in subagents], misses, now,
                   plan_kept)
    tool_use = summary["tool_use"]
    total_output = tokens["total"]["output"]
    return {
        "session": {
            "uuid": session,
            "member": member,
            "project_slug": files["project_slug"],
            "project_path": files["project_path"],
            "description": user_row["description"] if user_row else None,
            "started_at": instant(times["first_ts"]),
            "ended_at": instant(times["last_ts"]),
            "transcripts": files["transcripts"],
            "transcripts_deleted": files["transcripts_deleted"],
            "bad_lines": int(files["bad_lines"]),
        },
        "summary": {
            "wall_s": summary["wall_s"],
            "claude_s": summary["claude_s"],
            "tool_s": summary["tool_s"],
            "human_s": summary["human_s"],
            "away_s": summary["away_s"],
            "away_after_s": away_after_s,
            "requests": summary["requests"],
            "split_requests": summary["split_requests"],
            "compactions": int(compactions),
            "tool_calls": summary["tool_calls"],
            "web_searches": sum(m["web_searches"] for m in summary["tokens_by_model"]),  # (accounting.md §2.2)
            "tool_result_bytes": int(times["tool_result_bytes"]),
            "tool_result_tokens_est": int(times["tool_result_bytes"]) // 4,
            "persisted_outputs": {"count": files["persisted_outputs"], "bytes": int(files["persisted_bytes"])},
            "phases": len(phases),
            "tokens": tokens,
            "tokens_by_model": summary["tokens_by_model"],
            "cost": summary["cost"],
            "tool_use": tool_use,
            "cache": session_cache,
            "tool_use_by_agent": {agent: tool_use_figures(calls) for agent, calls in sorted(by_agent.items())},
        },
        "prices": prices.describe(),
        "claude_code": _claude_code(status),
        "tools": tools,
        "waste": _waste(tool_use, examples),
        "verdicts": _by_verdict(phases, total_output),
        "outside_phases": _outside(summary, phases) if phases else None,
        "tasks": _by_task(phases),
        "phases": phases,
        "subagents": subagents,
        "plan": _plan_json(plan, tasks),
        "lessons": [p["lessons_learned"] for p in phases if p["lessons_learned"]],
        "cache_misses": cache.listed(misses),
    }


def _kept_windows(cur, args: dict, phases: Sequence[dict] = ()) -> tuple[Plan, dict[str, dict], dict[str, dict], dict]:
    """The session's plan, each of its tasks' figures by its number, and the figures of the windows
    `phases` by id, as _plan, _task_window_figures and window_figures read them, what is kept of
    them since the last ask reused (kept_windows.py); and what _tasks keeps with the plan."""
    return kept_windows.figures(cur, args, lambda: _plan(cur, args),
                                lambda windows: window_figures(cur, args, windows), phases)


def _task_window_figures(cur, args: dict, plan: Plan) -> dict[str, dict]:
    """The figures of each of the plan's tasks, by its number: its windows' (which never
    overlap), summed by window_figures (all of them: what a first ask costs, kept_windows' oracle)."""
    return window_figures(cur, args, [{"id": n, "s": s, "e": e} for n, task in enumerate(plan.tasks, 1)
                                      for s, e in task.windows])


def _tasks(plan: Plan, task_figures: dict[str, dict], prices: pricing.Prices,
           subagents: list[tuple[str, int | None]], misses: list[cache.Miss], now: datetime,
           kept: dict) -> list[shapes.Task]:
    """`plan.tasks[]` (accounting.md §2.9): `subagents` the listed ones as (agent id, task number);
    `kept`: what is made of the plan alone, filled here when empty and kept with the plan (its
    windows as text, and in time order: a plan's thousands of windows take longer to write and
    sort than to sum; each task's figures priced, while its kept sum and the prices are those)."""
    if "priced" not in kept:  # (filled at once: another thread may be reading it)
        kept.update(text=[[(instant(s), instant(e)) for s, e in task.windows] for task in plan.tasks],
                    windows=sorted(((s, e, i) for i, task in enumerate(plan.tasks) for s, e in task.windows),
                                   key=lambda w: w[0]),
                    priced={})  # by task number: (the figures kept, the prices, what _figures made of them)
    task_misses = cache.in_tasks(misses, kept["windows"], len(plan.tasks), now)
    out = []
    for n, task in enumerate(plan.tasks, 1):
        fig = task_figures[str(n)]
        priced = kept["priced"].get(n)
        if priced is None or priced[0] is not fig or priced[1] is not prices:  # (a kept sum is the same object)
            priced = kept["priced"][n] = (fig, prices, _figures(fig, prices))
        out.append(_task(n, task, _copy(priced[2]), [agent for agent, number in subagents if number == n],
                         task_misses[n - 1], kept["text"][n - 1]))
    return out


def _copy(value):
    """A JSON value copied (a kept task's priced figures: each report gets its own)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _plan_json(plan: Plan, tasks: list[shapes.Task]) -> shapes.Plan:
    return {"family": plan.family, "calls": plan.calls, "tasks": tasks,
            "tasks_never_started": [{"name": t.name, "status": t.status} for t in plan.never_started]}


def _summary(cur, args: dict, prices: pricing.Prices) -> tuple[dict, dict[str, dict[str, int]], shapes.Totals]:
    """The session's times row (session_times), its counted calls by agent and signal, and its
    totals: tokens by bucket and model, cost, the four times, requests, tool use."""
    by_bucket = {row["bucket"]: row for row in cur.execute(q("report_session_tokens"), args)}
    model_rows = cur.execute(q("report_session_tokens_by_model"), args).fetchall()
    times = one(cur.execute(q("report_session_times"), args))
    away_us = one(cur.execute(q("report_session_away"), args))["away_us"]
    tool_calls = one(cur.execute(q("report_session_tool_calls"), args))["tool_calls"]
    by_agent = {row["agent"]: _calls_by_signal(row) for row in cur.execute(q("report_session_tool_use"), args)}
    split = {b: {f: int(by_bucket[b][f]) if b in by_bucket else 0 for f in TOKEN_FIELDS} for b in BUCKETS[:-1]}
    # (keys looped over are the shapes' own: mypy cannot follow a loop, the shape defines them)
    tokens = cast(shapes.TokensByBucket,
                  {**split, "total": {f: sum(split[b][f] for b in split) for f in TOKEN_FIELDS}})
    wall_us = (times["last_ts"] - times["first_ts"]) // timedelta(microseconds=1) if times["first_ts"] else 0
    tokens_by_model, cost = pricing.by_model(model_rows, prices)
    session_calls: dict[str, int] = {}
    for calls in by_agent.values():
        for signal, n in calls.items():
            session_calls[signal] = session_calls.get(signal, 0) + n
    return times, by_agent, {
        "wall_s": _seconds(wall_us),
        "claude_s": _seconds(times["claude_us"]),
        "tool_s": _seconds(times["tool_us"]),
        "human_s": _seconds(times["human_us"] - away_us),
        "away_s": _seconds(away_us),
        "requests": sum(row["requests"] for row in by_bucket.values()),
        "split_requests": sum(row["split_requests"] for row in by_bucket.values()),
        "tool_calls": tool_calls,
        "tokens": tokens, "tokens_by_model": tokens_by_model, "cost": cost,
        "tool_use": tool_use_figures(session_calls),
    }


def _cache(cur, args: dict, tokens: shapes.Tokens, prices: pricing.Prices,
           now: datetime) -> tuple[list[cache.Miss], shapes.SessionCache]:
    """accounting.md §2.8: the session's misses, and its `summary.cache` (`tokens`: its total tokens)."""
    with cur.connection.cursor() as rows:  # tuples, as cache.priced reads them
        misses = cache.priced(rows.execute(q("report_session_cache_misses"), args), prices)
        last = cache.last_of(rows.execute(q("report_session_cache_last"), args).fetchone())
    return misses, {**cache.figures(tokens, misses), "live": cache.live(last, now, prices),
                    "costliest": cache.costliest(misses)}


def with_cache_waste(conn: Connection, rows: list[dict], prices: pricing.Prices = pricing.DEFAULT) -> list[dict]:
    """Listed sessions (`retrod sessions`' rows: uuid, member), each with its prompt-cache waste
    (accounting.md §2.8, as its report's `summary.cache.waste_usd`): one read of each one's misses."""
    out = []
    with conn.cursor() as cur:
        for row in rows:
            args = {"session": row["uuid"], "member": row["member"]}
            misses = cache.priced(cur.execute(q("report_session_cache_misses"), args), prices)
            out.append({**row, "cache_waste_usd": cache.waste(misses)})
    return out


def cache_misses(conn: Connection, sessions: list[str], member: str,
                 prices: pricing.Prices = pricing.DEFAULT) -> dict[str, dict[str, tuple[int, float]]]:
    """Per session, its report's `summary.cache.misses.<cause>` as (count, extra_usd) (accounting.md
    §2.10 reads them): one read of each one's misses."""
    out = {}
    with conn.cursor() as cur:
        for session in sessions:
            misses = cache.priced(cur.execute(q("report_session_cache_misses"), {"session": session, "member": member}),
                                  prices)
            figures = cache.figures({"input": 0, "cache_read": 0, "cache_create": 0}, misses)["misses"]
            out[session] = {cause: (f["count"], f["extra_usd"])
                            for cause, f in cast(dict[str, shapes.CauseMisses], figures).items()}
    return out


def phase_seconds(conn: Connection, session: str, phase_rows: list[dict], member: str,
                  away_after_s: float = AWAY_AFTER_S) -> dict[int, float]:
    """Per phase (its id), its report's claude_s + tool_s + human_s (accounting.md §2.10's waste share)."""
    args = {"session": session, "away_us": int(away_after_s * 1_000_000), "member": member}
    with conn.cursor(row_factory=dict_row) as cur:
        figures = window_figures(cur, args, _phase_windows(phase_rows))
    return {int(i): _seconds(f["claude_us"]) + _seconds(f["tool_us"]) + _seconds(f["human_us"] - f["away_us"])
            for i, f in figures.items()}


def stats(conn: Connection, session: str, away_after_s: float = AWAY_AFTER_S,
          prices: pricing.Prices = pricing.DEFAULT, member: str | None = None, phase_figures: bool = True,
          cache_figures: bool = True, task_figures: bool = True) -> shapes.Stats:
    """The figures of a look mid-session (`retrod mcp`'s session_stats, `retrod statusline`), the
    same as `build`'s: the summary's totals, the number of phases and the open phase's figures so
    far (its window up to now), without the per-tool, subagent, waste-example and closed-phase
    queries. Without `phase_figures` the open phase is only named, with its start: its window's
    query is the costliest of these (the status line, which shows its name and minutes, skips it).
    Without `cache_figures`, no `cache` (accounting.md §2.8: a read of the session's misses).
    With `task_figures`, `plan` as the report's (accounting.md §2.9: every task's figures, the cache's
    included, so the misses are read then too)."""
    pricing.store_tiers(conn)
    with generic_plans(conn), conn.cursor(row_factory=dict_row) as cur:
        member = member_of(conn, session, member)
        phase_rows = cur.execute(q("report_session_phases"), {"session": session, "member": member}).fetchall()
        open_row = next((row for row in phase_rows if row["ended_at"] is None), None)
        args = {"session": session, "away_us": int(away_after_s * 1_000_000), "member": member}
        times, _by_agent, summary = _summary(cur, args, prices)
        fig = window_figures(cur, args, _phase_windows([open_row]))[str(open_row["id"])] \
            if open_row and phase_figures else None
        now = datetime.now(UTC)
        if cache_figures or task_figures:
            misses, summary["cache"] = _cache(cur, args, summary["tokens"]["total"], prices, now)
            if not cache_figures:
                del summary["cache"]
        if task_figures:
            plan, by_task, _phases, plan_kept = _kept_windows(cur, args)
            subagents = [(row["agent_id"], _task_at(plan.tasks, row["first_ts"]))
                         for row in cur.execute(q("report_session_subagents"), args)] if plan.tasks else []
            summary["plan"] = _plan_json(plan, _tasks(plan, by_task, prices, subagents, misses, now, plan_kept))
    open_phase: shapes.Phase | shapes.OpenPhase | None
    if open_row is None:
        open_phase = None
    elif fig is None:
        open_phase = {"task": open_row["task"], "phase": open_row["phase"], "verdict": open_row["verdict"],
                      "started_at": instant(open_row["started_at"])}
    else:
        open_phase = _phase(open_row, fig, prices)
    return {**summary, "member": member, "started_at": instant(times["first_ts"]),
            "ended_at": instant(times["last_ts"]), "phases": len(phase_rows),
            "open_phase": open_phase}


def current_task(plan: Plan) -> tuple[int, Task] | None:
    """accounting.md §2.9's current task after the last counting call — the one whose last window is
    open — with its number; None when no task is current."""
    return next(((n, task) for n, task in enumerate(plan.tasks, 1) if task.windows[-1][1] is None), None)


def windows_cost(conn: Connection, session: str, member: str, windows: list[list],
                 prices: pricing.Prices = pricing.DEFAULT) -> shapes.Cost:
    """The cost of the requests in a task's windows (an open one until now), priced as the
    report prices its `plan.tasks[].cost`, without the task's other figures (the status line's)."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(q("report_windows_tokens_by_model"), {"session": session, "member": member,
                                                          **_bounds([("", s, e) for s, e in windows])}).fetchall()
    return pricing.by_model(rows, prices)[1]


def plan(conn: Connection, session: str, member: str | None = None) -> Plan:
    """The session's plan as the report derives it (accounting.md §2.9), without the tasks' figures."""
    member = member_of(conn, session, member)
    with conn.cursor(row_factory=dict_row) as cur:
        return _plan(cur, {"session": session, "member": member})


def _plan(cur, args: dict) -> Plan:
    return derive(PlanCall(row["ts"], row["name"], row["plan"], row["failed"], row["task_id"])
                  for row in cur.execute(q("report_session_plan_calls"), args))


def _claude_code(row: dict | None) -> shapes.ClaudeCode | None:
    """What Claude Code's status line last reported of the session (`retrod statusline` keeps it:
    no transcript holds it): its own cost estimate, and each rate-limit window's latest use and
    the most of it used while the session ran. None when no status line of retrod's ran in it."""
    if row is None:
        return None

    def seconds(ms: int | None) -> float | None:
        return None if ms is None else round(ms / 1000, 3)

    def limit(window: str) -> shapes.RateLimit | None:
        return None if row[f"{window}_pct"] is None else {
            "used_pct": row[f"{window}_pct"], "resets_at": instant(row[f"{window}_resets_at"]),
            "max_used_pct": row[f"{window}_max_pct"], "max_resets_at": instant(row[f"{window}_max_resets_at"])}

    return {
        "version": row["cc_version"],
        "cost_usd": row["cc_cost_usd"],
        "duration_s": seconds(row["cc_duration_ms"]),
        "api_duration_s": seconds(row["cc_api_duration_ms"]),
        "rate_limits": {"five_hour": limit("five_hour"), "seven_day": limit("seven_day")},
        "first_seen": instant(row["first_seen"]),
        "updated_at": instant(row["updated_at"]),
    }


def phase(conn: Connection, session: str, row: dict, member: str, away_after_s: float = AWAY_AFTER_S,
          prices: pricing.Prices = pricing.DEFAULT) -> shapes.Phase | None:
    """One phase's figures, as the report's `phases[]` holds them: `row` is its cc_session_phases
    row (as session_phases reads it), `member` the role whose session it is (None: it is gone)."""
    args = {"session": session, "away_us": int(away_after_s * 1_000_000), "member": member}
    with conn.cursor(row_factory=dict_row) as cur:
        fig = window_figures(cur, args, _phase_windows([row])).get(str(row["id"]))
    return _phase(row, fig, prices) if fig else None


def window_figures(cur, args: dict, windows: list[dict]) -> dict[str, dict]:
    """The figures of each window `{id, s, e}` (datetimes; `e` None: open, until now) by its id
    (as text): what a phase (accounting.md §2.5) and a task (§2.9) count, by the same rules. Windows
    given one id are summed: they must never overlap (a task's windows)."""
    if not windows:
        return {}
    bounds = _bounds([(str(w["id"]), w["s"], w["e"]) for w in windows])
    return {row["id"]: row for row in cur.execute(q("report_window_figures"), {**args, **bounds})}


def _bounds(windows: list[tuple[str, datetime, datetime | None]]) -> dict[str, list]:
    """Windows (id, start, end or None) as report.sql's window_bounds takes them: arrays in step."""
    return {"ids": [w[0] for w in windows], "starts": [w[1] for w in windows], "ends": [w[2] for w in windows]}


def _phase_windows(phase_rows: list[dict]) -> list[dict]:
    return [{"id": row["id"], "s": row["started_at"], "e": row["ended_at"]} for row in phase_rows]


def _phase(row: dict, fig: dict, prices: pricing.Prices) -> shapes.Phase:
    return {
        "task": row["task"],
        "phase": row["phase"],
        "verdict": row["verdict"],
        "started_at": instant(row["started_at"]),
        "ended_at": instant(row["ended_at"]),
        **_figures(fig, prices),
        "actions_summary": row["actions_summary"],
        "subagents": row["subagents"],
        "useful_info": row["useful_info"],
        "lessons_learned": row["lessons_learned"],
        "notes": row["notes"],
    }


def _task(number: int, task: Task, figures: shapes.Figures, subagents: list[str],
          misses: list[cache.Miss], windows_text: list[tuple]) -> shapes.Task:
    """A task of the plan (accounting.md §2.9) with a phase's figures over its windows (`figures`: they
    never overlap, so their figures add up; _figures'); `misses`: the cache misses in its windows (§2.8);
    `windows_text`: its windows' start and end as the JSON writes them."""
    return {
        "number": number,
        "name": task.name,
        "status": task.status,
        "windows": [{"start": s, "end": e} for s, e in windows_text],
        "started_at": windows_text[0][0],
        "ended_at": windows_text[-1][1],
        "tokens": figures["tokens"],
        "tokens_by_model": figures["tokens_by_model"],
        "cost": figures["cost"],
        "requests": figures["requests"],
        "tool_turns": figures["tool_turns"],
        "text_turns": figures["text_turns"],
        "claude_s": figures["claude_s"],
        "tool_s": figures["tool_s"],
        "human_s": figures["human_s"],
        "away_s": figures["away_s"],
        "tool_use": figures["tool_use"],
        "cache": cache.figures(figures["tokens"], misses),
        "subagents": subagents,
    }


def _figures(fig: dict, prices: pricing.Prices) -> shapes.Figures:
    """accounting.md §2.5's figures of a window (or of windows that never overlap, summed)."""
    tokens_by_model, cost = pricing.by_model(fig["by_model"], prices)  # by price group
    requests = sum(m["requests"] for m in fig["by_model"])
    tool_turns = sum(m["tool_turns"] for m in fig["by_model"])
    return {
        "tokens": cast(shapes.Tokens, {f: sum(int(m[f]) for m in fig["by_model"]) for f in TOKEN_FIELDS}),
        "tokens_by_model": tokens_by_model,
        "cost": cost,
        "requests": requests,
        "tool_turns": tool_turns,
        "text_turns": requests - tool_turns,
        "claude_s": _seconds(fig["claude_us"]),
        "tool_s": _seconds(fig["tool_us"]),
        "human_s": _seconds(fig["human_us"] - fig["away_us"]),
        "away_s": _seconds(fig["away_us"]),
        "tool_result_bytes": int(fig["tool_result_bytes"]),
        "tool_result_tokens_est": int(fig["tool_result_bytes"]) // 4,
        "tool_use": tool_use_figures(_calls_by_signal(fig)),
    }


def _phase_at(phase_rows: list[dict], ts: datetime | None) -> dict | None:
    """The phase whose window holds `ts` (accounting.md §2.5); an open phase runs until now."""
    if ts is None:
        return None
    for row in phase_rows:
        if row["started_at"] <= ts and (row["ended_at"] is None or ts < row["ended_at"]):
            return row
    return None


def _task_at(tasks: list[Task], ts: datetime | None) -> int | None:
    """The number of the task whose window holds `ts` (accounting.md §2.9); an open window runs on."""
    if ts is None:
        return None
    for number, task in enumerate(tasks, 1):
        if any(s <= ts and (e is None or ts < e) for s, e in task.windows):
            return number
    return None


def _calls_by_signal(row: dict) -> dict[str, int]:
    """A rollup row's counts: productive (as '') and one per signal."""
    return {PRODUCTIVE: row["productive"], **{signal: row[signal] for signal in SIGNALS}}


def tool_use_figures(calls_by_signal: dict[str, int]) -> shapes.ToolUse:
    """accounting.md §2.6's figures from counted calls by signal ('' = productive)."""
    calls = sum(calls_by_signal.values())
    productive = calls_by_signal.get(PRODUCTIVE, 0)
    return {"calls": calls, "productive": productive, "efficiency": productive / calls if calls else None,
            "signals": cast(shapes.Signals, {signal: calls_by_signal.get(signal, 0) for signal in SIGNALS})}


def _tool(row: dict) -> shapes.Tool:
    return {"name": row["name"], "calls": row["calls"], "failed": row["failed"], "rejected": row["rejected"],
            "result_bytes": row["result_bytes"], "median_result_bytes": _whole(row["median_result_bytes"]),
            "result_s": _seconds(row["result_us"]),
            "median_result_s": None if row["median_result_us"] is None else _seconds(row["median_result_us"])}


def _whole(value: float | None) -> float | int | None:
    """A median of whole numbers: whole unless it falls between two."""
    return int(value) if value is not None and value.is_integer() else value


def _waste(tool_use: shapes.ToolUse, examples: list[dict]) -> dict[str, shapes.Waste]:
    waste: dict[str, shapes.Waste] = {signal: {"count": n, "examples": []}
                                      for signal, n in cast(dict[str, int], tool_use["signals"]).items()}
    for row in examples:
        waste[row["signal"]]["examples"].append(
            {"at": instant(row["ts"]), "tool": row["name"], "detail": row["detail"], "agent": row["agent"]})
    return waste


def _add(into: shapes.Group, phase: shapes.Phase) -> None:
    into["phases"] += 1
    tokens: dict[str, int] = cast(dict, into["tokens"])  # (its keys: TOKEN_FIELDS, the shape's)
    for f in TOKEN_FIELDS:
        tokens[f] += cast(dict, phase["tokens"])[f]
    into["claude_s"] = round(into["claude_s"] + phase["claude_s"], 3)
    into["tool_use"] = _sum_tool_use(into["tool_use"], phase["tool_use"])
    into["cost"] = _sum_costs(into["cost"], phase["cost"])


def _sum_tool_use(a: shapes.ToolUse, b: shapes.ToolUse) -> shapes.ToolUse:
    a_signals, b_signals = cast(dict[str, int], a["signals"]), cast(dict[str, int], b["signals"])
    by_signal = {signal: a_signals[signal] + b_signals[signal] for signal in SIGNALS}
    by_signal[PRODUCTIVE] = a["productive"] + b["productive"]
    return tool_use_figures(by_signal)


def _sum_costs(a: shapes.Cost, b: shapes.Cost) -> shapes.Cost:
    """Two phases' costs as one (the same price table)."""
    usd = None if a["usd"] is None and b["usd"] is None else round((a["usd"] or 0) + (b["usd"] or 0), 6)
    unknown = a["unknown_models"] + [m for m in b["unknown_models"] if m not in a["unknown_models"]]
    return {"usd": usd, "unknown_models": unknown, "complete": a["complete"] and b["complete"]}


def _empty() -> shapes.Group:
    return {"phases": 0, "tokens": cast(shapes.Tokens, dict.fromkeys(TOKEN_FIELDS, 0)), "claude_s": 0.0,
            "tool_use": tool_use_figures({}), "cost": {"usd": None, "unknown_models": [], "complete": True}}


def _outside(summary: shapes.Totals, phases: list[shapes.Phase]) -> shapes.Outside | None:
    """What no phase holds: the session's figures less its phases' (None when phases overlap, as
    other tools may write them: then their sum counts some twice)."""
    windows = sorted((p["started_at"], p["ended_at"]) for p in phases)
    if any(end is None or end > nxt for (_, end), (nxt, _) in itertools.pairwise(windows)):
        return None
    # (the keys looped over are the shapes' own: TOKEN_FIELDS, SIGNALS)
    total, phase_tokens = cast(dict[str, int], summary["tokens"]["total"]), [cast(dict, p["tokens"]) for p in phases]
    tokens = cast(shapes.Tokens, {f: total[f] - sum(t[f] for t in phase_tokens) for f in TOKEN_FIELDS})
    signals = cast(dict[str, int], summary["tool_use"]["signals"])
    phase_signals = [cast(dict, p["tool_use"]["signals"]) for p in phases]
    calls = {signal: signals[signal] - sum(s[signal] for s in phase_signals) for signal in SIGNALS}
    calls[PRODUCTIVE] = summary["tool_use"]["productive"] - sum(p["tool_use"]["productive"] for p in phases)
    usd = summary["cost"]["usd"]
    return {
        "tokens": tokens,
        "requests": summary["requests"] - sum(p["requests"] for p in phases),
        "claude_s": round(summary["claude_s"] - sum(p["claude_s"] for p in phases), 3),
        "tool_s": round(summary["tool_s"] - sum(p["tool_s"] for p in phases), 3),
        "human_s": round(summary["human_s"] - sum(p["human_s"] for p in phases), 3),
        "away_s": round(summary["away_s"] - sum(p["away_s"] for p in phases), 3),
        "output_share": round(tokens["output"] / summary["tokens"]["total"]["output"], 4)
        if summary["tokens"]["total"]["output"] else 0.0,
        "tool_use": tool_use_figures(calls),
        "cost": {**summary["cost"], "usd": None if usd is None else round(
            usd - sum(p["cost"]["usd"] or 0 for p in phases), 6)},
    }


def _by_verdict(phases: list[shapes.Phase], total_output: int) -> dict[str, shapes.VerdictGroup]:
    def empty() -> shapes.VerdictGroup:
        return {**_empty(), "output_share": 0.0}

    verdicts = {v: empty() for v in VERDICTS}
    for p in phases:
        _add(verdicts.setdefault(p["verdict"], empty()), p)  # keeps rows other tools wrote
    for figures in verdicts.values():
        out = figures["tokens"]["output"]
        figures["output_share"] = round(out / total_output, 4) if total_output else 0.0
    return verdicts


def _by_task(phases: list[shapes.Phase]) -> dict[str, shapes.TaskGroup]:
    tasks: dict[str, shapes.TaskGroup] = {}
    for p in phases:
        task = tasks.setdefault(p["task"], {**_empty(), "verdicts": {}})
        _add(task, p)
        task["verdicts"][p["verdict"]] = task["verdicts"].get(p["verdict"], 0) + 1
    return tasks


def _subagent(row: dict, phase: dict | None, calls_by_signal: dict[str, int], task: int | None,
              misses: list[cache.Miss]) -> shapes.Subagent:
    if row["meta_type"] or row["meta_description"]:
        matched_by, agent_type, description = "meta", row["meta_type"], row["meta_description"]
    elif row["linked_tool_use_id"]:
        matched_by, agent_type, description = "tool_use", row["linked_type"], row["linked_description"]
    elif row["nearest_tool_use_id"]:
        matched_by, agent_type, description = "timestamp", row["nearest_type"], row["nearest_description"]
    else:
        matched_by, agent_type, description = "unknown", None, None
    return {
        "agent_id": row["agent_id"],
        "agent_type": agent_type or "unknown",
        "description": description or "unknown",
        "matched_by": matched_by,
        "tokens": cast(shapes.Tokens, {f: int(row[f]) for f in TOKEN_FIELDS}),
        "requests": row["requests"],
        "tool_use": tool_use_figures(calls_by_signal),
        "cache": cache.figures(row, misses),
        "seconds": _seconds(row["span_us"] or 0),
        "started_at": instant(row["first_ts"]),
        "phase": None if phase is None else f"{phase['task']} / {phase['phase']}",
        "verdict": None if phase is None else phase["verdict"],
        "task": task,
    }
