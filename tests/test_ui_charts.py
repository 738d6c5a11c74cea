"""The web UI's charts as drawn, in a real browser (issue 28): the session timeline's cost line
stays flat across idle time, a 10-second phase in a two-hour session is a band one can see and
point at, a three-minute session's time ticks are all different, and the trends chart's axis
labels are inside the chart (a costly month's `$12,345.00` is wider than a fixed axis).

What is checked is what the page drew: uPlot's own paths and tick labels (the chart is the
element's `chart`), the canvas's pixels, the tip the pointer brings up. The figures expected are
the page's own data (its minutes' costs), not what the script made of them. Its own database:
the fixture corpus, with phases logged on the two-hour session, priced a thousand times the list
price, so that a month costs thousands of dollars.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from conftest import FIXTURES, fresh_database
from helpers import ingest
from retrod import tracking
from retrod.settings import Settings
from retrod.ui import data, secret
from retrod.ui.server import UiServer
from test_ui import free_port
from test_ui_browser import browser, page  # noqa: F401 - fixtures

LONG = "a7da6a22-facc-4fcd-8bab-f83c87862004"  # 15:16 to 17:11 UTC, an idle hour in it
SHORT = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"  # three minutes of requests
QUICK = ("checks", "quick check", "2025-11-29T16:30:00Z", "2025-11-29T16:30:10Z", "exploratory_waste")
PHASES = (("plan", "read the code", "2025-11-29T15:16:00Z", "2025-11-29T15:50:00Z", "high_impact"), QUICK,
          ("build", "implement", "2025-11-29T16:30:10Z", "2025-11-29T17:12:00Z", "moderate_impact"))
WASTE_ORANGE = (0xF0, 0xA4, 0x4B)  # the exploratory_waste band's colour (app.js VERDICT_COLOURS)
EXPENSIVE = {"input": 5_000, "output": 25_000, "cache_read": 500, "cache_create_5m": 6_250, "cache_create_1h": 10_000}


@pytest.fixture(scope="module")
def served(pg_cluster, tmp_path_factory) -> Iterator[tuple[UiServer, str]]:
    root = tmp_path_factory.mktemp("charts")
    with fresh_database(pg_cluster) as url:
        ingest(url, [FIXTURES])
        with psycopg.connect(url) as conn:
            tracking.track_start(conn, LONG, "Charts")
            for task, phase, start, end, verdict in PHASES:
                tracking.phase_log(conn, LONG, task, phase, tracking.parse_time(start), tracking.parse_time(end),
                                   verdict, tracking.PhaseNotes())
            models = data.choices(conn)["models"]
        prices = root / "prices.json"
        prices.write_text(json.dumps({"models": dict.fromkeys(models, EXPENSIVE)}))
        settings = Settings(database_url=url, data_dir=root / "data", ui_port=free_port(), prices=prices)
        with ConnectionPool(url, min_size=1, max_size=4) as pool, UiServer(pool, settings) as server:
            assert server.hub is not None, "the UI did not start"
            yield server, secret.read(settings.data_dir) or ""


def open_page(page, served, path: str) -> None:  # noqa: F811
    """The page at `path`, logged in as tests/test_ui_browser.py logs in."""
    server, token = served
    page.goto(f"http://127.0.0.1:{server.port}{path}{'&' if '?' in path else '?'}token={token}")
    # The login answers a page that goes on to the address without the token (the session is in
    # the cookie): wait for it, or the test would read the login page being left.
    page.wait_for_url(f"http://127.0.0.1:{server.port}{path}")


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


# The y values, in canvas pixels, at which a series' drawn stroke crosses the column at x (its
# value `x`), found with the canvas's own hit test on uPlot's path for it.
STROKE_AT = """(el, [series, xs]) => {
    const u = el.chart, path = u.series[series]._paths.stroke, box = u.bbox;
    const probe = document.createElement("canvas").getContext("2d");
    probe.lineWidth = 2 * devicePixelRatio;
    return xs.map(x => { const px = u.valToPos(x, "x", true), ys = [];
        for (let y = box.top; y <= box.top + box.height; y++) if (probe.isPointInStroke(path, px, y)) ys.push(y);
        return ys; }); }"""


def test_the_cost_line_stays_flat_across_an_idle_stretch(page, served) -> None:  # noqa: F811
    open_page(page, served, f"/sessions/{LONG}")
    page.wait_for_selector("#timeline canvas")
    minutes = json.loads(page.text_content("#retrod-data"))["timeline"]
    starts, costs = minutes["minute"], minutes["cost_usd"]
    # the longest stretch without a request, and the cost of everything before it and after it
    gap = max(range(len(starts) - 1), key=lambda i: starts[i + 1] - starts[i])
    idle_from, idle_to = starts[gap] + 60, starts[gap + 1]
    assert idle_to - idle_from >= 3600, "the fixture session has an idle hour"
    before, after = sum(c or 0 for c in costs[:gap + 1]), sum(c or 0 for c in costs[:gap + 2])
    y_before, y_after = page.eval_on_selector(
        "#timeline", "(el, vs) => vs.map(v => el.chart.valToPos(v, 'usd', true))", [before, after])
    assert y_before - y_after >= 3, "the minute after the idle hour costs something to see"

    across = [idle_from + (idle_to - idle_from) * share for share in (0.02, 0.25, 0.5, 0.75, 0.98)]
    drawn = page.eval_on_selector("#timeline", STROKE_AT, [2, across])
    assert all(drawn), f"no cost line somewhere across the idle stretch: {drawn}"
    heights = [y for ys in drawn for y in ys]
    assert max(heights) - min(heights) <= 3, f"the cost line moves across the idle stretch: {drawn}"
    assert all(abs(y - y_before) <= 3 for y in heights), (drawn, y_before)  # at what was spent before
    # and it rises in the minute after: its end is the whole session's cost
    everything = sum(c or 0 for c in costs)
    last = page.eval_on_selector("#timeline", "(el, v) => el.chart.valToPos(v, 'usd', true)", everything)
    end = page.eval_on_selector("#timeline", STROKE_AT, [2, [starts[-1] + 30]])[0]
    assert any(abs(y - last) <= 3 for y in end), (end, last)


def test_a_ten_second_phase_is_a_band_to_see_and_point_at(page, served) -> None:  # noqa: F811
    open_page(page, served, f"/sessions/{LONG}")
    page.wait_for_selector("#timeline canvas")
    start, end = epoch(QUICK[2]), epoch(QUICK[3])
    where = page.eval_on_selector("#timeline", """(el, [start, end]) => { const u = el.chart;
        return {x: u.valToPos((start + end) / 2, "x", true), window: u.valToPos(end, "x") - u.valToPos(start, "x"),
                top: u.bbox.top, ratio: devicePixelRatio}; }""", [start, end])
    assert where["window"] < 2, "its 10 s are less than 2 px of this chart"
    # the band's coloured strip along the plot's top, in the row just under its edge
    row = page.eval_on_selector("#timeline canvas", """(canvas, [x, y]) => Array.from(
        canvas.getContext("2d").getImageData(Math.round(x) - 40, Math.round(y), 81, 1).data)""",
                                [where["x"], where["top"] + 2 * where["ratio"]])
    pixels = [tuple(row[i:i + 3]) for i in range(0, len(row), 4)]
    orange = sum(all(abs(a - b) <= 6 for a, b in zip(p, WASTE_ORANGE, strict=True)) for p in pixels)
    assert orange >= 4 * where["ratio"], f"the 10-s phase's band is {orange} px wide"

    box = page.eval_on_selector("#timeline canvas", "c => { const r = c.getBoundingClientRect(); return [r.x, r.y]; }")
    page.mouse.move(box[0] + where["x"] / where["ratio"], box[1] + where["top"] / where["ratio"] + 60)
    tip = page.wait_for_selector("#timeline .phase-tip:not([hidden])", timeout=2000)
    assert tip.text_content() == ("checks / quick check · Exploratory, waste · "
                                  "2025-11-29 16:30 → 2025-11-29 16:30 UTC (10s)")


def test_a_three_minute_sessions_time_ticks_are_all_different(page, served) -> None:  # noqa: F811
    open_page(page, served, f"/sessions/{SHORT}")
    page.wait_for_selector("#timeline canvas")
    minutes = json.loads(page.text_content("#retrod-data"))["timeline"]["minute"]
    assert minutes[-1] - minutes[0] == 120, "three minutes of requests"
    labels = [v for v in page.eval_on_selector("#timeline", "el => el.chart.axes[0]._values") if v]
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels


def test_the_trends_charts_axis_labels_are_inside_the_chart(page, served) -> None:  # noqa: F811
    open_page(page, served, "/trends?by=month&tz=UTC")
    page.wait_for_selector("#trends-chart canvas")
    labels = page.eval_on_selector("#trends-chart", "el => el.chart.axes[1]._values")
    assert max(len(v) for v in labels) >= len("$10000.00"), labels  # a costly month's labels
    # a label cut by the chart's edge leaves its ink in the canvas's outermost columns
    edges = page.eval_on_selector("#trends-chart canvas", """canvas => {
        const ctx = canvas.getContext("2d"), w = canvas.width, h = canvas.height, inked = [];
        for (const x of [0, 1, w - 2, w - 1]) {
            const column = ctx.getImageData(x, 0, 1, h).data;
            let n = 0; for (let i = 3; i < column.length; i += 4) if (column[i] > 0) n++;
            inked.push(n); }
        return inked; }""")
    assert edges == [0, 0, 0, 0], f"painted pixels in the canvas's edge columns (left, right): {edges}"
