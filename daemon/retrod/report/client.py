"""`retrod report` answered by the running daemon: the command's fast path, standard library only.

Starting Python and importing psycopg and pydantic takes about 0.3 s, most of a report's
whole-process time, while the report itself takes milliseconds. The daemon has them loaded and
a connection open, so the command asks it over a unix socket in the data folder, and does the
work itself only when no daemon answers there.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

from ..paths import default_data_dir, default_reports_dir

SOCKET_NAME = "report.sock"
TIMEOUT_S = 60.0


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="session uuid or a unique prefix of one")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--no-save", action="store_true", help="print only; save no file")
    parser.add_argument("--output", type=Path, help="save to this file instead of RETROD_REPORTS_DIR")
    parser.add_argument("--close", action="store_true", help="end open phases and the session now")


def request(args: argparse.Namespace, reports_dir: Path) -> dict:
    """What the daemon needs to do exactly what this command would; paths made absolute here,
    where the user's working folder is."""
    return {"session": args.session, "format": args.format, "close": args.close,
            "output": str(args.output.absolute()) if args.output else None,
            "reports_dir": None if args.no_save else str(reports_dir.absolute()),
            "database_url": os.environ.get("RETROD_DATABASE_URL") or None}


def main(argv: list[str]) -> int | None:
    """Run `retrod report <argv>` through the daemon; None when no daemon serves it here."""
    parser = argparse.ArgumentParser(prog="retrod report", description="a session's retrospective")
    add_report_arguments(parser)
    args = parser.parse_args(argv)
    data_dir = Path(os.environ.get("RETROD_DATA_DIR") or default_data_dir())
    reports_dir = Path(os.environ.get("RETROD_REPORTS_DIR") or default_reports_dir())
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None  # no unix sockets here
    with conn:
        conn.settimeout(TIMEOUT_S)
        try:
            conn.connect(str(data_dir / SOCKET_NAME))
        except OSError:
            return None  # no daemon: the caller does the work
        try:
            conn.sendall(json.dumps(request(args, reports_dir)).encode() + b"\n")
            reply = json.loads(b"".join(iter(lambda: conn.recv(1 << 16), b"")))
        except (OSError, ValueError) as exc:
            print(f"retrod: error: the daemon did not answer the report request: {exc}", file=sys.stderr)
            return 1
    if "declined" in reply:
        return None  # e.g. it serves another database than this command would use
    sys.stdout.write(reply["stdout"])
    sys.stderr.write(reply["stderr"])
    return reply["exit"]
