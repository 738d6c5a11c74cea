"""A session's figures minute by minute: the web UI's timeline (issue 23) and the HTML report's.

From request_minutes, the per-minute rollup the report's phases already sum, so its cost does not
grow with the session's lines: a minute's request parts by price group (model, fast, tier; the
minute's day), each priced as the report prices a group (prices.group_cost). The minutes' costs
therefore add up to the report's cost, less requests without a timestamp (which no minute holds).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from psycopg import Connection
from psycopg.rows import dict_row

from ..store.members import member_of
from ..store.queries import q
from . import prices as pricing

FIELDS = ("requests", "output", "input", "cache_read", "cache_create", "cost_usd", "compaction_output", "flagged")


def series(conn: Connection, session: str, prices: pricing.Prices = pricing.DEFAULT,
           member: str | None = None) -> dict:
    """Columns, one entry per minute with requests or flagged calls (epoch seconds of its start):
    `minute`, `requests`, `output`, `input`, `cache_read`, `cache_create`, `cost_usd` (null when
    a part of that minute has tokens and no price), `compaction_output` (the compaction agents'
    output), `flagged` (tool calls a waste signal flagged); and `compactions`, when each happened
    (ISO 8601)."""
    member = member_of(conn, session, member)
    args = {"session": session, "member": member}
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(q("ui_timeline_minutes"), args).fetchall()
        flagged = cur.execute(q("ui_timeline_waste"), args).fetchall()
        compactions = [row["at"] for row in cur.execute(q("ui_compactions"), args)]
    minutes: dict[datetime, dict] = {}

    def minute(at: datetime) -> dict:
        return minutes.setdefault(at, {**dict.fromkeys(FIELDS, 0), "cost_usd": Decimal(0)})

    for row in rows:
        figures = minute(row["minute"])
        for name in ("requests", "output", "input", "cache_read", "cache_create"):
            figures[name] += int(row[name])
        figures["compaction_output"] += int(row["compaction_output"] or 0)
        cost = pricing.group_cost(prices, row["model"], row["minute"].astimezone(UTC).date(), bool(row["fast"]),
                                  int(row["tier_floor"]), {f: int(row[f]) for f in pricing.TOKENS}, int(row["parts"]))
        figures["cost_usd"] = None if cost is None or figures["cost_usd"] is None else figures["cost_usd"] + cost
    for row in flagged:
        minute(row["minute"])["flagged"] += int(row["flagged"])
    ordered = sorted(minutes.items())
    columns: dict[str, list] = {"minute": [int(at.timestamp()) for at, _ in ordered]}
    for name in FIELDS:
        columns[name] = [figures[name] for _, figures in ordered]
    columns["cost_usd"] = [None if c is None else pricing.usd(c) for c in columns["cost_usd"]]
    return {**columns, "compactions": [at.isoformat() for at in compactions if at is not None]}
