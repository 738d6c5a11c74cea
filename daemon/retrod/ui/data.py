"""The web UI's figures, as JSON-ready dicts: what each page shows and its `/api/` twin answers.

No HTML and no web framework here: `pages` renders these, `app` serves them. Every figure comes
from the store's rollups (store/ui.sql) or from the report itself (report/model.py), priced at
read time as the report prices (report/prices.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Self, TypeVar, cast
from zoneinfo import ZoneInfo

from psycopg import Connection
from psycopg.rows import dict_row
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from ..basics.errors import UserError
from ..basics.format import instant
from ..history import lesson_data
from ..history import trends as history
from ..report import cache, model, rates, shapes, timeline
from ..report import prices as pricing
from ..resolve import ProjectError, ProjectMatch
from ..store.members import current_role
from ..store.queries import q
from ..tracking import known_projects, project_args, project_match

SORTS = ("start", "cost", "tokens", "efficiency", "wall", "cache")
# Each sort's first direction: the most, the newest, the longest first; efficiency least first (the
# list is for finding where calls were wasted, as `retrod sessions --sort efficiency`).
FIRST_ORDER = {"start": "desc", "cost": "desc", "tokens": "desc", "efficiency": "asc", "wall": "desc", "cache": "desc"}
PER_PAGE, PER_PAGE_MAX = 50, 500
TREND_SPLITS = ("project", "model", "machine")  # (trends' `session` split is the brief's, not a view)
OUTLIERS = 5  # the trends page's costliest sessions
LIVE_MAX = 100  # the live page's first rows: the sessions with the newest lines


class QueryError(UserError, ValueError):
    """A page asked with a parameter that is not one (the answer is 400, with this message)."""


class _Query(BaseModel):
    """A page's (and its `/api/` twin's) query parameters, read by a declared model: a blank
    parameter is an absent one, one the route does not take is ignored, and a bad one is a
    QueryError (400) saying which and why, in the words of the validators below."""

    model_config = ConfigDict(frozen=True, validate_by_name=True, validate_by_alias=True)

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> Self:
        try:
            return cls.model_validate(dict(params), by_alias=True, by_name=False)  # `?q=`, never `?search=`
        except ValidationError as exc:
            error = exc.errors()[0]
            why = error.get("ctx", {}).get("error") or error["msg"]  # (our validators' own words)
            raise QueryError(f"{error['loc'][0]}: {why}") from None

    @model_validator(mode="before")
    @classmethod
    def _blank_is_absent(cls, values: object) -> object:
        if isinstance(values, Mapping):
            return {k: v for k, v in values.items() if not (isinstance(v, str) and not v.strip())}
        return values


def _text(value: object) -> object:
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("contains a NUL character")
        return value.strip() or None
    return value


def _a_date(value: object) -> object:
    if isinstance(value, str):
        text = _text(value)
        try:
            return date.fromisoformat(text) if isinstance(text, str) else text
        except ValueError:
            raise ValueError(f"{text!r} is not a date (YYYY-MM-DD)") from None
    return value


def _one_of(choices: Iterable[str], words: str | None = None) -> BeforeValidator:
    allowed = tuple(choices)

    def check(value: object) -> object:
        value = _text(value)
        if value is not None and value not in allowed:
            raise ValueError(f"{value!r} is not {words or 'one of ' + ', '.join(allowed)}")
        return value
    return BeforeValidator(check)


def _whole(low: int, high: int) -> BeforeValidator:
    def check(value: object) -> object:
        value = _text(value)
        if isinstance(value, str):
            # ASCII digits only: str.isdigit also takes '²' and '١', which int() refuses or reads
            if not (value.isascii() and value.isdigit() and len(value) <= 9 and low <= int(value) <= high):
                raise ValueError(f"{value!r} is not a whole number from {low} to {high}")
            return int(value)
        return value
    return BeforeValidator(check)


Text = Annotated[str | None, BeforeValidator(_text)]
Day = Annotated[date | None, BeforeValidator(_a_date)]


class SessionQuery(_Query):
    """The session list's filters, order and page, as the page's form and the API take them."""

    sort: Annotated[str, _one_of(SORTS)] = "start"
    order: Annotated[str, _one_of(("asc", "desc"), "asc or desc")] = "desc"  # (default: the sort's first)
    project: Text = None
    since: Day = None  # started on or after this day (UTC)
    until: Day = None  # started on or before this day (UTC)
    model: Text = None
    machine: Text = None  # a host id holding one of the session's transcripts (accounting.md §4)
    search: Text = Field(None, alias="q")  # in descriptions; a uuid's start; a project's name
    page: Annotated[int, _whole(1, 1_000_000)] = 1
    per_page: Annotated[int, _whole(1, PER_PAGE_MAX)] = PER_PAGE

    @model_validator(mode="before")
    @classmethod
    def _sorts_first_order(cls, values: object) -> object:
        """No order asked: the sort's first (FIRST_ORDER)."""
        if isinstance(values, Mapping) and values.get("order") is None:
            sort = values.get("sort") or "start"
            sort = sort.strip() if isinstance(sort, str) else sort
            if sort in FIRST_ORDER:
                return {**values, "order": FIRST_ORDER[sort]}
        return values

    def params(self, **changes: object) -> dict[str, str]:
        """The query as URL parameters (those not at their default), with `changes`."""
        values = {**self.model_dump(), **changes}
        out = {"project": values["project"], "since": values["since"], "until": values["until"],
               "model": values["model"], "machine": values["machine"], "q": values["search"],
               "sort": values["sort"] if values["sort"] != "start" else None,
               "order": values["order"] if values["order"] != FIRST_ORDER[str(values["sort"])] else None,
               "page": values["page"] if values["page"] != 1 else None,
               "per_page": values["per_page"] if values["per_page"] != PER_PAGE else None}
        return {k: str(v) for k, v in out.items() if v is not None}


EVERY_SESSION = SessionQuery()  # the list unfiltered, in its first order


class TrendsQuery(_Query):
    """The trends page's choices, as its form and `/api/trends` take them (`retrod trends`' options)."""

    by: Annotated[str, _one_of(history.PERIODS)] = "week"
    split: Annotated[str | None, _one_of(TREND_SPLITS)] = None  # project, model, machine or none
    project: Text = None
    since: Day = None  # sessions started on or after this day, in the periods' time zone
    tz: Text = None  # the periods' time zone; None: the daemon's machine's
    member: Text = None
    machine: Text = None  # only the figures this host id's files hold (accounting.md §4)

    def params(self, **changes: object) -> dict[str, str]:
        """The query as URL parameters (those not at their default), with `changes`."""
        values = {**self.model_dump(), **changes}
        values["by"] = values["by"] if values["by"] != "week" else None
        return {k: str(v) for k, v in values.items() if v is not None}


class ReportQuery(_Query):
    """A session's page, its `/api/` twin and its downloads: whose figures (a team's reader)."""

    member: Text = None


class LessonsQuery(_Query):
    """`/lessons` and `/api/lessons`: the project asked (none: the page lists them)."""

    project: Text = None


T = TypeVar("T")


def trends(conn: Connection, query: TrendsQuery, prices: pricing.Prices = pricing.DEFAULT,
           away_after_s: float = model.AWAY_AFTER_S) -> dict:
    """`/api/trends`: what `retrod trends --json` prints for the same choices, as it is."""
    return _trends_asked(history.trends, conn, query, prices, away_after_s)


def trends_json(conn: Connection, query: TrendsQuery, prices: pricing.Prices = pricing.DEFAULT,
                away_after_s: float = model.AWAY_AFTER_S) -> bytes:
    """`/api/trends`'s body: `trends`, as JSON (its kept periods' made once)."""
    return _trends_asked(history.trends_json, conn, query, prices, away_after_s)


def _trends_asked(answer: Callable[..., T], conn: Connection, query: TrendsQuery, prices: pricing.Prices,
                  away_after_s: float) -> T:
    """`answer` (history's trends or its JSON) for the query's choices; its refusals are QueryErrors."""
    zone, since = _trends_zone_and_since(query)
    try:
        return answer(conn, by=query.by, project=query.project, since=since, split=query.split, prices=prices,
                      tz=zone, member=query.member, away_after_s=away_after_s, machine=query.machine)
    except (history.TrendsError, ProjectError) as exc:
        raise QueryError(str(exc)) from None


def costliest(conn: Connection, query: TrendsQuery, prices: pricing.Prices = pricing.DEFAULT) -> list[dict]:
    """The trends page's outliers: the OUTLIERS costliest of the sessions its figures add up (the
    same project, member and day, as `trends` reads them), as `/api/sessions?sort=cost` gives them."""
    _zone, since = _trends_zone_and_since(query)
    member = query.member or current_role(conn)
    rows, _total = _rows(conn, prices, SessionQuery(sort="cost", per_page=OUTLIERS),
                         scope={**project_args(_project(conn, query.project, member)), "since": since,
                                "machine": query.machine, "member": member})
    return rows


def _project(conn: Connection, project: str | None, member: str | None = None) -> ProjectMatch | None:
    """The project filter as every surface reads it (resolve.match_project); one that matches
    nothing is a bad parameter."""
    try:
        return project_match(conn, project, member)
    except ProjectError as exc:
        raise QueryError(f"project: {exc}") from None


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Each project's name as a narrow cell shows it: the last two parts of its working folder (a
    Claude Code folder name as it is), more where two projects' would read the same."""
    unique = sorted(set(names))
    parts = {n: [p for p in n.split("/") if p] for n in unique if n.startswith("/")}
    out = {}
    for name in unique:
        mine = parts.get(name)
        if mine is None:
            out[name] = name
            continue
        depth = 2
        while depth < len(mine) and any(other != name and theirs[-depth:] == mine[-depth:]
                                        for other, theirs in parts.items()):
            depth += 1
        out[name] = "/".join(mine[-depth:]) if depth < len(mine) else name
    return out


def _trends_zone_and_since(query: TrendsQuery) -> tuple[str, datetime | None]:
    """The periods' time zone, and `since` as its midnight there (as `retrod trends --since`)."""
    try:
        zone = history.zone_of(query.tz)
    except history.TrendsError as exc:
        raise QueryError(str(exc)) from None
    return zone, datetime.combine(query.since, time(), ZoneInfo(zone)) if query.since else None


def sessions(conn: Connection, query: SessionQuery, prices: pricing.Prices = pricing.DEFAULT) -> dict:
    """`/api/sessions`: one page of sessions with their figures, how many match, and the query."""
    match = _project(conn, query.project)
    rows, total = _rows(conn, prices, query=query, scope=project_args(match))
    return {"sessions": rows, "total": total, "page": query.page, "per_page": query.per_page,
            "pages": max(1, -(-total // query.per_page)), "sort": query.sort, "order": query.order,
            "filters": {"project": query.project, "since": _day(query.since), "until": _day(query.until),
                        "model": query.model, "machine": query.machine, "q": query.search},
            **({"projects_matched": match.matched} if match and match.matched else {}),
            "prices": prices.describe()}


def choices(conn: Connection) -> dict:
    """What the list's filters offer: the projects, models and machines stored."""
    return {"projects": projects(conn), "models": [row[0] for row in conn.execute(q("ui_models"))],
            "machines": machines(conn)}


def projects(conn: Connection) -> list[str]:
    """Every project stored, by its name (its working folder, else its Claude Code folder name)."""
    return [p.name for p in known_projects(conn)]


def lessons(conn: Connection, project: str | None, prices: pricing.Prices, away_after_s: float) -> dict | None:
    """`/lessons`: `retrod lessons --json` of one project (None when none is asked: the page lists
    them); a project that is none, or a part of several, is a 400."""
    if not project:
        return None
    try:
        return cast(dict, lesson_data.lessons(conn, project=project, prices=prices, away_after_s=away_after_s))
    except ProjectError as exc:
        raise QueryError(str(exc)) from None


def machines(conn: Connection) -> list[str]:
    """Every host id files are stored under (RETROD_HOST_ID of each machine writing here)."""
    return [row[0] for row in conn.execute(q("ui_machines"))]


def live(conn: Connection, uuids: set[str] | None = None, prices: pricing.Prices = pricing.DEFAULT) -> list[dict]:
    """The live page's rows: these sessions, or (None) those with transcript time in the last hour
    (the LIVE_MAX with the newest lines), in the order of the list (newest first)."""
    if uuids is None:
        uuids = {row[0] for row in conn.execute(q("ui_active_sessions"), {"limit": LIVE_MAX})}
    if not uuids:
        return []
    rows, _total = _rows(conn, prices, uuids=sorted(uuids))
    return rows


def session(conn: Connection, uuid: str, away_after_s: float = model.AWAY_AFTER_S,
            prices: pricing.Prices = pricing.DEFAULT, member: str | None = None) -> dict:
    """`/api/sessions/{uuid}`: the report's JSON (model.build), with its per-minute `timeline`."""
    report = model.build(conn, uuid, away_after_s, prices, member)
    return {**report, "timeline": timeline.series(conn, uuid, prices, report["session"]["member"])}


def find(conn: Connection, prefix: str) -> list[str]:
    """The stored sessions a uuid, or a uuid's start, names (two at most)."""
    return model.known_sessions(conn, prefix)


def _rows(conn: Connection, prices: pricing.Prices, query: SessionQuery = EVERY_SESSION,
          uuids: list[str] | None = None, scope: Mapping[str, object] | None = None) -> tuple[list[dict], int]:
    """The list's rows for `query`, or for these `uuids`, each with its project's `project_short`
    (short_names); `scope`: the project's sessions (`projects`, `slugs`: tracking.project_args),
    and for trends' outliers their filters instead of the list's days — started at or after
    `since`, one `member`'s."""
    args = {
        "sessions": uuids, "projects": None, "slugs": None, "member": None,
        "since": _midnight(query.since), "until": _midnight(_day_after(query.until)),
        "model": query.model, "machine": query.machine,
        "search": f"%{_like(query.search)}%" if query.search else None,
        "prefix": f"{_like(query.search.lower())}%" if query.search else None,
        "sort": query.sort, "desc": query.order == "desc",
        "limit": query.per_page if uuids is None else len(uuids),
        "offset": (query.page - 1) * query.per_page if uuids is None else 0,
        **(scope or {}),
    }
    with conn.cursor(row_factory=dict_row) as cur:
        for fresh in (False, True):
            found = cur.execute(q("ui_sessions"), {**args, "rates": rates.stored(conn, prices, fresh)}).fetchall()
            if not (found and found[0]["stale_rates"]):
                break  # else: groups stored since the rates were read; once more, with theirs
    # The page's own rows, priced exactly as their reports price them (the sort used doubles)
    keys = [(row["uuid"], row["member"]) for row in found]
    costs = model.session_costs(conn, keys, prices)
    wastes = _cache_waste(conn, keys, prices)
    shorts = short_names(row[0] for row in conn.execute(q("ui_working_folders"))) if found else {}
    total = int(found[0]["total"]) if found else 0
    return [_row(row, *costs[(row["uuid"], row["member"])], wastes[(row["uuid"], row["member"])], shorts)
            for row in found], total


def _cache_waste(conn: Connection, keys: list[tuple[str, str]],
                 prices: pricing.Prices) -> dict[tuple[str, str], float]:
    """Each (session, member)'s `cache.waste_usd`, as its report prices it, from its misses."""
    found: dict[tuple[str, str], list] = {key: [] for key in keys}
    if keys:
        for session, member, *miss in conn.execute(q("ui_sessions_cache_misses"), {
                "sessions": [k[0] for k in keys], "members": [k[1] for k in keys]}):
            found[(session, member)].append(miss)
    return {key: cache.waste(cache.priced(misses, prices)) for key, misses in found.items()}


def _row(row: dict, by_model: list[shapes.ModelTokens], cost: shapes.Cost, waste: float,
         shorts: Mapping[str, str]) -> dict:
    name = row["project_path"] or row["project_slug"]
    return {
        "uuid": row["uuid"], "member": row["member"], "project": name, "project_short": shorts.get(name, name),
        "project_slug": row["project_slug"], "project_path": row["project_path"], "description": row["description"],
        "started_at": instant(row["started_at"]), "ended_at": instant(row["ended_at"]), "wall_s": row["wall_s"],
        "tokens": {f: int(row[f]) for f in model.TOKEN_FIELDS}, "total_tokens": int(row["total_tokens"]),
        "requests": int(row["requests"]),
        "models": sorted(m["model"] for m in by_model if m["model"] and m["requests"]), "cost": cost,
        "cache_waste_usd": waste,  # accounting.md §2.8: its report's summary.cache.waste_usd
        "tool_calls": int(row["tool_calls"]), "efficiency": row["efficiency"],
        "tracked": row["user_session_id"] is not None, "phases": int(row["phases"]),
    }


def _like(text: str) -> str:
    """A search term matched as typed: LIKE's own characters escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _day_after(day: date | None) -> date | None:
    """The day after `day`; None (no end) after the last day a date holds (9999-12-31)."""
    return day + timedelta(days=1) if day is not None and day < date.max else None


def _midnight(day: date | None) -> datetime | None:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) if day else None


def _day(day: date | None) -> str | None:
    return day.isoformat() if day else None


