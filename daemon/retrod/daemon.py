"""`retrod run`: catch up on every file, then follow them as Claude Code writes."""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import structlog
import watchfiles
from apscheduler.schedulers.background import BackgroundScheduler
from psycopg_pool import ConnectionPool

from . import ui
from .fastpath.client import STATUSLINE
from .fastpath.server import Answer, ReportServer
from .history.brief import answer as brief_answer
from .ingest.ingester import BULK_FROM_BYTES, BULK_LANES, Ingester, ScanStats
from .ingest.progress import Progress
from .report import prices
from .report.retrospective import close_idle_sessions
from .service.daemon_lock import daemon_lock
from .service.notify import notify, watchdog_interval_s
from .settings import Settings
from .statusline.served import StatuslineAnswer
from .store.db import open_pool
from .store.queries import q
from .store.store import OUTAGE, Store

log = structlog.get_logger(__name__)

_RETRY_MAX_S = 30.0
CLOSE_IDLE_EVERY_S = 300.0
ANALYZE_FROM_BYTES = 8 << 20  # a scan that read this much: a backfill's worth of new rows to plan by
# How the daemon hears of changes, best first. A watcher that fails moves it one step down for
# as long as it runs (a restart tries the best again): inotify out of watches or instances ->
# polling; polling failing too (watchfiles' walk stops at a folder it may not read, and so
# does inotify's) -> no watcher, a scan every SCANS_ONLY_EVERY_S.
_NATIVE, _POLLING, _SCANS_ONLY = "native", "polling", "scans only"
SCANS_ONLY_EVERY_S = 5.0
SCAN_SHARE_MAX = 50  # the wait after a scan is at least this many times the scan's own time
RETRY_BEST_AFTER_S = 600.0  # a watcher that failed is tried again after this long
UI_CONNECTIONS = 2  # the web UI's pages and its live figures, beside the report server's
DESCRIPTORS_UNLIMITED_HARD = 10240  # macOS's OPEN_MAX


class AlreadyRunning(RuntimeError):
    pass


def _watched(path: str) -> bool:
    """Transcripts, meta files, tool outputs, and folders (no dot in the name: project, session,
    subagents and tool-results folders), whose new files the watcher may not have seen yet."""
    return path.endswith((".jsonl", ".meta.json")) or "/tool-results/" in path or "." not in Path(path).name


class _Systemd:
    """READY=1 once the watcher is up; WATCHDOG=1 from the loop that does the work (so a wedged
    loop gets restarted); EXTEND_TIMEOUT_USEC while a first initdb or a long backfill runs."""

    def __init__(self) -> None:
        self.watchdog_s = watchdog_interval_s()
        self.ready = False
        self.last = 0.0

    def alive(self) -> None:
        now = time.monotonic()
        if now - self.last < min(self.watchdog_s or 5.0, 5.0):
            return
        self.last = now
        fields = ["WATCHDOG=1"] if self.watchdog_s else []
        if not self.ready:
            fields.append(f"EXTEND_TIMEOUT_USEC={_EXTEND_US}")
        if fields:
            notify(*fields)

    def ready_now(self) -> None:
        if not self.ready:
            self.ready = True
            notify("READY=1", "STATUS=following transcripts")


_EXTEND_US = 30_000_000


def raise_descriptor_limit() -> None:
    """The soft limit on open files up to the hard one: the daemon holds a descriptor per
    connection (database, report socket, web UI) and per file it reads, and the common soft
    default (1,024) is a small share of what the system allows it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit (macOS) is refused as a soft one: its per-process ceiling instead.
    wanted = hard if hard != resource.RLIM_INFINITY else DESCRIPTORS_UNLIMITED_HARD
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open files limit", soft=soft, hard=hard, error=str(exc))


def run(settings: Settings, once: bool, stop: threading.Event | None = None,
        serve: Callable[[ConnectionPool, dict[str, str]], Answer] | None = None) -> None:
    """`serve`: what answers the commands of the command line the fast path's socket takes
    besides `report` (served.py; the command line hands it over: nothing imports it)."""
    raise_descriptor_limit()
    stop = stop or threading.Event()
    systemd = _Systemd()
    notify(f"EXTEND_TIMEOUT_USEC={_EXTEND_US}", "STATUS=starting the database")
    with daemon_lock(settings.data_dir) as taken:
        if not taken:
            raise AlreadyRunning(f"another `retrod run` is using {settings.data_dir}")
        try:
            # The bulk path's lanes, the scan's own statements, the report server's requests, the web UI
            with open_pool(settings, owner=True, max_size=BULK_LANES + 3 + UI_CONNECTIONS) as pool:
                with pool.connection() as conn:  # before the catch-up sums requests by price tier
                    prices.store_tiers(conn)

                def interrupted() -> bool:
                    systemd.alive()
                    return stop.is_set()

                ingester = Ingester(Store(pool, settings.host_id), settings.projects_roots(),
                                    settings.batch_bytes, interrupted, Progress(settings.data_dir), BULK_FROM_BYTES)
                log.info("catching up", roots=[str(r) for r in ingester.roots])
                notify("STATUS=catching up")
                if once:
                    _scan(ingester, "caught up")
                else:
                    others: dict[str, Callable[[dict[str, str]], Answer]] = {
                        "brief": lambda request: brief_answer(pool, settings, request),
                        STATUSLINE: StatuslineAnswer(pool, settings)}
                    if serve is not None:
                        others["cli"] = lambda request: serve(pool, request)
                    with _web_ui(pool, settings) as publish, ReportServer(pool, settings, others, on_commit=publish):
                        ingester.on_commit = publish  # the live page hears of each commit
                        _follow(ingester, settings, stop, systemd)
        finally:
            if stop.is_set():  # (logged here, not by the signal handler: see install_signal_handlers)
                log.info("stopping", signal=getattr(stop, "signal", None))
            notify("STOPPING=1")


@contextmanager
def _web_ui(pool, settings: Settings) -> Iterator[Callable[[set[str]], None] | None]:
    """The web UI (`retrod ui`) while the daemon follows; yields what tells its live page of each
    commit, or None when it is off (said once, here)."""
    if settings.ui_port == 0:
        log.info("web UI off (RETROD_UI_PORT=0)")
        yield None
        return
    if not ui.installed():
        log.info(f"web UI off: {ui.INSTALL_HINT}")
        yield None
        return
    from .ui.server import UiServer  # Starlette and uvicorn: only now

    with UiServer(pool, settings) as server:
        yield server.publish if server.hub is not None else None


def _log_stats(event: str, stats: ScanStats, started: float) -> None:
    log.info(event, files=stats.files, files_read=stats.ingested, lines=stats.lines, bytes=stats.bytes,
             missing=stats.missing, failed=stats.failed, seconds=round(time.monotonic() - started, 3))


class _Outage:
    """The database away or refusing writes (a full disk too): waits of 1, 2, 4 … 30 s between
    attempts. Logged when it starts and as soon as a round of work goes through again, so that
    the next outage is logged too, and waited out from 1 s again."""

    def __init__(self) -> None:
        self.backoff = 0.0

    def failed(self, exc: Exception) -> float:
        """The seconds to wait before the next attempt."""
        if not self.backoff:
            log.warning("database unavailable; retrying with backoff", error=" ".join(str(exc).split()))
        self.backoff = min(_RETRY_MAX_S, self.backoff * 2 or 1.0)
        return self.backoff

    def over(self) -> None:
        if self.backoff:
            log.info("database back")
            self.backoff = 0.0


class _Scans:
    """When the next reconciliation scan is due: at once when asked (the catch-up, a new
    watcher, after an outage), else `seconds` after the last one ended. By time.monotonic(), as
    the watch loop asks at least once a second: APScheduler's interval trigger follows the wall
    clock, and a clock set back an hour (NTP, a user, a restored VM) held the scan back an hour."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._next = 0.0  # due at once: the catch-up

    def now(self) -> None:
        self._next = 0.0

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def done(self, took: float) -> None:
        # Never more than ~2% of the time scanning: scans every 5 s (no watcher) of a large tree
        # would otherwise cost a tenth of a core.
        self._next = time.monotonic() + max(self.seconds, SCAN_SHARE_MAX * took)


class Stop(threading.Event):
    """Set by the first SIGTERM/SIGINT, with the signal's name."""

    signal: str | None = None


def install_signal_handlers(stop: Stop) -> None:
    """The first SIGTERM/SIGINT stops gracefully (the batch in flight commits or rolls back, the
    private cluster is stopped); a second one exits at once.

    The handlers log nothing through structlog: a signal that arrives while the main thread
    writes a log line runs its handler inside that write, and the handler's own line would wait
    for the log's lock forever (a daemon that never stopped on SIGTERM). The loop logs the stop."""

    def handle(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if stop.is_set():
            os.write(2, f"retrod: second {name}: exiting at once\n".encode())
            os._exit(1)
        stop.signal = name
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)


class _WatcherFailed(Exception):
    """The file watcher itself raised, not the work it reported: the one reason to change mode."""


def _follow(ingester: Ingester, settings: Settings, stop: threading.Event, systemd: _Systemd) -> None:
    """Catch up, then watch with watchfiles; a reconciliation scan every scan_interval_s catches
    what the watcher misses. A database that goes away is waited for, with backoff, and caught
    up on."""
    scans = _Scans(settings.scan_interval_s)
    # On the wall clock, which is fine here: set back, it only closes idle sessions later, at
    # the same ended_at (their last activity); idleness itself is judged by the database's now().
    scheduler = BackgroundScheduler(daemon=True)
    scheduler.add_job(_close_idle_sessions, "interval", args=(ingester.store.pool, settings),
                      seconds=CLOSE_IDLE_EVERY_S, id="close-idle-sessions", name="close idle sessions",
                      coalesce=True, max_instances=1, next_run_time=datetime.now(UTC))
    scheduler.start()
    outage = _Outage()
    best = [_POLLING, _SCANS_ONLY] if settings.watch_polling else [_NATIVE, _POLLING, _SCANS_ONLY]
    modes, downgraded_at = list(best), None
    try:
        while not stop.is_set():
            roots = [r for r in ingester.roots if r.is_dir()]
            if not roots:
                log.info("waiting for the projects folder", roots=[str(r) for r in ingester.roots])
                systemd.ready_now()  # nothing to catch up on: up, and waiting
                _wait(stop, systemd, 5)
                continue
            if downgraded_at is not None and time.monotonic() - downgraded_at >= RETRY_BEST_AFTER_S:
                # What failed may have passed (a folder made readable, watches freed): try again.
                modes, downgraded_at, scans.seconds = list(best), None, settings.scan_interval_s
            wait_s = 0.0
            try:
                until = None if downgraded_at is None else downgraded_at + RETRY_BEST_AFTER_S
                _watch(ingester, settings, roots, scans, stop, systemd, modes[0], outage, until)
            except _WatcherFailed as failed:
                if len(modes) == 1:
                    raise  # nothing left to fall back on (scans alone do not fail this way)
                if any(not r.is_dir() for r in roots):
                    continue  # the folder went away as the watcher started: wait for it, as always
                modes.pop(0)
                downgraded_at = time.monotonic()
                if modes[0] == _POLLING:
                    log.warning("file watcher failed; polling instead", error=str(failed))
                else:
                    scans.seconds = min(scans.seconds, SCANS_ONLY_EVERY_S)
                    log.warning("file watcher failed; scanning instead", every_s=scans.seconds, error=str(failed))
                scans.now()
            except OUTAGE as exc:
                scans.now()  # catch up on what was written meanwhile
                wait_s = outage.failed(exc)
            except (OSError, RuntimeError) as exc:
                # From the work, not the watcher (a folder that could not be listed, no thread
                # left to start): the same mode again, after a pause.
                log.warning("following failed; retrying", error=" ".join(str(exc).split()))
                scans.now()
                wait_s = SCANS_ONLY_EVERY_S
            if wait_s:  # out of the except block: the failed round's watcher is released first
                _wait(stop, systemd, wait_s)
    finally:
        scheduler.shutdown(wait=False)


def _wait(stop: threading.Event, systemd: _Systemd, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        systemd.alive()
        stop.wait(min(1.0, max(0.0, deadline - time.monotonic())))


def _watch(ingester: Ingester, settings: Settings, roots: list[Path], scans: _Scans,
           stop: threading.Event, systemd: _Systemd, mode: str, outage: _Outage, until: float | None) -> None:
    """Rounds of work until the folder vanishes, the watcher fails (_WatcherFailed), or `until`
    (monotonic) passes."""
    try:
        rounds = _rounds(settings, roots, stop, mode)
    except (OSError, RuntimeError) as exc:
        raise _WatcherFailed(" ".join(str(exc).split())) from exc
    first = True
    while True:
        try:
            changes = next(rounds)
        except StopIteration:
            return
        except (OSError, RuntimeError) as exc:
            raise _WatcherFailed(" ".join(str(exc).split())) from exc
        systemd.alive()
        if first:
            first = False
            scans.now()  # the watcher is up now: catch what was written before it was
        if any(not r.is_dir() for r in roots):  # before a scan, which would mark every file gone
            log.warning("projects folder vanished; waiting for it", roots=[str(r) for r in roots])
            return
        if changes:
            stats = ingester.ingest_paths(sorted({Path(path) for _change, path in changes}))
            if stats.lines:
                log.debug("ingested", files=stats.ingested, lines=stats.lines, bytes=stats.bytes)
        if scans.due():
            scans.done(_scan(ingester, "caught up" if not systemd.ready else "reconciliation scan"))
            systemd.ready_now()
        if not stop.is_set():  # a scan cut short by a stop proves nothing about the database
            outage.over()  # a round of work went through (after an outage, the scan that caught up)
        if until is not None and time.monotonic() >= until:
            return


def _rounds(settings: Settings, roots: list[Path], stop: threading.Event, mode: str) -> Iterator[set]:
    """The watcher of `mode`: sets of changes, an empty one at least once a second."""
    return _ticks(stop) if mode == _SCANS_ONLY else watchfiles.watch(
        *roots,
        watch_filter=lambda _change, path: _watched(path),
        debounce=settings.watch_debounce_ms,
        step=min(50, settings.watch_debounce_ms) or 1,
        stop_event=stop,
        yield_on_timeout=True,
        rust_timeout=1000,  # a round at least once a second, for the watchdog and the scans
        raise_interrupt=False,
        # False: with True, watchfiles also ignores running out of inotify watches, and watches
        # only the folders its walk reached before the first error of any kind.
        ignore_permission_denied=False,
        force_polling=mode == _POLLING or None,
    )


def _ticks(stop: threading.Event) -> Iterator[set]:
    """No watcher: an empty round of changes each second, for the scans and the watchdog."""
    while not stop.wait(1.0):
        yield set()


def _close_idle_sessions(pool, settings: Settings) -> None:
    """A scheduler job (own thread, own connection): never lets an error escape into APScheduler."""
    try:
        with pool.connection() as conn:
            closed = close_idle_sessions(conn, settings.idle_close_s, settings.away_after_s)
        if closed:
            log.info("closed idle sessions", sessions=closed)
    except psycopg.Error as exc:
        log.warning("closing idle sessions failed; next run in 5 minutes", error=" ".join(str(exc).split()))


def _scan(ingester: Ingester, event: str) -> float:
    """One scan, logged; returns the seconds it took. After one that read at least
    ANALYZE_FROM_BYTES (a first backfill), the statistics the sums over many sessions are planned
    by are gathered at once (store/trends.sql, analyze_rollups)."""
    started = time.monotonic()
    stats = ingester.scan()
    _log_stats(event, stats, started)
    if stats.bytes >= ANALYZE_FROM_BYTES:
        gathering = time.monotonic()
        try:
            with ingester.store.pool.connection() as conn:
                conn.execute(q("trends_analyze_rollups"))
            log.info("statistics gathered", seconds=round(time.monotonic() - gathering, 3))
        except psycopg.Error as exc:  # (autovacuum gathers them later)
            log.warning("gathering statistics failed", error=" ".join(str(exc).split()))
    return time.monotonic() - started
