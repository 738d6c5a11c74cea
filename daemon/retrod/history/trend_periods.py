"""Trends' periods kept between asks (issue 32): each period's figures are summed once and kept
in this process, and an ask sums again only the periods whose sessions changed since.

What changed is the store's to tell (migration 0034): per member and UTC day, a count that goes
up at every commit that changes a session starting that day (or moves a session's start into or
out of it), whatever wrote it. A kept answer remembers the counts it was summed at; an ask reads
them (one small read), and sums again, in one statement, the sessions started in the span of
the periods overlapping the days whose count moved. Counts are read before the figures, so a
period summed after a change it did not see yet is summed again at the next ask, never kept
stale. Everything else an answer depends on is its key: the arguments, the database, the role
reading, the member's price tiers and the price table.

No period is kept where the triggers on the user's phase tables are missing or disabled (a role
that may not add them migrated): a phase logged there would not be seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Generic, TypeVar

from psycopg import Connection
from psycopg.rows import dict_row

from ..basics.kept import KeptValues, database_key
from ..store.queries import one, q

KEPT_ANSWERS = 8  # answers (periods by day, week, month; per project or not; zones) kept, least recent out
# Figures (a period's, or a project's in it) kept in all, ~10 kB each with their JSON: by day over
# the benchmark's 836 days is 836 (11 MB); by day per project over a year of 25 projects ~9,500
# (94 MB), more than a daemon should hold: such an answer is summed on each ask, as before.
KEPT_FIGURES = 5_000

T = TypeVar("T")
Period = date | None  # None: the undated sessions
Span = dict[str, object]  # trend_figures' started_from, started_to, undated
EVERY_SESSION: Span = {"started_from": None, "started_to": None, "undated": True}


@dataclass
class Kept(Generic[T]):
    """An answer's periods (each one with sessions: what `compute` made of them), the member's
    day counts they were summed at, and `memo`: what the caller makes of all of them (emptied
    whenever a period changes)."""

    days: dict[str, int]
    periods: dict[Period, T]
    memo: dict = field(default_factory=dict)
    weight: int = 0  # its figures: see KEPT_FIGURES


@dataclass(frozen=True)
class Marks:
    """The member's marks (migration 0034), as a kept value is checked against them: `key` (the
    database, the role reading, the member's price tiers), `days` (the member's count of changes
    by UTC day). Counts only go up, so their sum moves at every change (kept_briefs.py)."""

    key: tuple
    days: dict[str, int]

    @property
    def changes(self) -> int:
        return sum(self.days.values())


def marks(conn: Connection, member: str) -> Marks | None:
    """The member's marks now; None when the user's phase tables tell of no change (their
    triggers missing or disabled): nothing may be kept."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = one(cur.execute(q("trends_marks"), {"member": member}))
    if not row["phases_marked"]:
        return None
    return Marks((*database_key(conn, row), member), json.loads(row["days"]))


_kept: KeptValues[Kept] = KeptValues(KEPT_ANSWERS, KEPT_FIGURES, weigh=lambda kept: kept.weight)


def periods(conn: Connection, key: tuple, member: str, by: str, tz: str,
            compute: Callable[[Span], dict[Period, T]], weigh: Callable[[T], int]) -> Kept[T]:
    """The answer of `key` (everything its figures depend on but the stored rows): its periods
    as kept, the changed ones summed again by `compute(span)`, which returns the periods of the
    sessions started in `span` (trend_figures' arguments: EVERY_SESSION, or a span of starts);
    `weigh`: how many figures a period holds."""
    found_marks = marks(conn, member)
    if found_marks is None:
        return Kept({}, compute(EVERY_SESSION))
    whole_key = (*found_marks.key, *key)
    days = found_marks.days
    kept = _kept.get(whole_key)
    if kept is None:
        found = compute(EVERY_SESSION)
    else:
        changed = sorted(d for d in days.keys() | kept.days.keys() if days.get(d) != kept.days.get(d))
        if not changed:
            return kept
        found = _summed_again(conn, kept.periods, changed, by, tz, compute)
    fresh = Kept(days, found, weight=sum(weigh(value) for value in found.values()))
    _kept.put(whole_key, fresh)
    return fresh


def _summed_again(conn: Connection, kept: dict[Period, T], days: list[str], by: str, tz: str,
                  compute: Callable[[Span], dict[Period, T]]) -> dict[Period, T]:
    """`kept` with the periods overlapping `days` (UTC days; 'infinity': the undated) summed
    again, and every period between them: the sessions started in their span (and a margin, cut
    off here by period) are summed once; every session, when that is every period kept."""
    with conn.cursor(row_factory=dict_row) as cur:
        span = one(cur.execute(q("trends_changed_span"), {"days": days, "by": by, "tz": tz}))
    first, last, undated = span["first_period"], span["last_period"], span["undated"]
    dated = [period for period in kept if period is not None]
    if first is not None and (not dated or (first <= min(dated) and max(dated) <= last)):
        return compute(EVERY_SESSION)  # (every period changed: one sum of every session, not of a span)

    def again(period: Period) -> bool:
        return undated if period is None else first is not None and first <= period <= last

    found = compute({"started_from": span["started_from"] if first is not None else "infinity",
                     "started_to": span["started_to"] if first is not None else "infinity", "undated": undated})
    out = {period: value for period, value in kept.items() if not again(period)}
    out.update({period: value for period, value in found.items() if again(period)})
    return out

