"""The daemon's report socket against a client that is not retrod's: a request too big, one never
sent, a flood of connections (issue 28, item 10). The server runs in a process of its own, so
that its memory and threads are its alone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retrod.fastpath.client import MAX_REQUEST, SOCKET_NAME
from retrod.fastpath.server import CONNECTIONS_MAX

SERVE = """
import pathlib, sys
from retrod.fastpath import server
from retrod.settings import Settings
server.REQUEST_WAIT_S = float(sys.argv[2])
with server.ReportServer(None, Settings(data_dir=pathlib.Path(sys.argv[1]))):
    print("ready", flush=True)
    sys.stdin.read()
"""


@contextmanager
def report_server(request_wait_s: float) -> Iterator[tuple[Path, int]]:
    """A report server (no database behind it: nothing here gets as far as a question), its
    socket and its process id."""
    data = Path(tempfile.mkdtemp(prefix="retrod-sock-", dir="/tmp"))  # a short socket path
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    served = subprocess.Popen([sys.executable, "-c", SERVE, str(data), str(request_wait_s)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert served.stdout is not None and served.stdout.readline() == "ready\n"
        yield data / SOCKET_NAME, served.pid
    finally:
        served.kill()
        served.wait()
        for leftover in data.iterdir():
            leftover.unlink()
        data.rmdir()


def _status(pid: int, field: str) -> int:
    """A figure of /proc/<pid>/status (VmHWM: the most memory it ever held, in kB; Threads)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _connect(path: Path, timeout_s: float) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(path))  # blocking: with a timeout, a full listen queue fails at once (EAGAIN)
    conn.settimeout(timeout_s)
    return conn


def _closed_by_the_server(conn: socket.socket) -> bool:
    """Whether the server let the connection go (within the socket's timeout) without a reply."""
    try:
        return conn.recv(1 << 16) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_huge_request_is_closed_unread_and_the_daemon_does_not_grow() -> None:
    payload = b"x" * (50 << 20)  # 50 MB, no separator, never ended
    with report_server(request_wait_s=30) as (path, pid):
        peak_before = _status(pid, "VmHWM")
        conn = _connect(path, 30)
        try:
            try:
                conn.sendall(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed under it: what should happen
            assert _closed_by_the_server(conn)
        finally:
            conn.close()
        grown_kb = _status(pid, "VmHWM") - peak_before
        assert grown_kb * 1024 < MAX_REQUEST + (8 << 20), grown_kb


def test_a_connection_that_sends_nothing_or_a_byte_at_a_time_is_let_go() -> None:
    wait_s = 1.0
    with report_server(request_wait_s=wait_s) as (path, _pid):
        silent = _connect(path, wait_s + 10)
        dripping = _connect(path, 0.2)
        try:
            closed = False
            for _ in range(100):  # 20 s of a byte each 0.2 s: far past the bound
                try:
                    dripping.send(b"c")
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                if _closed_by_the_server(dripping):
                    closed = True
                    break
            assert closed
            assert _closed_by_the_server(silent)
        finally:
            silent.close()
            dripping.close()


def test_a_flood_of_connections_starts_a_bounded_number_of_threads() -> None:
    with report_server(request_wait_s=60) as (path, pid):
        threads_before = _status(pid, "Threads")
        flood = [_connect(path, 10) for _ in range(CONNECTIONS_MAX * 3)]
        try:
            # the server takes them in order: those past the limit are let go at once, unserved
            assert all(_closed_by_the_server(conn) for conn in flood[CONNECTIONS_MAX:])
            assert _status(pid, "Threads") <= threads_before + CONNECTIONS_MAX
        finally:
            for conn in flood:
                conn.close()
