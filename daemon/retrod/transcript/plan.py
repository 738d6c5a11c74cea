"""What accounting.md §2.9 keeps of a plan call's `input`: the part that moves tasks, made storable.
Pure functions; the tasks themselves are derived when a report is asked for (report/plan.py)."""

from __future__ import annotations

from typing import Any

from .parser import storable_id, storable_text

TODO_TOOLS = frozenset({"TodoWrite"})
TASK_TOOLS = frozenset({"TaskCreate", "TaskUpdate"})
PLAN_TOOLS = TODO_TOOLS | TASK_TOOLS


def plan_input(name: str, value: Any) -> dict | None:
    """A plan call's input as the store keeps it; None when the call is not a plan call or can
    never count (accounting.md §2.9 "well formed": a TodoWrite whose `todos` is no array, a TaskUpdate
    without a task id). A TaskCreate is kept whatever it says: only its result tells its id.

    - TodoWrite: {"todos": [[content, status or null], ...]}, the items that are objects with a
      non-empty string content, in list order;
    - TaskCreate: {"subject": subject or null};
    - TaskUpdate: {"taskId": id, "subject": subject or null, "status": status or null}."""
    given = value if isinstance(value, dict) else {}
    if name == "TodoWrite":
        todos = given.get("todos")
        if not isinstance(todos, list):
            return None
        items = [[content, storable_text(item.get("status"))] for item in todos
                 if isinstance(item, dict) and (content := storable_text(item.get("content"))) is not None]
        return {"todos": items}
    if name == "TaskCreate":
        return {"subject": storable_text(given.get("subject"))}
    if name == "TaskUpdate":
        task_id = storable_id(given.get("taskId"))
        if task_id is None:
            return None
        return {"taskId": task_id, "subject": storable_text(given.get("subject")),
                "status": storable_text(given.get("status"))}
    return None
