"""`retrod run` follows files as they are written, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import output_tokens
from retrod.fastpath import client

NEW = "dddddddd-0000-4000-8000-000000000000"


def _wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_live_appends_and_new_sessions_are_ingested(db_url: str, projects: Path, tmp_path: Path) -> None:
    env = dict(os.environ, RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects),
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_SCAN_INTERVAL_S="3600")
    proc = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: output_tokens(db_url, "258c7280-ae70-4798-800f-63464d01a85d") > 0)
        session_dir = projects / "-live"
        session_dir.mkdir()
        path = session_dir / f"{NEW}.jsonl"
        line = {"type": "assistant", "sessionId": NEW, "timestamp": "2026-03-01T00:00:00Z",
                "requestId": "req_live", "message": {"id": "msg_live", "usage": {"output_tokens": 5}}}
        path.write_text(json.dumps(line) + "\n")
        _wait_for(lambda: output_tokens(db_url, NEW) == 5)
        # A streaming snapshot of the same request with the final count: replaces, not adds.
        line["message"]["usage"]["output_tokens"] = 42
        with path.open("a") as f:
            f.write(json.dumps(line))  # no newline yet: not read
            f.flush()
            time.sleep(0.5)
            assert output_tokens(db_url, NEW) == 5
            f.write("\n")
        _wait_for(lambda: output_tokens(db_url, NEW) == 42)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    stderr = proc.stderr.read()
    assert code == 0, stderr


_FAST_REPORT = """
import sys
from retrod.cli.entry import main
code = main(sys.argv[1:])
sys.stderr.write("loaded psycopg\\n" if "psycopg" in sys.modules else "")
sys.exit(code)
"""


def test_report_is_answered_by_the_running_daemon(db_url: str, projects: Path, tmp_path: Path) -> None:
    """`retrod report` asks the daemon over its socket instead of loading psycopg and pydantic:
    the same output, files and exit codes as doing the work itself."""
    env = dict(os.environ, RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects),
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_REPORTS_DIR=str(tmp_path / "reports"))
    session = "258c7280-ae70-4798-800f-63464d01a85d"

    def report(*args: str, fast: bool = True) -> subprocess.CompletedProcess:
        command = [sys.executable, "-c", _FAST_REPORT] if fast else [sys.executable, "-m", "retrod.cli.commands"]
        return subprocess.run([*command, "report", *args], env=env, capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)

    proc = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: output_tokens(db_url, session) > 0 and (tmp_path / "data" / client.SOCKET_NAME).exists())
        served = report(session[:8], "--format", "json", "--output", "out.json")
        assert served.returncode == 0, served.stderr
        assert "loaded psycopg" not in served.stderr  # answered by the daemon
        assert f"saved {tmp_path / 'out.json'}" in served.stderr  # relative to the command's folder
        itself = report(session[:8], "--format", "json", "--no-save", fast=False)
        assert json.loads(served.stdout) == json.loads(itself.stdout)
        assert json.loads((tmp_path / "out.json").read_text()) == json.loads(itself.stdout)
        read_end, write_end = os.pipe()
        os.close(read_end)  # `retrod report … | head` with head already gone
        piped = subprocess.run([sys.executable, "-c", _FAST_REPORT, "report", session, "--no-save"], env=env,
                               stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
        os.close(write_end)
        assert piped.returncode == 1 and piped.stderr == "retrod: error: [Errno 32] Broken pipe\n"
        unknown = report("ffffffff")
        assert unknown.returncode == 2 and "loaded psycopg" not in unknown.stderr
        assert unknown.stderr.startswith("retrod: error: ") and unknown.stderr.count("\n") == 1
        # Another database than the daemon's (the same one, spelled differently): not served.
        env["RETROD_DATABASE_URL"] = db_url + ("&" if "?" in db_url else "?") + "application_name=other"
        other = report(session, "--no-save")
        assert other.returncode == 0 and "loaded psycopg" in other.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, proc.stderr.read()
    assert not (tmp_path / "data" / client.SOCKET_NAME).exists()
    env["RETROD_DATABASE_URL"] = db_url
    after = report(session, "--no-save")  # no daemon: the command does the work itself
    assert after.returncode == 0 and "loaded psycopg" in after.stderr


# A SIGTERM that arrives while the main thread writes a log line: the handler runs inside that
# write, holding the log's lock (structlog's, per file). A handler that logged waited for it
# forever — found as a daemon that never stopped when the UI test sent SIGTERM right after its
# "caught up" line. Run apart, so that a deadlock is a timeout, not a hung suite.
SIGNAL_DURING_A_LOG_LINE = """
import os, signal, sys
import structlog
from structlog._output import _get_lock_for_file
from retrod.basics import log
from retrod.daemon import Stop, install_signal_handlers

log.configure()
stop = Stop()
install_signal_handlers(stop)
with _get_lock_for_file(sys.stderr):  # as PrintLogger.msg holds it while it writes
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):  # the handler runs between bytecodes, here
        if stop.is_set():
            break
print(stop.is_set(), stop.signal)
"""


def test_a_signal_during_a_log_line_still_stops_the_daemon() -> None:
    done = subprocess.run([sys.executable, "-c", SIGNAL_DURING_A_LOG_LINE], capture_output=True, text=True,
                          timeout=30)
    assert (done.returncode, done.stdout) == (0, "True SIGTERM\n"), done.stderr
