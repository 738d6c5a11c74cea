"""List prices per model, and what tokens cost at them: an estimate made when a report is read,
never stored (prices change; token counts do not). A model the table lacks is not priced, never
guessed: the report says so."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from functools import cache
from importlib.resources import files
from pathlib import Path

# USD per million tokens, by the token figure they price.
RATES = ("input", "output", "cache_read", "cache_create_5m", "cache_create_1h")
TOKENS = ("input", "output", "cache_read", "cache_create", "cache_create_5m", "cache_create_1h")
_TOP_LEVEL = {"date", "source", "notes", "models"}
_MILLION = Decimal(1_000_000)
_MICRO = Decimal("0.000001")
# No list price comes near it; a larger one is a typo, and would overflow the rounding to micro-dollars.
_MAX_RATE = 1_000_000


class PricesError(ValueError):
    """A price table that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Prices:
    date: str
    source: str
    models: Mapping[str, Mapping[str, Decimal]]
    override: str | None = None  # the RETROD_PRICES file that replaced or added models


@cache
def shipped() -> Prices:
    """The table shipped in the package (prices.json beside this module)."""
    text = (files(__package__) / "prices.json").read_text(encoding="utf-8")
    table = _parse(text, "retrod's shipped prices.json", need_date=True)
    return Prices(table["date"], table["source"], table["models"])


def load(override: str | Path | None) -> Prices:
    """The shipped table, with the models of a RETROD_PRICES file replacing or extending its own."""
    base = shipped()
    if override is None:
        return base
    where = f"RETROD_PRICES={override}"
    try:
        text = Path(override).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PricesError(f"{where}: cannot read it: {problem}") from None
    table = _parse(text, where, need_date=False)
    return Prices(table.get("date") or base.date, table.get("source") or base.source,
                  {**base.models, **table["models"]}, str(override))


def _parse(text: str, where: str, need_date: bool) -> dict:
    try:
        table = json.loads(text, parse_float=Decimal, parse_constant=_not_json)
    except ValueError as exc:  # json.JSONDecodeError, and NaN/Infinity
        raise PricesError(f"{where}: not JSON: {exc}") from None
    if not isinstance(table, dict):
        raise PricesError(f"{where}: must be a JSON object with \"models\"")
    unknown = sorted(set(table) - _TOP_LEVEL)
    if unknown:
        raise PricesError(f"{where}: unknown key {unknown[0]!r} (use {', '.join(sorted(_TOP_LEVEL))})")
    if need_date or "date" in table:
        _check_date(table.get("date"), where)
    if not isinstance(table.get("source", ""), str):
        raise PricesError(f"{where}: \"source\" must be a string")
    models = table.get("models")
    if not isinstance(models, dict) or not models:
        raise PricesError(f"{where}: \"models\" must be an object of model name to prices")
    table["models"] = {name: _rates(name, rates, where) for name, rates in models.items()}
    return table


def _not_json(name: str) -> Decimal:
    raise ValueError(f"{name} is not a number JSON allows")


def _check_date(value: object, where: str) -> None:
    try:
        if not isinstance(value, str):
            raise TypeError
        date.fromisoformat(value)
    except (TypeError, ValueError):
        raise PricesError(f"{where}: \"date\" must be a date, YYYY-MM-DD, not {value!r}") from None


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
                              f" (USD per million tokens), not {value!r}")
        out[rate] = Decimal(value)
    return out


def cost(rates: Mapping[str, Decimal], tokens: Mapping[str, int]) -> Decimal:
    """USD for `tokens` at `rates`. Cache writes: those in the 1-hour split at the 1-hour price,
    all others — the 5-minute ones, and those a usage gave without a split — at the 5-minute
    price (Claude Code's default cache lifetime)."""
    one_hour = min(tokens["cache_create_1h"], tokens["cache_create"])
    per_million = (tokens["input"] * rates["input"] + tokens["output"] * rates["output"]
                   + tokens["cache_read"] * rates["cache_read"] + one_hour * rates["cache_create_1h"]
                   + (tokens["cache_create"] - one_hour) * rates["cache_create_5m"])
    return per_million / _MILLION


def usd(value: Decimal) -> float:
    """Dollars as the report shows them: to the micro-dollar."""
    return float(value.quantize(_MICRO))


def by_model(rows: Iterable[Mapping], prices: Prices) -> tuple[list[dict], dict]:
    """Per-model token rows (`model` '' = the transcript named none), priced, sorted by output
    tokens then model; and the cost of them all: `usd` sums what could be priced (null when
    nothing could), `unknown_models` are those with tokens the table has no price for."""
    out: list[dict] = []
    unknown: list[str | None] = []
    known, priced_any = Decimal(0), False
    for row in sorted(rows, key=lambda r: (-int(r["output"]), r["model"])):
        tokens = {f: int(row[f]) for f in TOKENS}
        rates = prices.models.get(row["model"])
        price: Decimal | None = None
        if not any(tokens.values()):
            price = Decimal(0)  # nothing used costs nothing, priced or not (<synthetic> entries)
        elif rates is None:
            unknown.append(row["model"] or None)
        else:
            price, priced_any = cost(rates, tokens), True
            known += price
        out.append({"model": row["model"] or None, "requests": int(row["requests"]), **tokens,
                    "cost_usd": None if price is None else usd(price)})
    return out, {"usd": None if unknown and not priced_any else usd(known), "prices_date": prices.date,
                 "unknown_models": unknown, "complete": not unknown}
