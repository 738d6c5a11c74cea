"""`retrod ui` without a browser (issue 23): the list's, the timeline's and the live rows' figures
against the report's JSON (model.build) of every fixture session; the list's sorting, filters and
pages; the served app's guard (token, cookie, Host, read-only, no CORS) and its JSON twins (the
trends' against `retrod trends --json`), with the server running in this process on the fixture
database; the command's own answers.
The pages themselves, in a real browser: tests/test_ui_browser.py."""

from __future__ import annotations

import html
import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from starlette.routing import Route

from conftest import FIXTURES, fresh_database
from helpers import ingest
from retrod import tracking
from retrod.report import markdown, model
from retrod.settings import Settings
from retrod.ui import app, data, secret
from retrod.ui.hub import Hub
from retrod.ui.server import UiServer

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"
SIGNALS = model.SIGNALS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_phases(url: str) -> None:
    """The README's walk-through phases on the spotter session, with its description."""
    with psycopg.connect(url) as conn:
        tracking.track_start(conn, SPOTTER, "Hooks research")
        for task, phase, start, end, verdict, lessons in (
                ("hooks", "read the docs", "2026-02-11T20:36:00Z", "2026-02-11T21:00:00Z", "high_impact",
                 "read the hook docs before coding"),
                ("hooks", "subagent survey", "2026-02-11T21:00:00Z", "2026-02-11T21:24:30Z", "exploratory_useful",
                 None),
                ("build", "implement", "2026-02-11T21:24:30Z", "2026-02-11T21:47:00Z", "avoidable_waste",
                 "write the test first")):
            tracking.phase_log(conn, SPOTTER, task, phase, tracking.parse_time(start), tracking.parse_time(end),
                               verdict, tracking.PhaseNotes(lessons=lessons))


@pytest.fixture(scope="module")
def fixture_db(pg_cluster) -> Iterator[str]:
    with fresh_database(pg_cluster) as url:
        ingest(url, [FIXTURES])
        log_phases(url)
        yield url


@pytest.fixture(scope="module")
def reports(fixture_db: str) -> dict[str, dict]:
    with psycopg.connect(fixture_db) as conn:
        listed = data.sessions(conn, data.SessionQuery(per_page=data.PER_PAGE_MAX))
        assert listed["total"] == len(listed["sessions"]) > 40
        return {row["uuid"]: model.build(conn, row["uuid"]) for row in listed["sessions"]}


def listing(url: str, **query: object) -> dict:
    with psycopg.connect(url) as conn:
        return data.sessions(conn, data.SessionQuery(**query))  # type: ignore[arg-type]


def test_every_listed_session_shows_the_reports_figures(fixture_db: str, reports: dict[str, dict]) -> None:
    rows = listing(fixture_db, per_page=data.PER_PAGE_MAX)["sessions"]
    assert {row["uuid"] for row in rows} == set(reports)
    priced = 0
    for row in rows:
        report = reports[row["uuid"]]
        summary = report["summary"]
        assert row["cost"] == summary["cost"], row["uuid"]
        assert row["tokens"] == summary["tokens"]["total"], row["uuid"]
        assert row["total_tokens"] == sum(summary["tokens"]["total"].values())
        assert row["requests"] == summary["requests"], row["uuid"]
        assert row["tool_calls"] == summary["tool_use"]["calls"], row["uuid"]
        assert row["efficiency"] == pytest.approx(summary["tool_use"]["efficiency"]), row["uuid"]
        assert row["models"] == sorted(m["model"] for m in summary["tokens_by_model"] if m["model"] and m["requests"])
        assert (row["started_at"], row["ended_at"]) == (report["session"]["started_at"], report["session"]["ended_at"])
        assert row["wall_s"] == summary["wall_s"], row["uuid"]
        assert row["description"] == report["session"]["description"]
        assert row["phases"] == summary["phases"]
        assert row["cache_waste_usd"] == summary["cache"]["waste_usd"], row["uuid"]  # accounting.md §2.8
        priced += bool(summary["cost"]["usd"])
    assert priced > 30  # the comparison is about real money, not zeros
    assert reports[SPOTTER]["summary"]["cost"]["usd"] > 10


def test_sorting_by_cost_finds_the_costliest_first_and_pages_split_the_same_order(
        fixture_db: str, reports: dict[str, dict]) -> None:
    costs = {uuid: r["summary"]["cost"]["usd"] or 0 for uuid, r in reports.items()}
    by_cost = listing(fixture_db, sort="cost", order="desc", per_page=data.PER_PAGE_MAX)["sessions"]
    shown = [row["cost"]["usd"] or 0 for row in by_cost]
    assert shown == sorted(costs.values(), reverse=True)
    assert by_cost[0]["uuid"] == max(costs, key=lambda u: costs[u]) == SPOTTER
    cheapest_first = listing(fixture_db, sort="cost", order="asc", per_page=data.PER_PAGE_MAX)["sessions"]
    assert [row["cost"]["usd"] or 0 for row in cheapest_first] == sorted(costs.values())

    page_two = listing(fixture_db, sort="cost", per_page=10, page=2)
    assert [row["uuid"] for row in page_two["sessions"]] == [row["uuid"] for row in by_cost[10:20]]
    assert page_two["pages"] == -(-len(reports) // 10) and page_two["total"] == len(reports)

    for sort, key, first in (("tokens", lambda r: sum(r["summary"]["tokens"]["total"].values()), True),
                             ("wall", lambda r: r["summary"]["wall_s"], True)):
        rows = listing(fixture_db, sort=sort, per_page=data.PER_PAGE_MAX)["sessions"]
        values = [key(reports[row["uuid"]]) for row in rows]
        assert values == sorted(values, reverse=first), sort
    least_efficient = listing(fixture_db, sort="efficiency", order="asc", per_page=data.PER_PAGE_MAX)["sessions"]
    efficiencies = [reports[row["uuid"]]["summary"]["tool_use"]["efficiency"] for row in least_efficient]
    known = [e for e in efficiencies if e is not None]
    assert known == sorted(known) and efficiencies[: len(known)] == known  # sessions without calls last
    newest = listing(fixture_db, per_page=data.PER_PAGE_MAX)["sessions"]
    starts = [row["started_at"] for row in newest if row["started_at"]]
    assert starts == sorted(starts, reverse=True)


def test_sorting_by_cache_waste_puts_the_costliest_misses_first(fixture_db: str, reports: dict[str, dict]) -> None:
    """accounting.md §2.8's waste, each session's report's `summary.cache.waste_usd`: the list sorted by
    it, most first, and back; a session without misses wastes nothing and sorts as 0."""
    waste = {uuid: r["summary"]["cache"]["waste_usd"] for uuid, r in reports.items()}
    most = listing(fixture_db, sort="cache", per_page=data.PER_PAGE_MAX)
    assert (most["sort"], most["order"]) == ("cache", "desc")
    shown = [row["cache_waste_usd"] for row in most["sessions"]]
    assert shown == sorted(waste.values(), reverse=True)
    assert [waste[row["uuid"]] for row in most["sessions"]] == shown
    assert len([w for w in shown if w]) == 10  # accounting.md §2.8: the fixtures' waste is in 10 sessions
    least = listing(fixture_db, sort="cache", order="asc", per_page=data.PER_PAGE_MAX)["sessions"]
    assert [row["cache_waste_usd"] for row in least] == sorted(waste.values())
    top = listing(fixture_db, sort="cache", per_page=3)
    assert [row["uuid"] for row in top["sessions"]] == [row["uuid"] for row in most["sessions"][:3]]


def test_filters_by_project_dates_model_and_search(fixture_db: str, reports: dict[str, dict]) -> None:
    slug = reports[SPOTTER]["session"]["project_slug"]
    by_project = listing(fixture_db, project=slug, per_page=data.PER_PAGE_MAX)
    assert {row["uuid"] for row in by_project["sessions"]} == {
        u for u, r in reports.items() if r["session"]["project_slug"] == slug}

    since, until = date(2026, 2, 1), date(2026, 2, 28)
    in_february = listing(fixture_db, since=since, until=until, per_page=data.PER_PAGE_MAX)["sessions"]
    want = {u for u, r in reports.items() if r["session"]["started_at"]
            and since <= datetime.fromisoformat(r["session"]["started_at"]).date() <= until}
    assert {row["uuid"] for row in in_february} == want and SPOTTER in want and len(want) < len(reports)
    assert listing(fixture_db, sort="cost", since=since, until=until)["sessions"][0]["uuid"] == SPOTTER

    model_name = "claude-sonnet-4-5-20250929"
    with_model = listing(fixture_db, model=model_name, per_page=data.PER_PAGE_MAX)["sessions"]
    assert {row["uuid"] for row in with_model} == {
        u for u, r in reports.items() if any(m["model"] == model_name for m in r["summary"]["tokens_by_model"])}
    assert 0 < len(with_model) < len(reports)

    for term in ("hooks RESEARCH", "258c72"):
        found = listing(fixture_db, search=term)["sessions"]
        assert [row["uuid"] for row in found] == [SPOTTER], term
    assert listing(fixture_db, search="100%_")["total"] == 0  # LIKE's own characters are text here


def test_a_bad_parameter_is_one_clear_refusal() -> None:
    for params, words in (({"sort": "price"}, "sort: 'price' is not one of"), ({"since": "yesterday"}, "not a date"),
                          ({"page": "0"}, "page: '0' is not a whole number"), ({"order": "up"}, "asc or desc"),
                          ({"per_page": "100000"}, "per_page")):
        with pytest.raises(data.QueryError, match=words):
            data.SessionQuery.parse(params)
    query = data.SessionQuery.parse({"sort": "cost", "since": "2026-02-01", "q": " hooks "})
    assert (query.sort, query.order, query.since, query.search) == ("cost", "desc", date(2026, 2, 1), "hooks")
    assert query.params() == {"sort": "cost", "since": "2026-02-01", "q": "hooks"}


def test_every_query_parameter_goes_through_its_routes_model() -> None:
    """The pages' query models (ui/data.py): a blank parameter is an absent one, one the route
    does not take is ignored, and a bad one is a QueryError naming it — `member` and the lessons'
    `project` included, which were read raw."""
    assert data.SessionQuery.parse({"sort": " ", "page": "", "search": "x", "member": "m"}) == data.SessionQuery()
    assert data.SessionQuery.parse({"sort": "efficiency"}).order == "asc"  # the sort's first order
    assert data.SessionQuery.parse({"sort": "efficiency", "order": "desc"}).params() == {
        "sort": "efficiency", "order": "desc"}
    for params, words in (({"page": "²"}, "page: '²' is not a whole number from 1 to 1000000"),
                          ({"q": "a\x00b"}, "q: contains a NUL character"),
                          ({"until": "2026-02-30"}, "until: '2026-02-30' is not a date (YYYY-MM-DD)")):
        with pytest.raises(data.QueryError, match=f"^{re.escape(words)}$"):
            data.SessionQuery.parse(params)
    assert data.TrendsQuery.parse({"by": "day", "split": "model", "tz": " UTC "}).params() == {
        "by": "day", "split": "model", "tz": "UTC"}
    assert data.ReportQuery.parse({"member": " alice "}).member == "alice"
    assert data.LessonsQuery.parse({"project": ""}).project is None
    for query_model, name in ((data.ReportQuery, "member"), (data.LessonsQuery, "project"),
                              (data.TrendsQuery, "member")):
        with pytest.raises(data.QueryError, match=f"^{name}: contains a NUL character$"):
            query_model.parse({name: "a\x00"})


def test_the_timeline_adds_up_to_the_report(fixture_db: str, reports: dict[str, dict]) -> None:
    with psycopg.connect(fixture_db) as conn:
        answer = data.session(conn, SPOTTER)
    report, timeline = reports[SPOTTER], answer["timeline"]
    assert {k: v for k, v in answer.items() if k != "timeline"} == report  # the report's JSON, and its timeline
    assert timeline["minute"] == sorted(timeline["minute"]) and len(set(timeline["minute"])) == len(timeline["minute"])
    total = report["summary"]["tokens"]["total"]
    for field in ("output", "input", "cache_read", "cache_create"):
        assert sum(timeline[field]) == total[field], field
    assert sum(timeline["requests"]) == report["summary"]["requests"]
    # each minute rounded to the micro-dollar, as the report rounds its total
    assert sum(timeline["cost_usd"]) == pytest.approx(report["summary"]["cost"]["usd"],
                                                      abs=1e-6 * len(timeline["minute"]))
    assert len(timeline["compactions"]) == report["summary"]["compactions"] == 1
    assert report["session"]["started_at"] <= timeline["compactions"][0] <= report["session"]["ended_at"]
    assert sum(timeline["compaction_output"]) == report["summary"]["tokens"]["compaction"]["output"] > 0
    use = report["summary"]["tool_use"]
    assert sum(timeline["flagged"]) == use["calls"] - use["productive"] > 0  # every call of it has a time
    # phases: a window holds the output of the minutes wholly inside it, and at most that of the
    # minutes it touches (equal for the first phase, whose edges are whole minutes)
    for phase in report["phases"]:
        start, end = (datetime.fromisoformat(phase[k]).timestamp() for k in ("started_at", "ended_at"))
        minutes = list(zip(timeline["minute"], timeline["output"], strict=True))
        inside = sum(o for m, o in minutes if start <= m and m + 60 <= end)
        touched = sum(o for m, o in minutes if m + 60 > start and m < end)
        assert inside <= phase["tokens"]["output"] <= touched, phase["phase"]
    assert report["phases"][0]["tokens"]["output"] == sum(
        o for m, o in zip(timeline["minute"], timeline["output"], strict=True)
        if datetime.fromisoformat("2026-02-11T20:36:00+00:00").timestamp() <= m
        < datetime.fromisoformat("2026-02-11T21:00:00+00:00").timestamp()) > 0


def test_live_rows_are_the_lists_rows(fixture_db: str) -> None:
    with psycopg.connect(fixture_db) as conn:
        rows = data.live(conn, {SPOTTER, "a7da6a22-facc-4fcd-8bab-f83c87862004"})
        assert data.live(conn) == []  # no fixture session wrote in the last hour
    listed = {row["uuid"]: row for row in listing(fixture_db, per_page=data.PER_PAGE_MAX)["sessions"]}
    assert {row["uuid"] for row in rows} == {SPOTTER, "a7da6a22-facc-4fcd-8bab-f83c87862004"}
    assert all(row == listed[row["uuid"]] for row in rows)


# --- the served app --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(fixture_db: str, tmp_path_factory) -> Iterator[tuple[UiServer, str]]:
    data_dir = tmp_path_factory.mktemp("ui-data")
    settings = Settings(database_url=fixture_db, data_dir=data_dir, ui_port=free_port())
    with ConnectionPool(fixture_db, min_size=1, max_size=4) as pool, UiServer(pool, settings) as server:
        assert server.hub is not None, "the UI did not start"
        yield server, secret.read(data_dir) or ""


def get(port: int, path: str, headers: dict[str, str] | None = None, method: str = "GET"):
    """(status, headers, body) of a request to the served app, redirects not followed."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoRedirect)
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {}, method=method)
    try:
        with opener.open(request, timeout=10) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers, refused.read()


def test_the_token_is_the_users_alone(served: tuple[UiServer, str]) -> None:
    server, token = served
    path = secret.path(server.settings.data_dir)
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(token) >= 40 and secret.load_or_create(server.settings.data_dir) == token  # made once


def test_no_token_no_answer_and_a_strange_host_none_either(served: tuple[UiServer, str]) -> None:
    server, token = served
    port = server.port
    for path in ("/", "/api/sessions", f"/sessions/{SPOTTER}", "/trends", "/api/trends", "/api/events",
                 "/static/app.js"):
        status, _headers, body = get(port, path)
        assert status == 401, path
        assert b"retrod ui" in body
    assert get(port, "/?token=" + "x" * len(token))[0] == 401
    assert get(port, "/", {"Cookie": f"retrod_ui_{port}=wrong"})[0] == 401
    # DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends its own Host, token or not
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}"):
        status, _headers, _body = get(port, f"/api/sessions?token={token}", {"Host": host})
        assert status == 403, host
    assert get(port, f"/api/ping?token={token}", {"Host": f"localhost:{port}"})[0] == 200


def login(port: int, token: str) -> dict[str, str]:
    """The Cookie header of a browser that opened the address `retrod ui` prints."""
    status, headers, _body = get(port, f"/?token={token}")
    assert status == 200
    return {"Cookie": headers["Set-Cookie"].split(";")[0]}


def onward(body: bytes) -> str:
    """Where a login page sends the browser on to (its refresh, and its link: the same)."""
    page = body.decode()
    refresh = re.search(r'<meta http-equiv="refresh" content="0; url=([^"]*)">', page)
    link = re.search(r'<a href="([^"]*)">', page)
    assert refresh and link and refresh[1] == link[1], page
    return html.unescape(refresh[1])


def test_the_token_is_exchanged_for_an_expiring_session_cookie(served: tuple[UiServer, str]) -> None:
    """Browsers send a host's cookies to every port on it: the cookie holds a session of this
    browser's, never the token."""
    server, token = served
    port = server.port
    status, headers, body = get(port, f"/sessions/{SPOTTER}?token={token}&member=")
    assert status == 200
    assert onward(body) == f"http://127.0.0.1:{port}/sessions/{SPOTTER}?member="  # the address loses the token
    cookie = headers["Set-Cookie"]
    name, session = cookie.split(";")[0].split("=", 1)
    assert name == f"retrod_ui_{port}" and len(session) >= 40 and token not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Max-Age=43200" in cookie  # 12 hours
    status, headers, body = get(port, f"/sessions/{SPOTTER}", {"Cookie": f"retrod_ui_{port}={session}"})
    assert status == 200 and b"Hooks research" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"] and headers["X-Frame-Options"] == "DENY"
    assert login(port, token) != {"Cookie": f"retrod_ui_{port}={session}"}  # one session per login
    # the token itself is no cookie's value (an older retrod's cookie stops working)
    assert get(port, "/api/ping", {"Cookie": f"retrod_ui_{port}={token}"})[0] == 401
    # a script's request with the token is answered, and begins no session
    status, headers, _body = get(port, f"/api/ping?token={token}")
    assert status == 200 and "Set-Cookie" not in headers


def test_read_only_and_no_cors(served: tuple[UiServer, str]) -> None:
    server, token = served
    port = server.port
    cookie = {**login(port, token), "Origin": "http://evil.example"}
    status, headers, _body = get(port, "/api/sessions", cookie)
    assert status == 200
    assert not [h for h in headers if h.lower().startswith("access-control-")]
    for method in ("POST", "PUT", "DELETE"):
        assert get(port, f"/sessions/{SPOTTER}", cookie, method)[0] == 405, method
    status, headers, _body = get(port, "/api/sessions", {**cookie, "Access-Control-Request-Method": "GET"}, "OPTIONS")
    assert status == 405 and "access-control-allow-origin" not in {h.lower() for h in headers}


def test_the_json_twins_answer_what_the_pages_show(served: tuple[UiServer, str], fixture_db: str,
                                                   reports: dict[str, dict]) -> None:
    server, token = served
    port = server.port

    def api(path: str) -> tuple[int, object]:
        status, _headers, body = get(port, path + ("&" if "?" in path else "?") + f"token={token}")
        return status, json.loads(body)

    status, answer = api("/api/sessions?sort=cost&since=2026-02-01&until=2026-02-28&per_page=5")
    assert status == 200
    assert answer == listing(fixture_db, sort="cost", since=date(2026, 2, 1), until=date(2026, 2, 28), per_page=5)
    status, answer = api(f"/api/sessions/{SPOTTER}")
    assert status == 200
    assert {k: v for k, v in answer.items() if k != "timeline"} == reports[SPOTTER]
    assert sum(answer["timeline"]["output"]) == reports[SPOTTER]["summary"]["tokens"]["total"]["output"]
    assert api("/api/live") == (200, {"sessions": []})
    status, answer = api("/api/sessions?sort=price")
    assert status == 400
    assert answer == {"error": "sort: 'price' is not one of start, cost, tokens, efficiency, wall, cache"}
    status, answer = api("/api/sessions/00000000-0000-4000-8000-000000000000")
    assert status == 404 and "no session" in answer["error"]
    cookie = login(port, token)
    status, headers, body = get(port, f"/sessions/{SPOTTER}/report.md", cookie)
    assert status == 200 and "attachment" in headers["Content-Disposition"]
    assert body.decode() == markdown.render(reports[SPOTTER])
    status, headers, body = get(port, f"/sessions/{SPOTTER[:8]}", cookie)
    assert (status, headers["Location"]) == (303, f"/sessions/{SPOTTER}")  # a uuid's start goes to the page


def card(page: str, field: str) -> str:
    """A card's value on a page (`data-field` names it)."""
    found = re.search(rf'data-field="{field}">.*?<div class="value">([^<]*)</div>', page)
    assert found, field
    return html.unescape(found[1])


def test_every_page_links_its_json_twin_which_answers_its_figures(served: tuple[UiServer, str],
                                                                  reports: dict[str, dict]) -> None:
    """Each page route of the app (not /api/, /static or a download) links its /api/ twin in its
    head (rel="alternate", the Datasette way), for the page's own parameters; the twin answers
    200 JSON, and its key figure is the one the page shows."""
    server, token = served
    cookie = login(server.port, token)
    slug = reports[SPOTTER]["session"]["project_slug"]
    asked = {"/": "?sort=cost&per_page=5&since=2026-02-01", "/trends": "?by=month&tz=UTC", "/live": "",
             "/lessons": "?" + urlencode({"project": slug}), "/sessions/{uuid}": ""}

    def rows(page: str) -> list[str]:
        return re.findall(r'<tr data-uuid="([^"]+)">', page)

    same = {  # the page's key figure is the twin's
        "/": lambda page, twin: rows(page) == [r["uuid"] for r in twin["sessions"]] and len(rows(page)) == 5
        and f'id="count">{twin["total"]:,} sessions' in page,
        "/trends": lambda page, twin: card(page, "sessions") == f'{twin["total"]["sessions"]:,}' != "0",
        "/live": lambda page, twin: rows(page) == [r["uuid"] for r in twin["sessions"]],
        "/lessons": lambda page, twin: f'id="lessons-answer">{html.escape(twin["answer"])}<' in page,
        "/sessions/{uuid}": lambda page, twin: card(page, "requests") == f'{twin["summary"]["requests"]:,}'
        == f'{reports[SPOTTER]["summary"]["requests"]:,}',
    }
    routes = app.build(None, server.settings, token, server.port, Hub(lambda _s: "")).routes  # type: ignore[arg-type]
    page_routes = [r.path for r in routes if isinstance(r, Route) and not r.path.startswith("/api/")
                   and not r.path.endswith((".md", ".html"))]
    assert sorted(page_routes) == sorted(asked)  # (a new page: add it here, with its key figure)
    for route in page_routes:
        path = route.format(uuid=SPOTTER) + asked[route]
        status, _headers, body = get(server.port, path, cookie)
        assert status == 200, path
        page = body.decode()
        links = re.findall(r'<link rel="alternate" type="application/json" href="([^"]+)">', page)
        assert len(links) == 1, path
        twin = html.unescape(links[0])
        assert twin == "/api" + (path if route != "/" else "/sessions" + asked[route]), path
        status, headers, body = get(server.port, twin, cookie)
        assert status == 200 and headers["Content-Type"].startswith("application/json"), twin
        assert same[route](page, json.loads(body)), path
    # The lessons page without a project lists the projects: no twin (/api/lessons asks for one)
    status, _headers, body = get(server.port, "/lessons", cookie)
    assert status == 200 and b'rel="alternate"' not in body
    assert get(server.port, "/api/lessons", cookie)[0] == 400


def test_the_event_stream_sends_a_sessions_new_figures_once_for_every_page(
        served: tuple[UiServer, str], fixture_db: str) -> None:
    """The committer's listener (ui.publish) reaches two open streams within the hub's debounce,
    each with the same rows, equal to the list's, and the row as the live page shows it."""
    server, token = served
    received: list[list[str]] = [[], []]

    def read(into: list[str]) -> None:
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}/api/events?token={token}")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=10) as stream:
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            for raw in stream:
                line = raw.decode().rstrip("\n")
                into.append(line)
                if line.startswith("data: "):
                    return

    readers = [threading.Thread(target=read, args=(into,)) for into in received]
    for reader in readers:
        reader.start()
    deadline = 100
    while len(server.hub._subscribers) < 2 and deadline:
        threading.Event().wait(0.05)
        deadline -= 1
    server.publish({SPOTTER})
    for reader in readers:
        reader.join(10)
    listed = {row["uuid"]: row for row in listing(fixture_db, per_page=data.PER_PAGE_MAX)["sessions"]}
    for lines in received:
        assert "event: figures" in lines
        update = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
        assert update["sessions"] == [listed[SPOTTER]]
        assert update["rows_html"][SPOTTER].startswith(f'<tr data-uuid="{SPOTTER}">')
        assert f"${listed[SPOTTER]['cost']['usd']:,.2f}" in update["rows_html"][SPOTTER]


def test_the_trends_twin_answers_what_retrod_trends_json_prints(served: tuple[UiServer, str], fixture_db: str,
                                                                reports: dict[str, dict], tmp_path: Path) -> None:
    server, token = served
    # the command reads the transcripts first when no daemon runs: the fixtures, already read
    env = {**os.environ, "RETROD_DATABASE_URL": fixture_db, "RETROD_PROJECTS_DIR": str(FIXTURES),
           "RETROD_DATA_DIR": str(tmp_path)}
    for query, options in (("by=month&split=project&tz=UTC", ["--by", "month", "--by-project", "--tz", "UTC"]),
                           ("split=model&since=2026-02-09&tz=Europe/Berlin",
                            ["--by-model", "--since", "2026-02-09", "--tz", "Europe/Berlin"])):
        done = retrod(env, "trends", "--json", *options)
        assert done.returncode == 0, done.stderr
        printed = json.loads(done.stdout)
        status, _headers, body = get(server.port, f"/api/trends?{query}&token={token}")
        assert status == 200
        assert json.loads(body) == printed
        assert printed["periods"] and printed["total"]["sessions"] > 0  # (not two empty answers)
        # the prompt cache's waste (accounting.md §2.8) of the sessions its periods add up: their reports'
        counted = [r for r in reports.values() if "since" not in query  # (Berlin's midnight of 2026-02-09)
                   or (r["session"]["started_at"] or "") >= "2026-02-08T23:00:00"]
        assert len(counted) == printed["total"]["sessions"]
        want = sum(r["summary"]["cache"]["waste_usd"] for r in counted)
        assert want > 0.1 and abs(printed["total"]["cache"]["waste_usd"] - want) <= 0.0000005 * len(counted) + 1e-9
    for query, error in (("by=year", "by: 'year' is not one of day, week, month"),
                         ("split=session", "split: 'session' is not one of project, model, machine"),
                         ("since=last%20week", "since: 'last week' is not a date (YYYY-MM-DD)"),
                         ("tz=Mars/Olympus", ("unknown time zone 'Mars/Olympus'; use a name such as UTC or "
                                              "Europe/Berlin"))):
        status, _headers, body = get(server.port, f"/api/trends?{query}&token={token}")
        assert (status, json.loads(body)) == (400, {"error": error}), query


def test_the_costliest_on_the_trends_page_are_of_the_sessions_its_figures_add_up(
        fixture_db: str, reports: dict[str, dict]) -> None:
    def expected(keep) -> list[str]:
        chosen = [u for u, r in reports.items() if keep(r["session"])]
        return sorted(chosen, key=lambda u: -(reports[u]["summary"]["cost"]["usd"] or 0))[:data.OUTLIERS]

    # UTC+14: its 2026-02-12 starts at 10:00 UTC the day before, before the spotter session's start
    midnight = datetime(2026, 2, 12, tzinfo=ZoneInfo("Pacific/Kiritimati"))
    with psycopg.connect(fixture_db) as conn:
        def costliest(**query: object) -> tuple[list[str], int]:
            trends_query = data.TrendsQuery(**query)  # type: ignore[arg-type]
            rows = data.costliest(conn, trends_query)
            return [r["uuid"] for r in rows], data.trends(conn, trends_query)["total"]["sessions"]

        # part of a folder name or a working folder (case-sensitive), as `retrod trends --project` reads it
        def spotter(s: dict) -> bool:
            return "spotter" in s["project_slug"] or "spotter" in (s["project_path"] or "")

        found, summed = costliest(project="spotter")
        assert found == expected(spotter) and summed == sum(spotter(r["session"]) for r in reports.values()) > 1
        with pytest.raises(data.QueryError, match="matches no project"):
            costliest(project="SPOTTER")  # (no folder is named in capitals)
        # a project's path: the sessions that ran in it
        path = reports[SPOTTER]["session"]["project_path"]
        found, summed = costliest(project=path)
        assert found == expected(lambda s: s["project_path"] == path) and found[0] == SPOTTER
        # the periods' midnight, not UTC's
        found, summed = costliest(since=date(2026, 2, 12), tz="Pacific/Kiritimati")
        assert found == expected(lambda s: s["started_at"] is not None
                                 and datetime.fromisoformat(s["started_at"]) >= midnight)
        assert found[0] == SPOTTER
        # another member's: none here
        assert costliest(member="nobody") == ([], 0)


# --- the command ---------------------------------------------------------------------------------

def retrod(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_retrod_ui_prints_the_address_with_the_token(served: tuple[UiServer, str], tmp_path: Path) -> None:
    server, token = served
    env = {**os.environ, "RETROD_DATA_DIR": str(server.settings.data_dir), "RETROD_UI_PORT": str(server.port),
           "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    done = retrod(env, "ui", "--no-open")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"http://127.0.0.1:{server.port}/?token={token}\n"
    done = retrod(env, "ui")  # no display: says so rather than start a text browser here
    assert (done.returncode, done.stderr) == (0, "no browser here to open: open the address above\n")


def test_retrod_ui_says_when_no_daemon_serves_it_or_it_is_off(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "RETROD_DATA_DIR": str(tmp_path), "RETROD_UI_PORT": str(port)}
    done = retrod(env, "ui", "--no-open")
    assert done.returncode == 1
    assert done.stderr == (f"retrod: error: no daemon serves the web UI on 127.0.0.1:{port} for {tmp_path}: "
                           "start it with `retrod run` (or `retrod service install`)\n")
    done = retrod({**env, "RETROD_UI_PORT": "0"}, "ui")
    assert done.returncode == 2 and "the web UI is off (RETROD_UI_PORT=0)" in done.stderr
    hidden = tmp_path / "no-extra" / "starlette"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('the ui extra is not installed')\n")
    done = retrod({**env, "PYTHONPATH": str(hidden.parent)}, "ui")
    assert (done.returncode, done.stderr) == (
        2, "retrod: error: the web UI needs Starlette and uvicorn, an optional extra: pip install 'retrod[ui]'\n")


def test_the_daemon_runs_without_the_extra_and_says_so_once(db_url: str, projects: Path, tmp_path: Path) -> None:
    hidden = tmp_path / "no-extra" / "uvicorn"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('the ui extra is not installed')\n")
    env = {**os.environ, "RETROD_DATABASE_URL": db_url, "RETROD_PROJECTS_DIR": str(projects),
           "RETROD_DATA_DIR": str(tmp_path / "data"), "RETROD_UI_PORT": str(free_port()),
           "PYTHONPATH": str(hidden.parent)}
    process = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in process.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if '"caught up"' in line:
                break
    finally:
        process.terminate()
        process.wait(30)
    said = [json.loads(line) for line in lines if line.startswith("{") and "web UI" in line]
    assert [s["event"] for s in said] == [("web UI off: the web UI needs Starlette and uvicorn, an optional extra:"
                                          " pip install 'retrod[ui]'")]
    assert process.returncode == 0


def test_the_ui_modules_that_need_no_framework_import_none() -> None:
    """`data`, `pages`, `hub`, `secret`, `sessions`, `opener` and `client` work without the extra
    (report --format html, `retrod ui`'s question and its file): only `app`, `server` and
    `connections` import Starlette and uvicorn."""
    code = ("import sys; import retrod.ui, retrod.ui.data, retrod.ui.pages, retrod.ui.hub, retrod.ui.secret,"
            " retrod.ui.sessions, retrod.ui.opener, retrod.ui.client;"
            " print(sorted(m for m in ('starlette', 'uvicorn') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


