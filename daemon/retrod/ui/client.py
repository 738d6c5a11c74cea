"""`retrod ui`'s question to the daemon: does it serve the web UI here? Standard library only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from .secret import url

TIMEOUT_S = 3.0


def serving(port: int, token: str) -> str | None:
    """The retrod version the daemon's UI answers with, or None when nothing (or something else)
    answers on 127.0.0.1:`port` with this user's token."""
    # No proxy: a loopback address must never be sent to one (nor the token with it).
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url(port, token, "/api/ping"), timeout=TIMEOUT_S) as answer:
            body = json.loads(answer.read(4096))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return body.get("retrod") if isinstance(body, dict) else None
