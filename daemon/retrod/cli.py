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
from . import resolve, skills, tracking
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
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="catch up on every transcript, then follow them")
    run.add_argument("--once", action="store_true", help="catch up and exit")

    sub.add_parser("migrate", help="create or upgrade the database schema")

    report = sub.add_parser("report", help="a session's retrospective (Markdown, saved; or JSON)")
    report.add_argument("session", nargs="?", help=f"session uuid or a unique prefix of one; {CURRENT}")
    report.add_argument("--format", choices=report_client.FORMATS, default="markdown")
    report.add_argument("--no-save", action="store_true", help="print only; save no file")
    report.add_argument("--output", type=Path, help="save to this file instead of RETROD_REPORTS_DIR")
    report.add_argument("--close", action="store_true", help="end open phases and the session now")

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
    p_log = phase.add_parser("log", help="log a whole phase, with its times")
    _session_option(p_log, allow_unknown=True)
    p_log.add_argument("--task", required=True)
    p_log.add_argument("--phase", required=True)
    p_log.add_argument("--start", required=True, help="ISO 8601 time; no offset = local time")
    p_log.add_argument("--end", required=True, help="ISO 8601 time; no offset = local time")
    _verdict_and_notes(p_log)

    phases = sub.add_parser("phases", help="list a session's phases")
    phases.add_argument("session", nargs="?", help=f"uuid or prefix; {CURRENT}")
    phases.add_argument("--format", choices=("text", "json"), default="text")

    listing = sub.add_parser("sessions", help="recent sessions across projects, newest first")
    listing.add_argument("--project", help="a project folder's path, or part of its Claude Code folder name")
    listing.add_argument("--since", help="started at or after this date or time (no offset = local time)")
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--json", action="store_true")

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

    skills = sub.add_parser("skills", help="the Claude Code skills that log phases and present reports")
    skills_install = skills.add_subparsers(dest="action", required=True, metavar="ACTION").add_parser(
        "install", help="copy the skills into ~/.claude/skills")
    skills_install.add_argument("--dir", type=Path, help="skills folder (default: ~/.claude/skills)")
    skills_install.add_argument("--force", action="store_true", help="overwrite changed copies")
    return parser


class _Version(argparse.Action):
    """argparse's own needs the text up front: importlib.metadata would load for every command."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from importlib.metadata import version

        print(f"retrod {version('retrod')}")
        parser.exit()


CURRENT = ("default: the session this runs in (CLAUDE_CODE_SESSION_ID, the Claude Code process above, "
           "else the newest transcript of this folder's project)")


def _session_option(parser: argparse.ArgumentParser, allow_unknown: bool = False) -> None:
    parser.add_argument("--session", help=f"uuid or prefix; {CURRENT}")
    if allow_unknown:
        parser.add_argument("--allow-unknown", action="store_true",
                            help="accept a uuid that has no transcript yet")


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
    from .ingest import Ingester  # the parser and fold: only a report reads transcripts
    from .store.store import Store

    output = args.output.absolute() if args.output else None  # absolute: "saved" names the daemon's file too
    retrospective.check_output(output)
    with open_pool(settings, max_size=3) as pool:
        with pool.connection() as conn:
            session = _session(settings, conn, args.session)
        Ingester(Store(pool, settings.host_id), settings.projects_roots(), settings.batch_bytes).refresh(session)
        with pool.connection() as conn:
            report, text = retrospective.produce(
                conn, session, close=args.close, output=output, as_json=args.format == "json",
                reports_dir=None if args.no_save else settings.reports_dir.absolute(),
                away_after_s=settings.away_after_s)
    print(text, end="")
    if "saved_to" in report:
        print(f"retrod: saved {report['saved_to']}", file=sys.stderr)
    return EXIT_OK


def _session(settings: Settings, conn, given: str | None, allow_unknown: bool = False) -> str:
    """The session the command means (resolve.py decides); says which rule found it."""
    found = resolve.resolve(given, roots=settings.projects_roots(), known=lambda p: model.known_sessions(conn, p),
                            allow_unknown=allow_unknown)
    if not found.explicit:
        print(f"retrod: session {found.uuid} ({found.rule})", file=sys.stderr)
    return found.uuid


def _tracked_session(settings: Settings, conn, args: argparse.Namespace) -> str:
    return _session(settings, conn, args.session, getattr(args, "allow_unknown", False))


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"retrod: warning: {warning}", file=sys.stderr)


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
            _warn(row["warnings"])
            print(f"phase {args.task!r} / {args.phase!r} started at {tracking.local(row['started_at'])}")
        elif args.action == "end":
            row = tracking.phase_end(conn, session, args.verdict, _notes(args))
            print(f"phase ended at {tracking.local(row['ended_at'])}: {args.verdict}")
        else:
            start, end = tracking.parse_time(args.start), tracking.parse_time(args.end)
            row = tracking.phase_log(conn, session, args.task, args.phase, start, end, args.verdict, _notes(args))
            _warn(row["warnings"])
            print(f"phase {args.task!r} / {args.phase!r} logged, {tracking.local(start)} → {tracking.local(end)}:"
                  f" {args.verdict}")
    return EXIT_OK


def _cmd_phases(settings: Settings, args: argparse.Namespace) -> int:
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        session = _session(settings, conn, args.session)
        rows = tracking.list_phases(conn, session)
    if args.format == "json":
        print(_json(rows))
    elif not rows:
        print(f"no phases logged for {session}")
    for n, row in enumerate(rows if args.format == "text" else [], 1):
        end = tracking.local(row["ended_at"]) if row["ended_at"] else "open"
        print(f"{n}. {tracking.local(row['started_at'])} → {end}  {row['verdict']:<18} "
              f"{markdown.cell(row['task'])} / {markdown.cell(row['phase'])}")
    return EXIT_OK


def _cmd_sessions(settings: Settings, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    since = tracking.parse_time(args.since) if args.since else None
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        rows = tracking.recent_sessions(conn, project=args.project, since=since, limit=args.limit)
    if args.json:
        print(_json(rows))
        return EXIT_OK
    if not rows:
        print("no sessions" + (" match" if args.project or args.since else " yet"))
    for row in rows:
        start = tracking.local(row["started_at"])[:16] if row["started_at"] else "undated"
        tracked = f"{row['phases']} phases  {markdown.cell(row['description'] or '')}" if row["tracked"] else ""
        print(f"{row['uuid']}  {start:<16}  {markdown.duration(row['wall_s']):>8}  "
              f"{row['total_tokens']:>13,} tok  {row['requests']:>5} req  {row['project_slug']}  {tracked}".rstrip())
    return EXIT_OK


def _json(rows: list[dict]) -> str:
    """Times as the report's JSON writes them (ISO 8601, UTC)."""
    return json.dumps(rows, indent=2, default=lambda v: v.isoformat() if hasattr(v, "isoformat") else str(v))


def _cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from . import health

    report = health.status(settings)
    print(json.dumps(report, indent=2) if args.json else health.render_status(report), end="\n" if args.json else "")
    return EXIT_OK


def _cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from . import health

    checks = health.doctor(settings)
    print(health.render_doctor(checks), end="")
    failing = ("fail", "warn") if args.strict else ("fail",)
    return EXIT_FAILURE if any(c.level in failing for c in checks) else EXIT_OK


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
            "phase": _cmd_phase, "phases": _cmd_phases, "sessions": _cmd_sessions, "skills": _cmd_skills,
            "service": _cmd_service, "status": _cmd_status, "doctor": _cmd_doctor}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings()
        # Short commands print their result; only the daemon narrates at INFO.
        level = settings.log_level if args.command == "run" or args.debug else "WARNING"
        logging_setup.configure(level)
        return COMMANDS[args.command](settings, args)
    except (UsageError, tracking.TrackingError, skills.SkillsError, resolve.SessionError,
            retrospective.OutputError) as exc:
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
