"""`retrod hooks install|uninstall`: the Claude Code hooks retrod offers. It adds one `SessionStart`
entry to Claude Code's settings (`~/.claude/settings.json`, or `$CLAUDE_CONFIG_DIR/settings.json`)
running `retrod brief --hook`, the session's start from what the project's last sessions taught;
and with `--task-completed` (opt-in) one `TaskCompleted` entry running `retrod hooks
task-completed`, the finished task's figures and a request for its verdict (issue 30). Each runs
this retrod by its absolute path, with this shell's RETROD_* settings (Claude Code runs hook
commands with its own environment) but one holding a password (claude_settings.carried).
claude_code/settings.py keeps every other key and hook, and backs the file up before each change;
`uninstall` removes retrod's entries and nothing else.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from . import settings as claude_settings
from . import skills

EVENT = "SessionStart"
MATCHER = "startup|resume|clear|compact"  # every way a session starts; Claude Code's documented set
TIMEOUT_S = 10  # Claude Code's own limit for the hook; retrod answers well within it
# Opt-in (issue 30): TaskCompleted takes no matcher, and its output reaches Claude only from an
# async hook (on its next turn; a synchronous one's stdout is shown in verbose mode alone, and its
# exit 2 would refuse the task's completion): docs/decisions.md.
TASK_EVENT = "TaskCompleted"
TASK_TIMEOUT_S = 30
TASK_NOTE = ("each task of Claude's plan (TaskCreate / TaskUpdate) that completes gets its figures and a request"
             " for its verdict (`retrod phase log --from-task N`), on Claude's next turn")
ARGUMENTS = {EVENT: ["brief", "--hook"], TASK_EVENT: ["hooks", "task-completed"]}


def command(event: str = EVENT) -> tuple[str, list[str]]:
    """The hook's command line: RETROD_* settings, then this retrod by its absolute path; and a
    note for each setting left out of it."""
    kept, notes = claude_settings.carried(skills.settings_env())
    settings = [f"{key}={shlex.quote(value)}" for key, value in kept.items()]
    return " ".join([*settings, shlex.join([*skills.command_argv(), *ARGUMENTS[event]])]), notes


def is_ours(entry: object, event: str = EVENT) -> bool:
    """Whether a hook entry is retrod's for `event`: a command that runs some retrod's `brief
    --hook` (`hooks task-completed`) — any retrod: one installed from another virtualenv is
    replaced, not doubled."""
    arguments = claude_settings.retrod_arguments(entry)
    return arguments is not None and arguments[-2:] == ARGUMENTS[event]


def _groups(data: dict[str, Any], event: str = EVENT) -> list[Any] | None:
    """The event's groups (None: there are none); a shape Claude Code would not read is refused."""
    hooks = data.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict) or not isinstance(hooks.get(event, []), list):
        raise claude_settings.SettingsError(f'"hooks.{event}" is not a list of hook groups as Claude Code'
                                            " writes it; fix it, then try again")
    return hooks.get(event)


def _without_ours(data: dict[str, Any], event: str = EVENT) -> None:
    """Remove retrod's entries of `event`, and a group, a list or "hooks" that only they filled."""
    groups = _groups(data, event)
    if groups is None:
        return
    kept = []
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if isinstance(inner, list) and any(is_ours(h, event) for h in inner):
            inner = [h for h in inner if not is_ours(h, event)]
            if not inner:
                continue
            group = {**group, "hooks": inner}
        kept.append(group)
    if kept:
        data["hooks"][event] = kept
    else:
        del data["hooks"][event]
        if not data["hooks"]:
            del data["hooks"]


def _entry(event: str, line: str) -> dict[str, Any]:
    if event == TASK_EVENT:
        return {"hooks": [{"type": "command", "command": line, "async": True, "timeout": TASK_TIMEOUT_S}]}
    return {"matcher": MATCHER, "hooks": [{"type": "command", "command": line, "timeout": TIMEOUT_S}]}


def install(path: Path | None = None, task_completed: bool = False) -> list[str]:
    """Add (or replace) retrod's SessionStart hook, and with `task_completed` its TaskCompleted
    hook too; the lines to print."""
    path = path or claude_settings.settings_file()
    events = [EVENT, TASK_EVENT] if task_completed else [EVENT]
    lines = {event: command(event) for event in events}
    changed = False

    def edit(data: dict[str, Any]) -> bool:
        nonlocal changed
        before = repr(data)
        for event in events:
            _groups(data, event)  # refused before anything changes
        for event in events:
            _without_ours(data, event)
            data.setdefault("hooks", {}).setdefault(event, []).append(_entry(event, lines[event][0]))
        changed = repr(data) != before
        return changed

    backup = claude_settings.change(path, edit)
    done = "installed in" if changed else "already installed in"
    out = [f"{done} {path}: {event} runs {lines[event][0]}" for event in events]
    return [*out, *([f"backup: {backup}"] if backup else []),
            "each new Claude Code session starts with `retrod brief` of its project (nothing where it has no history)",
            *([TASK_NOTE] if task_completed else []),
            *lines[EVENT][1]]


def uninstall(path: Path | None = None) -> list[str]:
    """Remove retrod's hooks (SessionStart, TaskCompleted), and nothing else; the lines to print."""
    path = path or claude_settings.settings_file()
    removed: list[str] = []

    def edit(data: dict[str, Any]) -> bool:
        for event in (EVENT, TASK_EVENT):
            before = repr(data)
            _without_ours(data, event)
            if repr(data) != before:
                removed.append(event)
        return bool(removed)

    backup = claude_settings.change(path, edit)
    if not removed:
        return [f"no retrod hook in {path}: nothing to remove"]
    return [f"removed retrod's {' and '.join(removed)} hook{'s' if len(removed) > 1 else ''} from {path}",
            *([f"backup: {backup}"] if backup else [])]
