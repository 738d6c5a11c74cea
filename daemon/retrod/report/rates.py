"""Price groups' rates for SQL to sum: `retrod trends` prices a year of sessions, the web UI's
session list orders 10,000 sessions by cost and a session's timeline prices each of its minutes,
each in one statement (store/trends.sql, store/ui.sql).

A price depends on a part's model, day, fast mode and tier (prices.py), and within a group it is
linear, so a statement can sum tokens × rates per group, as prices.py's `_cost` does. The rates go
as JSON: for each model, fast mode and tier, the spans of days the stored groups cover with one
price (prices change on a few days a year: a few dozen rows, not one per day), USD per million
tokens of each kind, per part and per web search, as exact decimals (trends sums them in `numeric`; the UI casts
them to doubles, for what only orders its list and draws its chart).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from datetime import date
from functools import lru_cache

from psycopg import Connection

from ..store.queries import q
from . import prices as pricing

# What a span's JSON object holds: the group, its days (both included) and its rates (null: not priced).
KEYS = ("model", "fast", "tier_floor", "day_from", "day_to")
RATES = ("input", "output", "cache_read", "cache_create_5m", "cache_create_1h", "per_part")
# USD per web search (accounting.md §2.7): null when the group has token prices but no web-search price.
WEB_SEARCH = "web_search"


def table(keys: Iterable[tuple[str, str, bool, int]], prices: pricing.Prices) -> str:
    """JSON: the spans of days with one price of the price groups `keys` (model, day as ISO text
    or 'infinity' for parts without a timestamp, fast, tier floor). A group outside every span
    was not among `keys`."""
    ordered = tuple(sorted(keys, key=lambda k: (k[0], k[2], k[3], k[1] == "infinity", k[1])))
    if prices is pricing.DEFAULT:  # (the package's prices never change while retrod runs)
        return _default_table(ordered)
    return _table(ordered, prices)


@lru_cache(maxsize=4)
def _default_table(keys: tuple) -> str:
    return _table(keys, pricing.DEFAULT)


def _table(keys: tuple, prices: pricing.Prices) -> str:
    spans: list[dict] = []
    last: tuple | None = None
    for model, day, fast, tier_floor in keys:
        found = pricing.rates(prices, model, None if day == "infinity" else date.fromisoformat(day), fast,
                              int(tier_floor))
        run = (model, fast, tier_floor, found, day == "infinity")
        if run == last:
            spans[-1]["day_to"] = day  # the same price as the day before: the span goes on
            continue
        rates: dict[str, str | None] = dict.fromkeys((*RATES, WEB_SEARCH))
        if found is not None:
            rates.update({k: str(getattr(found, k)) for k in RATES})
            rates[WEB_SEARCH] = None if found.web_search is None else str(found.web_search)
        spans.append({"model": model, "fast": fast, "tier_floor": int(tier_floor), "day_from": day, "day_to": day,
                      **rates})
        last = run
    return json.dumps(spans, separators=(",", ":"))


# The web UI asks for the rates of every stored group on each page. A long history holds
# thousands of groups; they are read again only when a statement meets a group outside them
# (`stale_rates`, `unrated`: a new day, a new model), not for each page.
_stored: dict[str, str] = {}
_lock = threading.Lock()


def stored(conn: Connection, prices: pricing.Prices, fresh: bool = False) -> str:
    """`table` of every price group stored (every member's). `fresh`: read the groups again."""
    which = json.dumps(prices.override_models, default=str, sort_keys=True)  # a RETROD_PRICES file, as read now
    with _lock:
        if not fresh and which in _stored:
            return _stored[which]
    text = table(conn.execute(q("ui_price_keys")).fetchall(), prices)
    with _lock:
        if len(_stored) > 8:  # (a price file edited many times: keep the newest few)
            _stored.clear()
        _stored[which] = text
    return text
