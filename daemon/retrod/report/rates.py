"""Price groups' rates for SQL to sum: the web UI's session list orders 10,000 sessions by cost,
and a session's timeline prices each of its minutes, in one statement each (store/ui.sql).

A price depends on a part's model, day, fast mode and tier (prices.py), and within a group it is
linear, so a statement can sum tokens × rates per group. The rates go as JSON: for each model,
fast mode and tier, the spans of days the stored groups cover with one price (prices change on a
few days a year: a few dozen rows, not one per day), in doubles — what orders the list and draws
the chart; the figures a page shows as the report's are priced exactly by prices.by_model.
"""

from __future__ import annotations

import json
import threading
from datetime import date
from decimal import Decimal

from psycopg import Connection

from ..store.queries import q
from . import prices as pricing

_MILLION = Decimal(1_000_000)


# The stored price groups' rates, as the JSON the list's statement reads, for the prices they
# were worked out with. A long history holds thousands of groups (a model, a day, fast or not, a
# tier), and prices change on a few days a year: the rates go as spans of days with one price, a
# few dozen rows, not one per day. They are worked out when a group appears outside them (the
# statement says so: `stale_rates`), not for each page; a group's rates by the package itself
# never change while the daemon runs.
_rates_json: dict[str, str] = {}
_package_rates: dict[tuple[str, str, bool, int], tuple[float, ...] | None] = {}
_lock = threading.Lock()


def spans(conn: Connection, prices: pricing.Prices, fresh: bool = False) -> str:
    """JSON: for each model (m), fast (f) and tier (t), the spans of days (d0 to d1, both
    included) of the stored groups with one price, with USD per token of input (i), output (o),
    cache read (cr), 5-minute (c5) and 1-hour (c1) cache write, and per part (p); rates null:
    not priced. `fresh`: read the stored groups again (a statement found one outside the spans:
    a new day, a new model)."""
    which = json.dumps(prices.override_models, default=str, sort_keys=True)  # a RETROD_PRICES file, as read now
    with _lock:
        if not fresh and which in _rates_json:
            return _rates_json[which]
    spans: list[dict] = []
    for model_name, fast, tier, day in conn.execute(q("ui_price_keys")):  # by model, fast, tier, day
        rates = _group_rates(prices, model_name, day, fast, int(tier))
        last = spans[-1] if spans else None
        if (last is not None and (last["m"], last["f"], last["t"]) == (model_name, fast, int(tier))
                and last["r"] == rates and day != "infinity"):
            last["d1"] = day  # the same price as the day before: the span goes on
            continue
        spans.append({"m": model_name, "f": fast, "t": int(tier), "d0": day, "d1": day, "r": rates})
    out = []
    for span in spans:
        rates = span.pop("r")
        if rates is not None:
            span.update(zip(("i", "o", "cr", "c5", "c1", "p"), rates, strict=True))
        out.append(span)
    text = json.dumps(out, separators=(",", ":"))
    with _lock:
        if len(_rates_json) > 8:  # (a price file edited many times: keep the newest few)
            _rates_json.clear()
        _rates_json[which] = text
    return text


def _group_rates(prices: pricing.Prices, model_name: str, day: str, fast: bool,
                 tier: int) -> tuple[float, ...] | None:
    key = (model_name, day, fast, tier)
    package = model_name not in prices.override_models
    if package and key in _package_rates:
        return _package_rates[key]
    rates = pricing.rates(prices, model_name, None if day == "infinity" else date.fromisoformat(day), fast, tier)
    flat = None if rates is None else (
        float(rates.input / _MILLION), float(rates.output / _MILLION), float(rates.cache_read / _MILLION),
        float(rates.cache_create_5m / _MILLION), float(rates.cache_create_1h / _MILLION), float(rates.per_part))
    if package:
        _package_rates[key] = flat
    return flat
