"""`daemon.lock` in the data folder: held by `retrod run` for its lifetime, one daemon per folder.

Standard library only: the private cluster's stop checks it too (a daemon from before the
cluster's shared lock does not hold that one, and must not lose its server to a command).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def daemon_lock(data_dir: Path) -> Iterator[bool]:
    """Held by `retrod run` for its lifetime: one daemon per data folder. Yields whether it was
    taken; when it was, the file names the daemon (pid and start time) for `retrod status`."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(data_dir / "daemon.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "started_at": time.time()}).encode(), 0)
        yield True
    finally:
        os.close(fd)


def running_daemon(data_dir: Path) -> dict | None:
    """{"pid", "started_at"} of the daemon holding the lock, or None when none runs."""
    try:
        fd = os.open(data_dir / "daemon.lock", os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None  # nobody holds it
        except BlockingIOError:
            pass
        try:
            return json.loads(os.pread(fd, 4096, 0) or b"{}")
        except ValueError:
            return {}
    finally:
        os.close(fd)
