"""`retrod run` follows files as they are written, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

NEW = "dddddddd-0000-4000-8000-000000000000"


def _wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _output(db_url: str, session: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT coalesce(sum(output_tokens), 0) FROM retrod.requests WHERE session_uuid = %s",
                           (session,)).fetchone()
        return int(row[0])


def test_live_appends_and_new_sessions_are_ingested(db_url: str, projects: Path, tmp_path: Path) -> None:
    env = dict(os.environ, RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects),
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_SCAN_INTERVAL_S="3600")
    proc = subprocess.Popen([sys.executable, "-m", "retrod.cli", "run"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _output(db_url, "258c7280-ae70-4798-800f-63464d01a85d") > 0)
        session_dir = projects / "-live"
        session_dir.mkdir()
        path = session_dir / f"{NEW}.jsonl"
        line = {"type": "assistant", "sessionId": NEW, "timestamp": "2026-03-01T00:00:00Z",
                "requestId": "req_live", "message": {"id": "msg_live", "usage": {"output_tokens": 5}}}
        path.write_text(json.dumps(line) + "\n")
        _wait_for(lambda: _output(db_url, NEW) == 5)
        # A streaming snapshot of the same request with the final count: replaces, not adds.
        line["message"]["usage"]["output_tokens"] = 42
        with path.open("a") as f:
            f.write(json.dumps(line))  # no newline yet: not read
            f.flush()
            time.sleep(0.5)
            assert _output(db_url, NEW) == 5
            f.write("\n")
        _wait_for(lambda: _output(db_url, NEW) == 42)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    stderr = proc.stderr.read()
    assert code == 0, stderr
