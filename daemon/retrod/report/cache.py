"""Prompt-cache misses priced by cause (DESIGN §2.8): the figures of a session, a phase and a
subagent, the costliest misses and the live state, from the rows `session_cache_misses` reads
(each miss with the element before it, and the main stream's last element). Pure: no SQL here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from . import prices as pricing

CAUSES = ("compaction", "model", "expired", "invalidated")
WASTE_CAUSES = ("model", "expired", "invalidated")  # a compaction's re-write is expected, never waste
ONE_HOUR_S = 3600
COSTLIEST = 10
_MILLION = Decimal(1_000_000)
_US = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Miss:
    at: datetime
    agent: str
    cause: str
    reason: str | None
    rewritten: int
    extra: Decimal  # unrounded dollars
    pause_us: int
    prefix_before: int


def _cause(row: Mapping) -> str:
    """The first that applies: a compaction between the two, a model switch, a pause past the
    lifetime in force after the element before, else the prefix was invalidated."""
    if row["after_compaction"]:
        return "compaction"
    if row["model"] != row["prev_model"]:
        return "model"
    if row["ts"] - row["prev_ts"] > timedelta(seconds=row["prev_ttl"]):
        return "expired"
    return "invalidated"


def _rates(model: str, fast: bool, size: int, day: datetime, prices: pricing.Prices) -> pricing.Rates | None:
    return pricing.rates(prices, model, day.astimezone(UTC).date(), fast, pricing.tier_floor(size))


def _extra(row: Mapping, prices: pricing.Prices) -> Decimal:
    """cost(e) − cost(e′), e′ reading the rewritten tokens instead of writing them: the 1h writes
    are taken first, at the rates of e's own size tier (unchanged: the input is the same). An
    element whose model no price knows costs nothing extra (§2.7 lists it as unpriced)."""
    rates = _rates(row["model"], row["fast"], row["input"] + row["cache_read"] + row["cache_create"], row["ts"], prices)
    if rates is None:
        return Decimal(0)
    one_hour = min(row["rewritten"], row["c1"])
    five_minutes = row["rewritten"] - one_hour
    return (five_minutes * (rates.cache_create_5m - rates.cache_read)
            + one_hour * (rates.cache_create_1h - rates.cache_read)) / _MILLION


def misses(rows: Iterable[Mapping], prices: pricing.Prices) -> list[Miss]:
    """The session's misses, in time order, from `session_cache_misses`' rows."""
    return [Miss(row["ts"], row["agent"], _cause(row), row["reason"], int(row["rewritten"]), _extra(row, prices),
                 (row["ts"] - row["prev_ts"]) // _US, int(row["prev_prefix"]))
            for row in rows if row["miss"]]


def figures(tokens: Mapping[str, int], scope: Iterable[Miss]) -> dict:
    """A scope's figures: `tokens` its requests' input, cache_read and cache_create; `scope`
    its misses."""
    read, create = int(tokens["cache_read"]), int(tokens["cache_create"])
    whole = int(tokens["input"]) + read + create
    counts = dict.fromkeys(CAUSES, 0)
    rewritten = dict.fromkeys(CAUSES, 0)
    extra = dict.fromkeys(CAUSES, Decimal(0))
    for miss in scope:
        counts[miss.cause] += 1
        rewritten[miss.cause] += miss.rewritten
        extra[miss.cause] += miss.extra
    return {
        "read": read,
        "create": create,
        "hit_ratio": read / whole if whole else None,
        "misses": {cause: {"count": counts[cause], "rewritten": rewritten[cause],
                           "extra_usd": pricing.usd(extra[cause])} for cause in CAUSES},
        "waste_usd": pricing.usd(sum((extra[c] for c in WASTE_CAUSES), Decimal(0))),
    }


def in_window(found: Iterable[Miss], start: datetime, end: datetime | None, now: datetime) -> list[Miss]:
    """The misses whose element's request falls in a phase's window (open: until now)."""
    stop = end if end is not None else now
    return [m for m in found if start <= m.at < stop]


def of_agent(found: Iterable[Miss], agent: str) -> list[Miss]:
    return [m for m in found if m.agent == agent]


def costliest(found: Iterable[Miss]) -> list[dict]:
    """The ten misses with the largest extra cost, the earlier first among equals."""
    ranked = sorted(found, key=lambda m: (-m.extra, m.at))[:COSTLIEST]
    return [{"at": m.at.isoformat(), "agent": m.agent, "cause": m.cause, "reason": m.reason,
             "rewritten": m.rewritten, "extra_usd": pricing.usd(m.extra), "pause_s": round(m.pause_us / 1_000_000, 3),
             "prefix_before": m.prefix_before} for m in ranked]


def live(rows: Iterable[Mapping], now: datetime, prices: pricing.Prices) -> dict:
    """The main stream's cache as of `now`: warm with the seconds left, or cold; what the next
    message writes again once it is cold, and what that costs beyond reading it (by the last
    element's model and speed, at today's prices, in the tier of a request that size)."""
    last = next((row for row in rows if row["last_main"]), None)
    if last is None:
        return {"state": "none", "ttl_s": None, "seconds_left": None, "prefix_tokens": None, "rewrite_usd": None,
                "last_request_at": None}
    ttl = int(last["ttl"])
    age_us = max(0, (now - last["ts"]) // _US)
    warm = age_us <= ttl * 1_000_000
    prefix = int(last["prefix"])
    rates = _rates(last["model"], last["fast"], prefix, now, prices)
    if rates is None:
        rewrite = None
    else:
        write = rates.cache_create_1h if ttl == ONE_HOUR_S else rates.cache_create_5m
        rewrite = pricing.usd(prefix * (write - rates.cache_read) / _MILLION)
    return {"state": "warm" if warm else "cold", "ttl_s": ttl,
            "seconds_left": round((ttl * 1_000_000 - age_us) / 1_000_000, 3) if warm else 0,
            "prefix_tokens": prefix, "rewrite_usd": rewrite, "last_request_at": last["ts"].isoformat()}
