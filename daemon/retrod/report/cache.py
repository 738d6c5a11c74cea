"""Prompt-cache misses priced by cause (accounting.md §2.8): the misses the store found at commit
(migration 0031 walks each stream in SQL; `session_cache_misses` reads them) priced, or each
stream's elements walked here in order (the status line's tail of the main stream), and the
figures of a session, a phase and a subagent, the costliest misses and the live state. Pure: no
SQL here."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple, cast

from ..basics.format import instant
from . import prices as pricing
from . import shapes

CAUSES: tuple[str, ...] = tuple(shapes.Misses.__annotations__)  # compaction, model, expired, invalidated
WASTE_CAUSES = ("model", "expired", "invalidated")  # a compaction's re-write is expected, never waste
FIVE_MINUTES_S = 300
ONE_HOUR_S = 3600
MISS_MIN_REWRITTEN = 2000  # tokens: a breakpoint moving back by a few hundred is no miss
COSTLIEST = 10
_MILLION = Decimal(1_000_000)
_US = timedelta(microseconds=1)
_UNSEEN: Any = object()


class Miss(NamedTuple):  # (a tuple: a long session's report makes hundreds)
    at: datetime
    agent: str
    cause: str
    reason: str | None
    rewritten: int
    extra: Decimal  # unrounded dollars
    pause_us: int
    prefix_before: int


@dataclass(frozen=True, slots=True)
class Last:
    """The main stream's last element: what the live state is made of."""

    at: datetime
    model: str
    fast: bool
    prefix: int
    ttl_s: int  # the lifetime in force after it


class Element(NamedTuple):
    """An element of a stream (`session_cache_main_tail` reads them), in its column order."""

    agent: str
    ts: datetime
    model: str
    fast: bool
    input: int
    cache_read: int
    cache_create: int
    c5: int
    c1: int
    reason: str | None

    @property
    def prefix(self) -> int:
        """What the cache holds for its stream after it."""
        return self.cache_read + self.cache_create

    @property
    def size(self) -> int:
        """Its input tokens in all: what its price tier goes by."""
        return self.input + self.cache_read + self.cache_create

    def rewritten_1h(self, rewritten: int) -> int:
        """Of `rewritten` tokens it wrote again, those of the 1-hour cache: its 1h writes first."""
        return min(rewritten, self.writes()[1])

    def writes(self) -> tuple[int, int]:
        """Its (5m, 1h) writes: all of them 5m when the split does not add up."""
        if self.c5 + self.c1 != self.cache_create:
            return self.cache_create, 0
        return self.c5, self.c1


def walk(rows: Iterable[Sequence], boundaries: Iterable[Sequence],
         prices: pricing.Prices) -> tuple[list[Miss], Last | None]:
    """The misses of every stream, in time order, and the main stream's last element. `rows`:
    Element's columns, each stream's in its order (agent, then §2.8's order); `boundaries`:
    (agent, ts), by agent then time."""
    times: dict[str, list[datetime]] = {}
    for agent, ts in boundaries:
        times.setdefault(agent, []).append(ts)
    found: list[Miss] = []
    main: tuple[Element, int] | None = None
    p: Element | None = None
    ttl = FIVE_MINUTES_S  # in force after `p`: the latest element that wrote sets it
    stream_times: Sequence[datetime] = ()
    for row in rows:
        e = Element(*row)
        if p is not None and p.agent != e.agent:
            if p.agent == "":
                main = (p, ttl)
            p = None
        if p is None:  # a stream's first element is never a miss
            ttl, stream_times = FIVE_MINUTES_S, times.get(e.agent, ())
        else:
            lost = p.prefix - e.cache_read
            # (cheap tests first: most elements read all of p's prefix)
            if lost >= MISS_MIN_REWRITTEN and e.cache_create >= MISS_MIN_REWRITTEN:
                miss = _miss(p, e, ttl, stream_times, prices)
                if miss is not None:
                    found.append(miss)
        if e.cache_create > 0:
            five, hour = e.writes()
            ttl = ONE_HOUR_S if hour > 0 and five == 0 else FIVE_MINUTES_S
        p = e
    if p is not None and p.agent == "":
        main = (p, ttl)
    found.sort(key=lambda m: m.at)  # (stable: streams in agent order at one time)
    last = None if main is None else Last(main[0].ts, main[0].model, main[0].fast, main[0].prefix, main[1])
    return found, last


def _miss(p: Element, e: Element, ttl_after_p: int, boundaries: Sequence[datetime],
          prices: pricing.Prices) -> Miss | None:
    """Element `e` after `p` in its stream: a miss when it wrote at least 2,000 of the tokens `p`
    left cached and read less than 95 % of them; its cause, the first that applies: a compaction
    boundary in (t(p), t(e)], a model switch, a pause past the lifetime in force, else the prefix
    was invalidated."""
    lost = p.prefix - e.cache_read
    rewritten = min(e.cache_create, lost) if lost > 0 else 0
    if rewritten < MISS_MIN_REWRITTEN or 20 * e.cache_read >= 19 * p.prefix:
        return None
    pause = e.ts - p.ts
    if bisect.bisect_right(boundaries, e.ts) > bisect.bisect_right(boundaries, p.ts):
        cause = "compaction"
    elif e.model != p.model:
        cause = "model"
    elif pause > timedelta(seconds=ttl_after_p):
        cause = "expired"
    else:
        cause = "invalidated"
    return Miss(e.ts, e.agent, cause, e.reason, rewritten, _extra(e, rewritten, prices), pause // _US, p.prefix)


def priced(rows: Iterable[Sequence], prices: pricing.Prices) -> list[Miss]:
    """The stored misses (`rows`: report_session_cache_misses' columns, in its order and time
    order; `size` a miss's part's input + cache read + cache write, its price tier; `rewritten_1h`
    the rewritten tokens taken from its 1h writes) with their extra cost: the rewritten tokens at
    the write price less the read price of their 1h / 5m lifetime, at the rates of the element's
    model, day, speed and size tier (miss_extra)."""
    found = []
    rates: dict[tuple, pricing.Rates | None] = {}  # by price group: a long session has hundreds of misses, few groups
    for ts, agent, cause, reason, model, fast, size, rewritten, rewritten_1h, pause_us, prefix_before in rows:
        group = _group(model, fast, size, ts)
        found_rates = rates.get(group, _UNSEEN)
        if found_rates is _UNSEEN:
            found_rates = rates[group] = pricing.rates(prices, *group)
        extra = _extra_at(found_rates, rewritten, rewritten_1h)
        found.append(Miss(ts, agent, cause, reason, rewritten, extra, pause_us, prefix_before))
    return found


def last_of(row: Sequence | None) -> Last | None:
    """The main stream's last element as `session_cache_last` reads it (None: no element)."""
    return None if row is None else Last(*row)


def _group(model: str, fast: bool, size: int, day: datetime) -> tuple[str, date, bool, int]:
    """What an element's rates depend on, as pricing.rates takes it after `prices`."""
    return model, day.astimezone(UTC).date(), fast, pricing.tier_floor(size)


def _rates(model: str, fast: bool, size: int, day: datetime, prices: pricing.Prices) -> pricing.Rates | None:
    return pricing.rates(prices, *_group(model, fast, size, day))


def _extra(e: Element, rewritten: int, prices: pricing.Prices) -> Decimal:
    """cost(e) − cost(e′), e′ reading the rewritten tokens instead of writing them: the 1h writes
    are taken first, at the rates of e's own size tier (unchanged: the input is the same). An
    element whose model no price knows costs nothing extra (§2.7 lists it as unpriced)."""
    return miss_extra(e.model, e.fast, e.size, e.ts, rewritten, e.rewritten_1h(rewritten), prices)


def miss_extra(model: str, fast: bool, size: int, at: datetime, rewritten: int, rewritten_1h: int,
               prices: pricing.Prices) -> Decimal:
    """A miss's extra cost from what is stored of it (migration 0031): its part's model,
    speed, size and time, the tokens it wrote again and the 1h ones among them."""
    return _extra_at(_rates(model, fast, size, at, prices), rewritten, rewritten_1h)


def _extra_at(rates: pricing.Rates | None, rewritten: int, rewritten_1h: int) -> Decimal:
    if rates is None:
        return Decimal(0)
    return ((rewritten - rewritten_1h) * (rates.cache_create_5m - rates.cache_read)
            + rewritten_1h * (rates.cache_create_1h - rates.cache_read)) / _MILLION


def figures(tokens: Mapping[str, Any], scope: Iterable[Miss]) -> shapes.Cache:
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
        "misses": cast(shapes.Misses, {cause: {"count": counts[cause], "rewritten": rewritten[cause],
                                               "extra_usd": pricing.usd(extra[cause])} for cause in CAUSES}),
        "waste_usd": pricing.usd(sum((extra[c] for c in WASTE_CAUSES), Decimal(0))),
    }


def waste(found: Iterable[Miss]) -> float:
    """The extra cost of the misses that are waste (not after a compaction), to the micro-dollar."""
    return pricing.usd(sum((m.extra for m in found if m.cause in WASTE_CAUSES), Decimal(0)))


def in_window(found: Sequence[Miss], start: datetime, end: datetime | None, now: datetime) -> list[Miss]:
    """The misses whose element's request falls in a phase's window (open: until now). `found` in
    time order, as `walk` returns them: found by bisection, as a long session's plan has thousands
    of task windows and hundreds of misses."""
    stop = end if end is not None else now
    return list(found[bisect.bisect_left(found, start, key=_at):bisect.bisect_left(found, stop, key=_at)])


def in_tasks(found: Sequence[Miss], windows: Sequence[tuple[datetime, datetime | None, int]],
             tasks: int, now: datetime) -> list[list[Miss]]:
    """The misses in each task's windows, by task (0 the first of `tasks`), in time order: `windows`
    are every task's, as (start, end or None: open, until now, task), sorted by start; no two
    overlap (accounting.md §2.9: one task is current at a time). Each miss is looked for once among
    them, as a long session's plan has thousands of windows and hundreds of misses."""
    starts = [w[0] for w in windows]
    out: list[list[Miss]] = [[] for _ in range(tasks)]
    for miss in found:
        i = bisect.bisect_right(starts, miss.at) - 1
        if i >= 0 and miss.at < (windows[i][1] or now):
            out[windows[i][2]].append(miss)
    return out


def _at(miss: Miss) -> datetime:
    return miss.at


def of_agent(found: Iterable[Miss], agent: str) -> list[Miss]:
    return [m for m in found if m.agent == agent]


def costliest(found: Iterable[Miss]) -> list[shapes.Miss]:
    """The ten misses with the largest extra cost, the earlier first among equals."""
    return listed(heapq.nsmallest(COSTLIEST, found, key=lambda m: (-m.extra, m.at)))


def listed(found: Iterable[Miss]) -> list[shapes.Miss]:
    """Misses as the report's JSON shows them, in the order given (`cache_misses`: all of them,
    in time order, for the timeline's markers; `costliest`: the ten)."""
    return [{"at": instant(m.at), "agent": m.agent, "cause": m.cause, "reason": m.reason,
             "rewritten": m.rewritten, "extra_usd": pricing.usd(m.extra), "pause_s": round(m.pause_us / 1_000_000, 3),
             "prefix_before": m.prefix_before} for m in found]


def live(last: Last | None, now: datetime, prices: pricing.Prices) -> shapes.LiveCache:
    """The main stream's cache as of `now`: warm with the seconds left, or cold; what the next
    message writes again once it is cold, and what that costs beyond reading it (by the last
    element's model and speed, at today's prices, in the tier of a request that size)."""
    if last is None:
        return {"state": "none", "ttl_s": None, "seconds_left": None, "prefix_tokens": None, "rewrite_usd": None,
                "last_request_at": None}
    age_us = max(0, (now - last.at) // _US)
    warm = age_us <= last.ttl_s * 1_000_000
    rates = _rates(last.model, last.fast, last.prefix, now, prices)
    if rates is None:
        rewrite = None
    else:
        write = rates.cache_create_1h if last.ttl_s == ONE_HOUR_S else rates.cache_create_5m
        rewrite = pricing.usd(last.prefix * (write - rates.cache_read) / _MILLION)
    return {"state": "warm" if warm else "cold", "ttl_s": last.ttl_s,
            "seconds_left": round((last.ttl_s * 1_000_000 - age_us) / 1_000_000, 3) if warm else 0,
            "prefix_tokens": last.prefix, "rewrite_usd": rewrite, "last_request_at": instant(last.at)}
