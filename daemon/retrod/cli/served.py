"""The commands the daemon answers over its socket besides `report`: `sessions`, `trends`,
`brief`, `lessons` and `phases` (fastpath/client.py asks, fastpath/server.py hands the request here).

Each is the command line's own code (cli.execute), run on the daemon's thread with the client's
working folder, environment, process and terminal (invocation.py) and the daemon's connections,
its output caught and sent back: the same answer, without starting Python's database libraries
in a new process. The daemon declines — and the command does the work itself — whenever it
could answer differently: settings of another value than its own (a `RETROD_*`, the time zone,
the home folder, Claude Code's folders), `--debug` (tracebacks are the command's), `--help`
(worded for the command's terminal)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from ..basics import invocation
from ..basics.paths import default_reports_dir
from ..fastpath.client import served_argv
from ..settings import Settings
from ..store.db import lend
from . import arguments

Answer = tuple[str, str, str]
DECLINED: Answer = ("declined", "", "")
# The command's own, sent with each request as the report's are; every other RETROD_* must be the daemon's.
PER_COMMAND = {"RETROD_PRICES": "prices", "RETROD_AWAY_AFTER_S": "away_after_s", "RETROD_REPORTS_DIR": "reports_dir"}
SAME_AS_DAEMON = ("TZ", "HOME", "CLAUDE_CONFIG_DIR")
RELATIVE_TO_CWD = ("RETROD_PROJECTS_DIR", "RETROD_DATA_DIR", "RETROD_PG_BINDIR", "CLAUDE_CONFIG_DIR")
IGNORED = frozenset({"RETROD_LOG_LEVEL"})  # a short command logs at WARNING whatever it says


def answer(pool, request: Mapping[str, str], execute: Callable[..., int],
           daemon_env: Mapping[str, str] = os.environ) -> Answer:
    """What the command would answer, as (exit code, stderr, stdout); DECLINED when it must run
    itself. `execute`: the command line's own (commands.py hands it over: it imports this module)."""
    argv = served_argv(request)
    env = {key[4:]: value for key, value in request.items() if key.startswith("env.")}
    if argv is None or not _same_settings(env, daemon_env):
        return DECLINED
    # The command's own values of PER_COMMAND; one it leaves unset is the default, never the daemon's
    per_command: dict[str, Any] = {"prices": None, "away_after_s": Settings.model_fields["away_after_s"].default,
                                   "reports_dir": default_reports_dir()}
    per_command.update((field, env[name]) for name, field in PER_COMMAND.items() if name in env)
    try:
        settings = _settings(tuple(sorted(per_command.items())))
    except Exception:  # noqa: BLE001 - a bad setting: the command words it itself
        return DECLINED
    asked = invocation.Invocation(cwd=Path(request["cwd"]) if request.get("cwd", "").startswith("/") else None,
                                  env=env, pid=int(request.get("pid") or 0), stdout_tty=request.get("tty") == "1")
    with invocation.serving(asked), lend(pool):
        try:
            code = execute(_parser().parse_args(argv), settings=settings)
        except SystemExit as exc:  # argparse's own usage error, already on the command's stderr
            code = exc.code if isinstance(exc.code, int) else 2
    return str(code), asked.err.getvalue(), asked.out.getvalue()


@lru_cache(maxsize=8)
def _settings(per_command: tuple[tuple[str, Any], ...]) -> Settings:
    """The daemon's settings with the command's own PER_COMMAND, made once per value (~0.7 ms
    each: every answer's): the daemon's environment, which the rest comes from, stays as it
    started (a setting that fails raises each time: a failure is not kept)."""
    return Settings(**dict(per_command))


@cache
def _parser():
    """The command line's grammar, built once (5 ms of each answer otherwise): parsing reads it
    and changes nothing, so the threads serving commands share it; what it prints goes to the
    served command's stderr (sys.stderr, looked up when it prints)."""
    return arguments.parser()


def _same_settings(env: Mapping[str, str], daemon_env: Mapping[str, str]) -> bool:
    """The command's settings and the daemon's mean the same: equal, and no relative path (the
    command's working folder is not the daemon's)."""
    if any(not path.strip().startswith(("/", "~")) for name in RELATIVE_TO_CWD
           for path in env.get(name, "/").split(",") if path.strip()):
        return False

    def relevant(source: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in source.items()
                if (k.startswith("RETROD_") and k not in PER_COMMAND and k not in IGNORED) or k in SAME_AS_DAEMON}
    return relevant(env) == relevant(daemon_env)

