"""`retrod report` and `retrod brief --hook` answered by the running daemon: their fast path.

Starting Python and importing psycopg and pydantic takes about 0.3 s, most of a report's
whole-process time, while the report itself takes milliseconds. The daemon has them loaded and
a connection open, so the command asks it over a unix socket in the data folder, and does the
work itself only when no daemon answers there. This module imports nothing it can do without
(no argparse, json or pathlib: together ~15 ms, as much as the report itself); anything but the
plain forms of the arguments goes to the full command line, with its usual messages.

Wire format (both ends are retrod's, same version): the request is NUL-separated key, value
pairs, ended by closing the write side, its `command` naming what is asked (report, statusline,
brief); the reply is `<exit code or "declined">\\0<stderr>\\0<stdout>` (report text holds no NUL:
PostgreSQL text cannot; a hook's stdin that holds one is sent as none). The status line's figures
come as JSON on the reply's stdout (statusline/client.py).
"""

from __future__ import annotations

# The C module, not `socket`: that one imports enum and selectors, ~5 ms, a sixth of this
# command's whole time. Only plain calls are used (no context manager: _socket has none).
import _socket as socket
import os
import sys

from ..basics.paths import default_data_dir, default_reports_dir

TYPE_CHECKING = False  # typing itself is not imported: it costs this command milliseconds
if TYPE_CHECKING:
    from collections.abc import Mapping

# Named for the wire format: a client never asks a daemon of another format (one still running
# from before an upgrade), it does the work itself instead. v3: the request carries the command's
# RETROD_PRICES, and the report its tokens by model and cost, which a v2 daemon knows nothing of.
# v4: the member (--member), and a request without RETROD_AWAY_AFTER_S means the default, where a
# v3 daemon used its own setting. v5: the request names its command: `statusline` (issue 21) and
# `brief` (`brief --hook`, issue 22) beside `report`, which a v4 daemon would take for reports.
SOCKET_NAME = "report-v5.sock"
STATUSLINE = "statusline"  # the `command` of the status line's request
TIMEOUT_S = 60.0
# The SessionStart hook: under Claude Code's own limit for it (10 s), so that a daemon that does
# not answer leaves the session without a brief, never waiting on it.
HOOK_TIMEOUT_S = 8.0
MAX_STDIN = 1 << 20  # a hook's JSON is a few hundred bytes
# What the daemon reads of a request: a hook's or a status line's stdin (at most MAX_STDIN) and the
# command's settings and paths. A longer one is no retrod client's: the daemon closes it unread.
MAX_REQUEST = 4 << 20
FLAGS = {"--no-save": "no_save", "--close": "close"}
OPTIONS = {"--format": "format", "--output": "output", "--session": "session", "--member": "member"}
FORMATS = ("markdown", "json")


def parse(argv: list[str]) -> dict[str, str | bool | None] | None:
    """`retrod report`'s arguments (arguments.py declares them for argparse) in their plain forms;
    None for anything else (help, a mistake, an abbreviation, the session given twice), left to
    the full command line."""
    args: dict[str, str | bool | None] = {"session": None, "format": "markdown", "output": None,
                                          "no_save": False, "close": False, "member": None}
    rest = iter(argv)
    for arg in rest:
        name, has_value, value = arg.partition("=")
        if arg in FLAGS:
            args[FLAGS[arg]] = True
        elif name in OPTIONS:
            key = OPTIONS[name]
            given = value if has_value else next(rest, None)
            # argparse takes no value starting with "-" after a space ("expected one argument"); an
            # empty session is not given, as the positional "" is.
            if given is None or not (given or key == "session") or (not has_value and given.startswith("-")):
                return None
            if key == "session" and args["session"] is not None:
                return None  # given twice: argparse says whether that is a mistake
            args[key] = given
        elif arg.startswith("-") or args["session"] is not None:
            return None
        else:
            args["session"] = arg
    return args if args["format"] in FORMATS else None  # no session: the current one


def request(args: dict, env: Mapping[str, str]) -> dict[str, str]:
    """What the daemon needs to do exactly what this command would: paths made absolute here,
    where the user's working folder is, and what tells which session this command runs in
    (its working folder, its process, whose ancestors may be Claude Code, and environment)."""
    out = {"command": "report", "format": args["format"], "pid": str(os.getpid())}
    if args["session"]:
        out["session"] = args["session"]
    try:
        out["cwd"] = os.getcwd()
    except OSError:
        pass  # deleted: the daemon says so if it needs it
    out.update(_settings(env))
    if args["close"]:
        out["close"] = "1"
    if args.get("member"):
        out["member"] = args["member"]
    if args["output"]:
        out["output"] = os.path.abspath(args["output"])
    if not args["no_save"]:
        out["reports_dir"] = os.path.abspath(env.get("RETROD_REPORTS_DIR") or default_reports_dir())
    return out


def _settings(env: Mapping[str, str]) -> dict[str, str]:
    """The command's own settings and what tells which session it runs in, for the daemon."""
    out = {}
    for name in ("CLAUDE_CODE_SESSION_ID", "CLAUDE_CONFIG_DIR", "RETROD_AWAY_AFTER_S"):
        if env.get(name):
            out[name] = env[name]
    if env.get("RETROD_PRICES"):  # a path: relative to this command's working folder, not the daemon's
        out["RETROD_PRICES"] = os.path.abspath(env["RETROD_PRICES"])
    if env.get("RETROD_DATABASE_URL"):
        out["database_url"] = env["RETROD_DATABASE_URL"]
    return out


_stdin: list[bytes] = []  # read once


def hook_input() -> bytes:
    """What Claude Code wrote on the hook's stdin, read once: the fast path and, when no daemon
    answers, the full command line read the same bytes. Nothing when stdin is a terminal."""
    if not _stdin:
        try:
            _stdin.append(b"" if sys.stdin is None or os.isatty(0) else sys.stdin.buffer.read(MAX_STDIN))
        except (OSError, ValueError):  # closed, or not readable
            _stdin.append(b"")
    return _stdin[0]


def parse_brief(argv: list[str]) -> dict[str, str] | None:
    """`retrod brief --hook [--sessions N]` (what the installed hook runs); None for anything
    else, left to the full command line."""
    if argv.count("--hook") != 1:
        return None
    rest = [a for a in argv if a != "--hook"]
    if not rest:
        return {"sessions": ""}
    if len(rest) == 2 and rest[0] == "--sessions" and rest[1].isdigit() and int(rest[1]) > 0:
        return {"sessions": str(int(rest[1]))}
    return None


def brief_main(argv: list[str]) -> int | None:
    """Run `retrod brief --hook` through the daemon; None when no daemon serves it here. Like the
    command, it never fails: exit 0, at worst with nothing printed."""
    args = parse_brief(argv)
    if args is None:
        return None
    payload = hook_input()
    fields = {"command": "brief", "pid": str(os.getpid()), "sessions": args["sessions"],
              "stdin": "" if b"\0" in payload else payload.decode("utf-8", "surrogateescape"), **_settings(os.environ)}
    try:
        fields["cwd"] = os.getcwd()
    except OSError:
        pass
    reply = _exchange(fields, HOOK_TIMEOUT_S)
    if reply is TimeoutError:
        print(f"retrod brief: the daemon did not answer within {HOOK_TIMEOUT_S:.0f} s; no brief this time",
              file=sys.stderr)
        return 0
    return _print(reply) if isinstance(reply, bytes) else None


# The commands the daemon also answers (served.py), with what of the command's environment goes
# with them: the daemon compares it with its own, and declines when it would answer otherwise.
SERVED_COMMANDS = ("sessions", "trends", "brief", "lessons", "phases")
SENT_ENV = ("TZ", "HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_SESSION_ID")


def command_main(argv: list[str]) -> int | None:
    """Run one of SERVED_COMMANDS through the daemon; None when no daemon serves it here, or the
    command must run itself (_runs_itself)."""
    fields = {"command": "cli", "pid": str(os.getpid()), "tty": "1" if os.isatty(1) else "",
              "argc": str(len(argv))}
    fields.update((f"argv.{i}", arg) for i, arg in enumerate(argv))
    if served_argv(fields) is None:  # the daemon's own check of the request
        return None
    for name, value in os.environ.items():
        if name.startswith("RETROD_") or name in SENT_ENV:
            fields[f"env.{name}"] = value
    if os.environ.get("RETROD_PRICES"):  # a path: relative to this command's working folder
        fields["env.RETROD_PRICES"] = os.path.abspath(os.environ["RETROD_PRICES"])
    if os.environ.get("RETROD_DATABASE_URL"):
        fields["database_url"] = os.environ["RETROD_DATABASE_URL"]
    try:
        fields["cwd"] = os.getcwd()
    except OSError:
        pass  # deleted: the command says so if it needs it
    reply = _exchange(fields, TIMEOUT_S)
    if reply is TimeoutError:
        print(f"retrod: error: the daemon did not answer within {TIMEOUT_S:.0f} s", file=sys.stderr)
        return 1
    return _print(reply) if isinstance(reply, bytes) else None


def _runs_itself(arg: str) -> bool:
    """What only the command's own process does right: help (worded for its terminal), --debug
    (its tracebacks), --hook (reads its stdin) — or an abbreviation argparse takes for one."""
    return arg.startswith("-h") or (len(arg) >= 3 and any(option.startswith(arg)
                                                          for option in ("--help", "--debug", "--hook")))


def served_argv(request: Mapping[str, str]) -> list[str] | None:
    """The command line a "cli" request carries (command_main), None when it is not one the
    daemon serves."""
    try:
        argv = [request[f"argv.{i}"] for i in range(int(request.get("argc", "")))]
    except (KeyError, ValueError):
        return None
    if not argv or argv[0] not in SERVED_COMMANDS or any(_runs_itself(arg) for arg in argv):
        return None
    return argv


def encode_request(fields: dict[str, str]) -> bytes:
    return b"\0".join(f"{key}\0{value}".encode("utf-8", "surrogateescape") for key, value in fields.items())


def decode_request(data: bytes) -> dict[str, str]:
    parts = data.decode("utf-8", "surrogateescape").split("\0")
    return dict(zip(parts[::2], parts[1::2], strict=True))


def main(argv: list[str]) -> int | None:
    """Run `retrod report <argv>` through the daemon; None when no daemon serves it here."""
    args = parse(argv)
    if args is None:
        return None
    reply = _exchange(request(args, os.environ), TIMEOUT_S)
    if reply is TimeoutError:
        print(f"retrod: error: the daemon did not answer within {TIMEOUT_S:.0f} s", file=sys.stderr)
        return 1
    return _print(reply) if isinstance(reply, bytes) else None


def _exchange(fields: dict[str, str], timeout_s: float) -> bytes | type[TimeoutError] | None:
    """The daemon's reply to `fields`; TimeoutError when it did not answer in time; None when no
    daemon answers here (the caller does the work)."""
    data_dir = os.environ.get("RETROD_DATA_DIR") or default_data_dir()
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except (OSError, AttributeError):
        return None  # no unix sockets on this system
    try:
        conn.settimeout(timeout_s)
        try:
            conn.connect(os.path.join(data_dir, SOCKET_NAME))
        except OSError:
            return None  # no daemon: the caller does the work
        data = encode_request(fields)
        if len(data) > MAX_REQUEST:
            return None  # the daemon would close it unread: the caller does the work
        try:
            conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
            return b"".join(iter(lambda: conn.recv(1 << 16), b""))
        except TimeoutError:
            return TimeoutError
        except OSError:
            return None  # it was stopping: do the work here (a report is safe to produce twice)
    finally:
        conn.close()


def _print(reply: bytes) -> int | None:
    """Print the daemon's answer; None when it declined or closed without a whole answer."""
    parts = reply.split(b"\0", 2)
    if len(parts) != 3:
        return None  # closed without a whole answer: the caller does the work
    code, stderr, stdout = parts
    if code == b"declined":
        return None  # e.g. it serves another database than this command would use
    try:
        sys.stdout.buffer.write(stdout)
        sys.stdout.flush()
    except OSError as exc:  # e.g. `retrod report … | head`: one line, as the full command says it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        print(f"retrod: error: {exc}", file=sys.stderr)
        return 1
    sys.stderr.buffer.write(stderr)
    return int(code)
