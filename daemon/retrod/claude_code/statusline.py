"""`retrod statusline install` and `uninstall`: the `statusLine` entry of Claude Code's settings
file, through claude_code/settings.py (every other key kept, a backup of the file first).

The entry runs this `retrod` by its absolute path (Claude Code's shell need not have a
virtualenv on PATH), as the skills do. A status line that is not retrod's is replaced only with
--force, and kept beside the settings file (claude_settings.remember) for uninstall to put back.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from typing import Any

from ..basics.errors import UserError
from . import settings as claude_settings
from . import skills

KEY = "statusLine"
# Claude Code runs the command after each of its messages. A timed run as well keeps what moves
# with the clock true while no message comes (a long tool call, the person away): the prompt
# cache's countdown above all (issue 29: the seconds before it goes cold are when the person can
# still save it), the open phase's minutes, the time to a rate limit's reset. Every 5 s costs a
# command start and a few indexed reads (~40 ms of CPU), under 1% of a core.
REFRESH_S = 5
# The settings the status line's answer depends on, carried in the command when the installing
# shell sets them (as the MCP server's registration carries them): Claude Code may be started
# from elsewhere than this shell. Paths are made absolute.
CARRIED = ("RETROD_DATA_DIR", "RETROD_DATABASE_URL", "RETROD_PRICES", "RETROD_AWAY_AFTER_S")
PATHS = ("RETROD_DATA_DIR", "RETROD_PRICES")


class StatuslineError(UserError, ValueError):
    """The status line cannot be installed as asked: the user's to decide (exit 2)."""


def command(env: Mapping[str, str]) -> tuple[str, list[str]]:
    """The entry's command (this retrod, with the settings it needs), and notes for the user: a
    setting holding a password is left out (claude_settings.carried)."""
    settings = {name: os.path.abspath(os.path.expanduser(value)) if name in PATHS else value
                for name in CARRIED if (value := env.get(name))}
    kept, notes = claude_settings.carried(settings)
    words = [f"{name}={shlex.quote(value)}" for name, value in kept.items()]
    return " ".join([*words, shlex.join([*skills.command_argv(), "statusline"])]), notes


# What retrod's entry sets; an entry of retrod's already there keeps its other keys (a padding
# the user changed, a key of a newer Claude Code), and gains the refresh.
OWN = ("type", "command", "refreshInterval")


def entry(env: Mapping[str, str], old: object = None) -> tuple[dict[str, Any], list[str]]:
    """retrod's statusLine entry; `old`: the entry there, kept but for OWN when it is retrod's."""
    cmd, notes = command(env)
    new: dict[str, Any] = {"type": "command", "command": cmd, "padding": 0, "refreshInterval": REFRESH_S}
    if isinstance(old, dict) and is_retrods(old):
        new = {**new, **{k: v for k, v in old.items() if k not in OWN}}
    return new, notes


def is_retrods(value: object) -> bool:
    """A statusLine entry that runs `retrod statusline` (this retrod or another install of it)."""
    arguments = claude_settings.retrod_arguments(value)
    return arguments is not None and arguments[-1:] == ["statusline"]


def _shown(value: object) -> str:
    command = value.get("command") if isinstance(value, dict) else None
    return f"`{command}`" if isinstance(command, str) else json.dumps(value, ensure_ascii=False)


def install(force: bool = False, env: Mapping[str, str] | None = None) -> list[str]:
    """Write retrod's statusLine entry; the lines to print."""
    env = os.environ if env is None else env
    path = claude_settings.settings_file(env)
    with claude_settings.locked(path):  # what is read here is what is changed: another install waits
        old = claude_settings.read(path).get(KEY)
        new, notes = entry(env, old)
        if old == new:
            return [f"unchanged: {path} already runs {new['command']}", *notes]
        replaced = old is not None and not is_retrods(old)
        if replaced and not force:
            raise StatuslineError(f"{path} already has a status line ({_shown(old)}); --force replaces it"
                                  " (and `retrod statusline uninstall` puts it back)")
        kept = None

        def edit(data: dict) -> bool:
            nonlocal kept
            if data.get(KEY) != old:  # changed since it was read (by hand, or a tool without the lock)
                raise StatuslineError(f"{path} changed while retrod was installing; run it again")
            if replaced:  # once the file is known writable
                kept = claude_settings.remember(path, KEY, old)
            data[KEY] = new
            return True

        backup = claude_settings.change(path, edit)
    out = [f"installed: {path} runs {new['command']} after each of Claude's messages (and every {REFRESH_S} s)"]
    if backup is not None:
        out.append(f"backup of the file before: {backup}")
    if kept is not None:
        out.append(f"replaced {_shown(old)}, kept in {kept}: `retrod statusline uninstall` puts it back")
    return out + notes


def uninstall(env: Mapping[str, str] | None = None) -> list[str]:
    """Take retrod's statusLine entry out, putting back what it replaced; the lines to print."""
    env = os.environ if env is None else env
    path = claude_settings.settings_file(env)
    with claude_settings.locked(path):
        had, before = claude_settings.recall(path, KEY)
        current = claude_settings.read(path).get(KEY)
        if current is None or not is_retrods(current):
            claude_settings.forget(path, KEY)  # whatever was kept is stale: the user chose another since
            if current is None:
                return [f"no status line in {path}: nothing to do"]
            return [f"the status line in {path} is not retrod's ({_shown(current)}): left alone"]

        def edit(data: dict) -> bool:
            if data.get(KEY) != current:
                raise StatuslineError(f"{path} changed while retrod was uninstalling; run it again")
            if had and before is not None:
                data[KEY] = before
            else:
                del data[KEY]
            return True

        backup = claude_settings.change(path, edit)
        claude_settings.forget(path, KEY)
    out = [f"put back the status line retrod replaced in {path}: {_shown(before)}" if had and before is not None
           else f"removed retrod's status line from {path}"]
    return out + ([f"backup of the file before: {backup}"] if backup is not None else [])
