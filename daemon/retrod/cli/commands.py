"""The `retrod` command: composition only.

Each command imports what it uses when it runs (a command that prices nothing never loads
genai-prices, one that opens no database never loads psycopg): without a daemon the imports are
most of a short command's time. The daemon, which serves several of them, has them all loaded."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pydantic  # (Settings' own: loaded with it)
import structlog  # (log.py's own: loaded with it)

from ..basics import invocation
from ..basics import log as logging_setup
from ..basics.errors import UserError
from ..basics.json_text import json_text
from ..settings import Settings
from . import arguments

if TYPE_CHECKING:
    import argparse

    from .. import tracking

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _notes(args: argparse.Namespace) -> tracking.PhaseNotes:
    from ..tracking import PhaseNotes

    return PhaseNotes(args.actions, args.subagents, args.useful_info, args.lessons, args.notes)


def _cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    from ..daemon import Stop, install_signal_handlers, run
    from . import served

    stop = Stop()
    install_signal_handlers(stop)
    run(settings, once=args.once, stop=stop, serve=lambda pool, request: served.answer(pool, request, execute))
    return EXIT_OK


def _cmd_migrate(settings: Settings, _args: argparse.Namespace) -> int:
    from ..store.db import open_pool

    with open_pool(settings, max_size=1):
        pass  # opening the pool migrates
    print("database schema is up to date")
    return EXIT_OK


def _cmd_report(settings: Settings, args: argparse.Namespace) -> int:
    from .. import tracking
    from ..ingest.ingester import Ingester  # the parser and fold: only a report reads transcripts
    from ..report import retrospective
    from ..report.prices import load as load_prices
    from ..store.db import open_pool
    from ..store.store import Store

    to_stdout = args.output == STDOUT  # `--output -`: the report on stdout, and no file
    output = args.output.absolute() if args.output and not to_stdout else None  # absolute: "saved" names it
    retrospective.check_output(output)
    verdict, notes = _report_verdict(args)
    # A page is ~80 KB of HTML: a terminal gets the path of the file, a pipe (or `--output -`) the page
    page_saved_only = args.format == "html" and not (to_stdout or args.no_save) and sys.stdout.isatty()
    prices = load_prices(settings.prices)  # a bad price file is refused before any work
    with open_pool(settings, max_size=3) as pool:
        with pool.connection() as conn:
            session = _session(settings, conn, args.session)
            may_write = tracking.may_write(conn)
        if may_write:  # a team's reader reads what the members' daemons wrote, and writes nothing
            Ingester(Store(pool, settings.host_id), settings.projects_roots(), settings.batch_bytes).refresh(session)
        with pool.connection() as conn:
            report, text = retrospective.produce(
                conn, session, close=args.close, output=output, as_json=args.format == "json",
                reports_dir=None if args.no_save or to_stdout else settings.reports_dir.absolute(),
                away_after_s=settings.away_after_s, prices=prices, member=args.member,
                html=_html_page(prices) if args.format == "html" else None, verdict=verdict, notes=notes)
    if page_saved_only and "saved_to" in report:
        print(report["saved_to"])
        return EXIT_OK
    print(text, end="")
    if "saved_to" in report:
        print(f"retrod: saved {report['saved_to']}", file=sys.stderr)
    if "not_saved" in report:  # the setting is the user's mistake; the report is not lost for it
        print(f"retrod: error: {report['not_saved']}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


STDOUT = Path("-")


def _report_verdict(args: argparse.Namespace) -> tuple[str | None, tracking.PhaseNotes | None]:
    """`report --close --verdict V [--lessons …]`: what the open phase ends with."""
    from .. import tracking

    notes = _notes(args)
    if args.verdict is None:
        given = [f"--{name.replace('_', '-')}" for name, text in vars(notes).items() if text is not None]
        if given:
            raise tracking.TrackingError(f"{', '.join(given)} go with --close --verdict VERDICT")
        return None, None
    return args.verdict, notes


def _html_page(prices):
    """`report --format html`: the web UI's session page, its assets inline, as one file."""
    from ..report import timeline
    from ..ui import pages

    def render(conn, report: dict) -> str:
        series = timeline.series(conn, report["session"]["uuid"], prices, report["session"]["member"])
        return pages.session_page({**report, "timeline": series}, standalone=True)
    return render


def _session(settings: Settings, conn, given: str | None, allow_unknown: bool = False) -> str:
    """The session the command means (resolve.py decides); says which rule found it."""
    from .. import resolve
    from ..report import model

    found = resolve.resolve(given, roots=settings.projects_roots(), known=lambda p: model.known_sessions(conn, p),
                            allow_unknown=allow_unknown)
    print(found.said, end="", file=sys.stderr)
    return found.uuid


def _tracked_session(settings: Settings, conn, args: argparse.Namespace) -> str:
    return _session(settings, conn, args.session, getattr(args, "allow_unknown", False))


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"retrod: warning: {warning}", file=sys.stderr)


def _cmd_track(settings: Settings, args: argparse.Namespace) -> int:
    from .. import tracking
    from ..basics.stored_text import quoted
    from ..store.db import open_pool

    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        session = _tracked_session(settings, conn, args)
        row = tracking.track_start(conn, session, args.description)
    print(f"tracking session {session}" + (f": {quoted(row['description'])}" if row["description"] else ""))
    return EXIT_OK


def _cmd_phase(settings: Settings, args: argparse.Namespace) -> int:
    from .. import tracking
    from ..basics.stored_text import quoted
    from ..store.db import open_pool

    if args.action == "log" and args.from_task is not None:
        return _log_task(settings, args)
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        session = _tracked_session(settings, conn, args)
        if args.action == "start":
            row = tracking.phase_start(conn, session, args.task, args.phase)
            _warn(row["warnings"])
            print(f"phase {quoted(args.task)} / {quoted(args.phase)} started at {tracking.local(row['started_at'])}")
        elif args.action == "end":
            row = tracking.phase_end(conn, session, args.verdict, _notes(args))
            if row["ended"]:
                print(f"phase ended at {tracking.local(row['ended_at'])}: {args.verdict}")
            else:  # a phase `report --close` ended without one
                print(f"phase {quoted(row['task'])} / {quoted(row['phase'])}, ended at"
                      f" {tracking.local(row['ended_at'])}, given its verdict: {args.verdict}")
        else:
            if args.task is None or args.start is None or args.end is None:
                raise tracking.TrackingError("phase log needs --task, --start and --end (or --from-task N)")
            start, end = tracking.parse_time(args.start), tracking.parse_time(args.end)
            row = tracking.phase_log(conn, session, args.task, args.phase, start, end, args.verdict, _notes(args))
            _warn(row["warnings"])
            print(f"phase {quoted(args.task)} / {quoted(args.phase)} logged, {tracking.local(start)} →"
                  f" {tracking.local(end)}: {args.verdict}")
    return EXIT_OK


def _log_task(settings: Settings, args: argparse.Namespace) -> int:
    """`phase log --from-task N`: the task's windows as phases (accounting.md §2.9), from the plan as the
    report reads it: the session's transcripts read up to now first."""
    from .. import tracking
    from ..basics.stored_text import quoted
    from ..ingest.ingester import Ingester
    from ..report import model, plan
    from ..store.db import open_pool
    from ..store.store import Store

    if args.start is not None:
        raise tracking.TrackingError("--start cannot be given with --from-task: the task's windows give the times")
    end = None if args.end is None else tracking.parse_time(args.end)
    with open_pool(settings, max_size=3) as pool:
        with pool.connection() as conn:
            session = _tracked_session(settings, conn, args)
            may_write = tracking.may_write(conn)
        if may_write:
            Ingester(Store(pool, settings.host_id), settings.projects_roots(), settings.batch_bytes).refresh(session)
        with pool.connection() as conn:
            task, windows = plan.task_windows(model.plan(conn, session), args.from_task, end)
            name = task.name if args.task is None else args.task
            row = tracking.phase_log_windows(conn, session, name, args.phase, windows, args.verdict, _notes(args))
    _warn(row["warnings"])
    for start, stop in windows:
        print(f"phase {quoted(name)} / {quoted(args.phase)} logged, {tracking.local(start)} → {tracking.local(stop)}:"
              f" {args.verdict}")
    return EXIT_OK


def _cmd_phases(settings: Settings, args: argparse.Namespace) -> int:
    from .. import tracking
    from ..basics.stored_text import quoted
    from ..basics.verdicts import shown
    from ..store.db import open_pool

    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
        session = _session(settings, conn, args.session)
        rows = tracking.list_phases(conn, session, args.member)
    if args.format == "json":
        print(_json(rows))
    elif not rows:
        print(f"no phases logged for {session}")
    for row in rows if args.format == "text" else []:
        end = tracking.local(row["ended_at"]) if row["ended_at"] else "open"
        print(f"{row['number']}. {tracking.local(row['started_at'])} → {end}  {shown(row['verdict']):<18} "
              f"{quoted(row['task'])} / {quoted(row['phase'])}")
    return EXIT_OK


def _cmd_sessions(settings: Settings, args: argparse.Namespace) -> int:
    # (catchup: the parser and fold, the transcripts read first when no daemon runs)
    from .. import resolve, tracking
    from ..basics.format import count
    from ..ingest import catchup
    from ..report import model
    from ..report.prices import load as load_prices
    from ..store.db import open_pool

    prices = load_prices(settings.prices)  # a bad price file is refused before any work
    since = tracking.parse_time(args.since) if args.since else None
    with open_pool(settings, max_size=catchup.POOL_SIZE) as pool:
        note = catchup.catch_up(settings, pool)
        with pool.connection() as conn:
            listing = tracking.recent_sessions(conn, project=args.project, since=since, limit=args.limit,
                                               sort=args.sort)
            costs = model.session_costs(conn, [(r["uuid"], r["member"]) for r in listing["sessions"]], prices)
            if args.json:  # (each listed session's elements read: the text list stays on precomputed rows)
                listing["sessions"] = model.with_cache_waste(conn, listing["sessions"], prices)
    for row in listing["sessions"]:
        row["cost"] = costs[(row["uuid"], row["member"])][1]  # as its report prices it
    _warn([note] if note else [])
    print(resolve.matched_line(args.project, listing.get("projects_matched")), end="", file=sys.stderr)
    if args.json:
        print(_json(listing))
        return EXIT_OK
    rows = listing["sessions"]
    if not rows:
        print("no sessions" + (" match" if args.project or args.since else " yet"))
    else:
        for line in _sessions_table(rows):
            print(line)
    if listing["more"]:
        print(f"… and {count(listing['more'])} more (--limit {args.limit})")
    return EXIT_OK


def _sessions_table(rows: list[dict]) -> list[str]:
    """`retrod sessions`' rows under a header, each column as wide as its widest cell (numbers to
    the right), the member's column only when several members' sessions are listed."""
    from .. import tracking
    from ..basics.format import count, duration
    from ..basics.stored_text import one_line, quoted
    from ..report import markdown

    members = len({row["member"] for row in rows}) > 1  # a team's reader: whose session each is
    header = ["SESSION", *(["MEMBER"] if members else []), "STARTED", "WALL", "COST", "TOKENS", "REQUESTS",
              "CALLS", "EFF", "PROJECT", "PHASES", "DESCRIPTION"]
    right = {"WALL", "COST", "TOKENS", "REQUESTS", "CALLS", "EFF", "PHASES"}
    cells = [[one_line(row["uuid"]), *([one_line(row["member"])] if members else []),
              tracking.local(row["started_at"])[:16] if row["started_at"] else "undated",
              duration(row["wall_s"]), markdown.cost_cell(row["cost"]), count(row["total_tokens"]),
              count(row["requests"]), count(row["tool_calls"]), markdown.efficiency(row), quoted(row["project"]),
              f"{row['phases']}" if row["tracked"] else "", quoted(row["description"]) if row["description"] else ""]
             for row in rows]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    return ["  ".join(cell.rjust(width) if name in right else cell.ljust(width)
                      for name, cell, width in zip(header, line, widths, strict=True)).rstrip()
            for line in [header, *cells]]


def _cmd_trends(settings: Settings, args: argparse.Namespace) -> int:
    # (catchup: the parser and fold, the transcripts read first when no daemon runs)
    from .. import resolve
    from ..history import trends
    from ..ingest import catchup
    from ..report.prices import load as load_prices
    from ..store.db import open_pool

    zone = trends.zone_of(args.tz)
    since = trends.parse_since(args.since, zone) if args.since else None
    prices = load_prices(settings.prices)  # a bad price file is refused before any work
    split = "project" if args.by_project else "model" if args.by_model else "machine" if args.by_machine else None
    with open_pool(settings, max_size=catchup.POOL_SIZE) as pool:
        note = catchup.catch_up(settings, pool)
        with pool.connection() as conn:
            data = trends.trends(conn, by=args.by, project=args.project, since=since, split=split, prices=prices,
                                 tz=zone, member=args.member, away_after_s=settings.away_after_s)
    _warn([note] if note else [])
    print(resolve.matched_line(args.project, data.get("projects_matched")), end="", file=sys.stderr)
    print(json_text(data) if args.json else trends.render(data), end="\n" if args.json else "")
    return EXIT_OK


def _cmd_brief(settings: Settings, args: argparse.Namespace) -> int:
    # (catchup: the parser and fold, the transcripts read first when no daemon runs)
    from ..basics.stored_text import quoted
    from ..history import brief
    from ..ingest import catchup
    from ..report.prices import load as load_prices
    from ..store.db import open_pool

    prices = load_prices(settings.prices)  # a bad price file is refused before any work
    folder = None if args.project else _cwd()
    with open_pool(settings, max_size=catchup.POOL_SIZE) as pool:
        note = catchup.catch_up(settings, pool)
        with pool.connection() as conn:
            data = brief.brief(conn, folder=folder, project=args.project, sessions=args.sessions,
                               exclude=brief.excluded_session(), prices=prices, away_after_s=settings.away_after_s)
    _warn([note] if note else [])
    if args.format == "json":
        print(json_text(data))
    elif data["sessions"]:
        print(brief.render(data), end="")
    else:  # nothing to brief on: nothing on stdout, as the hook prints nothing
        print(f"retrod: no past sessions of {quoted(data['project']) if data['project'] else 'this folder'}"
              " (or a folder above it)", file=sys.stderr)
    return EXIT_OK


def _cmd_lessons(settings: Settings, args: argparse.Namespace) -> int:
    from ..history import lesson_data  # (catchup: the transcripts read first when no daemon runs)
    from ..ingest import catchup
    from ..report.prices import load as load_prices
    from ..store.db import open_pool

    prices = load_prices(settings.prices)  # a bad price file is refused before any work
    folder = None if args.project else _cwd()
    with open_pool(settings, max_size=catchup.POOL_SIZE) as pool:
        note = catchup.catch_up(settings, pool)
        with pool.connection() as conn:
            data = lesson_data.lessons(conn, folder=folder, project=args.project, prices=prices,
                                       away_after_s=settings.away_after_s)
    _warn([note] if note else [])
    print(json_text(data) if args.json else lesson_data.render(data), end="\n" if args.json else "")
    return EXIT_OK


def _cwd() -> Path:
    try:
        return invocation.cwd()
    except OSError:  # the working folder was deleted
        from ..resolve import SessionError

        raise SessionError("the working directory is gone; pass --project") from None


def _hook(args: argparse.Namespace) -> int:
    """`retrod brief --hook`, Claude Code's SessionStart hook, when no daemon answered it: it never
    fails the session it starts. Any problem (no database, bad settings, garbage on stdin) is
    one line on stderr, nothing on stdout, exit 0."""
    from ..fastpath import client
    from ..history import brief
    from ..report.prices import load as load_prices
    from ..store.db import open_pool

    try:
        settings = Settings()
        logging_setup.configure("DEBUG" if args.debug else "WARNING")
        payload = brief.read_payload(client.hook_input())
        prices = load_prices(settings.prices)
        try:
            cwd = Path.cwd()
        except OSError:
            cwd = None
        with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
            out, notes = brief.hook(conn, payload, sessions=args.sessions,
                                    prices=prices, away_after_s=settings.away_after_s, cwd=cwd)
    except Exception as exc:  # noqa: BLE001 - a hook never fails the session it starts
        if args.debug:
            structlog.get_logger("retrod").exception("brief --hook failed")
        print(f"retrod brief: {' '.join(str(exc).split()) or type(exc).__name__}; no brief this time", file=sys.stderr)
        return EXIT_OK
    for note in notes:
        print(f"retrod brief: {note}", file=sys.stderr)
    print(out, end="")
    return EXIT_OK


def _cmd_hooks(_settings: Settings, args: argparse.Namespace) -> int:
    from ..claude_code import hooks

    for line in (hooks.install(task_completed=args.task_completed) if args.action == "install"
                 else hooks.uninstall()):
        print(line)
    return EXIT_OK


def _task_completed_hook(args: argparse.Namespace) -> int:
    """`retrod hooks task-completed`, Claude Code's TaskCompleted hook (opt-in): the session's
    transcripts read up to now, then the finished task's figures on stdout. It never fails the
    session it runs in: any problem is one line on stderr, nothing on stdout, exit 0."""
    from .. import tracking
    from ..fastpath import client
    from ..ingest.ingester import Ingester
    from ..report import task_completed
    from ..report.prices import load as load_prices
    from ..store.db import open_pool
    from ..store.store import Store

    try:
        settings = Settings()
        logging_setup.configure("DEBUG" if args.debug else "WARNING")
        payload = task_completed.read_payload(client.hook_input())
        session = task_completed.session_of(payload)
        if session is None or task_completed.task_of(payload) is None:
            return EXIT_OK  # not a TaskCompleted input retrod can answer: nothing to say
        prices = load_prices(settings.prices)
        with open_pool(settings, max_size=2) as pool:
            with pool.connection() as conn:
                writable = tracking.may_write(conn)
            if writable:  # (a team's reader reads what the members' daemons wrote)
                store = Store(pool, settings.host_id)
                Ingester(store, settings.projects_roots(), settings.batch_bytes).refresh(session)
            with pool.connection() as conn:
                out = task_completed.answer(conn, payload, prices, settings.away_after_s)
    except Exception as exc:  # noqa: BLE001 - a hook never fails the session it runs in
        if args.debug:
            structlog.get_logger("retrod").exception("hooks task-completed failed")
        print(f"retrod hooks task-completed: {' '.join(str(exc).split()) or type(exc).__name__}", file=sys.stderr)
        return EXIT_OK
    print(out, end="")
    return EXIT_OK


def _json(rows: list[dict] | dict) -> str:
    """Instants as the report's JSON writes them (format.instant: RFC 3339 UTC, milliseconds)."""
    from datetime import datetime

    from ..basics.format import instant

    def plain(v: object) -> object:
        if isinstance(v, datetime):
            return instant(v)
        isoformat = getattr(v, "isoformat", None)
        return isoformat() if isoformat else str(v)

    return json_text(rows, default=plain)


def _cmd_status(settings: Settings, args: argparse.Namespace) -> int:
    from .. import health

    report = health.status(settings)
    print(json_text(report) if args.json else health.render_status(report), end="\n" if args.json else "")
    return EXIT_OK


def _cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from .. import health

    checks = health.doctor(settings)
    print(health.render_doctor(checks), end="")
    failing = ("fail", "warn") if args.strict else ("fail",)
    return EXIT_FAILURE if any(c.level in failing for c in checks) else EXIT_OK


def _cmd_team(settings: Settings, args: argparse.Namespace) -> int:
    from ..store import team
    from ..store.db import open_pool

    if not args.apply:
        print(team.script(args.member, args.reader), end="")
        return EXIT_OK
    if settings.database_url is None:
        raise team.TeamError("--apply needs RETROD_DATABASE_URL: the private cluster has one user")
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn:  # opening it migrates
        for line in team.apply(conn, args.member, args.reader):
            print(line)
    return EXIT_OK


def _cmd_service(_settings: Settings, args: argparse.Namespace) -> int:
    from ..service import install

    if args.action == "status":
        print(install.status())
        return EXIT_OK
    for line in getattr(install, args.action)(args.dry_run):
        print(line)
    return EXIT_OK


def _cmd_skills(_settings: Settings, args: argparse.Namespace) -> int:
    from ..claude_code import skills

    for line in skills.install(args.dir or skills.default_dir(), force=args.force, mcp=args.mcp):
        print(line)
    return EXIT_OK


def _cmd_statusline(_settings: Settings, args: argparse.Namespace) -> int:
    """install and uninstall (entry.py runs the status line itself, with any options)."""
    from ..claude_code import statusline as statusline_install

    done = statusline_install.install(args.force) if args.action == "install" else statusline_install.uninstall()
    for line in done:
        print(line)
    return EXIT_OK


def _cmd_mcp(settings: Settings, _args: argparse.Namespace) -> int:
    from .. import mcp  # stdout is the protocol's from here on: nothing else may print to it

    if not mcp.sdk_installed():
        print(f"retrod: error: {mcp.INSTALL_HINT}", file=sys.stderr)
        return EXIT_USAGE
    from ..mcp.server import serve  # the SDK: only now

    return serve(settings)


def _cmd_ui(settings: Settings, args: argparse.Namespace) -> int:
    from .. import ui
    from ..service.daemon_lock import running_daemon
    from ..ui import client, secret

    if not ui.installed():
        raise UiError(ui.INSTALL_HINT)
    if settings.ui_port == 0:
        raise UiError("the web UI is off (RETROD_UI_PORT=0): set RETROD_UI_PORT to a port (default 8377) "
                      "and restart the daemon")
    token = secret.read(settings.data_dir)
    if token is None or client.serving(settings.ui_port, token) is None:
        daemon = running_daemon(settings.data_dir)
        if daemon is not None:  # it runs, without its UI: the extra came after it started (it logged why)
            print(f"retrod: error: the daemon (pid {daemon.get('pid', '?')}) does not serve the web UI on "
                  f"127.0.0.1:{settings.ui_port}: restart it (it was started before the `ui` extra was installed, "
                  "with another RETROD_UI_PORT, or its port was taken: its log says which)", file=sys.stderr)
            return EXIT_FAILURE
        print(f"retrod: error: no daemon serves the web UI on 127.0.0.1:{settings.ui_port} for "
              f"{settings.data_dir}: start it with `retrod run` (or `retrod service install`)", file=sys.stderr)
        return EXIT_FAILURE
    address = secret.url(settings.ui_port, token)
    print(address)
    if not args.no_open:
        opened = _open_browser(settings.data_dir, address)
        # A snap's browser cannot read hidden folders (the data folder): it shows an error, and
        # retrod cannot tell. The address printed above works in it.
        print(OPENED_IN_BROWSER if opened else "no browser here to open: open the address above",
              file=sys.stderr)
    return EXIT_OK


OPENED_IN_BROWSER = ("opened in your browser; if it shows an error (a snap browser cannot read hidden folders), "
                     "open the address above")


def _open_browser(data_dir: Path, address: str) -> bool:
    """A graphical browser only: on Linux without a display, webbrowser would start a text browser
    (lynx, w3m) in this terminal. Opened on the owner-only file that leads to `address`, never on
    the address: a browser's command line is every local user's to read."""
    import os
    import webbrowser

    from ..ui import opener

    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:
        return webbrowser.open(opener.write(data_dir, address).as_uri())
    except webbrowser.Error:
        return False


class UiError(UserError):
    """`retrod ui` cannot work as set up: the user's to fix (exit 2)."""


COMMANDS = {"run": _cmd_run, "migrate": _cmd_migrate, "report": _cmd_report, "track": _cmd_track,
            "phase": _cmd_phase, "phases": _cmd_phases, "sessions": _cmd_sessions, "trends": _cmd_trends,
            "brief": _cmd_brief, "lessons": _cmd_lessons, "hooks": _cmd_hooks, "skills": _cmd_skills, "team": _cmd_team,
            "mcp": _cmd_mcp,
            "statusline": _cmd_statusline, "ui": _cmd_ui, "service": _cmd_service, "status": _cmd_status,
            "doctor": _cmd_doctor}


def main(argv: list[str] | None = None) -> int:
    return execute(arguments.parser().parse_args(argv))


def execute(args: argparse.Namespace, settings: Settings | None = None) -> int:
    """A parsed command line (entry.py parses it first, before this module loads). `settings`:
    the command's, given when the daemon serves it (served.py), which keeps its own logging."""
    if args.command == "brief" and args.hook:
        return _hook(args)
    if args.command == "hooks" and args.action == "task-completed":
        return _task_completed_hook(args)
    try:
        if settings is None:
            settings = Settings()
            # Short commands print their result; only the daemon narrates at INFO.
            level = settings.log_level if args.command == "run" or args.debug else "WARNING"
            logging_setup.configure(level)
        return COMMANDS[args.command](settings, args)
    except UserError as exc:  # the user's to fix, whichever room raised it (basics/errors.py)
        return _fail(args, exc, EXIT_USAGE, exc.prefix)
    except Exception as exc:  # noqa: BLE001 - sorted below; a bug is still one line, the traceback with --debug
        if isinstance(exc, pydantic.ValidationError):
            problems = "; ".join(f"RETROD_{'_'.join(map(str, e['loc'])).upper()}={e.get('input')!r}: {e['msg']}"
                                 for e in exc.errors())
            return _fail(args, ValueError(problems), EXIT_USAGE, "configuration: ")
        if _failure(exc):
            return _fail(args, exc, EXIT_FAILURE)
        return _fail(args, exc, EXIT_FAILURE, f"internal error ({type(exc).__name__}): ")


def _failure(exc: Exception) -> bool:
    """A failure of what the command uses (exit 1, its message as it is), not a bug: the system's
    (OSError), retrod's own (RuntimeError: ClusterError, ServiceError, MigrationRefused …), the
    database's. psycopg's only if loaded: a command that opened no database met none of its errors."""
    psycopg = sys.modules.get("psycopg")
    return isinstance(exc, (OSError, RuntimeError)) or (psycopg is not None and isinstance(exc, psycopg.Error))


def _fail(args: argparse.Namespace, exc: Exception, code: int, prefix: str = "") -> int:
    if args.debug:
        structlog.get_logger("retrod").exception("failed")
    message = " ".join(str(exc).split()) or type(exc).__name__
    print(f"retrod: error: {prefix}{message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
