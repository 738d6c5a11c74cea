"""Every JSON answer on a terminal or a file laid out one way: as `json.dumps(value, indent=2)`
writes it, byte for byte, in a fraction of the time. With an indent, json.dumps runs its pure
Python encoder (14 of the 36 ms `retrod trends --json` took through the daemon for its 420 KB by
week over 10,000 sessions: the largest part); here the standard library's C encoder writes
every string and number (its escapes, its float repr), and msgspec only lays the tokens out.

msgspec is retrod's own dependency, imported when a value is laid out: the light commands that
import `basics` (the status line) never call this."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def json_text(value: object, default: Callable[[Any], Any] | None = None) -> str:
    """`json.dumps(value, indent=2, default=default)`. A value msgspec cannot lay out (NaN and
    the infinities, which are not JSON) takes the slow way, which calls `default` again: it must
    have no side effect."""
    import msgspec

    compact = json.dumps(value, default=default)
    try:
        return msgspec.json.format(compact, indent=2)
    except msgspec.DecodeError:
        return json.dumps(value, indent=2, default=default)
