"""Behaving as a user service: systemd notifications, graceful stop, staying up."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from conftest import FIXTURES
from helpers import output_tokens
from retrod.service.cluster import Cluster
from retrod.service.notify import notify


def _daemon(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "retrod", "run", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _env(**settings: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "NOTIFY_", "WATCHDOG_"))}
    env.update(settings)
    return env


def test_notify_is_a_no_op_outside_systemd(monkeypatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify("READY=1") is False
    monkeypatch.setenv("NOTIFY_SOCKET", "/nonexistent/socket")
    assert notify("READY=1") is False  # systemd being away never raises


def test_ready_watchdog_and_stopping_reach_the_notify_socket(db_url: str, projects: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="retrod-n-", dir="/tmp"))
    address = str(folder / "notify")
    received: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(0.2)
        env = _env(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects),
                   RETROD_DATA_DIR=str(folder / "data"), NOTIFY_SOCKET=address, WATCHDOG_USEC="2000000")
        proc = _daemon(env)

        def wait_for(field: str) -> None:
            deadline = time.monotonic() + 30
            while not any(field in message.split("\n") for message in received):
                assert time.monotonic() < deadline, (field, received)
                try:
                    received.append(sock.recv(4096).decode())
                except TimeoutError:
                    assert proc.poll() is None, proc.stderr.read()

        try:
            wait_for("READY=1")
            with psycopg.connect(db_url) as conn:  # ready means caught up
                assert conn.execute("SELECT count(*) FROM retrod.files").fetchone()[0] == 67
            received.clear()
            wait_for("WATCHDOG=1")
            proc.send_signal(signal.SIGTERM)
            wait_for("STOPPING=1")
            assert proc.wait(timeout=30) == 0, proc.stderr.read()
        finally:
            proc.kill()
            shutil.rmtree(folder, ignore_errors=True)


def test_sigterm_mid_ingest_exits_0_quickly_and_stops_the_private_cluster(tmp_path: Path) -> None:
    data = Path(tempfile.mkdtemp(prefix="retrod-t-", dir="/tmp"))
    os.chmod(data, 0o711)
    projects = tmp_path / "projects"
    for i in range(6):
        for slug in FIXTURES.iterdir():
            shutil.copytree(slug, projects / f"{slug.name}-{i}")
    env = _env(RETROD_DATA_DIR=str(data / "d"), RETROD_PROJECTS_DIR=str(projects), RETROD_BATCH_BYTES="65536")
    cluster = Cluster(data / "d")
    proc = _daemon(env, "--once")
    try:
        deadline = time.monotonic() + 60
        while not (cluster.is_running() and _ingested(cluster) > 0):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
        assert time.monotonic() - started < 10
        assert not cluster.is_running()
        log = (data / "d" / "postgres.log").read_text()
        assert "database system is shut down" in log  # a clean shutdown, not a crash
        cluster.ensure_running()
        total = sum(p.stat().st_size for p in projects.rglob("*") if p.is_file())
        assert 0 < _ingested(cluster) < total  # it did stop mid-ingest
    finally:
        proc.kill()
        cluster.stop("immediate")
        shutil.rmtree(data, ignore_errors=True)


def _ingested(cluster: Cluster) -> int:
    try:
        with psycopg.connect(cluster.url(), connect_timeout=2) as conn:
            return conn.execute("SELECT coalesce(sum(\"offset\"), 0) FROM retrod.files").fetchone()[0]
    except psycopg.Error:
        return 0


@pytest.mark.slow
def test_database_outage_mid_ingest_ends_with_the_uninterrupted_numbers(pg_cluster, db_url: str,
                                                                        tmp_path: Path) -> None:
    from conftest import fresh_database
    from helpers import ingest, snapshot

    projects = tmp_path / "projects"
    for i in range(4):
        for slug in FIXTURES.iterdir():
            shutil.copytree(slug, projects / f"{slug.name}-{i}")
    total = sum(p.stat().st_size for p in projects.rglob("*") if p.is_file())
    env = _env(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects),
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_BATCH_BYTES="65536")
    proc = _daemon(env)
    try:
        deadline = time.monotonic() + 60
        while _offsets(db_url) < total // 10:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.02)
        pg_cluster.stop("fast")  # the database goes away mid-ingest...
        time.sleep(3)
        assert proc.poll() is None  # ...and the daemon stays up
        pg_cluster.start()
        deadline = time.monotonic() + 120
        while _offsets(db_url) < total:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        pg_cluster.ensure_running()
    stderr = proc.stderr.read()
    assert code == 0, stderr
    assert stderr.count("database unavailable") == 1  # logged once per outage, not per attempt
    with fresh_database(pg_cluster) as clean_url:
        ingest(clean_url, [projects])
        assert snapshot(db_url) == snapshot(clean_url)


def _offsets(db_url: str) -> int:
    try:
        with psycopg.connect(db_url, connect_timeout=2) as conn:
            return conn.execute("SELECT coalesce(sum(\"offset\"), 0) FROM retrod.files").fetchone()[0]
    except psycopg.Error:
        return 0


def test_status_and_doctor(db_url: str, projects: Path, tmp_path: Path) -> None:
    env = _env(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects), RETROD_DATA_DIR=str(tmp_path / "d"),
               HOME=str(tmp_path / "home"))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True,
                              text=True, timeout=60)

    import json

    proc = _daemon(env)
    try:
        deadline = time.monotonic() + 30
        while (s := json.loads(cli("status", "--json").stdout))["lag"]["bytes"] or not s["files"]["tracked"]:
            assert time.monotonic() < deadline, s
            time.sleep(0.2)
        assert s["daemon"]["running"] and s["daemon"]["pid"] == proc.pid
        assert s["database"]["healthy"] and s["files"]["tracked"] == 67
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    path = next(projects.glob("*/258c7280-*.jsonl"))
    with path.open("a") as f:
        f.write('{"type":"user"}\n' * 10)  # written while no daemon runs: behind by 160 bytes
    s = json.loads(cli("status", "--json").stdout)
    assert not s["daemon"]["running"]
    assert s["lag"] == {"bytes": 160, "files": 1, "worst": [{"path": str(path), "bytes": 160}]}
    text = cli("status").stdout
    assert "daemon:    not running" in text and "160 bytes not yet ingested in 1 files" in text

    doctor = subprocess.run([sys.executable, "-m", "retrod", "doctor"], capture_output=True, text=True,
                            env=dict(env, RETROD_PROJECTS_DIR=str(tmp_path / "nowhere")), timeout=60)
    assert doctor.returncode == 1
    assert f"FAIL  projects folder: {tmp_path / 'nowhere'} does not exist" in doctor.stdout
    assert (f"fix: create it (mkdir -p {tmp_path / 'nowhere'}), or fix RETROD_PROJECTS_DIR if it names the wrong"
            " folder") in doctor.stdout
    assert "ok    database:" in doctor.stdout


def test_projects_folder_deleted_and_recreated_under_a_running_daemon(db_url: str, tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    projects.mkdir()
    env = _env(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects), RETROD_DATA_DIR=str(tmp_path / "d"))
    proc = _daemon(env)
    session = "ffffffff-0000-4000-8000-000000000001"
    try:
        time.sleep(2)
        shutil.rmtree(projects)
        time.sleep(2)
        assert proc.poll() is None
        (projects / "-again").mkdir(parents=True)
        (projects / "-again" / f"{session}.jsonl").write_text(
            '{"type":"assistant","requestId":"r","message":{"id":"m","usage":{"output_tokens":9}}}\n')
        deadline = time.monotonic() + 30
        while output_tokens(db_url, session) != 9:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_a_failing_watcher_falls_back_to_polling(db_url: str, tmp_path: Path, monkeypatch) -> None:
    """inotify can be unavailable or out of watches: the daemon polls instead and keeps ingesting."""
    import threading

    import watchfiles

    from retrod import daemon
    from retrod.settings import Settings

    real_watch, modes = watchfiles.watch, []

    def watch(*args, force_polling=None, **kwargs):
        modes.append(force_polling)
        if not force_polling:
            raise OSError("OS file watch limit reached")
        return real_watch(*args, force_polling=force_polling, poll_delay_ms=50, **kwargs)

    monkeypatch.setattr(daemon.watchfiles, "watch", watch)
    projects = tmp_path / "projects"
    (projects / "-p").mkdir(parents=True)
    settings = Settings(database_url=db_url, projects_dir=str(projects), data_dir=tmp_path / "d")
    stop = threading.Event()
    thread = threading.Thread(target=daemon.run, args=(settings, False, stop))
    thread.start()
    session = "ffffffff-0000-4000-8000-000000000002"
    try:
        time.sleep(1)
        (projects / "-p" / f"{session}.jsonl").write_text(
            '{"type":"assistant","requestId":"r","message":{"id":"m2","usage":{"output_tokens":4}}}\n')
        deadline = time.monotonic() + 30
        while output_tokens(db_url, session) != 4:
            assert thread.is_alive() and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert modes[:2] == [None, True]
