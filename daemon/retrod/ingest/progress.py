"""A long scan's progress: in the daemon's log and in a small file `retrod status` reads.

The scan knows what it has to read only from its own stats (size against stored offset) and
what is done only from its committer, so the daemon says it; `retrod status` reads the file the
daemon writes instead of recomputing it from the database, which would need a scan's start and
totals anyway. The file is replaced whole (never half-written) and is readable by its owner only.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

PROGRESS_FILE = "backfill.json"
# A scan is worth reporting once it has this much to read or has run this long: a reconciliation
# scan that finds a few appended lines stays silent.
LARGE_BYTES = 64 << 20
SLOW_S = 2.0
_WORTH_SHOWING = 1 << 20  # ... and, when only slow (a large tree's stats), still has this much to read
LOG_EVERY_S = 5.0
WRITE_EVERY_S = 1.0  # `retrod status` is asked by a human; a write a second costs nothing


class Progress:
    """Told by the ingester where a scan stands (start, update often, end); logs and writes the
    file at the rates above once the scan is long. Never raises for the file: progress must not
    stop the work it reports on."""

    def __init__(self, data_dir: Path | None, clock: Callable[[], float] = time.monotonic,
                 log_every_s: float = LOG_EVERY_S, write_every_s: float = WRITE_EVERY_S,
                 large_bytes: int = LARGE_BYTES, slow_s: float = SLOW_S) -> None:
        self.path = data_dir / PROGRESS_FILE if data_dir is not None else None
        self.clock = clock
        self.log_every_s, self.write_every_s = log_every_s, write_every_s
        self.large_bytes, self.slow_s = large_bytes, slow_s
        self._reset()

    def _reset(self) -> None:
        self.files_total = self.bytes_total = self.files_done = self.bytes_done = 0
        self.started = 0.0
        self.started_at = 0.0  # wall clock, for `retrod status`
        self.active = False
        self.last_log: float | None = None
        self.last_write: float | None = None

    def start(self, files_total: int, bytes_total: int) -> None:
        self._reset()
        self.files_total, self.bytes_total = files_total, bytes_total
        self.started, self.started_at = self.clock(), time.time()
        self.update(0, 0)

    def update(self, files_done: int, bytes_done: int) -> None:
        self.files_done, self.bytes_done = files_done, bytes_done
        now = self.clock()
        if not self.active:
            slow = now - self.started >= self.slow_s and self.bytes_total - bytes_done >= _WORTH_SHOWING
            if self.bytes_total <= self.large_bytes and not slow:
                return
            self.active = True
        if self.last_log is None or now - self.last_log >= self.log_every_s:
            self.last_log = now
            log.info("backfill progress", **self.figures(now))
        if self.path is not None and (self.last_write is None or now - self.last_write >= self.write_every_s):
            self.last_write = now
            self._write(self.path, now)

    def end(self) -> None:
        """The scan is over (done, stopped or failed): no progress to show any more. The file goes
        even if this scan wrote none: one a killed daemon left may name this daemon's pid (reused)."""
        if self.path is not None:
            try:
                self.path.unlink(missing_ok=True)
            except OSError as exc:
                log.debug("progress file not removed", path=str(self.path), error=str(exc))
        self._reset()

    def figures(self, now: float) -> dict:
        """Files read and bytes committed of the totals, the rate so far, and the time left at it."""
        elapsed = now - self.started
        rate = self.bytes_done / elapsed if elapsed > 0 else 0.0
        left = max(0, self.bytes_total - self.bytes_done)
        return {"files_done": self.files_done, "files_total": self.files_total,
                "bytes_done": self.bytes_done, "bytes_total": self.bytes_total,
                "mb_s": round(rate / 1e6, 1), "seconds": round(elapsed, 1),
                "left_s": round(left / rate, 1) if rate > 0 else None}

    def _write(self, path: Path, now: float) -> None:
        record = {"pid": os.getpid(), "started_at": self.started_at, "updated_at": time.time(), **self.figures(now)}
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{PROGRESS_FILE}.", dir=path.parent)  # 0600, never an existing file
            try:
                with os.fdopen(fd, "w") as out:
                    out.write(json.dumps(record))
                os.replace(tmp, path)  # a reader sees the old figures or the new, never half
            except OSError:
                os.unlink(tmp)
                raise
        except OSError as exc:
            log.debug("progress file not written", path=str(path), error=str(exc))


def read(data_dir: Path, pid: int | None) -> dict | None:
    """The progress the running daemon (`pid`) wrote, or None: no scan under way, or a file left
    by a daemon that was killed mid-scan (another pid)."""
    if pid is None:
        return None
    try:
        record = json.loads((data_dir / PROGRESS_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    keys = ("files_done", "files_total", "bytes_done", "bytes_total", "mb_s", "left_s")
    if not isinstance(record, dict) or record.get("pid") != pid or any(k not in record for k in keys):
        return None
    return record
