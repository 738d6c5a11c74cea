"""A session's figures minute by minute: the web UI's timeline (issue 23) and the HTML report's.

From request_minutes, the per-minute rollup the report's phases already sum, so its cost does not
grow with the session's lines: a minute's request parts by price group (model, fast, tier; the
minute's day), each priced as the report prices a group (prices.group_cost). The minutes' costs
therefore add up to the report's cost, less requests without a timestamp (which no minute holds).
"""

from __future__ import annotations

from datetime import UTC, datetime

from psycopg import Connection
from psycopg.rows import dict_row

from ..store.members import member_of
from ..store.queries import q
from . import prices as pricing


def series(conn: Connection, session: str, prices: pricing.Prices = pricing.DEFAULT,
           member: str | None = None) -> dict:
    """Columns, one entry per minute with requests (epoch seconds of its start): `minute`,
    `requests`, `output`, `input`, `cache_read`, `cache_create`, `cost_usd` (null when a part of
    that minute has tokens and no price), `compaction_output` (the compaction agents' output);
    and `compactions`, when each happened (ISO 8601)."""
    member = member_of(conn, session, member)
    args = {"session": session, "member": member}
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(q("ui_timeline_minutes"), args).fetchall()
        compactions = [row["at"] for row in cur.execute(q("ui_compactions"), args)]
    columns: dict[str, list] = {k: [] for k in ("minute", "requests", "output", "input", "cache_read",
                                                "cache_create", "cost_usd", "compaction_output")}
    last: datetime | None = None
    for row in rows:
        if row["minute"] != last:
            last = row["minute"]
            columns["minute"].append(int(row["minute"].timestamp()))
            for name in columns:
                if name != "minute":
                    columns[name].append(0)
        for name in ("requests", "output", "input", "cache_read", "cache_create"):
            columns[name][-1] += int(row[name])
        columns["compaction_output"][-1] += int(row["compaction_output"] or 0)
        cost = pricing.group_cost(prices, row["model"], row["minute"].astimezone(UTC).date(), bool(row["fast"]),
                                  int(row["tier_floor"]), {f: int(row[f]) for f in pricing.TOKENS}, int(row["parts"]))
        spent = columns["cost_usd"][-1]
        columns["cost_usd"][-1] = None if cost is None or spent is None else spent + cost
    columns["cost_usd"] = [None if c is None else pricing.usd(c) for c in columns["cost_usd"]]
    return {**columns, "compactions": [at.isoformat() for at in compactions if at is not None]}
