"""Tasks from Claude's own plan (accounting.md §2.9), derived from the stored plan calls when a report is
asked for: a pure function of the calls in their order, so no order of reading, chunking or late
result changes them. The figures of each task's windows are the report's (model.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..tracking import TrackingError

TODO_STATUSES = ("pending", "in_progress", "completed")
TASK_STATUSES = ("pending", "in_progress", "completed", "deleted")


@dataclass(frozen=True, slots=True)
class PlanCall:
    """A stored plan call (migration 0025), in accounting.md §2.9's order: its time, then its project
    folder, line and block. `plan`: its input as transcript/plan.py keeps it."""

    ts: datetime
    name: str
    plan: dict
    failed: bool  # its result has is_error, or its line's toolUseResult says success: false
    task_id: str | None  # a TaskCreate's id, from its result


@dataclass(slots=True, eq=False)  # one task is one object: compared by identity
class Task:
    key: str  # a todo's content, a task's id
    name: str
    status: str = "pending"
    windows: list[list] = field(default_factory=list)  # [start, end or None (open)]


@dataclass(slots=True)
class Plan:
    family: str | None  # "todo", "task", or None: no counting call
    calls: int  # the counting calls of that family
    tasks: list[Task]  # with a window, by their first window's start: task N is tasks[N - 1]
    never_started: list[Task]  # the others, in plan order


def task_windows(plan: Plan, number: int, end: datetime | None) -> tuple[Task, list[tuple[datetime, datetime]]]:
    """Task `number` of the plan (1 the first) and its windows as phases to log (`phase log
    --from-task`, accounting.md §2.9): a last window still open ends at `end`, which only such a task
    takes. The user's mistakes raise TrackingError."""
    if not 1 <= number <= len(plan.tasks):
        have = f"its tasks are 1 to {len(plan.tasks)}" if plan.tasks else "no task of its plan was started"
        raise TrackingError(f"the session has no task {number}: {have}; see `retrod report` (plan.tasks)")
    task = plan.tasks[number - 1]
    last_start, last_end = task.windows[-1]
    if last_end is None:
        if end is None:
            raise TrackingError(f"task {number} ({task.name!r}) is still current, since {last_start.isoformat()}:"
                                " give --end TIME to end its last phase")
        if end <= last_start:
            raise TrackingError(f"--end ({end.isoformat()}) must be later than the start of task {number}'s last"
                                f" window ({last_start.isoformat()})")
        return task, [(s, e) for s, e in task.windows[:-1]] + [(last_start, end)]
    if end is not None:
        raise TrackingError(f"--end is only for a task still current; task {number}'s windows are all closed")
    return task, [(s, e) for s, e in task.windows]


def family_of(name: str) -> str:
    return "todo" if name == "TodoWrite" else "task"


def counts(call: PlanCall) -> bool:
    """A call counts unless its result failed; a TaskCreate needs the id its result gave."""
    return not call.failed and (call.name != "TaskCreate" or call.task_id is not None)


def derive(calls: Iterable[PlanCall]) -> Plan:
    """accounting.md §2.9 over the session's plan calls in order."""
    counting = [c for c in calls if counts(c)]
    if not counting:
        return Plan(None, 0, [], [])
    family = family_of(counting[0].name)
    counting = [c for c in counting if family_of(c.name) == family]
    tasks: dict[str, Task] = {}  # in plan order (first appearance)
    in_last_list: dict[str, str] = {}  # todo: the last list's tasks, and their status there
    current: Task | None = None
    for call in counting:
        if family == "todo":
            in_last_list = {}
            for content, status in call.plan["todos"]:
                if content in in_last_list:
                    continue  # a copy in one list: its first place counts
                task = tasks.get(content)
                if task is None:  # (not setdefault: a long plan's lists name the same tasks thousands of times)
                    task = tasks[content] = Task(content, content)
                task.status = status if status in TODO_STATUSES else "pending"
                in_last_list[content] = task.status
            candidates = [tasks[content] for content, status in in_last_list.items() if status == "in_progress"]
        else:
            _apply_task_call(tasks, call)
            candidates = [task for task in tasks.values() if task.status == "in_progress"]
        if current is None or current not in candidates:
            now = candidates[0] if candidates else None
            if current is not None:
                current.windows[-1][1] = call.ts
            if now is not None:
                now.windows.append([call.ts, None])
            current = now
    if family == "todo":
        for key, task in tasks.items():
            if key not in in_last_list and task.status != "completed":
                task.status = "deleted"
    for task in tasks.values():
        task.windows = _tidy(task.windows)
    started = sorted((t for t in tasks.values() if t.windows), key=lambda t: t.windows[0][0])
    return Plan(family, len(counting), started, [t for t in tasks.values() if not t.windows])


def _apply_task_call(tasks: dict[str, Task], call: PlanCall) -> None:
    subject = call.plan.get("subject")
    if call.name == "TaskCreate":
        task_id = call.task_id or ""  # (a TaskCreate that counts has one)
        task = tasks.get(task_id)
        if task is None:
            tasks[task_id] = Task(task_id, subject or f"#{task_id}")
            return
        task.status = "pending"
    else:
        task_id = call.plan["taskId"]
        task = tasks.get(task_id)
        if task is None:
            task = tasks[task_id] = Task(task_id, subject or f"#{task_id}")
        if call.plan.get("status") in TASK_STATUSES:
            task.status = call.plan["status"]
    if subject:
        task.name = subject


def _tidy(windows: Sequence[list]) -> list[list]:
    """A window whose end is its start is dropped; one that ends as the next starts joins it."""
    kept: list[list] = []
    for start, end in windows:
        if end is not None and end == start:
            continue
        if kept and kept[-1][1] == start:
            kept[-1][1] = end
        else:
            kept.append([start, end])
    return kept
