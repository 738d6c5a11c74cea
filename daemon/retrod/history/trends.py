"""`retrod trends`: is the work getting more efficient, and where does the money go — per day,
week or month, per project and per model.

Every figure is a sum of the per-session figures `retrod report` shows (tokens by bucket, cost,
Claude / tool / human / away time, tool calls and their waste signals, the phases' verdicts), read
from per-session rollups (migration 0018), so that a period of 10,000 sessions costs what a few
indexed reads do. A session counts wholly in the period it started in (its first line: the
report's `started_at`), however long it ran: its figures are never split across periods, so each
period's figures are exactly the sum of its sessions' reports. Periods are cut in a time zone
(the local one unless told), weeks start on Monday.

`trends()` answers JSON-able data: the command prints it (`render`), `retrod mcp` and the web
dashboard's `/api/trends` serve it as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import psycopg
from psycopg import Connection
from psycopg.rows import dict_row

from ..basics import invocation
from ..basics.errors import UserError
from ..basics.format import NONE, count, duration, points, rate, share, tokens, usd, usd_change
from ..basics.stored_text import one_line, quoted
from ..basics.verdicts import shown
from ..lessons import PATTERNS
from ..report import cache, markdown, rates
from ..report import prices as pricing
from ..report.model import AWAY_AFTER_S, BUCKETS, PRODUCTIVE, SIGNALS, TOKEN_FIELDS, tool_use_figures
from ..store.members import current_role
from ..store.queries import q
from ..tracking import project_args, project_match
from . import lesson_data, trend_periods

PERIODS = ("day", "week", "month")
SPLITS = ("project", "model", "machine", "session")  # session: for the brief, not offered on the command line
TOP_WASTE = 3


class TrendsError(UserError, ValueError):
    """A period, split, time zone or date that is not one: the user's mistake."""


def local_zone(env: dict[str, str] | None = None) -> str:
    """The name of this machine's time zone: `TZ` when it names one, else the zone /etc/localtime
    links to, else UTC (a name, not an offset: periods cut across a daylight-saving change)."""
    env = dict(invocation.env()) if env is None else env
    candidates = [env.get("TZ", "").removeprefix(":")]
    try:
        candidates.append(str(Path("/etc/localtime").resolve()).partition("/zoneinfo/")[2])
    except OSError:
        pass
    for name in candidates:
        if name and _known_zone(name):
            return name
    return "UTC"


def _known_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def check_zone(name: str) -> str:
    if not _known_zone(name):
        raise TrendsError(f"unknown time zone {name!r}; use a name such as UTC or Europe/Berlin")
    return name


def zone_of(tz: str | None) -> str:
    """The periods' time zone: the one named (checked), else this machine's."""
    return check_zone(tz) if tz else local_zone()


def parse_since(text: str, zone: str) -> datetime:
    """ISO 8601 date or time; without an offset, in the periods' time zone."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise TrendsError(f"--since {text!r} is not a date; use ISO 8601, e.g. 2026-11-01") from None
    return value if value.tzinfo else value.replace(tzinfo=ZoneInfo(zone))


TIMES = ("wall", "claude", "tool", "human", "away")  # microseconds, as trend_figures sums them
SPLIT_BUCKETS = BUCKETS[:-1]  # main, subagents, compaction: `total` is their sum


@dataclass(slots=True)
class _Model:
    """One model's sums (trend_figures' `models`): tokens by bucket, each as TOKEN_FIELDS in order.
    (Plain fields and lists: a year by day is hundreds of periods, each added up in Python.)"""

    sessions: int
    requests: int
    parts: int
    fast_parts: int
    cache_create_5m: int
    cache_create_1h: int
    web_searches: int
    cost: Decimal
    unpriced: bool
    tokens: list[list[int]]

    @classmethod
    def of(cls, m: dict) -> _Model:
        return cls(m["sessions"], m["requests"], m["parts"], m["fast_parts"], m["cache_create_5m"],
                   m["cache_create_1h"], m["web_searches"], Decimal(m["cost"]), m["unpriced"],
                   [m[b] for b in SPLIT_BUCKETS])

    def add(self, other: _Model) -> None:
        self.sessions += other.sessions
        self.requests += other.requests
        self.parts += other.parts
        self.fast_parts += other.fast_parts
        self.cache_create_5m += other.cache_create_5m
        self.cache_create_1h += other.cache_create_1h
        self.web_searches += other.web_searches
        self.cost += other.cost
        self.unpriced = self.unpriced or other.unpriced
        self.tokens = [[a + b for a, b in zip(mine, theirs, strict=True)]
                       for mine, theirs in zip(self.tokens, other.tokens, strict=True)]


@dataclass(slots=True)
class _Misses:
    """Prompt-cache misses of one model and cause (trend_figures' `cache_misses`)."""

    count: int = 0
    rewritten: int = 0
    extra: Decimal = Decimal(0)  # USD, unrounded

    def add(self, other: _Misses) -> None:
        self.count += other.count
        self.rewritten += other.rewritten
        self.extra += other.extra


@dataclass
class _Sums:
    """Unrounded sums of per-session figures (a period, a project in it, or everything)."""

    sessions: int = 0
    us: list[int] = field(default_factory=lambda: [0] * len(TIMES))
    tool_result_bytes: int = 0
    calls: list[int] = field(default_factory=lambda: [0] * (1 + len(SIGNALS)))  # productive, then SIGNALS
    models: dict[str, _Model] = field(default_factory=dict)
    verdicts: dict[str, int] = field(default_factory=dict)
    misses: dict[tuple[str, str], _Misses] = field(default_factory=dict)  # accounting.md §2.8, by (model, cause)

    @classmethod
    def of(cls, row: dict) -> _Sums:
        return cls(row["sessions"], [row[f"{k}_us"] for k in TIMES], row["tool_result_bytes"],
                   [row["productive"], *(row[s] for s in SIGNALS)],
                   {m["model"]: _Model.of(m) for m in row["models"]}, row["verdicts"],
                   {(m["model"], m["cause"]): _Misses(m["count"], m["rewritten"], Decimal(m["extra"]))
                    for m in row["cache_misses"]})

    def add(self, other: _Sums) -> None:
        self.sessions += other.sessions
        self.us = [a + b for a, b in zip(self.us, other.us, strict=True)]
        self.tool_result_bytes += other.tool_result_bytes
        self.calls = [a + b for a, b in zip(self.calls, other.calls, strict=True)]
        for model, theirs in other.models.items():
            mine = self.models.get(model)
            if mine is None:
                self.models[model] = _Model(**{f: getattr(theirs, f) for f in _Model.__slots__})
                self.models[model].tokens = [list(t) for t in theirs.tokens]
            else:
                mine.add(theirs)
        for k, v in other.verdicts.items():
            self.verdicts[k] = self.verdicts.get(k, 0) + v
        for key, theirs_misses in other.misses.items():
            self.misses.setdefault(key, _Misses()).add(theirs_misses)


def _s(us: int) -> float:
    return round(us / 1_000_000, 3)


def figures(sums: _Sums) -> dict:
    """What a period (or a project in it) shows: the sums of its sessions' report figures."""
    by_bucket = [[0] * len(TOKEN_FIELDS) for _ in SPLIT_BUCKETS]
    rows = []
    for model, m in sums.models.items():
        totals = [0] * len(TOKEN_FIELDS)
        for i, in_bucket in enumerate(m.tokens):
            for j, n in enumerate(in_bucket):
                by_bucket[i][j] += n
                totals[j] += n
        rows.append({"model": model or None, "requests": m.parts, **dict(zip(TOKEN_FIELDS, totals, strict=True)),
                     "cache_create_5m": m.cache_create_5m, "cache_create_1h": m.cache_create_1h,
                     "web_searches": m.web_searches, "fast_requests": m.fast_parts, "cost": m.cost,
                     "unpriced": m.unpriced})
    by_model, cost = pricing.summarize(rows)
    tokens = {b: dict(zip(TOKEN_FIELDS, by_bucket[i], strict=True)) for i, b in enumerate(SPLIT_BUCKETS)}
    tokens["total"] = {f: sum(t[j] for t in by_bucket) for j, f in enumerate(TOKEN_FIELDS)}
    tool_use = tool_use_figures(dict(zip((PRODUCTIVE, *SIGNALS), sums.calls, strict=True)))
    signals = cast(dict[str, int], tool_use["signals"])
    ranked = sorted(((n, s) for s, n in signals.items() if n), key=lambda x: (-x[0], SIGNALS.index(x[1])))
    wall, claude, tool, human, away = sums.us
    cache_figures = _cache(sums, tokens["total"], cost["usd"])
    waste_by_model: dict[str, Decimal] = {}
    for (model, cause), misses in sums.misses.items():
        if cause in cache.WASTE_CAUSES:
            waste_by_model[model] = waste_by_model.get(model, Decimal(0)) + misses.extra
    return {
        "sessions": sums.sessions,
        "requests": sum(m.requests for m in sums.models.values()),
        "tokens": tokens,
        "cost": cost,
        "cost_per_session": round(cost["usd"] / sums.sessions, 6) if cost["usd"] is not None and sums.sessions
        else None,
        "wall_s": _s(wall), "claude_s": _s(claude), "tool_s": _s(tool), "human_s": _s(human - away),
        "away_s": _s(away),
        "tool_result_bytes": sums.tool_result_bytes,
        "tool_use": tool_use,
        "top_waste": [{"signal": s, "count": n} for n, s in ranked[:TOP_WASTE]],
        "verdicts": dict(sorted(sums.verdicts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "tokens_by_model": [{**m, "sessions": sums.models[m["model"] or ""].sessions,
                             "cache_waste_usd": pricing.usd(waste_by_model.get(m["model"] or "", Decimal(0)))}
                            for m in by_model],
        "cache": cache_figures,
    }


def _cache(sums: _Sums, total: dict, cost_usd: float | None) -> dict:
    """The report's `cache` figures summed over the sessions (accounting.md §2.8: read, create, hit
    ratio, misses by cause, waste), and `waste_share`: the waste's part of the estimated cost
    (None when nothing was priced)."""
    by_cause = {c: _Misses() for c in cache.CAUSES}
    for (_model, cause), misses in sums.misses.items():
        by_cause[cause].add(misses)
    whole = total["input"] + total["cache_read"] + total["cache_create"]
    waste = sum((by_cause[c].extra for c in cache.WASTE_CAUSES), Decimal(0))
    return {
        "read": total["cache_read"], "create": total["cache_create"],
        "hit_ratio": total["cache_read"] / whole if whole else None,
        "misses": {c: {"count": m.count, "rewritten": m.rewritten, "extra_usd": pricing.usd(m.extra)}
                   for c, m in by_cause.items()},
        "waste_usd": pricing.usd(waste),
        "waste_share": float(waste) / cost_usd if cost_usd else None,
    }


def price_table(conn: Connection, member: str, prices: pricing.Prices, sessions: list[str] | None = None) -> str:
    """The prices of every price group the member's sessions have, as trend_figures reads them
    (report/rates.py)."""
    keys = conn.execute(q("trends_price_keys"), {"member": member, "sessions": sessions}).fetchall()
    return rates.table(keys, prices)


def change(now: dict, before: dict | None) -> dict | None:
    """What moved since the period before (None: there is none to compare with)."""
    if before is None:
        return None

    def delta(a: float | None, b: float | None, digits: int) -> float | None:
        return None if a is None or b is None else round(a - b, digits)

    return {
        "sessions": now["sessions"] - before["sessions"],
        "cost_usd": delta(now["cost"]["usd"] or 0.0, before["cost"]["usd"] or 0.0, 6),
        "cost_per_session": delta(now["cost_per_session"], before["cost_per_session"], 6),
        "output_tokens": now["tokens"]["total"]["output"] - before["tokens"]["total"]["output"],
        "claude_s": delta(now["claude_s"], before["claude_s"], 3),
        "efficiency": delta(now["tool_use"]["efficiency"], before["tool_use"]["efficiency"], 4),
        "cache_waste_usd": delta(now["cache"]["waste_usd"], before["cache"]["waste_usd"], 6),
    }


def _next(period: date, by: str) -> date:
    if by == "day":
        return period + timedelta(days=1)
    if by == "week":
        return period + timedelta(days=7)
    return date(period.year + period.month // 12, period.month % 12 + 1, 1)


def trends(conn: Connection, *, by: str = "week", project: str | None = None, since: datetime | None = None,
           split: str | None = None, prices: pricing.Prices = pricing.DEFAULT, tz: str = "UTC",
           member: str | None = None, away_after_s: float = AWAY_AFTER_S,
           sessions: list[str] | None = None, machine: str | None = None) -> dict:
    """Per period of `by` (day, week, month), oldest first, every period between the first and
    the last that has a session (empty ones included, so that each period's `change` is from the
    one right before it); with `split` ("project", "model" or "machine"), each period's figures
    per project, per model or per machine too. `project`: as every surface reads it
    (resolve.match_project); `since`: sessions that started at or after it; `member`: whose rows
    (default: one's own); `sessions`: only these (the brief's); `machine`: only the figures that
    host id's files hold (as its `machines` row in the split: accounting.md §4). Sessions without any
    timestamp come last, undated. The periods' figures are kept between asks (trend_periods.py):
    read them, never change them."""
    return _answer(conn, by=by, project=project, since=since, split=split, prices=prices, tz=tz, member=member,
                   away_after_s=away_after_s, sessions=sessions, machine=machine).as_dict()


def trends_json(conn: Connection, *, by: str = "week", project: str | None = None, since: datetime | None = None,
                split: str | None = None, prices: pricing.Prices = pricing.DEFAULT, tz: str = "UTC",
                member: str | None = None, away_after_s: float = AWAY_AFTER_S, machine: str | None = None) -> bytes:
    """`trends` as the web UI sends it: compact JSON in UTF-8 (Starlette's JSONResponse's bytes),
    each kept period's made once."""
    return _answer(conn, by=by, project=project, since=since, split=split, prices=prices, tz=tz, member=member,
                   away_after_s=away_after_s, sessions=None, machine=machine).as_json()


def _json(value: object) -> str:
    """As the web UI encodes its answers (Starlette's JSONResponse)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class _Period:
    """A period's sums as trend_figures gives them: the whole period and, split, each group in it
    (a project with its folder name and working folder, a machine or a session: name, slug,
    path, sums), in the statement's order. Its figures and their JSON are worked out when first
    asked for: a kept period is answered again and again."""

    __slots__ = ("_figures", "_json", "_parts", "parts", "whole")

    def __init__(self, whole: _Sums, parts: list[tuple[str, str | None, str | None, _Sums]]) -> None:
        self.whole, self.parts = whole, parts
        self._figures: dict | None = None
        self._json: str | None = None
        self._parts: list[tuple[dict, str]] | None = None

    def figures(self) -> dict:
        if self._figures is None:
            self._figures = figures(self.whole)
        return self._figures

    def json(self) -> str:
        """Its figures as JSON, without the braces."""
        if self._json is None:
            self._json = _json(self.figures())[1:-1]
        return self._json

    def part_figures(self) -> list[tuple[dict, str]]:
        """Each group's figures, and as JSON without the braces."""
        if self._parts is None:
            self._parts = [(f, _json(f)[1:-1]) for f in (figures(s) for *_label, s in self.parts)]
        return self._parts


def _periods(rows: list[dict], machine_rows: list[dict]) -> dict[date | None, _Period]:
    """trends_figures' rows as periods: a period's rows (one per project or session in it) add up
    to the period; by machine, the period is the unsplit row and each machine's row a part of it
    (a session on two machines is in both machines' per-model session counts, and once in the
    period's)."""
    whole: dict[date | None, _Sums] = {}
    parts: dict[date | None, list[tuple[str, str | None, str | None, _Sums]]] = {}
    for row in rows:
        sums = _Sums.of(row)
        if row["grp"] is None:  # (no split: the one row is the period)
            whole[row["period"]] = sums
            continue
        whole.setdefault(row["period"], _Sums()).add(sums)
        parts.setdefault(row["period"], []).append((row["grp"], row["slug"], row["path"], sums))
    for row in machine_rows:
        parts.setdefault(row["period"], []).append((row["machine"], None, None, _Sums.of(row)))
    return {period: _Period(sums, parts.get(period, [])) for period, sums in whole.items()}


@lru_cache(maxsize=4096)
def _bounds(period: date, by: str, zone: str) -> tuple[str, str]:
    tz = ZoneInfo(zone)
    return (datetime.combine(period, time(), tz).isoformat(),
            datetime.combine(_next(period, by), time(), tz).isoformat())


_NOTHING: list[tuple[dict, str]] = []  # a period without sessions: its figures and their JSON, made once


def _nothing() -> tuple[dict, str]:
    if not _NOTHING:
        empty = figures(_Sums())
        _NOTHING.append((empty, _json(empty)[1:-1]))
    return _NOTHING[0]


@dataclass
class _Entry:
    """A period as the answer shows it."""

    period: date | None
    figures: dict
    json: str  # its figures as JSON, without the braces
    change: dict | None
    parts: list[tuple[dict, dict, str]]  # each group's label, figures and their JSON


@dataclass
class _Answer:
    head: dict  # what comes before the periods
    label: str | None  # the parts' list: projects, machines or per_session (None: not split)
    by: str
    tz: str
    entries: list[_Entry]
    pattern_rates: list[dict] | None  # each entry's (None: no pattern named)
    total: tuple[dict, str]
    memo: dict  # the kept answer's (its JSON is made once, while no period changes)

    def as_dict(self) -> dict:
        periods = []
        for n, e in enumerate(self.entries):
            start, end = _bounds(e.period, self.by, self.tz) if e.period is not None else (None, None)
            entry = {"period": e.period.isoformat() if e.period else None, "start": start, "end": end, **e.figures,
                     "change": e.change}
            if self.label is not None:
                entry[self.label] = [{**label, **f} for label, f, _ in e.parts]
            if self.pattern_rates is not None:
                entry["pattern_rates"] = self.pattern_rates[n]
            periods.append(entry)
        return {**self.head, "periods": periods, "total": self.total[0]}

    def as_json(self) -> bytes:
        key = ("json", json.dumps(self.head, default=str))
        if key not in self.memo:
            pieces = []
            for n, e in enumerate(self.entries):
                start, end = _bounds(e.period, self.by, self.tz) if e.period is not None else (None, None)
                text = (f'{{"period":{_json(e.period.isoformat() if e.period else None)},"start":{_json(start)},'
                        f'"end":{_json(end)},{e.json},"change":{_json(e.change)}')
                if self.label is not None:
                    text += f',"{self.label}":[' + ",".join(
                        "{" + _json(label)[1:-1] + "," + j + "}" for label, _, j in e.parts) + "]"
                if self.pattern_rates is not None:
                    text += f',"pattern_rates":{_json(self.pattern_rates[n])}'
                pieces.append(text + "}")
            self.memo[key] = (_json(self.head)[:-1] + ',"periods":[' + ",".join(pieces) + '],"total":{'
                              + self.total[1] + "}}").encode()
        return self.memo[key]


def _answer(conn: Connection, *, by: str, project: str | None, since: datetime | None, split: str | None,
            prices: pricing.Prices, tz: str, member: str | None, away_after_s: float, sessions: list[str] | None,
            machine: str | None) -> _Answer:
    if by not in PERIODS:
        raise TrendsError(f"--by {by!r}: use one of {', '.join(PERIODS)}")
    if split not in (None, *SPLITS):
        raise TrendsError(f"split {split!r}: use one of {', '.join(SPLITS)}")
    check_zone(tz)
    pricing.store_tiers(conn)  # the tiers the rollups are summed by are the ones priced
    member = member or current_role(conn)
    match = project_match(conn, project, member)
    args = {"member": member, **project_args(match), "since": since, "by": by, "tz": tz,
            "away_us": int(away_after_s * 1_000_000), "by_project": split == "project",
            "by_session": split == "session", "sessions": sessions, "by_machine": machine is not None,
            "machine": machine}
    table: list[str] = []  # the price table, read once an ask, when a period is summed

    def figure_rows(span: trend_periods.Span, **changes: object) -> list[dict]:
        if not table:
            table.append(price_table(conn, member, prices, sessions))
        with conn.cursor(row_factory=dict_row) as cur:
            # planned for its arguments each time: a generic plan is far slower
            return cur.execute(q("trends_figures"), {**args, **span, "rates": table[0], **changes},
                               prepare=False).fetchall()

    def summed(span: trend_periods.Span) -> dict[date | None, _Period]:
        # By machine, the period is the unsplit answer, not the machines' rows added up.
        return _periods(figure_rows(span), figure_rows(span, by_machine=True) if split == "machine" else [])

    try:
        if sessions is None and machine is None and split not in ("machine", "session"):
            answer = ("trends", by, tz, split == "project", args["projects"] and tuple(args["projects"]),
                      args["slugs"] and tuple(args["slugs"]), since, args["away_us"], prices.identity())
            kept = trend_periods.periods(conn, answer, member, by, tz, summed, lambda p: 1 + len(p.parts))
        else:  # (the brief's few sessions, and machines, read from the stored rows: summed each time)
            kept = trend_periods.Kept({}, summed(trend_periods.EVERY_SESSION))
    except psycopg.errors.InvalidParameterValue as exc:  # a zone Python knows and PostgreSQL does not
        raise TrendsError(f"time zone {tz!r}: {' '.join(str(exc).split())}") from None
    periods = kept.periods
    if "keys" not in kept.memo:
        kept.memo["keys"] = _keys(periods, by)
    keys: list[date | None] = kept.memo["keys"]
    if "total" not in kept.memo:
        whole = _Sums()
        for key in keys:
            if key in periods:
                whole.add(periods[key].whole)
        total_figures = figures(whole)
        kept.memo["total"] = (whole, total_figures, _json(total_figures)[1:-1])
    total, total_figures, total_json = kept.memo["total"]

    label = {"project": "projects", "machine": "machines", "session": "per_session"}.get(split or "")
    if ("entries", label) not in kept.memo:
        kept.memo["entries", label] = _entries(periods, keys, split, label)
    entries: list[_Entry] = kept.memo["entries", label]
    named = _named_patterns(conn, member, project, total) if match and len(match.projects) == 1 else []
    # §2.10's rate of each, per period: a fall after it was named shows
    rates = [{x: _pattern_rate(e.figures, x) for x in named} for e in entries] if named else None
    head = {
        "by": by, "time_zone": tz, "split": split, "member": member,
        "project": project, **({"projects_matched": match.matched} if match and match.matched else {}),
        **({"patterns": named} if named else {}),
        "machine": machine, "since": since.isoformat() if since else None,
        "attribution": "each session wholly in the period its first line falls in",
        "prices": prices.describe(),
    }
    return _Answer(head, label, by, tz, entries, rates, (total_figures, total_json), kept.memo)


def _keys(periods: dict[date | None, _Period], by: str) -> list[date | None]:
    """Every period from the first with a session to the last (the empty ones too, so that each
    one's change is from the one right before it), then the undated, if any."""
    dated = sorted(p for p in periods if p is not None)
    keys: list[date | None] = []
    period = dated[0] if dated else None
    while period is not None and period <= dated[-1]:
        keys.append(period)
        period = _next(period, by)
    if None in periods:
        keys.append(None)
    return keys


def _entries(periods: dict[date | None, _Period], keys: list[date | None], split: str | None,
             label: str | None) -> list[_Entry]:
    """The periods as the answer shows them, `keys` in order (the empty ones too), each with its
    change from the one before and, split, its groups."""
    folders: dict[str, tuple[str | None, str | None]] = {}  # a project's Claude Code folder and working folder
    for key in keys:  # (the first period's that has it, for every period)
        for name, slug, path, _sums in periods[key].parts if key in periods else ():
            folders.setdefault(name, (slug, path))
    entries, before = [], None
    for key in keys:
        found = periods.get(key)
        shown, text = (found.figures(), found.json()) if found is not None else _nothing()
        parts = []
        if found is not None and label is not None:
            for (name, *_rest), (part, part_json) in zip(found.parts, found.part_figures(), strict=True):
                parts.append(({"project": name, "project_slug": folders[name][0], "project_path": folders[name][1]}
                              if split == "project" else {"machine": name} if split == "machine"
                              else {"session": name}, part, part_json))
        entries.append(_Entry(key, shown, text, change(shown, before) if key is not None else None, parts))
        before = shown if key is not None else before
    return entries


def _pattern_rate(entry: dict, pattern: str) -> float | None:
    """accounting.md §2.10's rate of a period's sessions: a signal per 100 calls, a cache cause per 100
    requests; None when there is no call (request) to count by."""
    if pattern in SIGNALS:
        count, base = entry["tool_use"]["signals"][pattern], entry["tool_use"]["calls"]
    else:
        count, base = entry["cache"]["misses"][pattern]["count"], entry["requests"]
    return 100 * count / base if base else None


def _named_patterns(conn: Connection, member: str, project: str | None, total: _Sums) -> list[str]:
    """The project's top patterns (accounting.md §2.10): the waste signals and cache causes its stored
    briefs named to its sessions, the most occurrences over the whole history first (ties: the
    pattern order), at most TOP_WASTE."""
    _, rows, _ = lesson_data.find_sessions(conn, member, folder=None, project=project, exclude=None)
    mine = {r["session_uuid"] for r in rows}
    given = {x for s, x in conn.execute(q("lessons_given"), {"member": member}) if s in mine and x in PATTERNS}
    counts = dict(zip(SIGNALS, total.calls[1:], strict=True))
    for (_model, cause), misses in total.misses.items():
        counts[cause] = counts.get(cause, 0) + misses.count
    return sorted(given, key=lambda x: (-counts.get(x, 0), PATTERNS.index(x)))[:TOP_WASTE]


# -- text ------------------------------------------------------------------------------------

HEADER = (f"{'sess':>5} {'cost':>10} {'$/sess':>8} {'Δ$/sess':>8} {'cache$':>8} {'eff':>4} {'Δeff':>5} {'calls':>6}"
          f" {'output':>7} {'Claude':>7} {'tool':>7} {'human':>7} {'away':>7}")


def _row(f: dict, ch: dict | None) -> str:
    """A period's (or a project's) figures under HEADER; `ch`: the change from the period before."""
    return (f"{f['sessions']:>5} {markdown.cost_cell(f['cost']):>10} {usd(f['cost_per_session'], NONE):>8}"
            f" {usd_change(ch['cost_per_session'] if ch else None):>8} {usd(f['cache']['waste_usd']):>8}"
            f" {share(f['tool_use']['efficiency']):>4}"
            f" {points(ch['efficiency'] if ch else None):>5} {count(f['tool_use']['calls']):>6}"
            f" {tokens(f['tokens']['total']['output']):>7}"
            f" {duration(f['claude_s']):>7} {duration(f['tool_s']):>7}"
            f" {duration(f['human_s']):>7} {duration(f['away_s']):>7}")


def _detail(f: dict) -> str | None:
    parts = []
    if f["verdicts"]:
        parts.append("verdicts: " + ", ".join(f"{shown(v)} {n}" for v, n in f["verdicts"].items()))
    if f["top_waste"]:
        parts.append("waste: " + ", ".join(f"{w['signal']} {w['count']}" for w in f["top_waste"]))
    misses = [(c, f["cache"]["misses"][c]["count"]) for c in cache.WASTE_CAUSES if f["cache"]["misses"][c]["count"]]
    if misses:
        part = f["cache"]["waste_share"]
        parts.append("cache misses: " + ", ".join(f"{c} {n}" for c, n in misses)
                     + (f" ({share(part)} of cost)" if part else ""))
    return " · ".join(parts) or None


def period_name(period: dict, by: str) -> str:
    """A period as the command and the dashboard name it: its day, its week's Monday, its month."""
    if period["period"] is None:
        return "undated"
    return period["period"][:7] if by == "month" else period["period"]


def has_figures(period: dict) -> bool:
    """Whether a period holds anything: a session, or (one machine's figures, accounting.md §4) tokens,
    time or calls of sessions that count on another machine."""
    return bool(period["sessions"] or period["requests"] or period["tool_use"]["calls"]
                or period["tool_result_bytes"] or any(period[f"{t}_s"] for t in TIMES))


def shown_periods(periods: list[dict], by: str) -> Iterator[tuple[dict, dict | None, str | None]]:
    """The periods as the command and the dashboard show them, each with the change to show (from
    the period before, when that one had sessions: a change from none says nothing) and, for a
    run of periods without figures shown as one, the name of its last (None: a run of one)."""
    for i, p in enumerate(periods):
        if has_figures(p):
            yield p, p["change"] if p["change"] and p["change"]["sessions"] != p["sessions"] else None, None
        elif i == 0 or has_figures(periods[i - 1]):  # (the first of its run)
            last = i
            while last + 1 < len(periods) and not has_figures(periods[last + 1]) and periods[last + 1]["period"]:
                last += 1
            yield p, None, period_name(periods[last], by) if last > i else None


def render(data: dict) -> str:
    """The text `retrod trends` prints: a row per period (and per project or model in it), its
    verdicts and top waste signals under it, and the total."""
    label = {"day": "day", "week": "week of", "month": "month"}[data["by"]]
    out = [(f"retrod trends by {data['by']} (cut in {data['time_zone']}; each session counts wholly in the"
            f" {data['by']} it started; Δ: change from the {data['by']} before)")]
    if not any(has_figures(p) for p in data["periods"]):
        return "\n".join([*out, "no sessions" + (" match" if data["project"] or data["since"] else " yet"), ""])
    out.append(f"{label:<10} {HEADER}")
    for p, before, through in shown_periods(data["periods"], data["by"]):
        name = period_name(p, data["by"])
        if not has_figures(p):  # a run of empty periods is one line
            out.append(f"{name:<10} {'—':>5}  (no sessions{f' to {through}' if through else ''})")
            continue
        out.append(f"{name:<10} {_row(p, before)}")
        detail = _detail(p)
        if detail:
            out.append(f"{'':<10}   {detail}")
        for row in p.get("projects", []):
            out.append(f"{'':<10} {_row(row, None)}  {quoted(row['project'])}")
        for row in p.get("machines", []):  # (a host id: a setting's, shown on one line unquoted)
            out.append(f"{'':<10} {_row(row, None)}  {one_line(row['machine'])}")
        if data["split"] == "model":
            for m in p["tokens_by_model"]:
                model = quoted(m["model"]) if m["model"] else "unknown model"
                out.append(f"{'':<10} {m['sessions']:>5} {usd(m['cost_usd']):>10} {'':>8} {'':>8}"
                           f" {usd(m['cache_waste_usd']):>8} {'':>4}"
                           f" {'':>5} {'':>6} {tokens(m['output']):>7}  {model}")
    out.append(f"{'total':<10} {_row(data['total'], None)}")
    if data.get("patterns"):
        out.append("Waste patterns the brief named here, per 100 calls (cache causes: per 100 requests;"
                   " retrod lessons: since when):")
        for p, _, _ in shown_periods(data["periods"], data["by"]):
            if has_figures(p):
                rates = ", ".join(f"{x} {rate(r)}" for x, r in p["pattern_rates"].items())
                out.append(f"{period_name(p, data['by']):<10} {rates}")
    prices = data["prices"]
    out.append(f"Costs are estimates at API list prices ({prices['source']} {prices['version']}), not a bill.")
    return "\n".join(out) + "\n"
