"""`retrod hooks install|uninstall`: the Claude Code hook that starts every session from what the
project's last sessions taught. It adds one `SessionStart` entry to Claude Code's settings
(`~/.claude/settings.json`, or `$CLAUDE_CONFIG_DIR/settings.json`) running `retrod brief --hook`
by this retrod's absolute path, with this shell's RETROD_* settings (Claude Code runs hook
commands with its own environment) but one holding a password (claude_settings.carried).
claude_settings.py keeps every other key and hook, and backs the file up before each change;
`uninstall` removes retrod's entry and nothing else.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from . import claude_settings, skills

EVENT = "SessionStart"
MATCHER = "startup|resume|clear|compact"  # every way a session starts; Claude Code's documented set
TIMEOUT_S = 10  # Claude Code's own limit for the hook; retrod answers well within it


def command() -> tuple[str, list[str]]:
    """The hook's command line: RETROD_* settings, then this retrod by its absolute path; and a
    note for each setting left out of it."""
    kept, notes = claude_settings.carried(skills.settings_env())
    settings = [f"{key}={shlex.quote(value)}" for key, value in kept.items()]
    return " ".join([*settings, shlex.join([*skills.command_argv(), "brief", "--hook"])]), notes


def is_ours(entry: object) -> bool:
    """Whether a hook entry is retrod's: a command that runs some retrod's `brief --hook` (any
    retrod: one installed from another virtualenv is replaced, not doubled)."""
    arguments = claude_settings.retrod_arguments(entry)
    return arguments is not None and arguments[-2:] == ["brief", "--hook"]


def _groups(data: dict[str, Any]) -> list[Any] | None:
    """The SessionStart groups (None: there are none); a shape Claude Code would not read is refused."""
    hooks = data.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict) or not isinstance(hooks.get(EVENT, []), list):
        raise claude_settings.SettingsError(f'"hooks.{EVENT}" is not a list of hook groups as Claude Code'
                                            " writes it; fix it, then try again")
    return hooks.get(EVENT)


def _without_ours(data: dict[str, Any]) -> None:
    """Remove retrod's entries, and a group, a list or "hooks" that only they filled."""
    groups = _groups(data)
    if groups is None:
        return
    kept = []
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if isinstance(inner, list) and any(is_ours(h) for h in inner):
            inner = [h for h in inner if not is_ours(h)]
            if not inner:
                continue
            group = {**group, "hooks": inner}
        kept.append(group)
    if kept:
        data["hooks"][EVENT] = kept
    else:
        del data["hooks"][EVENT]
        if not data["hooks"]:
            del data["hooks"]


def install(path: Path | None = None) -> list[str]:
    """Add (or replace) retrod's SessionStart hook; the lines to print."""
    path = path or claude_settings.settings_file()
    line, notes = command()
    ours = {"matcher": MATCHER, "hooks": [{"type": "command", "command": line, "timeout": TIMEOUT_S}]}
    changed = False

    def edit(data: dict[str, Any]) -> bool:
        nonlocal changed
        before = repr(data)
        _groups(data)  # refused before anything changes
        _without_ours(data)
        data.setdefault("hooks", {}).setdefault(EVENT, []).append(ours)
        changed = repr(data) != before
        return changed

    backup = claude_settings.change(path, edit)
    return [f"{'installed in' if changed else 'already installed in'} {path}: {EVENT} runs {line}",
            *([f"backup: {backup}"] if backup else []),
            "each new Claude Code session starts with `retrod brief` of its project (nothing where it has no history)",
            *notes]


def uninstall(path: Path | None = None) -> list[str]:
    """Remove retrod's SessionStart hook, and nothing else; the lines to print."""
    path = path or claude_settings.settings_file()
    changed = False

    def edit(data: dict[str, Any]) -> bool:
        nonlocal changed
        before = repr(data)
        _without_ours(data)
        changed = repr(data) != before
        return changed

    backup = claude_settings.change(path, edit)
    if not changed:
        return [f"no retrod hook in {path}: nothing to remove"]
    return [f"removed retrod's {EVENT} hook from {path}", *([f"backup: {backup}"] if backup else [])]
