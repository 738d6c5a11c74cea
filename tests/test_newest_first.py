"""The catch-up reads the newest files first, and a long scan says how far it is: in the log,
and in `retrod status` while the daemon runs (issue 13)."""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from psycopg_pool import ConnectionPool

from helpers import HOST, output_tokens
from retrod import health
from retrod.ingest import progress
from retrod.ingest.ingester import Ingester
from retrod.ingest.progress import PROGRESS_FILE, Progress
from retrod.service.daemon_lock import daemon_lock
from retrod.settings import Settings
from retrod.store.store import Store

NEWEST = "eeeeeeee-0000-4000-8000-000000000013"


@pytest.fixture(autouse=True)
def _info_logged() -> Iterator[None]:
    """capture_logs sees only what the bound logger lets through: another test in the same
    process may have configured structlog at WARNING."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    structlog.configure(**saved)


def _shuffled_times(projects: Path, seed: int = 13) -> list[Path]:
    """Every file gets a distinct modification time, in a random order unlike the walk's; then a
    new small session is written last, as the one a user is about to ask about. Returns the
    files newest first."""
    files = sorted(p for p in projects.rglob("*") if p.is_file())
    random.Random(seed).shuffle(files)
    for age, path in enumerate(files, start=1):
        os.utime(path, ns=(1_700_000_000_000_000_000 - age * 10**9,) * 2)
    session = projects / "-newest" / f"{NEWEST}.jsonl"
    session.parent.mkdir()
    session.write_text(json.dumps({"type": "assistant", "sessionId": NEWEST, "timestamp": "2026-03-01T00:00:00Z",
                                   "requestId": "req_new", "message": {"id": "msg_new",
                                                                       "usage": {"output_tokens": 7}}}) + "\n")
    return [session, *files]


def _recording(store: Store, order: list[str]) -> Store:
    commit = store.commit

    def recorded(batch, bulk=False, lane=None):
        order.extend(p.path for p in batch)
        return commit(batch, bulk, lane)

    store.commit = recorded  # type: ignore[method-assign]
    return store


def test_catch_up_commits_the_newest_files_first(db_url: str, projects: Path) -> None:
    newest_first = [str(p) for p in _shuffled_times(projects)]
    order: list[str] = []
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        stats = Ingester(_recording(Store(pool, HOST), order), [projects], batch_bytes=64 << 10).scan()
    assert stats.failed == 0 and stats.missing == 0
    first_commits = list(dict.fromkeys(order))  # a large file commits chunk by chunk
    assert first_commits == newest_first  # every file, meta files and tool outputs too, in mtime order
    assert first_commits[0].endswith(f"{NEWEST}.jsonl")


def test_a_catch_up_stopped_after_its_first_batch_has_the_newest_session_only(db_url: str, projects: Path) -> None:
    newest_first = _shuffled_times(projects)
    oldest = next(p for p in reversed(newest_first) if p.suffix == ".jsonl" and p.parent.parent == projects)
    order: list[str] = []
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        store = _recording(Store(pool, HOST), order)
        stats = Ingester(store, [projects], batch_bytes=64 << 10, interrupted=lambda: bool(order)).scan()
        assert stats.missing == 0  # a scan cut short marks nothing as gone
        assert output_tokens(db_url, NEWEST) == 7
        assert output_tokens(db_url, oldest.stem) == 0 and oldest.stat().st_size > 0
        # the next scan goes on from there, and gets everything
        Ingester(store, [projects]).scan()
        assert output_tokens(db_url, oldest.stem) > 0


class _Clock:
    """A second per reading: the scan looks long (> SLOW_S) and due for a report at every step,
    whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_a_long_scan_logs_its_progress_and_retrod_status_shows_it(db_url: str, projects: Path,
                                                                   tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = Settings(database_url=db_url, projects_dir=str(projects), data_dir=data, host_id=HOST)
    total = sum(p.stat().st_size for p in projects.rglob("*.jsonl")) + sum(
        p.stat().st_size for p in projects.rglob("tool-results/*") if p.is_file())
    seen: list[dict] = []

    with daemon_lock(data) as taken, ConnectionPool(db_url, min_size=1, max_size=3, open=True) as pool:
        assert taken  # this process is "the daemon": status trusts its progress file
        store = Store(pool, HOST)
        commit = store.commit

        def commit_then_ask_status(batch, bulk=False, lane=None):
            commit(batch, bulk, lane)
            seen.append(health.status(settings))

        store.commit = commit_then_ask_status  # type: ignore[method-assign]
        with structlog.testing.capture_logs() as logs:
            Ingester(store, [projects], batch_bytes=256 << 10,
                     progress=Progress(data, clock=_Clock(), log_every_s=5, write_every_s=0)).scan()
        assert not (data / PROGRESS_FILE).exists()  # the scan is over: nothing to show
        assert health.status(settings)["backfill"] is None

    shown = [s["backfill"] for s in seen if s["backfill"] is not None]
    assert len(shown) >= 5, seen[:2]
    for b in shown:
        assert b["files_total"] == 67 and b["bytes_total"] == total
        assert 0 <= b["files_done"] <= b["files_total"] and 0 <= b["bytes_done"] <= b["bytes_total"]
    assert [b["bytes_done"] for b in shown] == sorted(b["bytes_done"] for b in shown)
    assert shown[-1]["bytes_done"] > shown[0]["bytes_done"] and shown[-1]["files_done"] > 1
    late = next(b for b in shown if b["bytes_done"])
    assert late["mb_s"] >= 0 and late["left_s"] == pytest.approx(
        (late["bytes_total"] - late["bytes_done"]) / (late["bytes_done"] / late["seconds"]), rel=0.05, abs=0.2)
    text = health.render_status({**seen[-1], "backfill": late})
    assert f"backfill:  {late['files_done']:,} of 67 files, {late['bytes_done'] / 1e6:,.1f} of " in text

    lines = [entry for entry in logs if entry["event"] == "backfill progress"]
    assert len(lines) >= 2
    assert {"files_done", "files_total", "bytes_done", "bytes_total", "mb_s", "left_s"} <= lines[0].keys()
    # at the sane rate: the fake clock gains a second per reading, lines come 5 or more apart
    assert all(b["seconds"] - a["seconds"] >= 5 for a, b in itertools.pairwise(lines))
    assert lines[-1]["files_total"] == 67


def test_progress_is_silent_for_a_short_scan_and_owner_only_for_a_long_one(tmp_path: Path) -> None:
    clock = [0.0]
    p = Progress(tmp_path, clock=lambda: clock[0])
    with structlog.testing.capture_logs() as logs:
        p.start(3, 4 << 20)  # a little to read
        clock[0] = 1.5
        p.update(1, 1000)
        assert not logs and not (tmp_path / PROGRESS_FILE).exists()
        clock[0] = 2.5  # running long now
        p.update(2, 500_000)
        assert [e["event"] for e in logs] == ["backfill progress"]
        path = tmp_path / PROGRESS_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        record = json.loads(path.read_text())
        assert record["pid"] == os.getpid() and record["files_done"] == 2 and record["bytes_done"] == 500_000
        assert record["mb_s"] == 0.2 and record["left_s"] == 18.5  # 3,694,304 bytes left at 200 kB/s
        assert progress.read(tmp_path, os.getpid()) == record
        assert progress.read(tmp_path, os.getpid() + 1) is None  # left by a daemon killed mid-scan
        clock[0] = 4.0
        p.update(3, 600_000)
        assert len(logs) == 1  # the next line 5 s after the last
        clock[0] = 7.6
        p.update(3, 900_000)
        assert len(logs) == 2
        p.end()
        assert not path.exists() and list(tmp_path.iterdir()) == []

    # Found in review: a reconciliation scan slow only to stat a large tree, with a few appended
    # lines to read, is no backfill; and a file a killed daemon left under a pid reused by this
    # one goes when this daemon's scan ends, even a scan that wrote none.
    clock[0] = 0.0
    quiet = Progress(tmp_path, clock=lambda: clock[0])
    (tmp_path / PROGRESS_FILE).write_text(json.dumps({"pid": os.getpid(), "files_done": 1, "files_total": 9,
                                                      "bytes_done": 1, "bytes_total": 9, "mb_s": 0.0,
                                                      "left_s": None}))
    with structlog.testing.capture_logs() as logs:
        quiet.start(1, 200)
        clock[0] = 2.5
        quiet.update(1, 200)
        quiet.end()
        assert not logs
    assert list(tmp_path.iterdir()) == []

    big = Progress(tmp_path, clock=lambda: 0.0)
    with structlog.testing.capture_logs() as logs:
        big.start(1, (64 << 20) + 1)  # much to read: reported from the start
        assert len(logs) == 1 and logs[0]["left_s"] is None
        assert progress.read(tmp_path, os.getpid())["bytes_total"] == (64 << 20) + 1
