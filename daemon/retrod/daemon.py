"""`retrod run`: catch up on every file, then follow them as Claude Code writes."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import psycopg
import structlog
import watchfiles
from apscheduler.schedulers.background import BackgroundScheduler

from .ingest import Ingester, ScanStats
from .settings import Settings
from .store.db import daemon_lock, open_pool
from .store.store import Store

log = structlog.get_logger(__name__)

_RETRY_MAX_S = 30.0


class AlreadyRunning(RuntimeError):
    pass


def _watched(path: str) -> bool:
    return path.endswith((".jsonl", ".meta.json")) or "/tool-results/" in path


def run(settings: Settings, once: bool, stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    with daemon_lock(settings.data_dir) as taken:
        if not taken:
            raise AlreadyRunning(f"another `retrod run` is using {settings.data_dir}")
        with open_pool(settings, owner=True) as pool:
            ingester = Ingester(Store(pool, settings.host_id), settings.projects_roots(), settings.batch_bytes)
            roots = [str(r) for r in ingester.roots]
            log.info("catching up", roots=roots)
            started = time.monotonic()
            stats = ingester.scan()
            _log_stats("caught up", stats, started)
            if not once:
                _follow(ingester, settings, stop)


def _log_stats(event: str, stats: ScanStats, started: float) -> None:
    log.info(event, files=stats.files, files_read=stats.ingested, lines=stats.lines, bytes=stats.bytes,
             missing=stats.missing, failed=stats.failed, seconds=round(time.monotonic() - started, 3))


def install_signal_handlers(stop: threading.Event) -> None:
    def handle(signum: int, _frame: object) -> None:
        log.info("stopping", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


def _follow(ingester: Ingester, settings: Settings, stop: threading.Event) -> None:
    """Watch with watchfiles; a scheduled reconciliation scan catches what the watcher misses."""
    scan_due = threading.Event()
    scheduler = BackgroundScheduler(daemon=True)
    scheduler.add_job(scan_due.set, "interval", seconds=settings.scan_interval_s,
                      id="reconciliation-scan", name="reconciliation scan", coalesce=True, max_instances=1)
    scheduler.start()
    backoff = 0.0
    try:
        while not stop.is_set():
            roots = [r for r in ingester.roots if r.is_dir()]
            if not roots:
                log.info("waiting for the projects folder", roots=[str(r) for r in ingester.roots])
                stop.wait(5)
                continue
            try:
                _watch(ingester, settings, roots, scan_due, stop)
                backoff = 0.0
            except psycopg.OperationalError as exc:
                backoff = min(_RETRY_MAX_S, backoff * 2 or 1.0)
                log.warning("database unavailable; retrying", error=str(exc).strip(), retry_in_s=backoff)
                scan_due.set()
                stop.wait(backoff)
    finally:
        scheduler.shutdown(wait=False)


def _watch(ingester: Ingester, settings: Settings, roots: list[Path], scan_due: threading.Event,
           stop: threading.Event) -> None:
    changes_seen = watchfiles.watch(
        *roots,
        watch_filter=lambda _change, path: _watched(path),
        debounce=settings.watch_debounce_ms,
        step=min(50, settings.watch_debounce_ms) or 1,
        stop_event=stop,
        yield_on_timeout=True,
        rust_timeout=1000,
        raise_interrupt=False,
        ignore_permission_denied=True,
    )
    for n, changes in enumerate(changes_seen):
        if n == 0:
            scan_due.set()  # the watcher is up now: catch what was written before it was
        if changes:
            stats = ingester.ingest_paths(sorted({Path(path) for _change, path in changes}))
            if stats.lines:
                log.debug("ingested", files=stats.ingested, lines=stats.lines, bytes=stats.bytes)
        if scan_due.is_set():
            scan_due.clear()
            _scan(ingester)
        if any(not r.is_dir() for r in roots):
            log.warning("projects folder vanished; waiting for it", roots=[str(r) for r in roots])
            return


def _scan(ingester: Ingester) -> None:
    started = time.monotonic()
    _log_stats("reconciliation scan", ingester.scan(), started)
