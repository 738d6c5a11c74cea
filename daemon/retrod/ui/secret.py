"""The web UI's per-user secret: a random token in RETROD_DATA_DIR, readable by its owner only.

Every request must carry it (the URL `retrod ui` prints holds it as `?token=`, as Jupyter's does;
the app then keeps it in a cookie): any other local user, and any web page the browser opens,
can reach 127.0.0.1, but cannot read this file.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

FILE_NAME = "ui-token"


def path(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


def load_or_create(data_dir: Path) -> str:
    """The token, made the first time (0600 from the start: no moment where others may read it)."""
    file = path(data_dir)
    try:
        token = file.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        token = ""
    if token:
        if file.stat().st_mode & 0o077:  # loosened by hand or by a copy: tightened again
            file.chmod(0o600)
        return token
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(token + "\n")
    return token


def read(data_dir: Path) -> str | None:
    """The token when it exists (the daemon made it), for `retrod ui` to print."""
    try:
        return path(data_dir).read_text(encoding="ascii").strip() or None
    except FileNotFoundError:
        return None


def url(port: int, token: str, page: str = "/") -> str:
    return f"http://127.0.0.1:{port}{page}?token={token}"
