"""The `retrod` command: composition only."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

import psycopg
import pydantic
import structlog

from . import log as logging_setup
from . import skills, tracking
from .report import client as report_client
from .report import markdown, model, retrospective
from .report.model import VERDICTS
from .service.cluster import ClusterError
from .settings import Settings
from .store.db import open_pool

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """The user's mistake: exit 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="retrod", description="Where a Claude Code session's tokens and time went.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="catch up on every transcript, then follow them")
    run.add_argument("--once", action="store_true", help="catch up and exit")

    sub.add_parser("migrate", help="create or upgrade the database schema")

    report = sub.add_parser("report", help="a session's retrospective (Markdown, saved; or JSON)")
    report.add_argument("session", help="session uuid or a unique prefix of one")
    report.add_argument("--format", choices=report_client.FORMATS, default="markdown")
    report.add_argument("--no-save", action="store_true", help="print only; save no file")
    report.add_argument("--output", type=Path, help="save to this file instead of RETROD_REPORTS_DIR")
    report.add_argument("--close", action="store_true", help="end open phases and the session now")

    track = sub.add_parser("track", help="start tracking a session").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    start = track.add_parser("start", help="record the session in cc_sessions")
    _session_option(start)
    start.add_argument("--description", help="what the session is for (names the saved report)")

    phase = sub.add_parser("phase", help="log phases of work with their verdicts").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    p_start = phase.add_parser("start", help="open a phase now")
    _session_option(p_start)
    p_start.add_argument("--task", required=True)
    p_start.add_argument("--phase", required=True)
    p_end = phase.add_parser("end", help="close the open phase now, with its verdict")
    _session_option(p_end)
    _verdict_and_notes(p_end)
    p_log = phase.add_parser("log", help="log a whole phase, with its times")
    _session_option(p_log)
    p_log.add_argument("--task", required=True)
    p_log.add_argument("--phase", required=True)
    p_log.add_argument("--start", required=True, help="ISO 8601 time; no offset = local time")
    p_log.add_argument("--end", required=True, help="ISO 8601 time; no offset = local time")
    _verdict_and_notes(p_log)

    phases = sub.add_parser("phases", help="list a session's phases")
    phases.add_argument("session", nargs="?", help="uuid or prefix; default: this directory's session")
    phases.add_argument("--format", choices=("text", "json"), default="text")

    status = sub.add_parser("status", help="is the daemon running, how far behind, how healthy")
    status.add_argument("--json", action="store_true")
    sub.add_parser("doctor", help="check configuration, folders, database, watcher limits, service")

    service = sub.add_parser("service", help="run retrod as a systemd (Linux) or launchd (macOS) user service")
    service_actions = service.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in (("install", "write the unit/agent, enable and start it"),
                         ("uninstall", "stop, disable and remove it"), ("status", "is it installed and running")):
        one = service_actions.add_parser(action, help=text)
        if action != "status":
            one.add_argument("--dry-run", action="store_true", help="print what would be done, do nothing")

    skills = sub.add_parser("skills", help="the Claude Code skills that log phases and present reports")
    skills_install = skills.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser(
        "install", help="copy the skills into ~/.claude/skills")
    skills_install.add_argument("--dir", type=Path, help="skills folder (default: ~/.claude/skills)")
    skills_install.add_argument("--force", action="store_true", help="overwrite changed copies")
    return parser


def _session_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", help="uuid or prefix; default: the newest transcript of this directory")


def _verdict_and_notes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verdict", required=True, help=f"one of: {', '.join(VERDICTS)}")
    parser.add_argument("--actions", help="what was done")
    parser.add_argument("--subagents", help="subagents used")
    parser.add_argument("--useful-info", help="facts worth keeping")
    parser.add_argument("--lessons", help="what to do differently next time")
    parser.add_argument("--notes")


def _notes(args: argparse.Namespace) -> tracking.PhaseNotes:
    return tracking.PhaseNotes(args.actions, args.subagents, args.useful_info, args.lessons, args.notes)


def _cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    from .daemon import install_signal_handlers, run

    stop = threading.Event()
    install_signal_handlers(stop)
    run(settings, once=args.once, stop=stop)
    return EXIT_OK


def _cmd_migrate(settings: Settings, _args: argparse.Namespace) -> int:
    with open_pool(settings, max_size=1):
        pass  # opening the pool migrates
    print("database schema is up to date")
    return EXIT_OK


def _cmd_report(settings: Settings, args: argparse.Namespace) -> int:
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        session = _resolve(conn, args.session)
        report, text = retrospective.produce(  # absolute: "saved" names the same file as the daemon's
            conn, session, close=args.close, output=args.output.absolute() if args.output else None,
            reports_dir=None if args.no_save else settings.reports_dir.absolute(), as_json=args.format == "json")
    print(text, end="")
    if "saved_to" in report:
        print(f"retrod: saved {report['saved_to']}", file=sys.stderr)
    return EXIT_OK


def _resolve(conn, prefix: str) -> str:
    try:
        return model.resolve_session(conn, prefix)
    except model.SessionNotFound as exc:
        raise UsageError(str(exc)) from exc


def _tracked_session(settings: Settings, conn, args: argparse.Namespace) -> str:
    return tracking.resolve(conn, args.session, settings.projects_roots(), Path.cwd())


def _cmd_track(settings: Settings, args: argparse.Namespace) -> int:
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        session = _tracked_session(settings, conn, args)
        row = tracking.track_start(conn, session, args.description)
    print(f"tracking session {session}" + (f": {markdown.cell(row['description'])}" if row["description"] else ""))
    return EXIT_OK


def _cmd_phase(settings: Settings, args: argparse.Namespace) -> int:
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        session = _tracked_session(settings, conn, args)
        if args.action == "start":
            row = tracking.phase_start(conn, session, args.task, args.phase)
            print(f"phase {args.task!r} / {args.phase!r} started at {row['started_at']:%H:%M:%S}")
        elif args.action == "end":
            row = tracking.phase_end(conn, session, args.verdict, _notes(args))
            print(f"phase ended at {row['ended_at']:%H:%M:%S}: {args.verdict}")
        else:
            start, end = tracking.parse_time(args.start), tracking.parse_time(args.end)
            tracking.phase_log(conn, session, args.task, args.phase, start, end, args.verdict, _notes(args))
            print(f"phase {args.task!r} / {args.phase!r} logged: {args.verdict}")
    return EXIT_OK


def _cmd_phases(settings: Settings, args: argparse.Namespace) -> int:
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        session = (_resolve(conn, args.session) if args.session
                   else tracking.current_session(settings.projects_roots(), Path.cwd()))
        rows = tracking.list_phases(conn, session)
    if args.format == "json":
        print(json.dumps(rows, indent=2, default=str))
    elif not rows:
        print(f"no phases logged for {session}")
    for row in rows if args.format == "text" else []:
        end = f"{row['ended_at']:%Y-%m-%d %H:%M}" if row["ended_at"] else "open"
        print(f"{row['started_at']:%Y-%m-%d %H:%M} → {end}  {row['verdict']:<18} "
              f"{markdown.cell(row['task'])} / {markdown.cell(row['phase'])}")
    return EXIT_OK


def _cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from . import health

    report = health.status(settings)
    print(json.dumps(report, indent=2) if args.json else health.render_status(report), end="\n" if args.json else "")
    return EXIT_OK


def _cmd_doctor(settings: Settings, _args: argparse.Namespace) -> int:
    from . import health

    checks = health.doctor(settings)
    print(health.render_doctor(checks), end="")
    return EXIT_OK if all(c.ok for c in checks) else EXIT_FAILURE


def _cmd_service(_settings: Settings, args: argparse.Namespace) -> int:
    from .service import install

    if args.action == "status":
        print(install.status())
        return EXIT_OK
    for line in getattr(install, args.action)(args.dry_run):
        print(line)
    return EXIT_OK


def _cmd_skills(_settings: Settings, args: argparse.Namespace) -> int:
    for line in skills.install(args.dir or skills.default_dir(), force=args.force):
        print(line)
    return EXIT_OK


COMMANDS = {"run": _cmd_run, "migrate": _cmd_migrate, "report": _cmd_report, "track": _cmd_track,
            "phase": _cmd_phase, "phases": _cmd_phases, "skills": _cmd_skills,
            "service": _cmd_service, "status": _cmd_status, "doctor": _cmd_doctor}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings()
        # Short commands print their result; only the daemon narrates at INFO.
        level = settings.log_level if args.command == "run" or args.debug else "WARNING"
        logging_setup.configure(level)
        return COMMANDS[args.command](settings, args)
    except (UsageError, tracking.TrackingError, skills.SkillsError) as exc:
        return _fail(args, exc, EXIT_USAGE)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"RETROD_{'_'.join(map(str, e['loc'])).upper()}={e.get('input')!r}: {e['msg']}" for e in exc.errors())
        return _fail(args, ValueError(problems), EXIT_USAGE, "configuration: ")
    except (ClusterError, psycopg.Error, OSError, RuntimeError) as exc:
        return _fail(args, exc, EXIT_FAILURE)
    except Exception as exc:  # a bug: still one line, the traceback with --debug
        return _fail(args, exc, EXIT_FAILURE, f"internal error ({type(exc).__name__}): ")


def _fail(args: argparse.Namespace, exc: Exception, code: int, prefix: str = "") -> int:
    if args.debug:
        structlog.get_logger("retrod").exception("failed")
    message = " ".join(str(exc).split()) or type(exc).__name__
    print(f"retrod: error: {prefix}{message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
