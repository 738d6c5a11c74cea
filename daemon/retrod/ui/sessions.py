"""The web UI's logins: the token is exchanged for a session id, and only that goes in a cookie.

Browsers send a host's cookies to every port on it, so a cookie holding the token handed it to
any other server on 127.0.0.1 (issue 28). A session id is random, one per browser that logs in,
kept in the daemon's memory only (gone when it stops), and expires SESSION_S after it was made:
what another port might receive is worth hours, not the token's lifetime. Hours of the wall
clock: the monotonic one stands still while the machine sleeps, and a laptop suspended every
night would keep a session for days.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable

SESSION_S = 12 * 3600  # a working day, then `retrod ui` again
SESSIONS_MAX = 64  # logins kept at once; the oldest goes first (a browser per login: a few)


class Sessions:
    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or time.time
        # Keyed by the id's digest: a dictionary's look-up time then tells nothing about the ids.
        self._expiry: OrderedDict[bytes, float] = OrderedDict()

    def new(self) -> str:
        """A new session's id, valid for SESSION_S."""
        now = self.clock()
        for key, expiry in list(self._expiry.items()):
            if expiry <= now:
                del self._expiry[key]
        while len(self._expiry) >= SESSIONS_MAX:
            self._expiry.popitem(last=False)
        session = secrets.token_urlsafe(32)
        self._expiry[_digest(session)] = now + SESSION_S
        return session

    def valid(self, session: str) -> bool:
        expiry = self._expiry.get(_digest(session))
        return expiry is not None and self.clock() < expiry


def _digest(session: str) -> bytes:
    return hashlib.sha256(session.encode("utf-8", "surrogateescape")).digest()
