"""A session's figures minute by minute: the web UI's timeline (issue 23) and the HTML report's.

From request_minutes, the per-minute rollup the report's phases already sum, so its cost does not
grow with the session's lines; each minute's price groups (model, fast, tier; the minute's day)
priced at the rates the report's prices give them (rates.py), summed in the database. The
minutes' costs therefore add up to the report's cost (each rounded to the micro-dollar), less
requests without a timestamp, which no minute holds.
"""

from __future__ import annotations

from datetime import datetime

from psycopg import Connection

from ..basics.format import instant
from ..store.members import member_of
from ..store.queries import q
from . import prices as pricing
from . import rates

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
    # Plain rows (a dict per row was a fifth of the time for a session of thousands of minutes):
    # minute, requests, input, output, cache_read, cache_create, compaction_output, usd, unpriced, unrated
    for fresh in (False, True):
        rows = conn.execute(q("ui_timeline_minutes"), {**args, "rates": rates.stored(conn, prices, fresh)}).fetchall()
        if not any(row[9] for row in rows):
            break  # else: groups stored since the rates were read; once more, with theirs
    flagged: dict[datetime, int] = dict(conn.execute(q("ui_timeline_waste"), args).fetchall())
    compactions = [at for (at,) in conn.execute(q("ui_compactions"), args) if at is not None]
    if flagged.keys() - {row[0] for row in rows}:  # minutes with flagged calls and no request
        blank = (0, 0, 0, 0, 0, 0, 0.0, False, False)
        rows = sorted([*rows, *((at, *blank) for at in flagged.keys() - {row[0] for row in rows})])
    columns: dict[str, list] = {"minute": [int(row[0].timestamp()) for row in rows]}
    for n, name in enumerate(("requests", "input", "output", "cache_read", "cache_create", "compaction_output"), 1):
        columns[name] = [int(row[n]) for row in rows]
    columns["cost_usd"] = [None if row[8] else round(float(row[7]), 6) for row in rows]
    columns["flagged"] = [flagged.get(row[0], 0) for row in rows]
    return {**columns, "compactions": [instant(at) for at in compactions]}
