"""`retrod statusline`: the session's real figures under Claude's prompt.

Claude Code runs the status line command after each assistant message (debounced 300 ms), with
a JSON object on stdin, and shows what it prints; an update that arrives while the command still
runs cancels it, so a slow command shows nothing. This one therefore starts Python and little
else: the standard library's lightest parts (no json, socket or re module: the C parts beneath
them), asks the running daemon for the figures over its report socket (fastpath/client.py's wire
format, a request whose command is `statusline`), and lays them out (render.py). The daemon brings the
session's files up to date, works the figures out from its precomputed rows and prices them.

Never blank, never a traceback, always exit 0: with no daemon (or one that does not answer in
time) it shows what the JSON alone gives, with a mark saying retrod's figures are missing; it
never starts the private cluster, which takes longer than a status line may. Empty or garbage
stdin gives a minimal line.
"""

from __future__ import annotations

# C modules, not `socket` and `json`: those import enum, selectors and re, milliseconds of a
# command whose whole budget is a few tens of them. _socket is used with plain calls only.
import _socket as socket
import os
import sys
import time

from ..basics.paths import default_data_dir
from ..fastpath.client import SOCKET_NAME, STATUSLINE, encode_request
from . import render

TYPE_CHECKING = False  # typing itself is not imported: it costs this command milliseconds
if TYPE_CHECKING:
    from collections.abc import Mapping

# Longer than any answer of a daemon at work (~10 ms), shorter than Claude Code's patience: a
# daemon that does not answer by then (a long first catch-up holding the database) leaves the
# line to what the JSON alone gives.
TIMEOUT_S = 1.0
MAX_STDIN = 1 << 20  # Claude Code's JSON is a few kB

# Why retrod's figures are missing, longest form first.
NO_DAEMON = ("retrod: no daemon running (retrod run)", "retrod: no daemon", "retrod off")
DECLINED = ("retrod: its daemon serves another database", "retrod: other database", "retrod: other db")
NO_ANSWER = ("retrod: the daemon did not answer in time", "retrod: no answer", "retrod: slow")
FAILED = ("retrod: error (run `retrod statusline` by hand to see it)", "retrod: error", "retrod: err")
NOT_SEEN = ("retrod: no figures of this session yet", "retrod: session not seen", "retrod: not seen")
NO_SESSION = ("retrod: no session id in the status JSON", "retrod: no session id", "retrod: no id")


# ---- JSON without the json module ------------------------------------------------------------

class _Decoding:
    """What _json's scanner reads off its context (json.JSONDecoder's defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity: numbers the callers then refuse as not finite


def loads(text: str) -> object:
    """json.loads by the C scanner that json.loads itself uses; raises ValueError when `text`
    is not one JSON value."""
    try:
        from _json import make_scanner
    except ImportError:  # an interpreter without the C accelerator: the module, slower to load
        return _module_loads(text)
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        # (typeshed types the context as a scanner: any object with json.JSONDecoder's attributes works)
        value, end = make_scanner(_Decoding())(text, start)  # type: ignore[arg-type]
    except StopIteration:
        raise ValueError("not JSON") from None
    except Exception:  # noqa: BLE001 - malformed: the scanner raises json.decoder's error class, which
        # Python 3.11's looks up only once that module is loaded (else a SystemError): the module says why
        return _module_loads(text)
    if text[end:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return value


def _module_loads(text: str) -> object:
    import json

    return json.loads(text)


# ---- Claude Code's JSON -----------------------------------------------------------------------

def read_stdin() -> bytes:
    """Claude Code's JSON; nothing when stdin is a terminal (a person trying the command) or closed."""
    try:
        if sys.stdin is None or os.isatty(0):
            return b""
        return sys.stdin.buffer.read(MAX_STDIN)
    except (OSError, ValueError):
        return b""


def payload_of(data: bytes) -> dict | None:
    """The JSON object on stdin; None for anything else (empty, not UTF-8, not JSON, not an object)."""
    try:
        value = loads(data.decode("utf-8").removeprefix("\ufeff"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _uuid(value: object) -> str | None:
    """A session id as Claude Code writes it (a uuid), lower-case; None for anything else."""
    if not isinstance(value, str) or len(value) != 36:
        return None
    parts = value.split("-")
    if [len(p) for p in parts] != [8, 4, 4, 4, 12] or not all(_hex(p) for p in parts):
        return None
    return value.lower()


def _hex(part: str) -> bool:
    return part.isascii() and all(c in "0123456789abcdefABCDEF" for c in part)


def session_of(payload: dict) -> str | None:
    """`session_id`, else the transcript's name (`<uuid>.jsonl`)."""
    found = _uuid(payload.get("session_id"))
    path = payload.get("transcript_path")
    if found is None and isinstance(path, str) and path.endswith(".jsonl"):
        found = _uuid(path.rpartition("/")[2].removesuffix(".jsonl"))
    return found


def local_day(now: float) -> tuple[int, int]:
    """Today on this machine, [midnight, next midnight), in seconds since the epoch: "today" is
    the user's local day, whatever the daemon's time zone (mktime settles DST and month ends)."""
    t = time.localtime(now)
    start = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))
    end = time.mktime((t.tm_year, t.tm_mon, t.tm_mday + 1, 0, 0, 0, 0, 0, -1))
    return int(start), int(end)


# The status line's figures the daemon keeps (retrod.session_status): request field -> JSON path.
REPORTED = {
    "cc_cost_usd": ("cost", "total_cost_usd"), "cc_duration_ms": ("cost", "total_duration_ms"),
    "cc_api_duration_ms": ("cost", "total_api_duration_ms"),
    "five_hour_pct": ("rate_limits", "five_hour", "used_percentage"),
    "five_hour_resets_at": ("rate_limits", "five_hour", "resets_at"),
    "seven_day_pct": ("rate_limits", "seven_day", "used_percentage"),
    "seven_day_resets_at": ("rate_limits", "seven_day", "resets_at"),
}


def request(payload: dict | None, env: Mapping[str, str], now: float) -> dict[str, str]:
    """What the daemon needs: the session, the local day, the command's own settings (as a
    report's request carries them), and what the status line reported, for it to keep."""
    out = {"command": STATUSLINE}
    session = session_of(payload) if payload is not None else None
    if session:
        out["session"] = session
    out["day_start"], out["day_end"] = (str(t) for t in local_day(now))
    if env.get("RETROD_DATABASE_URL"):
        out["database_url"] = env["RETROD_DATABASE_URL"]
    if env.get("RETROD_AWAY_AFTER_S"):
        out["RETROD_AWAY_AFTER_S"] = env["RETROD_AWAY_AFTER_S"]
    if env.get("RETROD_PRICES"):  # a path: relative to this command's folder, not the daemon's
        out["RETROD_PRICES"] = os.path.abspath(env["RETROD_PRICES"])
    if payload is not None and session:
        transcript = payload.get("transcript_path")
        if isinstance(transcript, str) and transcript.startswith("/"):
            out["transcript_path"] = transcript  # where to look for its new files
        for field, path in REPORTED.items():
            value = render.number(render.get(payload, *path))
            if value is not None:
                if path[-1] == "resets_at" and value > 1e12:  # milliseconds, not seconds
                    value /= 1000
                out[field] = repr(value)
        version = render.text(payload.get("version"))
        if version:
            out["cc_version"] = version
    return {k: v.replace("\0", "") for k, v in out.items()}  # NUL separates the wire format's fields


# ---- the daemon ---------------------------------------------------------------------------------

def ask(fields: dict[str, str], env: Mapping[str, str]) -> tuple[dict | None, tuple[str, ...] | None]:
    """The daemon's figures, or None and why not (one of the marks above)."""
    data_dir = env.get("RETROD_DATA_DIR") or default_data_dir()
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except (OSError, AttributeError):
        return None, NO_DAEMON  # no unix sockets here
    try:
        conn.settimeout(TIMEOUT_S)
        try:
            conn.connect(os.path.join(data_dir, SOCKET_NAME))
        except TimeoutError:
            return None, NO_ANSWER
        except OSError:
            return None, NO_DAEMON
        try:
            conn.sendall(encode_request(fields))
            conn.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + TIMEOUT_S
            chunks = []
            while chunk := conn.recv(1 << 16):
                chunks.append(chunk)
                conn.settimeout(max(0.001, deadline - time.monotonic()))
        except TimeoutError:
            return None, NO_ANSWER
        except OSError:
            return None, NO_DAEMON  # it was stopping
    finally:
        conn.close()
    parts = b"".join(chunks).split(b"\0", 2)
    if len(parts) != 3:
        return None, NO_DAEMON
    code, stderr, stdout = parts
    if code == b"declined":
        return None, DECLINED
    if code != b"0":
        _say(stderr)  # Claude Code does not show stderr; a person running it by hand sees why
        return None, FAILED
    try:
        answer = loads(stdout.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None, FAILED
    if not isinstance(answer, dict):
        return None, FAILED
    if "session" in fields and not answer.get("session"):
        return answer, NOT_SEEN
    return answer, None if "session" in fields else NO_SESSION


def _say(message: bytes) -> None:
    try:
        sys.stderr.buffer.write(message)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


# ---- the command ------------------------------------------------------------------------------

def columns(env: Mapping[str, str]) -> int:
    """The width Claude Code gives (COLUMNS, 2.1.153 and later); 80 when it gives none."""
    try:
        value = int(env.get("COLUMNS") or 80)
    except ValueError:
        return 80
    return value if value > 0 else 80


def colour(env: Mapping[str, str]) -> bool:
    """Claude Code renders ANSI colours; NO_COLOR (any value, https://no-color.org) or a dumb
    terminal turns them off."""
    return not env.get("NO_COLOR") and env.get("TERM") != "dumb"


def main() -> int:
    env = os.environ
    try:
        now = time.time()
        payload = payload_of(read_stdin())
        answer, mark = ask(request(payload, env, now), env)
        if payload is None and mark is NO_SESSION:
            mark = None  # no JSON at all: the minimal line says so
        lines = render.render(payload, answer, mark, columns(env), colour(env), now)
        out = "\n".join(lines) + "\n"
    except Exception:  # noqa: BLE001 - a traceback would blank the status line: a line, always
        out = "retrod\n"
    try:
        sys.stdout.buffer.write(out.encode("utf-8", "replace"))
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):  # Claude Code stopped reading: nothing to say
        try:  # and no second error when the interpreter flushes stdout on its way out
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        except OSError:
            pass
    return 0
