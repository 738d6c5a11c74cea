"""Whole reports kept between asks (issue 32): a report is built once and kept in this process
(the daemon's, `retrod mcp`'s), with its text, and built again only once something it reads has
changed. The ~200 MB session's report takes 10–15 ms to build; checking a kept one, ~1 ms.

What changed is the store's to tell, in two small reads taken before the report is built (so
that a report built after a change it did not see yet is built again at the next ask, never
kept stale):
- the window marks (migration 0038, kept_windows.py): per session and UTC hour, a count that goes
  up at every statement changing one of its requests, calls or events (the rollups, gaps and
  misses the report reads are kept from these in the same transaction); its plan calls' count;
  the count of the tables' emptyings; the member's price tiers;
- `report_session_state`: the session's own count of changes (migration 0041: every commit that
  changes its rollups, events, files, phases or tracked row, undated rows and fork copies decided
  in another session's commit included); its files' rows (every commit reading a line of one
  writes its row, so a malformed line, a meta file, a persisted output or a file gone moves it
  too); its tracked row, its phases and the status Claude Code last gave it.

A report depends on the clock only while its session is live: an open phase runs until now, a
warm cache counts down, a task's open window grows. So only a session at rest is kept: no row in
its last two hours (the cache's longest lifetime is one) and no phase open. Undated parts are
priced at today's prices: the day is part of the key, with everything else a report depends on:
the database, the role reading, the member, the session, the away threshold, the prices.

A report asked to close its session, or as a page, is never kept (produce builds it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg import Connection
from psycopg.rows import dict_row

from ..basics.kept import KeptValues, database_key
from ..store.members import member_of
from ..store.queries import one, q
from . import model, shapes
from .kept_windows import at_rest
from .prices import Prices, store_tiers

KEPT = 8  # reports kept in all (a long session's: its JSON text is ~140 kB), least recently asked out


@dataclass(frozen=True)
class _Kept:
    state: tuple  # the marks it was built at
    report: shapes.Report
    texts: dict[str, str]  # its text by format, as asked


_kept: KeptValues[_Kept] = KeptValues(KEPT)


def report(conn: Connection, session: str, away_after_s: float, prices: Prices, member: str | None,
           text_format: str, render: Callable[[shapes.Report], str]) -> tuple[shapes.Report, str]:
    """model.build's report of `session` and `render(report)` (its text in `text_format`), as kept
    when nothing they read has changed since, else built (and kept, when the session is at rest).
    The report is the kept one: its caller copies what it changes."""
    store_tiers(conn)  # (before the marks: a rebuild of the tiers changes their thresholds)
    member = member_of(conn, session, member)
    args = {"session": session, "member": member}
    with conn.cursor(row_factory=dict_row) as cur:
        marks = one(cur.execute(q("report_window_marks"), args))
        found = one(cur.execute(q("report_session_state"), args))
    now = datetime.now(UTC)
    key = (*database_key(conn, marks), session, member, away_after_s, prices.identity(), now.date())
    state = (marks["emptied"], marks["hours"], marks["changes"], marks["plan_changes"], *found.values())
    settled = not found["phase_open"] and at_rest(marks["hours"], now)
    kept = _kept.get(key)
    if kept is not None and kept.state == state and text_format in kept.texts:
        return kept.report, kept.texts[text_format]
    if kept is None or kept.state != state:
        built = model.build(conn, session, away_after_s, prices, member)
        kept = _Kept(state, built, {})
    text = render(kept.report)
    if settled:
        _kept.put(key, _Kept(state, kept.report, {**kept.texts, text_format: text}))
    return kept.report, text


def forget() -> None:
    """Every kept report dropped (the tests')."""
    _kept.clear()
