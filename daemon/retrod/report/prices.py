"""What tokens cost (accounting.md §2.7): each request part priced by the `genai-prices` package (the
pydantic project's maintained price data: prices by date, long-context tiers, fast mode), a
`RETROD_PRICES` file overriding it for the models it names. An estimate made when a report is
read, never stored: an upgraded price table applies to every report at once. A model no price
knows is not priced, never guessed: the report says so.

A price depends on a part's model, its day (prices change by date), fast mode and its price
tier (a threshold on the part's own input). The store sums tokens by those (request_minutes, a
rollup keyed by them), and a sum of parts that share them costs what the parts cost one by one:
within a tier a price is linear in each kind of token, and in web searches (the package's own
web-search unit, priced per 1,000 searches: accounting.md §2.7). So a report prices a few groups, not
every request, and its cost does not grow with the session.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, cast

from ..basics.errors import UserError
from . import shapes

SOURCE = "genai-prices"
PROVIDER = "anthropic"
# USD per million tokens, by the token figure they price (RETROD_PRICES' shape).
RATES = ("input", "output", "cache_read", "cache_create_5m", "cache_create_1h")
TOKENS = ("input", "output", "cache_read", "cache_create", "cache_create_5m", "cache_create_1h")
# What a price group's cache writes cost at the 1-hour rate: the sum, over its parts, of each one's
# 1h writes when its 5m and 1h writes add up to its cache writes, else none (accounting.md §2.7; the
# store's rollups sum it, migration 0036). A figure priced, never shown.
PRICED_1H = "priced_1h"
# What a price group sums besides its tokens and is priced too (accounting.md §2.2, §2.7).
WEB_SEARCHES = "web_searches"
_TOP_LEVEL = {"date", "source", "notes", "models"}
_MILLION = Decimal(1_000_000)
_MICRO = Decimal("0.000001")
# No list price comes near it; a larger one is a typo, and would overflow the rounding to micro-dollars.
_MAX_RATE = 1_000_000


class PricesError(UserError, ValueError):
    """A price table that cannot be used; the message names the file and what is wrong."""

    prefix = "configuration: "  # a setting (RETROD_PRICES), worded as the other settings' mistakes


@dataclass(frozen=True)
class Prices:
    """What a report prices with: the package, and the models a RETROD_PRICES file sets."""

    override_models: Mapping[str, Mapping[str, Decimal]]
    override: str | None = None  # the RETROD_PRICES file

    def describe(self) -> shapes.Prices:
        return {"source": SOURCE, "version": package_version(), "override": self.override}

    def identity(self) -> str:
        """What its prices are (a RETROD_PRICES file as read now): part of the key of what is kept
        between asks (trends' periods, a brief)."""
        return json.dumps([self.describe(), self.override_models], default=str, sort_keys=True)


DEFAULT = Prices({})


@cache
def package_version() -> str:
    from importlib.metadata import version

    return version("genai-prices")


def load(override: str | Path | None) -> Prices:
    """The package's prices, with the models of a RETROD_PRICES file replacing its own."""
    if override is None:
        return DEFAULT
    where = f"RETROD_PRICES={override}"
    try:
        text = Path(override).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PricesError(f"{where}: cannot read it: {problem}") from None
    return Prices(_parse(text, where), str(override))


def _parse(text: str, where: str) -> dict[str, dict[str, Decimal]]:
    try:
        table = json.loads(text, parse_float=Decimal, parse_constant=_not_json)
    except ValueError as exc:  # json.JSONDecodeError, and NaN/Infinity
        raise PricesError(f"{where}: not JSON: {exc}") from None
    if not isinstance(table, dict):
        raise PricesError(f"{where}: must be a JSON object with \"models\"")
    unknown = sorted(set(table) - _TOP_LEVEL)
    if unknown:
        raise PricesError(f"{where}: unknown key {unknown[0]!r} (use {', '.join(sorted(_TOP_LEVEL))})")
    if "date" in table:  # when the prices were checked: optional, but a date when given
        try:
            date.fromisoformat(table["date"])
        except (TypeError, ValueError):
            raise PricesError(f"{where}: \"date\" must be a date, YYYY-MM-DD, not {_shown(table['date'])}") from None
    if not isinstance(table.get("source", ""), str):
        raise PricesError(f"{where}: \"source\" must be a string")
    models = table.get("models")
    if not isinstance(models, dict) or not models:
        raise PricesError(f"{where}: \"models\" must be an object of model name to prices")
    return {name: _rates(name, rates, where) for name, rates in models.items()}


def _not_json(name: str) -> Decimal:
    raise ValueError(f"{name} is not a number JSON allows")


def _shown(value: object) -> str:
    """A value as JSON writes it (true, "x", 1E+30), not as Python does (True, Decimal('1E+30'))."""
    return str(value) if isinstance(value, Decimal) else json.dumps(value)


def _rates(name: str, rates: object, where: str) -> dict[str, Decimal]:
    if not name or not isinstance(rates, dict):
        raise PricesError(f"{where}: model {name!r}: its prices must be an object of {', '.join(RATES)}")
    extra = sorted(set(rates) - set(RATES))
    missing = [r for r in RATES if r not in rates]
    if extra or missing:
        what = f"unknown price {extra[0]!r}" if extra else f"no {missing[0]!r} price"
        raise PricesError(f"{where}: model {name!r}: {what} (each model has {', '.join(RATES)})")
    out = {}
    for rate in RATES:
        value = rates[rate]
        number = type(value) is int or (type(value) is Decimal and value.is_finite())  # not bool
        if not number or not 0 <= value <= _MAX_RATE:
            raise PricesError(f"{where}: model {name!r}: {rate} must be a number from 0 to {_MAX_RATE:,}"
                              f" (USD per million tokens), not {_shown(value)}")
        out[rate] = Decimal(value)
    return out


# --- the package's prices ---------------------------------------------------------------------

def _anthropic() -> Any:
    from genai_prices.data_snapshot import get_snapshot  # ~0.5 s to import: only when pricing

    snapshot = get_snapshot()
    return next(p for p in snapshot.providers if p.id == PROVIDER)


@cache
def thresholds() -> tuple[int, ...]:
    """Every input size above which a price of the package's Anthropic models changes (its
    long-context tiers), ascending: the price tiers parts are summed by (migration 0013)."""
    from genai_prices.types import ModelPrice, TieredPrices

    starts: set[int] = set()
    for model in _anthropic().models:
        prices = [model.prices] if isinstance(model.prices, ModelPrice) else [c.prices for c in model.prices]
        prices += [v.prices for v in model.price_variants or ()]
        for price in prices:
            for value in vars(price).values():
                if isinstance(value, TieredPrices):
                    starts.update(tier.start for tier in value.tiers)
    return tuple(sorted(starts))


def tier_floor(size: int) -> int:
    """The price tier of a part whose input (input + cache read + cache write) is `size`: the
    largest threshold it is above, 0 for none (as retrod.tier_floor in SQL, migration 0013)."""
    starts = thresholds()
    below = bisect.bisect_left(starts, size)  # (ascending: those before it are below `size`)
    return starts[below - 1] if below else 0


def store_tiers(conn: Any) -> bool:
    """The store sums request parts by these thresholds from now on (store/tiers.ensure)."""
    from ..store import tiers

    return tiers.ensure(conn, thresholds(), package_version())


def _in_tier(value: Any, tier_floor: int) -> Any:
    """A price for a part in the tier above `tier_floor`: the package's rule (the highest tier
    whose start the part's input is above), for an input just above the floor."""
    from genai_prices.types import TieredPrices

    if not isinstance(value, TieredPrices):
        return value
    size = tier_floor + 1 if tier_floor else 0
    for tier in sorted(value.tiers, key=lambda t: t.start, reverse=True):
        if size > tier.start:
            return tier.price
    return value.base


@dataclass(frozen=True)
class Rates:
    """USD per million tokens of each kind for one group (model, day, fast, tier), per part, and
    per web search (None: the package has no web-search price for the model)."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_create_5m: Decimal
    cache_create_1h: Decimal
    per_part: Decimal = Decimal(0)
    web_search: Decimal | None = None


@lru_cache(maxsize=8192)
def _package_rates(model: str, day: date, fast: bool, tier_floor: int) -> Rates | None:
    """The package's prices of `model` on `day` (None: it has none), flattened to one tier."""
    from genai_prices.data_snapshot import get_snapshot
    from genai_prices.types import ModelPrice

    try:
        provider, info = get_snapshot().find_provider_model(model, None, PROVIDER, None)
    except LookupError:
        return None
    when = datetime.combine(day, time(12), UTC)
    # As calc_price does: a price context applies to the provider's own models only.
    context = {"speed": "fast"} if fast and any(m is info for m in provider.models) else None
    price = info.get_prices(when, context)
    return _probe(tuple(sorted((k, _in_tier(v, tier_floor)) for k, v in vars(price).items() if not k.startswith("_"))),
                  ModelPrice)


@lru_cache(maxsize=1024)
def _probe(flat: tuple, model_price: type) -> Rates:
    """Each kind's rate, as the package prices a million tokens of it alone (its own leaf
    arithmetic: cache reads and writes inside the input), less what a part costs by itself."""
    from genai_prices import Usage

    price = model_price(**dict(flat))

    def usd(**usage: int) -> Decimal:
        return price.calc_price(Usage(**usage))["total_price"]

    million = 1_000_000
    base = usd()
    # The package's web-search unit is per 1,000 searches; a model without one prices them at 0
    # silently, so its absence is read from the price itself (such searches are unpriced, §2.7).
    searches = None if price.web_searches_kcount is None else (usd(web_searches=1000) - base) / 1000
    return Rates(
        input=usd(input_tokens=million) - base,
        output=usd(output_tokens=million) - base,
        cache_read=usd(input_tokens=million, cache_read_tokens=million) - base,
        cache_create_5m=usd(input_tokens=million, cache_write_tokens=million) - base,
        cache_create_1h=usd(input_tokens=million, cache_write_tokens=million, cache_write_1h_tokens=million) - base,
        per_part=base,
        web_search=searches,
    )


def _cost(rate: Rates, tokens: Mapping[str, int], parts: int, web_searches: int = 0) -> Decimal:
    """USD for summed tokens at flat rates. Cache writes: those priced at 1 hour (PRICED_1H) at
    the 1-hour price, all others — the 5-minute ones, those a usage gave without a split, and all
    of a part whose split does not add up — at the 5-minute price (Claude Code's default cache
    lifetime). Web searches at the web-search price (none: they add nothing here, and the caller
    says they are unpriced)."""
    one_hour = tokens[PRICED_1H]
    per_million = (tokens["input"] * rate.input + tokens["output"] * rate.output
                   + tokens["cache_read"] * rate.cache_read + one_hour * rate.cache_create_1h
                   + (tokens["cache_create"] - one_hour) * rate.cache_create_5m)
    searched = web_searches * rate.web_search if web_searches and rate.web_search is not None else 0
    return per_million / _MILLION + parts * rate.per_part + searched


def rates(prices: Prices, model: str, day: date | None, fast: bool, tier_floor: int) -> Rates | None:
    """USD per million tokens of each kind, per part and per web search, for one price group
    (None: not priced). A part without a day is priced as of today (its request had no
    timestamp). A RETROD_PRICES model's tokens are priced by the file, flat, and its web
    searches by the package (accounting.md §2.7): none when the package does not know the model."""
    if not model:
        return None  # (a RETROD_PRICES file names no model "")
    package = _package_rates(model, day or datetime.now(UTC).date(), fast, tier_floor)
    override = prices.override_models.get(model)
    if override is not None:  # flat: nothing per part
        return Rates(**override, web_search=None if package is None else package.web_search)
    return package


def group_cost(prices: Prices, model: str, day: date | None, fast: bool, tier_floor: int,
               tokens: Mapping[str, int], parts: int = 1, web_searches: int = 0) -> tuple[Decimal, bool]:
    """What `parts` parts of one price group cost together, summed tokens and web searches in
    hand, and whether some of it could not be priced (accounting.md §2.7): an unknown model's tokens
    or web searches, a known model's web searches without a web-search price (its tokens are
    still priced: docs/decisions.md)."""
    if not web_searches and not any(tokens[f] for f in TOKENS):
        return Decimal(0), False  # nothing used costs nothing, priced or not (<synthetic> entries)
    found = rates(prices, model, day, fast, tier_floor)
    if found is None:
        return Decimal(0), True
    return _cost(found, tokens, parts, web_searches), bool(web_searches) and found.web_search is None


def usd(value: Decimal) -> float:
    """Dollars as the report shows them: to the micro-dollar."""
    return float(value.quantize(_MICRO))


def by_model(groups: Iterable[Mapping], prices: Prices) -> tuple[list[shapes.ModelTokens], shapes.Cost]:
    """Price groups (rows of model — '' when the transcript named none —, day, fast, tier_floor,
    parts, the token figures and PRICED_1H) summed by model and priced: see `summarize`."""
    models: dict[str, dict] = {}
    for group in groups:
        model = group["model"]
        tokens = {f: int(group[f]) for f in TOKENS}
        searches = int(group[WEB_SEARCHES])
        row = models.setdefault(model, {"model": model or None, "requests": 0, **dict.fromkeys(TOKENS, 0),
                                        WEB_SEARCHES: 0, "fast_requests": 0, "cost": Decimal(0),
                                        "unpriced": False})
        row["requests"] += int(group["parts"])
        row["fast_requests"] += int(group["parts"]) if group["fast"] else 0
        for f in TOKENS:
            row[f] += tokens[f]
        row[WEB_SEARCHES] += searches
        price, unpriced = group_cost(prices, model, _day(group["day"]), bool(group["fast"]),
                                     int(group["tier_floor"]), {**tokens, PRICED_1H: int(group[PRICED_1H])},
                                     int(group["parts"]), searches)
        row["cost"] += price
        row["unpriced"] = row["unpriced"] or unpriced
    return summarize(models.values())


def summarize(models: Iterable[dict]) -> tuple[list[shapes.ModelTokens], shapes.Cost]:
    """Rows by model (`model` None when the transcript named none, `requests` counting parts, the
    token figures, `web_searches`, `fast_requests`, `cost` in Decimal dollars and `unpriced`: some
    part with tokens or web searches no price knows) sorted by output tokens then model, each with
    its `cost_usd`; and the
    cost of them all: `usd` sums what could be priced (null when nothing could),
    `unknown_models` are those with tokens no price knows, `complete` says there are none."""
    out: list[shapes.ModelTokens] = []
    unknown: list[str | None] = []
    total, priced_any = Decimal(0), False
    for row in sorted(models, key=lambda r: (-r["output"], r["model"] or "")):
        row = dict(row)
        unpriced = row.pop("unpriced")
        cost = row.pop("cost")
        if unpriced:
            unknown.append(row["model"])
        if cost or (not unpriced and (row.get(WEB_SEARCHES) or any(row[f] for f in TOKENS))):
            priced_any = True  # (an unpriced row's tokens may be priced: its web searches are not)
        total += cost
        out.append(cast(shapes.ModelTokens, {**row, "cost_usd": None if unpriced else usd(cost)}))
    unknown.sort(key=lambda m: (m is not None, m or ""))  # (the transcript named none) first
    return out, {"usd": None if unknown and not priced_any else usd(total), "unknown_models": unknown,
                 "complete": not unknown}


def _day(value: object) -> date | None:
    if value is None or isinstance(value, date):
        return value
    return date.fromisoformat(str(value))  # a phase's groups come as JSON
