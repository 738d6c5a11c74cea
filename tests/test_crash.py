"""Crash safety: SIGKILL a running `retrod run` mid-ingest, restart it, and end with exactly
the numbers of an uninterrupted run (each batch commits its rows with the file's offset)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from conftest import FIXTURES
from helpers import ingest, snapshot

COPIES = 6


def _big_tree(root: Path) -> int:
    """COPIES copies of the fixture tree, under distinct project folders."""
    for i in range(COPIES):
        for slug in FIXTURES.iterdir():
            shutil.copytree(slug, root / f"{slug.name}-copy{i}")
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())  # .jsonl and .meta.json


def _daemon(db_url: str, projects: Path, data_dir: Path, host: str) -> subprocess.Popen:
    env = dict(os.environ, RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects),
               RETROD_DATA_DIR=str(data_dir), RETROD_HOST_ID=host, RETROD_BATCH_BYTES="65536")
    return subprocess.Popen([sys.executable, "-m", "retrod", "run", "--once"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ingested_bytes(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT coalesce(sum(\"offset\"), 0) FROM retrod.files").fetchone()[0]


@pytest.mark.slow
def test_sigkill_mid_ingest_then_restart_equals_uninterrupted(tmp_path: Path, db_url: str, pg_cluster) -> None:
    from conftest import fresh_database

    projects = tmp_path / "projects"
    total = _big_tree(projects)

    proc = _daemon(db_url, projects, tmp_path / "data", "test-host")
    deadline = time.monotonic() + 60
    while _ingested_bytes(db_url) < total // 10:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    at_kill = _ingested_bytes(db_url)
    assert 0 < at_kill < total, "the kill must land mid-ingest"

    restarted = _daemon(db_url, projects, tmp_path / "data", "test-host")
    assert restarted.wait(timeout=300) == 0, restarted.stderr.read().decode()
    assert _ingested_bytes(db_url) == total

    with fresh_database(pg_cluster) as clean_url:
        ingest(clean_url, [projects])
        got, want = snapshot(db_url), snapshot(clean_url)
        for table in want:
            assert got[table] == want[table], f"retrod.{table} differs"
