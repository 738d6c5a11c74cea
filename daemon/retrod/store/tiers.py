"""The price tiers the request rollup is summed by (migration 0013), kept equal to the price
data's (report/prices.thresholds): a report sums a part with the others of its tier, and prices
the sum as the tier prices one part."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from .queries import one, q


def ensure(conn: psycopg.Connection, thresholds: Sequence[int]) -> bool:
    """Store `thresholds` for this role and sum its rollup by them again if they changed; False
    when nothing changed or this role may not write (a team's reader reads what members summed)."""
    wanted = list(thresholds)
    stored, may_store = one(conn.execute(q("stored_price_tiers")))
    if stored == wanted or not may_store:
        return False
    with conn.transaction():
        conn.execute(q("lock_requests"))
        conn.execute(q("store_price_tiers"), {"thresholds": wanted})
        conn.execute(q("rebuild_request_minutes"))
    return True
