"""`daemon.lock` in the data folder: held by `retrod run` for its lifetime, one daemon per folder.

Standard library only: the private cluster's stop checks it too (a daemon from before the
cluster's shared lock does not hold that one, and must not lose its server to a command), and
opens its own files with `open_unlinked` here.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class LinkRefused(RuntimeError):
    """A file retrod writes or reads in its data folder is a link or not a plain file."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is a link or not a plain file, which retrod will not follow or change; "
                         "remove it (someone may have tried to reach another file through it)")


def open_unlinked(path: Path, flags: int) -> int:
    """`path` opened without following a link (O_NOFOLLOW; O_NONBLOCK: a pipe put there does not
    hang the open), and only if it is a plain file of one name: a link, hard or symbolic, is
    refused (LinkRefused) before anything is written. As root in a folder an older retrod handed
    to the server's user, that user could have put one there to reach another file. Not given
    O_TRUNC: a hard link must be refused before it is emptied (truncate after, on the descriptor)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(path) from None
        raise
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1:
            raise LinkRefused(path)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def daemon_lock(data_dir: Path) -> Iterator[bool]:
    """Held by `retrod run` for its lifetime: one daemon per data folder. Yields whether it was
    taken; when it was, the file names the daemon (pid and start time) for `retrod status`."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = open_unlinked(data_dir / "daemon.lock", os.O_RDWR | os.O_CREAT)
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
        fd = open_unlinked(data_dir / "daemon.lock", os.O_RDONLY)
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
