"""The web UI's port cannot stall the daemon (issue 28): a flood of idle connections to it
delays neither a new line's ingest nor the status line's answer over the report socket; the
daemon raises its own descriptor limit at its start."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuids
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from psycopg_pool import ConnectionPool
from uvicorn.protocols.http.h11_impl import H11Protocol

from helpers import output_tokens
from retrod.basics import log as logging_setup
from retrod.fastpath.client import SOCKET_NAME
from retrod.settings import Settings
from retrod.statusline import client as statusline
from retrod.ui import client, connections, secret
from retrod.ui.hub import SUBSCRIBERS_MAX, Full, Hub
from retrod.ui.server import UiServer
from retrod.ui.sessions import SESSIONS_MAX, Sessions
from test_ui import SPOTTER, fixture_db, free_port, get, login, onward, served  # noqa: F401 - fixtures

IDLE_CONNECTIONS = 1100
INGEST_WITHIN_S = 2.0
DESCRIPTORS = 1024  # the common default soft limit, under which 1,100 connections exhausted the daemon


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short folder under /tmp: the report socket's path must fit in ~100 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="rug-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Daemon:
    """`retrod run` as a subprocess, its log lines collected as they come."""

    def __init__(self, env: dict[str, str], limits: tuple[int, int] | None = None) -> None:
        # The limits set by the process itself before retrod loads (preexec_fn is unsafe with threads)
        start = (f"import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_NOFILE, {limits!r}); "
                 "sys.argv = ['retrod', 'run']; runpy.run_module('retrod', run_name='__main__')")
        command = ["-c", start] if limits is not None else ["-m", "retrod", "run"]
        self.process = subprocess.Popen([sys.executable, *command], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        for line in self.process.stderr:  # type: ignore[union-attr]
            self.log.append(line)
            if '"caught up"' in line:
                self.ready.set()

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(30)


def daemon_env(db_url: str, projects: Path, data_dir: Path, port: int) -> dict[str, str]:
    return {**os.environ, "RETROD_DATABASE_URL": db_url, "RETROD_PROJECTS_DIR": str(projects),
            "RETROD_DATA_DIR": str(data_dir), "RETROD_UI_PORT": str(port), "RETROD_SCAN_INTERVAL_S": "3600"}


def idle_connections(port: int, count: int) -> list[socket.socket]:
    """`count` connections to the port that never send a byte, opened 32 at a time with a pause
    between: more at once than the listen queue holds, and the kernel drops their last handshake
    packet until it is sent again seconds later, so that the server would not see them all."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 1000), hard))
    sockets = []
    while len(sockets) < count:
        for _ in range(min(32, count - len(sockets))):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            sockets.append(sock)
        time.sleep(0.1)
    return sockets


def new_line(transcript: Path, output_tokens: int) -> str:
    """A new response of the session's, stamped now: what Claude Code appends as it works."""
    template = next(json.loads(x) for x in transcript.read_text().splitlines()
                    if '"type":"assistant"' in x.replace(" ", "") and '"usage"' in x)
    stamp = uuids.uuid4().hex
    template.update(uuid=str(uuids.uuid4()), requestId=f"req_flood_{stamp}",
                    timestamp=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
    template["message"]["id"] = f"msg_flood_{stamp}"
    template["message"]["usage"]["output_tokens"] = output_tokens
    return json.dumps(template) + "\n"


def test_a_thousand_idle_ui_connections_delay_neither_ingest_nor_the_status_line(
        db_url: str, projects: Path, short_tmp: Path) -> None:
    """Under the common soft and hard limit of 1,024 descriptors (so that raising the limit
    cannot be what saves it), 1,100 connections to the UI port that never send a request: a line
    appended then is stored within 2 s, the status line is answered over the report socket, the
    log stays small, and the UI still answers a request once they are gone."""
    port, data_dir = free_port(), short_tmp / "data"
    env = daemon_env(db_url, projects, data_dir, port)
    daemon = Daemon(env, limits=(DESCRIPTORS, DESCRIPTORS))
    flood: list[socket.socket] = []
    try:
        assert daemon.ready.wait(120), "".join(daemon.log[-20:])
        assert (data_dir / SOCKET_NAME).exists()
        before_flood = sum(map(len, daemon.log))
        flood = idle_connections(port, IDLE_CONNECTIONS)
        time.sleep(1)  # the daemon accepts what it accepts

        transcript = next(projects.glob(f"*/{SPOTTER}.jsonl"))
        stored = output_tokens(db_url, SPOTTER)
        with transcript.open("a") as out:
            out.write(new_line(transcript, 7777))
        written = time.monotonic()
        while output_tokens(db_url, SPOTTER) != stored + 7777:
            assert time.monotonic() - written <= INGEST_WITHIN_S, (
                f"not ingested within {INGEST_WITHIN_S} s under the flood: {''.join(daemon.log[-5:])}")
            time.sleep(0.05)

        statusline_env = {"RETROD_DATA_DIR": str(data_dir), "RETROD_DATABASE_URL": db_url}
        answer, mark = statusline.ask(statusline.request({"session_id": SPOTTER}, statusline_env, time.time()),
                                      statusline_env)
        assert mark is None and answer is not None and answer["session"], (mark, "".join(daemon.log[-5:]))
        assert sum(map(len, daemon.log)) - before_flood < 20_000, "".join(daemon.log[-5:])
        for sock in flood:
            sock.close()
        token = secret.read(data_dir)
        assert token is not None and client.serving(port, token) is not None  # the UI itself still answers
    finally:
        for sock in flood:
            sock.close()
        code = daemon.stop()
    assert code == 0, "".join(daemon.log[-20:])


def test_the_daemon_raises_its_open_files_limit_to_the_hard_one(db_url: str, projects: Path, short_tmp: Path) -> None:
    env = daemon_env(db_url, projects, short_tmp / "data", 0)
    daemon = Daemon(env, limits=(512, 4096))
    try:
        assert daemon.ready.wait(120), "".join(daemon.log[-20:])
        limits = Path(f"/proc/{daemon.process.pid}/limits").read_text()
        assert next(line.split()[3:5] for line in limits.splitlines() if line.startswith("Max open files")) == [
            "4096", "4096"]
    finally:
        code = daemon.stop()
    assert code == 0, "".join(daemon.log[-20:])


# --- the bounds, in this process -------------------------------------------------------------------

@pytest.fixture
def ui(db_url: str, short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[UiServer]:
    """A UI server with small bounds: 8 connections, half a second to send a request head."""
    monkeypatch.setattr(connections, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(connections, "HEAD_TIMEOUT_S", 0.5)
    settings = Settings(database_url=db_url, data_dir=short_tmp / "data", ui_port=free_port())
    with ConnectionPool(db_url, min_size=1, max_size=2) as pool, UiServer(pool, settings) as server:
        assert server.hub is not None, "the UI did not start"
        yield server


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closed the connection within `seconds` (what it sent before, if anything, read)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_a_request_head_not_sent_in_time_closes_the_connection(ui: UiServer) -> None:
    with socket.create_connection(("127.0.0.1", ui.port)) as silent, \
            socket.create_connection(("127.0.0.1", ui.port)) as slow:
        slow.sendall(b"GET /api/ping HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never the blank line
        assert closed_within(silent, 5) and closed_within(slow, 5)
    token = secret.read(ui.settings.data_dir) or ""
    with socket.create_connection(("127.0.0.1", ui.port)) as kept:  # answered, then waits for the next
        kept.sendall(f"GET /api/ping?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\n\r\n".encode())
        assert kept.recv(4096).startswith(b"HTTP/1.1 200")
        assert closed_within(kept, 5 + connections.KEEP_ALIVE_S)


def test_past_the_bound_the_oldest_idle_connection_is_closed(ui: UiServer) -> None:
    opened = [socket.create_connection(("127.0.0.1", ui.port)) for _ in range(12)]
    try:
        assert [closed_within(sock, 0.3) for sock in opened[:4]] == [True] * 4
        assert [closed_within(sock, 0.05) for sock in opened[4:]] == [False] * 8
    finally:
        for sock in opened:
            sock.close()


def unread_pipelines(port: int, count: int, requests: int) -> list[socket.socket]:
    """`count` connections that each send `requests` pipelined requests (no token: each is
    answered 401) with a 4 KB receive buffer, and never read an answer."""
    opened = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.settimeout(2)
        with contextlib.suppress(OSError):  # a full buffer, or the server gone: enough was sent
            sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode() * requests)
        opened.append(sock)
    return opened


def test_connections_that_never_read_their_answers_do_not_lock_the_owner_out(
        ui: UiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers a client never reads fill the socket's buffers, and the server's next answer waits
    for room: a connection held so, in a request, is no longer waiting for its head. As many as
    the bound, without the token, left nothing to close for a new connection (the owner's)."""
    made = H11Protocol.connection_made

    def small_send_buffer(self: H11Protocol, transport: asyncio.Transport) -> None:
        # the kernel's buffers full after a few answers, not after megabytes: the same stall, sooner
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        made(self, transport)

    monkeypatch.setattr(H11Protocol, "connection_made", small_send_buffer)
    token = secret.read(ui.settings.data_dir) or ""
    stalled = unread_pipelines(ui.port, 8, 2_000)
    try:
        time.sleep(3)
        assert get(ui.port, f"/api/ping?token={token}")[0] == 200
    finally:
        for sock in stalled:
            sock.close()


def test_a_failed_accept_is_logged_once_an_interval(capsys: pytest.CaptureFixture[str]) -> None:
    logging_setup.configure("INFO")
    now = [100.0]
    handler = connections.AcceptFailures(every_s=60, clock=lambda: now[0])
    failure = {"message": connections.AcceptFailures.MESSAGE, "exception": OSError(24, "Too many open files")}
    loop = asyncio.new_event_loop()
    try:
        for step in range(300):  # five minutes of one failure a second
            now[0] = 100.0 + step
            handler(loop, failure)
    finally:
        loop.close()
    said = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [s["failures"] for s in said] == [1, 60, 60, 60, 60]
    assert {s["error"] for s in said} == {"Too many open files"}


def test_live_streams_are_bounded() -> None:
    hub = Hub(lambda sessions: "")
    for _ in range(SUBSCRIBERS_MAX):
        hub.subscribe()
    with pytest.raises(Full, match=f"{SUBSCRIBERS_MAX} live pages are open already"):
        hub.subscribe()


# --- the UI's answers to odd input -----------------------------------------------------------------

ODD_VALUES = ("²", "١", "１", "-1", "0", "9" * 5000, "1e3", "nan", " ", "%", "\\", "'", "9999-12-31",
              "0001-01-01", "2026-02-30", "20260211", "2026-W07-3", "Mars/Olympus", "../../etc/passwd", "x" * 10_000)


@pytest.mark.parametrize("route, names", [
    ("/api/sessions", ("page", "per_page", "since", "until", "sort", "order", "project", "model", "q")),
    ("/", ("page", "per_page", "since", "until", "sort", "order")),
    ("/api/trends", ("by", "split", "project", "since", "tz", "member")),
    ("/trends", ("since", "tz", "member")),
    (f"/api/sessions/{SPOTTER}", ("member",)),
])
def test_odd_parameters_are_a_one_line_400_never_a_500(served, route: str, names: tuple[str, ...]) -> None:  # noqa: F811
    server, token = served
    cookie = login(server.port, token)
    for name in names:
        for value in ODD_VALUES:
            status, _headers, body = get(server.port, f"{route}?{urlencode({name: value})}", cookie)
            assert status in (200, 400), (name, value[:20], status, body[:300])
            if status == 400 and route.startswith("/api/"):
                error = json.loads(body)["error"]
                assert "\n" not in error and "Traceback" not in error, (name, value[:20], error)


def test_odd_session_ids_are_a_one_line_refusal(served) -> None:  # noqa: F811
    server, token = served
    for uuid in ("\x00", "x" * 5000, "..", "%", "²", "'"):
        status, _headers, body = get(server.port, f"/api/sessions/{quote(uuid)}?token={token}")
        assert status in (400, 404), (uuid[:20], status, body[:300])
        assert "\n" not in json.loads(body)["error"]


def test_the_token_redirects_only_to_a_page_of_this_server(served) -> None:  # noqa: F811
    server, token = served
    for path, target in (("//evil.example/", "//evil.example/"), ("/\\evil.example", "/%5Cevil.example"),
                         ("/%2F%2Fevil.example", "/%2F%2Fevil.example")):
        status, _headers, body = get(server.port, f"{path}?token={token}")
        assert status == 200, path
        assert onward(body) == f"http://127.0.0.1:{server.port}{target}", path


# --- logins ----------------------------------------------------------------------------------------

def test_a_session_ends_12_hours_after_it_began_and_the_oldest_go_past_the_bound() -> None:
    now = [1000.0]
    sessions = Sessions(clock=lambda: now[0])
    first = sessions.new()
    assert sessions.valid(first) and not sessions.valid("x" * len(first)) and not sessions.valid("")
    now[0] += 12 * 3600 - 1
    assert sessions.valid(first)
    now[0] += 1
    assert not sessions.valid(first)
    many = [sessions.new() for _ in range(SESSIONS_MAX + 1)]
    assert len(set(many)) == len(many)
    assert not sessions.valid(many[0]) and all(sessions.valid(s) for s in many[1:])


def test_a_session_ends_12_hours_of_the_wall_clock_after_it_began_sleep_included(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """While the machine is suspended the monotonic clock stands still, the wall clock does not."""
    wall, monotonic = [1_000_000.0], [500.0]
    monkeypatch.setattr(time, "time", lambda: wall[0])
    monkeypatch.setattr(time, "monotonic", lambda: monotonic[0])
    sessions = Sessions()
    first = sessions.new()
    wall[0] += 12 * 3600 - 1  # a night asleep: only the wall clock went on
    assert sessions.valid(first)
    wall[0] += 1
    assert not sessions.valid(first)


def test_an_unknown_or_ended_session_is_refused_with_one_line(ui: UiServer) -> None:
    status, _headers, body = get(ui.port, "/api/ping", {"Cookie": f"retrod_ui_{ui.port}={'x' * 43}"})
    assert status == 401
    assert body.decode() == ("401: your session has ended (after 12 hours, or the daemon restarted). "
                             "Open the address `retrod ui` prints: it carries your token.\n")


# --- `retrod ui` ----------------------------------------------------------------------------------

def test_retrod_ui_opens_the_browser_on_an_owner_only_file_never_on_the_token(served, tmp_path: Path) -> None:  # noqa: F811
    """A browser's command line is every local user's to read (`ps`): it gets a file's path."""
    server, token = served
    seen = tmp_path / "browser-argv.json"
    browser = tmp_path / "browser"
    browser.write_text(f"#!{sys.executable}\nimport json, sys\nopen({str(seen)!r}, 'w').write(json.dumps(sys.argv))\n")
    browser.chmod(0o755)
    env = {**os.environ, "RETROD_DATA_DIR": str(server.settings.data_dir), "RETROD_UI_PORT": str(server.port),
           "DISPLAY": ":0", "BROWSER": str(browser)}
    done = subprocess.run([sys.executable, "-m", "retrod", "ui"], env=env, capture_output=True, text=True, timeout=120)
    said = ("opened in your browser; if it shows an error (a snap browser cannot read hidden folders), "
            "open the address above\n")  # retrod cannot tell whether it could read the file
    assert (done.returncode, done.stderr) == (0, said), done.stderr
    address = f"http://127.0.0.1:{server.port}/?token={token}"
    assert done.stdout == f"{address}\n"
    argv = json.loads(seen.read_text())
    assert not any(token in arg for arg in argv)
    opener = Path(argv[1].removeprefix("file://"))
    assert argv[1].startswith("file:///") and opener.parent == server.settings.data_dir
    assert opener.stat().st_mode & 0o777 == 0o600
    assert f'url={address}"' in opener.read_text() and f'href="{address}"' in opener.read_text()


def test_retrod_ui_says_to_restart_a_daemon_started_before_the_extra(db_url: str, projects: Path,
                                                                     short_tmp: Path) -> None:
    hidden = short_tmp / "no-extra" / "uvicorn"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('the ui extra is not installed')\n")
    port, data_dir = free_port(), short_tmp / "data"
    env = daemon_env(db_url, projects, data_dir, port)
    daemon = Daemon({**env, "PYTHONPATH": str(hidden.parent)})  # the extra not there yet
    try:
        assert daemon.ready.wait(120), "".join(daemon.log[-20:])
        done = subprocess.run([sys.executable, "-m", "retrod", "ui", "--no-open"], env=env, capture_output=True,
                              text=True, timeout=120)  # installed now
    finally:
        assert daemon.stop() == 0
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (f"retrod: error: the daemon (pid {daemon.process.pid}) does not serve the web UI on "
                           f"127.0.0.1:{port}: restart it (it was started before the `ui` extra was installed, "
                           "with another RETROD_UI_PORT, or its port was taken: its log says which)\n")


# --- the token's file ------------------------------------------------------------------------------

def test_a_link_in_place_of_the_token_file_is_refused_and_its_target_left_alone(short_tmp: Path) -> None:
    """As root, another user could put a link there: following it, the daemon chmodded (and took
    as its token) whatever file it names."""
    data_dir = short_tmp / "data"
    data_dir.mkdir()
    elsewhere = short_tmp / "someone-elses"
    elsewhere.write_text("not a token\n")
    elsewhere.chmod(0o644)
    secret.path(data_dir).symlink_to(elsewhere)
    for attempt in (secret.load_or_create, secret.read):
        with pytest.raises(secret.TokenFileError) as refused:
            attempt(data_dir)
        assert str(refused.value) == (f"{secret.path(data_dir)} is a symbolic link, not the web UI's token file: "
                                      "refused (remove it; the daemon makes a new one at its start)")
    assert elsewhere.stat().st_mode & 0o777 == 0o644 and elsewhere.read_text() == "not a token\n"
    env = {**os.environ, "RETROD_DATA_DIR": str(data_dir), "RETROD_UI_PORT": str(free_port())}
    done = subprocess.run([sys.executable, "-m", "retrod", "ui", "--no-open"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stderr) == (1, f"retrod: error: {refused.value}\n")


def test_a_token_file_that_is_no_plain_file_is_refused_and_a_loose_one_tightened(short_tmp: Path) -> None:
    data_dir = short_tmp / "data"
    data_dir.mkdir()
    os.mkfifo(secret.path(data_dir))  # opened for reading, a FIFO would wait for a writer for ever
    with pytest.raises(secret.TokenFileError, match="is not a plain file: refused"):
        secret.load_or_create(data_dir)
    secret.path(data_dir).unlink()
    token = secret.load_or_create(data_dir)
    assert secret.path(data_dir).stat().st_mode & 0o777 == 0o600 and len(token) >= 40
    secret.path(data_dir).chmod(0o644)
    assert secret.load_or_create(data_dir) == token
    assert secret.path(data_dir).stat().st_mode & 0o777 == 0o600


def test_a_hard_linked_token_file_is_refused_and_its_other_name_left_alone(short_tmp: Path) -> None:
    """As root, another user could give the token file's name to a file of root's (a hard link):
    the daemon would chmod it and print its content as the token."""
    data_dir = short_tmp / "data"
    data_dir.mkdir()
    elsewhere = short_tmp / "roots-own"
    elsewhere.write_text("rootsown\n")
    elsewhere.chmod(0o644)
    os.link(elsewhere, secret.path(data_dir))
    for attempt in (secret.load_or_create, secret.read):
        with pytest.raises(secret.TokenFileError) as refused:
            attempt(data_dir)
        assert str(refused.value) == (f"{secret.path(data_dir)} is a hard link (the file has other names): refused as "
                                      "the web UI's token file (remove it; the daemon makes a new one at its start)")
    assert elsewhere.stat().st_mode & 0o777 == 0o644 and elsewhere.read_text() == "rootsown\n"


def test_a_token_file_holding_no_ascii_token_is_one_line_and_the_daemon_runs_on(
        db_url: str, short_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A byte that is not ASCII raised UnicodeDecodeError, which no one caught: `retrod run` stopped."""
    logging_setup.configure("INFO")
    data_dir = short_tmp / "data"
    data_dir.mkdir()
    secret.path(data_dir).write_bytes(b"caf\xe9-token\n")
    secret.path(data_dir).chmod(0o600)
    refusal = (f"{secret.path(data_dir)} does not hold a token (ASCII letters, digits, - and _): refused as the "
               "web UI's token file (remove it; the daemon makes a new one at its start)")
    with pytest.raises(secret.TokenFileError) as refused:
        secret.read(data_dir)
    assert str(refused.value) == refusal
    settings = Settings(database_url=db_url, data_dir=data_dir, ui_port=free_port())
    with ConnectionPool(db_url, min_size=1, max_size=2) as pool, UiServer(pool, settings) as server:
        assert server.hub is None
    said = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert [(s["event"], s["error"]) for s in said] == [("web UI off: its token file cannot be used", refusal)]
    assert secret.path(data_dir).read_bytes() == b"caf\xe9-token\n"


def test_the_daemon_serves_no_ui_beside_a_linked_token_file_and_says_so(db_url: str, short_tmp: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    logging_setup.configure("INFO")
    data_dir = short_tmp / "data"
    data_dir.mkdir()
    secret.path(data_dir).symlink_to(short_tmp / "anything")
    settings = Settings(database_url=db_url, data_dir=data_dir, ui_port=free_port())
    with ConnectionPool(db_url, min_size=1, max_size=2) as pool, UiServer(pool, settings) as server:
        assert server.hub is None
    said = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    refusal = (f"{secret.path(data_dir)} is a symbolic link, not the web UI's token file: refused (remove it; "
               "the daemon makes a new one at its start)")
    assert [(s["event"], s["error"]) for s in said] == [("web UI off: its token file cannot be used", refusal)]


def test_malformed_requests_are_refused_without_a_log_line_each(ui: UiServer, caplog: pytest.LogCaptureFixture) -> None:
    """Anyone can send them, as fast as they like: a line each would fill the log (uvicorn's
    warnings go to the standard library's logging, which prints them on stderr in the daemon)."""
    tls_hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"
    too_long = b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X" * 20_000
    for garbage in (tls_hello, too_long, b"NOT HTTP AT ALL\r\n\r\n") * 20:
        with socket.create_connection(("127.0.0.1", ui.port)) as sock:
            sock.sendall(garbage)
            sock.settimeout(5)
            assert sock.recv(4096).startswith(b"HTTP/1.1 400")
    assert [r.getMessage() for r in caplog.records] == []
