"""The `retrod` command: composition only."""

from __future__ import annotations

import argparse
import json
import sys
import threading

import psycopg
import pydantic
import structlog

from . import log as logging_setup
from .report import markdown, model
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

    report = sub.add_parser("report", help="a session's retrospective")
    report.add_argument("session", help="session uuid or a unique prefix of one")
    report.add_argument("--format", choices=("markdown", "json"), default="markdown")
    return parser


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
        try:
            session = model.resolve_session(conn, args.session)
        except model.SessionNotFound as exc:
            raise UsageError(str(exc)) from exc
        report = model.build(conn, session)
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(markdown.render(report), end="")
    return EXIT_OK


COMMANDS = {"run": _cmd_run, "migrate": _cmd_migrate, "report": _cmd_report}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings()
        # Short commands print their result; only the daemon narrates at INFO.
        level = settings.log_level if args.command == "run" or args.debug else "WARNING"
        logging_setup.configure(level)
        return COMMANDS[args.command](settings, args)
    except UsageError as exc:
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
