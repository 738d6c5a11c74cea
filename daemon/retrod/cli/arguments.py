"""The command line's grammar: standard library only, so that a mistyped command is refused
(exit 2) before anything starts — the private cluster included (see entry.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ..basics.verdicts import VERDICTS
from ..fastpath.client import FORMATS


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="retrod", description="Where a Claude Code session's tokens and time went.")
    top.add_argument("--debug", action="store_true", help="show tracebacks")
    top.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="catch up on every transcript, then follow them")
    run.add_argument("--once", action="store_true", help="catch up and exit")

    sub.add_parser("migrate", help="create or upgrade the database schema")

    report = sub.add_parser("report", help="a session's retrospective (Markdown, saved; or JSON)")
    _session_argument(report)
    _session_option(report)
    # html: the web UI's session page as one self-contained file (not answered by the daemon's
    # fast path, which speaks the first two)
    report.add_argument("--format", choices=(*FORMATS, "html"), default="markdown")
    report.add_argument("--no-save", action="store_true", help="print only; save no file")
    report.add_argument("--output", type=Path, help="save to this file instead of RETROD_REPORTS_DIR")
    report.add_argument("--close", action="store_true", help="end open phases and the session now")
    _verdict_and_notes(report, required=False,
                       verdict_help="with --close: the verdict the open phase ends with (one of: {})")
    _member_option(report)

    track = sub.add_parser("track", help="start tracking a session").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    start = track.add_parser("start", help="record the session in cc_sessions")
    _session_option(start, allow_unknown=True)
    start.add_argument("--description", help="what the session is for (names the saved report)")

    phase = sub.add_parser("phase", help="log phases of work with their verdicts").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    p_start = phase.add_parser("start", help="open a phase now")
    _session_option(p_start, allow_unknown=True)
    p_start.add_argument("--task", required=True)
    p_start.add_argument("--phase", required=True)
    p_end = phase.add_parser("end", help="close the open phase now, with its verdict")
    _session_option(p_end)
    _verdict_and_notes(p_end)
    p_log = phase.add_parser("log", help="log a whole phase, with its times (or a task of Claude's plan)")
    _session_option(p_log, allow_unknown=True)
    p_log.add_argument("--task", help="required without --from-task (with it: default, the task's name)")
    p_log.add_argument("--phase", required=True)
    p_log.add_argument("--start", help="ISO 8601 time; no offset = local time (required without --from-task)")
    p_log.add_argument("--end", help=("ISO 8601 time; no offset = local time (required without --from-task;"
                                      " with it, only for a task still current: ends its last phase)"))
    p_log.add_argument("--from-task", type=_positive, metavar="N", help=(
        "log task N of the report's plan (plan.tasks, 1 the first) as phases, one per window"))
    _verdict_and_notes(p_log)

    phases = sub.add_parser("phases", help="list a session's phases")
    _session_argument(phases)
    _session_option(phases)
    phases.add_argument("--format", choices=("text", "json"), default="text")
    _member_option(phases)

    listing = sub.add_parser("sessions", help="recent sessions across projects, newest first")
    listing.dash_values = ("--project",)  # every Claude Code folder name starts with "-"
    listing.add_argument("--project", help=(
        "a project folder's path (or a folder inside one), or part of its Claude Code folder name"))
    listing.add_argument("--since", help="started at or after this date or time (no offset = local time)")
    listing.add_argument("--limit", type=_positive, default=20, help="at most this many (default 20)")
    listing.add_argument("--sort", choices=("start", "tokens", "efficiency"), default="start",
                         help="newest first (default), most tokens first, or least efficient tool use first")
    listing.add_argument("--json", action="store_true")

    brief = sub.add_parser("brief", help="what this project's past sessions teach: lessons, waste, cost, efficiency")
    brief.dash_values = ("--project",)
    brief.add_argument("--project", help=(
        "a project folder's path, or part of its Claude Code folder name (default: this folder's project)"))
    brief.add_argument("--sessions", type=_positive, default=5, help="how many past sessions (default 5)")
    brief.add_argument("--format", choices=("text", "json"), default="text")
    brief.add_argument("--hook", action="store_true", help=(
        "as Claude Code's SessionStart hook: its JSON on stdin, its hook output on stdout; never fails"))

    lessons = sub.add_parser("lessons", help=(
        "whether the waste the brief names fell after retrod started naming it (per pattern and lesson)"))
    lessons.dash_values = ("--project",)
    lessons.add_argument("--project", help=(
        "a project folder's path, or part of its Claude Code folder name (default: this folder's project)"))
    lessons.add_argument("--json", action="store_true")

    hooks = sub.add_parser("hooks", help="the Claude Code hooks: each session starts from `retrod brief`; opt-in,"
                                         " each completed task of Claude's plan asks for its verdict")
    hooks_actions = hooks.add_subparsers(dest="action", required=True, metavar="ACTION")
    hooks_install = hooks_actions.add_parser(
        "install", help="add the SessionStart hook to Claude Code's settings (backed up first)")
    hooks_install.add_argument("--task-completed", action="store_true", help=(
        "also the TaskCompleted hook: when a task of Claude's plan completes, its figures and a request for"
        " its verdict (`phase log --from-task N`) reach Claude on its next turn"))
    hooks_actions.add_parser("uninstall", help="remove retrod's hooks from Claude Code's settings, nothing else")
    hooks_actions.add_parser("task-completed", help=(
        "as Claude Code's TaskCompleted hook: its JSON on stdin, the task's figures on stdout; never fails"))

    trends = sub.add_parser("trends", help="sessions, cost, time and efficiency per day, week or month, and the change")
    trends.dash_values = ("--project",)
    trends.add_argument("--by", choices=("day", "week", "month"), default="week", help="the period (default week)")
    trends.add_argument("--project", help=(
        "a project folder's path (or a folder inside one), or part of its Claude Code folder name"))
    trends.add_argument("--since", help="sessions started at or after this date or time (no offset: in --tz)")
    split = trends.add_mutually_exclusive_group()
    split.add_argument("--by-project", action="store_true", help="each period's figures per project too")
    split.add_argument("--by-model", action="store_true", help="each period's tokens and cost per model too")
    split.add_argument("--by-machine", action="store_true",
                       help="each period's figures per machine (RETROD_HOST_ID) whose files hold them too")
    trends.add_argument("--tz", metavar="ZONE", help="the time zone periods are cut in (default: the local one)")
    _member_option(trends)
    trends.add_argument("--json", action="store_true")

    sub.add_parser("mcp", help="serve retrod's tools to Claude Code over MCP (stdio; needs retrod[mcp])")

    web = sub.add_parser("ui", help="open the daemon's web dashboard (prints its address; needs retrod[ui])")
    web.add_argument("--no-open", action="store_true", help="print the address only; open no browser")

    team = sub.add_parser("team", help="share one PostgreSQL among a team: print (or apply) roles and policies")
    team.add_argument("--member", action="append", default=[], metavar="ROLE",
                      help="a login role whose daemon writes its own rows (repeatable)")
    team.add_argument("--reader", action="append", default=[], metavar="ROLE",
                      help="a login role that reads everyone's rows (repeatable)")
    team.add_argument("--apply", action="store_true",
                      help="run it on RETROD_DATABASE_URL, as the role that owns retrod's tables")

    status = sub.add_parser("status", help="is the daemon running, how far behind, how healthy")
    status.add_argument("--json", action="store_true")
    doctor = sub.add_parser("doctor", help="check configuration, folders, database, watcher limits, service")
    doctor.add_argument("--strict", action="store_true", help="warnings (no service installed) fail too")

    service = sub.add_parser("service", help="run retrod as a systemd (Linux) or launchd (macOS) user service")
    service_actions = service.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (("install", "write the unit/agent, enable and start it"),
                         ("uninstall", "stop, disable and remove it"), ("status", "is it installed and running")):
        one = service_actions.add_parser(action, help=text)
        if action != "status":
            one.add_argument("--dry-run", action="store_true", help="print what would be done, do nothing")

    statusline = sub.add_parser(
        "statusline", help="Claude Code's status line: the session's cost, phase, efficiency and today's cost",
        description=("Reads the JSON Claude Code hands its status line on stdin and prints at most two lines "
                     "(COLUMNS wide). `install` puts it into Claude Code's settings."))
    statusline_actions = statusline.add_subparsers(dest="action", metavar="ACTION")
    statusline_install = statusline_actions.add_parser(
        "install", help="run it as Claude Code's status line (~/.claude/settings.json, or CLAUDE_CONFIG_DIR's)")
    statusline_install.add_argument("--force", action="store_true",
                                    help="replace a status line that is not retrod's (uninstall puts it back)")
    statusline_actions.add_parser("uninstall", help="take it out, putting back the status line it replaced")

    skills = sub.add_parser("skills", help="the Claude Code skills that log phases and present reports")
    skills_install = skills.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser(
        "install", help="copy the skills into ~/.claude/skills")
    skills_install.add_argument("--dir", type=Path, help="skills folder (default: ~/.claude/skills)")
    skills_install.add_argument("--force", action="store_true", help="overwrite changed copies")
    skills_install.add_argument("--mcp", action="store_true",
                                help="also register `retrod mcp` with Claude Code (runs the line it prints)")
    return top


class _Parser(argparse.ArgumentParser):
    """argparse, except that the options named in `dash_values` also take a value that starts
    with "-" after a space (`--project -home-me-app`): argparse reads such a value as an option
    and refuses the command ("expected one argument"). `--project=-home-me-app` works either way.
    A value that is one of the parser's own options (`--project --json`) is left alone, so that
    a forgotten value is still refused. Subcommands' parsers are of this class too."""

    dash_values: tuple[str, ...] = ()

    # typeshed declares this overloaded; one signature covers both
    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        if args is not None and self.dash_values:
            args = self._joined(list(args))
        return super().parse_known_args(args, namespace)

    def _joined(self, args: list[str]) -> list[str]:
        out: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":  # the rest is positional
                return out + args[i:]
            value = args[i + 1] if i + 1 < len(args) else None
            if (arg in self.dash_values and value is not None and value.startswith("-")
                    and not value.startswith("--") and value not in self._option_string_actions):
                out.append(f"{arg}={value}")
                i += 2
            else:
                out.append(arg)
                i += 1
        return out


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


class _Version(argparse.Action):
    """argparse's own needs the text up front: importlib.metadata would load for every command."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from importlib.metadata import version

        print(f"retrod {version('retrod')}")
        parser.exit()


CURRENT = ("default: the session this runs in (CLAUDE_CODE_SESSION_ID, the Claude Code process above, "
           "else the newest transcript of this folder's project)")


class _Session(argparse.Action):
    """The session, whether given as the positional argument or as `--session` (every command
    that takes one takes `--session`, so that one form works everywhere): given both ways, the
    two must agree. A blank value counts as not given (a skill's variable that came out empty)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        given, value = getattr(namespace, self.dest, None), str(values)
        if given and given.strip() and value.strip() and given != value:
            parser.error(f"the session is given twice ({given!r} and {value!r}); give it once")
        if value.strip() or not given:
            setattr(namespace, self.dest, value)


def _session_argument(parser: argparse.ArgumentParser) -> None:
    # No default of its own: an absent positional must not undo a --session given before it.
    parser.add_argument("session", nargs="?", action=_Session, default=argparse.SUPPRESS,
                        help=f"session uuid or a unique prefix of one (or --session); {CURRENT}")


def _session_option(parser: argparse.ArgumentParser, allow_unknown: bool = False) -> None:
    parser.add_argument("--session", action=_Session, help=f"uuid or prefix; {CURRENT}")
    if allow_unknown:
        parser.add_argument("--allow-unknown", action="store_true",
                            help="accept a uuid that has no transcript yet")


def _member_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--member", metavar="ROLE",
                        help="a team's reader: the member whose session it is, when several hold its id")


def _verdict_and_notes(parser: argparse.ArgumentParser, required: bool = True,
                       verdict_help: str = "one of: {}") -> None:
    parser.add_argument("--verdict", required=required, help=verdict_help.format(", ".join(VERDICTS)))
    parser.add_argument("--actions", help="what was done")
    parser.add_argument("--subagents", help="subagents used")
    parser.add_argument("--useful-info", help="facts worth keeping")
    parser.add_argument("--lessons", help="what to do differently next time")
    parser.add_argument("--notes")
