"""The price tiers the request rollup is summed by (migration 0013), kept equal to the price
data's (report/prices.thresholds): a report sums a part with the others of its tier, and prices
the sum as the tier prices one part."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from .queries import one, q


def ensure(conn: psycopg.Connection, thresholds: Sequence[int], version: str) -> bool:
    """Store `thresholds` (those of price data `version`) for this role and sum its rollup by
    them again if they changed; False when nothing changed, when this role may not write (a
    team's reader reads what members summed), or when a newer price data's are stored (a command
    of an older retrod beside an upgraded daemon must not undo them: each would sum again)."""
    wanted = list(thresholds)
    with conn.transaction():
        stored, stored_version, may_store = one(conn.execute(q("ingest_stored_price_tiers")))
        if stored == wanted or not may_store or _older(version, stored_version):
            return False
        conn.execute(q("ingest_lock_requests"))
        stored, stored_version, _ = one(conn.execute(q("ingest_stored_price_tiers")))  # (another may have, meanwhile)
        if stored == wanted or _older(version, stored_version):
            return False
        conn.execute(q("ingest_store_price_tiers"), {"thresholds": wanted, "version": version})
        conn.execute(q("ingest_rebuild_request_minutes"))
    return True


def _older(version: str, than: str | None) -> bool:
    return than is not None and _numbers(version) < _numbers(than)


def _numbers(version: str) -> tuple[int, ...]:
    """"0.2.10" → (0, 2, 10); a part that is not a number counts 0."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))
