"""The brief's figures kept between asks (issue 32): a brief is read once and kept in this process,
and read again only once something it reads has changed.

What changed is the store's to tell, by trends' marks (migration 0034, trend_periods.py): per
member and UTC day a count that goes up at every commit that changes one of the member's
sessions — its rollups, files, events, phases (by retrod or another tool), a tracked session
re-keyed or deleted — and, since migration 0039, the patterns a stored brief gave it (accounting.md
§2.10 "Given"), read by trend_periods.marks. Counts only go up and are never deleted, so their
sum over the member's days moves at every such commit: a kept brief remembers the sum it was
read at, and an ask reads it (one small read). It is read before the brief, so a brief read
after a change it did not see yet is read again at the next ask, never kept stale. What the
marks do not tell of is read at each ask (brief.py): the sessions' descriptions, the project's
last mentions and the lessons' ages. Everything else a brief depends on is its key: the
arguments, the database, the role reading and the member's price tiers.

Nothing is kept where the triggers on the user's phase tables are missing or disabled (a role
that may not add them migrated): a phase logged there would not be seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..basics.kept import KeptValues
from .trend_periods import Marks

KEPT = 16  # values kept in all (a project's place and its briefs by their arguments), least recent out

T = TypeVar("T")

_kept: KeptValues[tuple[int, Any]] = KeptValues(KEPT)  # (the changes it was read at, the value)


def kept(found: Marks | None, key: tuple, compute: Callable[[], T]) -> T:
    """The value of `key` as kept when read at `found`, else `compute()` (kept from now)."""
    if found is None:
        return compute()
    whole_key = (*found.key, *key)
    value = _kept.get(whole_key)
    if value is not None and value[0] == found.changes:
        return value[1]
    fresh = compute()
    _kept.put(whole_key, (found.changes, fresh))
    return fresh
