"""The stored prompt-cache misses (migration 0029): the sessions whose requests or compaction
boundaries changed are walked again (cache.walk, as their reports walk them) and their misses
written, unpriced, for `retrod trends` and the web UI's list to sum and price in SQL.

Only the role's own sessions: a team's reader reads what its members' daemons wrote."""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal

from psycopg import Connection

from ..store.members import current_role
from ..store.queries import one, q
from . import cache
from . import prices as pricing

BATCH = 50  # sessions read, then written, per transaction


def refresh(conn: Connection, limit: int | None = None, sessions: Sequence[str] | None = None) -> int:
    """Walk the role's marked sessions (`sessions`: of these), once each, and store their misses;
    returns how many were stored. `limit`: about that many at most. Reads and writes are transactions of their own
    when the connection has none open, so a committer that marks a session waits only for a
    short write; a session marked again while it was walked is left marked, for the next walk."""
    walked, after = 0, ""
    member = current_role(conn)
    while limit is None or walked < limit:
        with conn.transaction(), conn.cursor() as cur:
            marks = cur.execute(q("cache_stale_marks"), {"after": after, "limit": BATCH,
                                                         "sessions": sessions}).fetchall()
            found: dict[str, list[dict]] = {}
            for session, _mark in marks:
                args = {"session": session, "member": member}
                elements = cur.execute(q("session_cache_elements"), args).fetchall()
                boundaries = cur.execute(q("session_cache_boundaries"), args).fetchall()
                misses, _last = cache.walk(elements, boundaries, pricing.DEFAULT)
                found[session] = [_row(session, m) for m in misses]
        if not marks:
            break
        after = marks[-1][0]
        with conn.transaction(), conn.cursor() as cur:
            cleared = [row[0] for row in cur.execute(q("cache_stale_clear"), {
                "sessions": [m[0] for m in marks], "marks": [m[1] for m in marks]}).fetchall()]
            if cleared:
                cur.execute(q("cache_misses_forget"), {"sessions": cleared})
                rows = [row for session in cleared for row in found[session]]
                if rows:
                    cur.execute(q("cache_misses_insert"), {"misses": json.dumps(rows)})
        walked += len(cleared)
    return walked


def ensure(conn: Connection, member: str | None, sessions: Sequence[str] | None = None) -> None:
    """Before a read of the stored misses: walk what is still marked (`sessions`: of these), when
    the rows are one's own (`member` None: one's own). Costs one indexed look when nothing is."""
    own = current_role(conn)
    if member in (None, own) and one(conn.execute(q("cache_stale_any"), {"member": own, "sessions": sessions}))[0]:
        refresh(conn, sessions=sessions)


def waste(conn: Connection, keys: Sequence[tuple[str, str]], prices: pricing.Prices) -> dict[tuple[str, str], float]:
    """Each (session, member)'s `cache.waste_usd`, as its report has it, from its stored misses."""
    sums = {key: Decimal(0) for key in keys}
    rows = conn.execute(q("ui_sessions_waste_misses"),
                        {"sessions": [k[0] for k in keys], "members": [k[1] for k in keys]}).fetchall()
    for session, member, model, fast, size, at, rewritten, rewritten_1h in rows:
        sums[(session, member)] += cache.miss_extra(model, fast, size, at, rewritten, rewritten_1h, prices)
    return {key: pricing.usd(total) for key, total in sums.items()}


def _row(session: str, miss: cache.Miss) -> dict:
    e = miss.element
    if e is None:
        raise ValueError("a miss to store must come from a walk, which gives its element")
    return {"session_uuid": session, "agent": miss.agent, "at": miss.at.isoformat(), "cause": miss.cause,
            "model": e.model, "fast": e.fast, "size": e.size, "rewritten": miss.rewritten,
            "rewritten_1h": e.rewritten_1h(miss.rewritten), "machine": e.machine}
