"""The plan and the windows' figures (its tasks', the phases') kept between reports (issue 30): a
plan of thousands of windows (the report benchmark's planned ~200 MB session: 2,262) cost ~0.2 s
of window figures and ~40 ms of plan calls read and derived on every report, where the rest of
it costs ~15 ms.

A window's figures (accounting.md §2.5 over its range) depend only on the session's rows whose
time is in its range, so they are kept in this process (the daemon's, `retrod mcp`'s, a command's
for its one report), keyed by the window; the store says what changed (migration 0038): per
session and UTC hour, a count that goes up at every statement changing a row whose time is in
that hour, and one for the plan calls. An ask reads the session's counts (one small read), drops
the kept windows over an hour whose count moved, reads the plan again only if the plan calls'
count moved, and sums the windows it does not hold in one window_figures statement. A window
still open (the current task's, an open phase's: until now) is kept only while the session is
at rest (no row in its last two hours): its figures until now are then those until any time
later; in a live session it is summed at every ask. Counts are read before the figures, so a
window summed after a change it did not see yet is summed again at the next ask, never kept
stale. Everything else the figures depend on is the key: the database, the role reading, the
member, the session, the away threshold, the member's price tiers, the tables' emptyings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..basics.kept import KeptValues, database_key
from ..store.queries import one, q
from .plan import Plan, Task

KEPT_SESSIONS = 16  # sessions whose plan is kept, least recently asked out
# Windows' figures kept in all, ~3 kB each with the plan: the benchmark's planned ~200 MB session
# holds 2,262 (6.8 MB), a real session's plan a few dozen. Past it (~45 MB, as trends' periods
# may hold ~50), the least recently asked sessions go; a session of more is summed at every ask.
KEPT_WINDOWS = 15_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HOUR = timedelta(hours=1)
_US = timedelta(microseconds=1)
# What window_figures sums by id: the figures, and the price groups' (by their key)
_SUMMED = ("claude_us", "tool_us", "human_us", "tool_result_bytes", "away_us", "productive", "sibling_error",
           "error_retry", "persisted_output_read", "post_write_read", "duplicate", "re_read")
_GROUP_KEY = ("model", "day", "fast", "tier_floor")
_GROUP_SUMMED = ("requests", "parts", "tool_turns", "input", "output", "cache_read", "cache_create",
                 "cache_create_5m", "cache_create_1h", "web_searches", "priced_1h")

Window = tuple[datetime, datetime | None]  # (an end None: open, until now)


@dataclass(frozen=True)
class Kept:
    plan_changes: int
    plan: Plan
    hours: dict[int, int]  # the session's counts of changes by hour, as of these figures
    windows: dict[Window, dict]  # closed windows' figures (window_figures' rows)
    sums: dict[int, tuple[tuple[Window, ...], dict]]  # by task number: its closed windows, their sum
    memo: dict  # what the caller makes of the plan, kept with it (emptied when it is read again)


_kept: KeptValues[Kept] = KeptValues(KEPT_SESSIONS, KEPT_WINDOWS, weigh=lambda kept: len(kept.windows))


def hour_of(ts: datetime) -> int:
    """The hour's number since the epoch, as migration 0038's window_hour."""
    return (ts - _EPOCH) // _HOUR


def at_rest(hours: Sequence[int], now: datetime) -> bool:
    """Whether a session whose rows' hours (report_window_marks' `hours`) are these holds no row
    in the last two hours before `now` (the database's clock may be a little off ours): its
    figures until now are its figures until any time later."""
    return not hours or max(hours) < hour_of(now) - 1


def figures(cur, args: dict, read_plan: Callable[[], Plan], window_figures: Callable[[list[dict]], dict[str, dict]],
            phases: Sequence[dict] = ()) -> tuple[Plan, dict[str, dict], dict[str, dict], dict]:
    """The session's plan; its tasks' figures by number (as text), each its windows' summed
    (window_figures' rows, as it sums windows given one id); the figures of the windows `phases`
    (`{id, s, e}`, a phase's) by id (as text); and a dict the caller may fill with what it makes of
    the plan alone, kept with it. `read_plan()` reads and derives the plan; `window_figures(windows)`
    sums windows `{id, s, e}` by id: called once, for the windows not kept, if any."""
    marks = one(cur.execute(q("report_window_marks"), args))
    key = (*database_key(cur.connection, marks), args["member"], args["session"], args["away_us"], marks["emptied"])
    hours = dict(zip(marks["hours"], marks["changes"], strict=True))
    # (an open window's figures, until now, are then its figures until any time later: kept too)
    settled = at_rest(marks["hours"], datetime.now(UTC))
    kept = _kept.get(key)
    windows: dict[Window, dict] = {}
    sums: dict[int, tuple[tuple[Window, ...], dict]] = {}
    changed: set[int] = set()
    if kept is not None:
        changed = {h for h in hours.keys() | kept.hours.keys() if hours.get(h, 0) != kept.hours.get(h, 0)}
        if changed:
            windows = {w: fig for w, fig in kept.windows.items() if not _touches(w, changed)}
            sums = {n: found for n, found in kept.sums.items() if all(w in windows for w in found[0])}
        else:
            windows, sums = kept.windows, kept.sums
    if kept is not None and kept.plan_changes == marks["plan_changes"]:
        plan, memo = kept.plan, kept.memo
    else:
        plan, memo = read_plan(), {}

    def sum_kept(n: int, task: Task) -> bool:
        """Whether task `n`'s closed windows' sum is kept (those kept with a plan are its own)."""
        return n in sums and (plan is kept_plan or sums[n][0] == tuple((s, e) for s, e in task.windows
                                                                       if e is not None))

    kept_plan = kept.plan if kept is not None else None

    def held(s: datetime, e: datetime | None) -> bool:
        return (s, e) in windows and _keeps(s, e, settled)

    asked: list[dict] = []  # the windows not kept (a task's: its number and place)
    for n, task in enumerate(plan.tasks, 1):
        if sum_kept(n, task):
            s, e = task.windows[-1]  # (its closed windows' sum kept: none of them asked)
            if e is None and not held(s, e):
                asked.append({"id": f"{n}:{len(task.windows) - 1}", "s": s, "e": e})
            continue
        asked += [{"id": f"{n}:{i}", "s": s, "e": e} for i, (s, e) in enumerate(task.windows) if not held(s, e)]
    asked += [{**w, "id": f"phase {w['id']}"} for w in phases if not held(w["s"], w["e"])]
    found = window_figures(asked) if asked else {}
    summed = {(w["s"], w["e"]): found[w["id"]] for w in asked}  # (one window, one figures: its rows')
    new = {w: fig for w, fig in summed.items() if _keeps(*w, settled)}

    # Kept again when anything changed or was summed: only the plan's windows and the phases' (those
    # no longer asked for go)
    keep = kept is None or bool(changed) or plan is not kept.plan or bool(new)
    kept_windows: dict[Window, dict] = {}
    kept_sums: dict[int, tuple[tuple[Window, ...], dict]] = {}
    tasks: dict[str, dict] = {}
    for n, task in enumerate(plan.tasks, 1):
        if sum_kept(n, task):
            kept_sums[n] = sums[n]
            if keep:
                kept_windows.update((w, windows[w]) for w in sums[n][0])
        else:
            closed = tuple((s, e) for s, e in task.windows if e is not None)
            rows = [summed[w] if w in summed else windows[w] for w in closed]
            kept_windows.update((w, fig) for w, fig in zip(closed, rows, strict=True) if _keeps(*w, settled))
            kept_sums[n] = (closed, _sum(rows))
        total = kept_sums[n][1]
        s, e = task.windows[-1]
        if e is None:
            last = summed[(s, e)] if (s, e) in summed else windows[(s, e)]
            total = _sum([total, last])
            if _keeps(s, e, settled):
                kept_windows[(s, e)] = last
        tasks[str(n)] = total
    by_phase: dict[str, dict] = {}
    for w in phases:
        window = (w["s"], w["e"])
        by_phase[str(w["id"])] = summed[window] if window in summed else windows[window]
        if _keeps(*window, settled):
            kept_windows[window] = by_phase[str(w["id"])]
    if keep:
        _kept.put(key, Kept(marks["plan_changes"], plan, hours, kept_windows, kept_sums, memo))
    return plan, tasks, by_phase, memo


def _keeps(s: datetime, e: datetime | None, settled: bool) -> bool:
    """Whether a window's figures may be kept: a closed one not empty; an open one (until now, moving
    with the session) only while the session is `settled`."""
    return settled if e is None else s < e


def _touches(window: Window, changed: set[int]) -> bool:
    s, e = window
    if e is None:
        return any(h >= hour_of(s) for h in changed)
    return any(h in changed for h in range(hour_of(s), hour_of(e - _US) + 1))


def _sum(rows: list[dict]) -> dict:
    """Rows of window_figures added up as it adds windows of one id: the figures, and the price
    groups of one key (model, day, fast, tier floor) into one."""
    total: dict = dict.fromkeys(_SUMMED, 0)
    groups: dict[tuple, dict] = {}
    for row in rows:
        for f in _SUMMED:
            total[f] += row[f]
        for group in row["by_model"]:
            k = tuple(group[f] for f in _GROUP_KEY)
            into = groups.get(k)
            if into is None:
                groups[k] = dict(group)
            else:
                for f in _GROUP_SUMMED:
                    into[f] += group[f]
    total["by_model"] = list(groups.values())
    return total


def forget() -> None:
    """Every kept plan dropped (the tests')."""
    _kept.clear()
