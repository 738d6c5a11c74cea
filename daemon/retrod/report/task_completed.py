"""What the opt-in `TaskCompleted` hook tells Claude (`retrod hooks task-completed`, issue 30): the
finished task's figures as the report's plan has them (accounting.md §2.9), and the one command that logs
a verdict on it (`retrod phase log --from-task N`).

Claude Code runs the hook when a task of its `TaskCreate` / `TaskUpdate` plan is being marked
completed, with the documented common input (session_id, transcript_path, cwd, hook_event_name)
and `task_id`, `task_subject`. The hook runs asynchronously (`"async": true`), so its answer, a
`systemMessage`, reaches Claude on its next turn; docs/decisions.md says why. A task the plan
never had in progress (no window) has no figures: nothing is said. Never an error: a hook must not
fail the session it runs in.
"""

from __future__ import annotations

import json
import re

from psycopg import Connection

from ..basics.format import usd
from ..basics.stored_text import quoted
from ..basics.verdicts import VERDICTS
from . import model, shapes
from . import prices as pricing
from .markdown import task_cells

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MAX_TASK_ID = 200  # Claude Code's ids are short numbers; anything longer names no task of ours


def read_payload(data: bytes) -> dict:
    """The hook's JSON; {} for anything that is not a JSON object."""
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return payload if isinstance(payload, dict) else {}


def session_of(payload: dict) -> str | None:
    session = payload.get("session_id")
    session = session.lower() if isinstance(session, str) else None
    return session if session and UUID_RE.fullmatch(session) else None


def task_of(payload: dict) -> str | None:
    task = payload.get("task_id")
    if isinstance(task, int) and not isinstance(task, bool):
        task = str(task)  # (a number, should a version send one: the plan's ids are its text)
    return task if isinstance(task, str) and 0 < len(task) <= MAX_TASK_ID else None


def answer(conn: Connection, payload: dict, prices: pricing.Prices = pricing.DEFAULT,
           away_after_s: float = model.AWAY_AFTER_S) -> str:
    """What the hook prints: `{"systemMessage": …}` and a newline, or '' when there is nothing to
    say (no such session or task, a plan of TodoWrite, a task never in progress)."""
    session, task_id = session_of(payload), task_of(payload)
    if session is None or task_id is None:
        return ""
    plan = model.plan(conn, session)
    number = next((n for n, task in enumerate(plan.tasks, 1) if task.key == task_id), None)
    if plan.family != "task" or number is None:
        return ""
    stats = model.stats(conn, session, away_after_s, prices, phase_figures=False, cache_figures=False)
    tasks = stats["plan"]["tasks"]
    if number > len(tasks):  # (read again: a call committed between the two reads)
        return ""
    return json.dumps({"systemMessage": text(tasks[number - 1], session)}) + "\n"


def text(task: shapes.Task, session: str) -> str:
    """The finished task's figures, as the report's Tasks section writes them, and the command
    that logs its verdict."""
    cells = task_cells(task)
    number = task["number"]
    so_far = " so far" if task["ended_at"] is None else ""
    cache = task["cache"]["waste_usd"]
    figures = (f"{cells['time']}{so_far}, est. cost {cells['cost']}, {cells['output']} output tokens, "
               f"{cells['calls']} tool calls ({cells['efficiency']} efficient, {cells['wasted']} wasted)"
               + (f", prompt-cache waste {usd(cache)}" if cache else ""))
    return (f"retrod: task {number} of this session's plan, {quoted(task['name'])}, is done: {figures}. "
            f"Judge it honestly and log the verdict: `retrod phase log --session {session} --from-task {number} "
            f"--phase PHASE --verdict VERDICT --lessons \"…\"` (or the MCP tool log_phase with from_task {number});"
            f" VERDICT is one of {', '.join(VERDICTS)}. If retrod answers that the task is still current, its"
            " completion is not read yet: try again after your next message.")
