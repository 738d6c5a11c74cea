"""The daemon's side of the fast path (see client.py): one request per connection. It answers
`retrod report` itself; another command's requests go to the function the daemon registered for
it (`retrod statusline`: statusline/served.py; `retrod brief --hook`: brief.answer; the commands
cli/served.py answers), which this room may not import."""

from __future__ import annotations

import math
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import psycopg
import structlog
from psycopg_pool import ConnectionPool

from .. import resolve
from ..basics.errors import UserError
from ..ingest.ingester import Ingester
from ..report import model, retrospective
from ..report.prices import load as load_prices
from ..settings import Settings
from ..store.store import Store
from .client import MAX_REQUEST, SOCKET_NAME, decode_request

log = structlog.get_logger(__name__)

# What one connection may hold (a client sends its request at once and reads the reply as it
# comes; anything else is not a retrod client): the time to send the whole request, the time to
# take the whole reply (sendall's timeout is its total), and the connections served at once, each
# a thread. A silent client also held the daemon's way out, which waits for them all. One over the
# limit is closed at once: its command does the work itself.
REQUEST_WAIT_S = 10.0
REPLY_WAIT_S = 30.0
CONNECTIONS_MAX = 16


Answer = tuple[str, str, str]  # (exit code or "declined", stderr, stdout)


class ReportServer:
    """Serves `retrod report` on `<data_dir>/<SOCKET_NAME>` (owner-only) while the daemon runs,
    and the commands of `others` (command name → what answers its request)."""

    def __init__(self, pool: ConnectionPool, settings: Settings,
                 others: Mapping[str, Callable[[dict[str, str]], Answer]] | None = None,
                 on_commit: Callable[[set[str]], None] | None = None) -> None:
        self.pool = pool
        self.settings = settings
        self.others = dict(others or {})
        self.on_commit = on_commit  # the lines a report reads first reach the live page too
        self.path = settings.data_dir / SOCKET_NAME
        self._server: socketserver.ThreadingUnixStreamServer | None = None

    def __enter__(self) -> ReportServer:
        try:
            self.path.unlink(missing_ok=True)  # left by a daemon that was killed; we hold the lock
            old_umask = os.umask(0o177)  # owner-only from the start; no other thread runs yet
            try:
                self._server = _Server(str(self.path), _Handler, self)
            finally:
                os.umask(old_umask)
        except OSError as exc:  # e.g. a path too long for a unix socket: reports still work, slower
            log.warning("report socket unavailable; `retrod report` will do the work itself",
                        path=str(self.path), error=str(exc))
            return self
        threading.Thread(target=self._server.serve_forever, name="report server", daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self.path.unlink(missing_ok=True)

    def answer(self, request: dict[str, str]) -> Answer:
        """(exit code or "declined", stderr, stdout) of the command asked, as if it had done the
        work itself: for `retrod report`, the same session resolved, its files brought up to date
        first."""
        if request.get("database_url") != self.settings.database_url:
            return "declined", "", ""  # this daemon serves another database
        command = request.get("command", "report")
        if command != "report":
            other = self.others.get(command)
            return other(request) if other is not None else ("declined", "", "")
        return self._report(request)

    def _report(self, request: dict[str, str]) -> Answer:
        away_after_s = away_after_s_of(request)
        if away_after_s is None:
            return "declined", "", ""  # the command's own settings check words the mistake
        try:
            output = Path(request["output"]) if request.get("output") else None
            retrospective.check_output(output)
            # The command's own price file (the client made its path absolute), read for each
            # report: the daemon's environment is not the command's.
            prices = load_prices(request.get("RETROD_PRICES"))
            roots = self.settings.projects_roots()
            with self.pool.connection() as conn:
                found = resolve.resolve(
                    request.get("session"), roots=roots, known=lambda p: model.known_sessions(conn, p),
                    cwd=Path(request["cwd"]) if request.get("cwd") else None, pid=int(request["pid"]),
                    env={k: request[k] for k in (resolve.ENV_VAR, "CLAUDE_CONFIG_DIR") if k in request})
            Ingester(Store(self.pool, self.settings.host_id), roots, self.settings.batch_bytes,
                     on_commit=self.on_commit).refresh(found.uuid)
            with self.pool.connection() as conn:
                report, text = retrospective.produce(
                    conn, found.uuid, close=bool(request.get("close")), output=output,
                    reports_dir=Path(request["reports_dir"]) if request.get("reports_dir") else None,
                    as_json=request.get("format") == "json", away_after_s=away_after_s, prices=prices,
                    member=request.get("member"))
        except UserError as exc:  # the user's to fix (basics/errors.py), worded as the command words it
            return "2", f"retrod: error: {exc.prefix}{one_line(exc)}\n", ""
        except Exception as exc:  # noqa: BLE001 - the command's own one-line error, the daemon goes on
            log.warning("report request failed", error=f"{type(exc).__name__}: {exc}")
            known = isinstance(exc, (psycopg.Error, OSError, RuntimeError))  # as cli.main words them
            prefix = "" if known else f"internal error ({type(exc).__name__}): "
            return "1", f"retrod: error: {prefix}{one_line(exc)}\n", ""
        if "not_saved" in report:  # as the command says it: the report answered, the setting wrong
            return "2", f"{found.said}retrod: error: {report['not_saved']}\n", text
        saved = f"retrod: saved {report['saved_to']}\n" if "saved_to" in report else ""
        return "0", found.said + saved, text

def away_after_s_of(request: dict[str, str]) -> float | None:
    """The command's setting, whoever answers: unset is the default, never the daemon's own;
    None: not a positive number."""
    try:
        away_after_s = float(request.get("RETROD_AWAY_AFTER_S") or model.AWAY_AFTER_S)
    except ValueError:
        return None
    return away_after_s if math.isfinite(away_after_s) and away_after_s > 0 else None


def one_line(exc: Exception) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class _Server(socketserver.ThreadingUnixStreamServer):
    # Closing waits for the requests in hand: they use the pool, which closes after.
    daemon_threads = False
    block_on_close = True

    def __init__(self, path: str, handler: type, reports: ReportServer) -> None:
        super().__init__(path, handler)
        self.reports = reports
        self._slots = threading.BoundedSemaphore(CONNECTIONS_MAX)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # a flood: no thread for it; a command would do the work itself
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Handler(socketserver.BaseRequestHandler):
    server: _Server  # for the type checker: the server this handler is made for
    request: socket.socket

    def handle(self) -> None:
        data = _read_request(self.request)
        if data is None:
            return
        try:
            request = decode_request(data)
        except ValueError:
            return  # not a retrod client
        reply = "\0".join(self.server.reports.answer(request)).encode("utf-8", "surrogateescape")
        self.request.settimeout(REPLY_WAIT_S)  # all of it: a client that reads nothing is let go
        try:
            self.request.sendall(reply)
        except OSError:
            pass  # gone, or not reading: its command says so itself


def _read_request(conn: socket.socket) -> bytes | None:
    """The whole request (the client closes its side after it), read within REQUEST_WAIT_S and
    MAX_REQUEST bytes; None, and the connection let go, past either."""
    deadline = time.monotonic() + REQUEST_WAIT_S
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            conn.settimeout(left)
            chunk = conn.recv(1 << 16)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_REQUEST:
                log.warning("report socket: a request over the size limit, closed unread", limit=MAX_REQUEST)
                return None
            chunks.append(chunk)
    except TimeoutError:
        log.warning("report socket: a request not sent in time, closed", wait_s=REQUEST_WAIT_S)
        return None
    except OSError:
        return None
