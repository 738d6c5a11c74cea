"""The web UI's per-user secret: a random token in RETROD_DATA_DIR, readable by its owner only.

A browser logs in with it (the URL `retrod ui` prints holds it as `?token=`, as Jupyter's does;
the app then keeps a session id in a cookie, never the token): any other local user, and any web
page the browser opens, can reach 127.0.0.1, but cannot read this file.

The file is opened without following a link, and what was opened is what is checked and
tightened (fstat, fchmod): a daemon running as root must not be led by a link someone put in
its place to chmod, or take as its token, another file (issue 28).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from pathlib import Path

FILE_NAME = "ui-token"
_READ_MAX = 4096  # a token is 43 characters
_TOKEN = re.compile(rb"[A-Za-z0-9_-]+")  # what secrets.token_urlsafe makes: it goes in an address as it is
_REFUSED = "refused as the web UI's token file (remove it; the daemon makes a new one at its start)"


class TokenFileError(RuntimeError):
    """The token's file is not one retrod may trust (a link, not a plain file, another user's)."""


def path(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


def load_or_create(data_dir: Path) -> str:
    """The token, made the first time (0600 from the start: no moment where others may read it);
    a file loosened by hand or by a copy is tightened again."""
    file = path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    for _attempt in range(2):  # made by another process between the look and the make: read it
        fd = _open(file, os.O_RDWR)
        if fd is None:
            token = secrets.token_urlsafe(32)
            try:
                fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(token + "\n")
            return token
        with os.fdopen(fd, "r+b") as opened:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o600)
            found = _token(file, opened.read(_READ_MAX))
            if found is None:  # an empty file (a disk that filled at its making): a new token in it
                found = secrets.token_urlsafe(32)
                opened.seek(0)
                opened.truncate()
                opened.write(found.encode("ascii") + b"\n")
            return found
    raise TokenFileError(f"{file}: made and removed while the daemon read it; restart the daemon")


def read(data_dir: Path) -> str | None:
    """The token when it exists (the daemon made it), for `retrod ui` to print."""
    file = path(data_dir)
    fd = _open(file, os.O_RDONLY)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as opened:
        return _token(file, opened.read(_READ_MAX))


def _token(file: Path, held: bytes) -> str | None:
    """The token `held` (None when there is none); anything else, a byte that is not ASCII
    among them, refused in one line rather than raised as a decoding error that stops the daemon."""
    held = held.strip()
    if not held:
        return None
    if _TOKEN.fullmatch(held) is None:
        raise TokenFileError(f"{file} does not hold a token (ASCII letters, digits, - and _): {_REFUSED}")
    return held.decode("ascii")


def _open(file: Path, mode: int) -> int | None:
    """The file's descriptor, or None when there is none; a link, anything but a plain file, or
    another user's file refused in one line."""
    try:
        # O_NONBLOCK: a FIFO put in its place must not hang the open (it is refused below).
        fd = os.open(file, mode | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise TokenFileError(f"{file} is a folder: {_REFUSED}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TokenFileError(f"{file} is a symbolic link, not the web UI's token file: refused (remove it; "
                                 "the daemon makes a new one at its start)") from None
        raise
    info = os.fstat(fd)
    problem = ("is not a plain file" if not stat.S_ISREG(info.st_mode)
               else "belongs to another user" if info.st_uid != os.geteuid()
               else "is a hard link (the file has other names)" if info.st_nlink != 1 else None)
    if problem is not None:
        os.close(fd)
        raise TokenFileError(f"{file} {problem}: {_REFUSED}")
    os.set_blocking(fd, True)
    return fd


def url(port: int, token: str, page: str = "/") -> str:
    return f"http://127.0.0.1:{port}{page}?token={token}"
