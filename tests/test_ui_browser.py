"""`retrod ui` in a real browser (issue 23): headless Chromium (Debian's, driven by Playwright by
its path) loads every page against the fixture database and the figures it shows are the report's
JSON, its charts are drawn, its console stays clean; a line appended to a transcript under a
running daemon reaches the live page within 2 s; the HTML report opens offline; the trends page adds
up the reports of each month and names the costliest sessions. One browser for
the module. Screenshots go to RETROD_SCREENSHOTS (docs/screenshots/ holds the last ones taken).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid as uuids
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from retrod.basics import format
from retrod.report import markdown, model
from retrod.ui import data, opener, secret
from test_ui import SPOTTER, fixture_db, free_port, log_phases, reports, served  # noqa: F401 - fixtures

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium reaches for Google's hosts, which this
# machine's network refuses (and a test must not depend on).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LIVE_WITHIN_S = 2.0


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium package")
        pytest.skip(f"no {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    """A fresh page (no cookies), whose console errors and uncaught exceptions fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    tab.on("pageerror", lambda error: problems.append(str(error)))
    yield tab
    context.close()
    assert problems == [], f"the browser's console: {problems}"


def screenshot(page, name: str) -> None:
    folder = os.environ.get("RETROD_SCREENSHOTS")
    if folder:  # the page down to its content's end, no blank below
        bottom = page.eval_on_selector("main", "m => m.getBoundingClientRect().bottom + window.scrollY")
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True,
                        clip={"x": 0, "y": 0, "width": 1280, "height": bottom + 8})


def money(usd: float | None) -> str:
    """docs/reference.md's rule for a cost: to the cent, and money spent never reads as none."""
    if usd is None:
        return "not priced"
    return "<$0.01" if 0 < usd < 0.005 else f"${usd:,.2f}"


def cells(page, selector: str) -> list[dict[str, str]]:
    """Each row's cells by their data-field, as the page shows them."""
    return page.eval_on_selector_all(selector, """rows => rows.map(row => Object.fromEntries(
        [["uuid", row.dataset.uuid || row.dataset.phase || row.dataset.period || ""]].concat(
        Array.from(row.querySelectorAll("[data-field]")).map(c => [c.dataset.field, c.textContent.trim()]))))""")


def drawn_pixels(page, selector: str) -> int:
    """Painted pixels of the chart's canvas: more than its axes' worth when the bars are there."""
    return page.eval_on_selector(selector, """canvas => {
        const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
        let painted = 0;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) painted++;
        return painted; }""")


def test_the_sessions_page_lists_the_reports_figures_and_finds_the_costliest(
        page, served, reports) -> None:  # noqa: F811
    server, token = served
    base = f"http://127.0.0.1:{server.port}"
    page.goto(f"{base}/?token={token}")
    page.wait_for_url(f"{base}/")  # a session in the cookie, the token out of the address
    rows = cells(page, "#sessions tbody tr")
    assert len(rows) == min(len(reports), data.PER_PAGE)
    for row in rows:
        summary = reports[row["uuid"]]["summary"]
        assert row["cost"] == money(summary["cost"]["usd"]), row["uuid"]
        assert row["requests"] == f"{summary['requests']:,}"
        assert row["tool_calls"] == f"{summary['tool_use']['calls']:,}"
        efficiency = summary["tool_use"]["efficiency"]
        assert row["efficiency"] == ("—" if efficiency is None else f"{efficiency * 100:.0f}%")

    # the costliest session of a week, without reading any docs: dates, then the cost column
    page.fill("input[name=since]", "2026-02-09")
    page.fill("input[name=until]", "2026-02-15")
    page.click("form.filters button[type=submit]")
    page.click("a[data-sort=cost]")
    assert "sort=cost" in page.url and "since=2026-02-09" in page.url
    in_week = {u: r for u, r in reports.items()
               if "2026-02-09" <= (r["session"]["started_at"] or "")[:10] <= "2026-02-15"}
    shown = cells(page, "#sessions tbody tr")
    assert next(row["uuid"] for row in shown) == max(in_week, key=lambda u: in_week[u]["summary"]["cost"]["usd"] or 0)
    assert len(shown) == len(in_week) and shown[0]["uuid"] == SPOTTER
    assert page.text_content("#count").startswith(f"{len(in_week)} sessions")
    screenshot(page, "sessions")
    page.click(f'#sessions tr[data-uuid="{SPOTTER}"] td:nth-child(3) a')
    assert page.url == f"{base}/sessions/{SPOTTER}"

    page.goto(f"{base}/?q=hooks")
    assert [row["uuid"] for row in cells(page, "#sessions tbody tr")] == [SPOTTER]


def test_the_sessions_page_sorts_by_cache_waste(page, served, reports) -> None:  # noqa: F811
    """The cache waste column (accounting.md §2.8, each report's `summary.cache.waste_usd`, shown as the
    report shows it): a click sorts the most first, another the least first."""
    server, token = served
    base = f"http://127.0.0.1:{server.port}"
    page.goto(f"{base}/?token={token}")
    page.wait_for_url(f"{base}/")
    page.click("a[data-sort=cache]")
    assert "sort=cache" in page.url
    shown = cells(page, "#sessions tbody tr")
    waste = [reports[row["uuid"]]["summary"]["cache"]["waste_usd"] for row in shown]
    assert [row["cache"] for row in shown] == [format.usd(w) for w in waste]
    assert waste == sorted(waste, reverse=True)
    assert waste[0] == max(r["summary"]["cache"]["waste_usd"] for r in reports.values()) > 0
    assert "▼" in page.text_content("a[data-sort=cache]")
    page.click("a[data-sort=cache]")
    assert "order=asc" in page.url
    least = [reports[row["uuid"]]["summary"]["cache"]["waste_usd"] for row in cells(page, "#sessions tbody tr")]
    assert least == sorted(least) and least[0] == 0


def test_the_file_retrod_ui_opens_logs_the_browser_in(page, served) -> None:  # noqa: F811
    """`retrod ui` opens the browser on an owner-only local file (never the address: a command
    line is every local user's to read); the file leads to the sessions page, logged in."""
    server, token = served
    base = f"http://127.0.0.1:{server.port}"
    page.goto(opener.write(server.settings.data_dir, secret.url(server.port, token)).as_uri())
    page.wait_for_url(f"{base}/")
    assert page.query_selector("#sessions tbody tr") is not None
    session = next(c for c in page.context.cookies() if c["name"] == f"retrod_ui_{server.port}")
    assert session["value"] != token and session["httpOnly"]


def test_the_session_page_shows_the_report_and_draws_its_timeline(page, served, reports) -> None:  # noqa: F811
    server, token = served
    report = reports[SPOTTER]
    summary = report["summary"]
    page.goto(f"http://127.0.0.1:{server.port}/sessions/{SPOTTER}?token={token}")
    page.wait_for_url(f"http://127.0.0.1:{server.port}/sessions/{SPOTTER}")
    page.wait_for_selector("#timeline canvas")
    cards = dict(page.eval_on_selector_all(
        "#summary .card", "cards => cards.map(c => [c.dataset.field, c.querySelector('.value').textContent])"))
    assert cards["cost"] == money(summary["cost"]["usd"])
    assert cards["output"] == f"{summary['tokens']['total']['output']:,}"
    assert cards["requests"] == f"{summary['requests']:,}"
    assert cards["tool_calls"] == f"{summary['tool_use']['calls']:,}"
    assert cards["compactions"] == str(summary["compactions"]) and cards["subagents"] == str(len(report["subagents"]))
    assert drawn_pixels(page, "#timeline canvas") > 20_000

    phases = cells(page, "#phases tbody tr[data-phase]")
    assert [row["output"] for row in phases] == [f"{p['tokens']['output']:,}" for p in report["phases"]]
    assert [row["cost"] for row in phases] == [money(p["cost"]["usd"]) for p in report["phases"]]
    verdicts = page.eval_on_selector_all("#phases .chip", "chips => chips.map(c => c.className)")
    assert verdicts == [f"chip verdict-{p['verdict']}" for p in report["phases"]]
    badges = dict(page.eval_on_selector_all(
        "#waste h3", "hs => hs.map(h => [h.dataset.signal, h.querySelector('.badge').textContent])"))
    assert badges == {k: str(v["count"]) for k, v in report["waste"].items() if v["count"]}
    models = page.eval_on_selector_all("#models tbody td[data-field=cost]", "cs => cs.map(c => c.textContent)")
    assert models == [money(m["cost_usd"]) for m in summary["tokens_by_model"]]
    screenshot(page, "session")

    with page.expect_download() as download:
        page.click("text=Markdown retrospective")
    assert Path(download.value.path()).read_text(encoding="utf-8").startswith("# Session Retrospective: 2026-02-11")


PLANNED = "ef958aa1-0e93-49f0-bb71-150f63befcd1"  # a TaskCreate / TaskUpdate plan; cache misses, expired, invalidated
TASK_SHADES = [(0x5B, 0x6B, 0xBF), (0x2F, 0x8F, 0x8F)]  # app.js TASK_COLOURS, neighbours alternating
MISS_COLOURS = {"compaction": (0x7B, 0x3F, 0xA0), "model": (0x1F, 0x77, 0xB4), "expired": (0xE6, 0xA1, 0x00),
                "invalidated": (0xC0, 0x39, 0x2B)}  # app.js MISS_COLOURS
TASK_LANE_Y, MISS_Y = 23, 43  # CSS px under the plot's top: inside the tasks' lane, inside a miss's marker


def pixel_at(page, x: float, y: float) -> tuple[int, int, int]:
    return tuple(page.eval_on_selector("#timeline canvas", """(canvas, [x, y]) => Array.from(
        canvas.getContext("2d").getImageData(Math.round(x), Math.round(y), 1, 1).data).slice(0, 3)""", [x, y]))


def near(colour: tuple[int, ...], want: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 6 for a, b in zip(colour, want, strict=True))


def markdown_rows(report: dict) -> list[list[str]]:
    """The Tasks section's table rows of the Markdown report, cell by cell."""
    section = markdown.render(report).split("## Tasks (from Claude's plan)", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and line[2:3].isdigit()]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]


def test_the_session_page_draws_the_plans_tasks_and_the_cache_misses(page, served, reports) -> None:  # noqa: F811
    """Issues 29 and 30 on the timeline: a bar in the tasks' lane for each window of each task, a
    marker for each cache miss in its cause's colour, tips naming them; the task table's rows are
    the report's figures as its Markdown's Tasks section writes them; the JSON twin carries both."""
    server, token = served
    base = f"http://127.0.0.1:{server.port}"
    report = reports[PLANNED]
    tasks, misses = report["plan"]["tasks"], report["cache_misses"]
    assert len(tasks) >= 5 and {m["cause"] for m in misses} == {"expired", "invalidated"}
    assert [m["at"] for m in misses] == sorted(m["at"] for m in misses)
    page.goto(f"{base}/sessions/{PLANNED}?token={token}")
    page.wait_for_url(f"{base}/sessions/{PLANNED}")
    page.wait_for_selector("#timeline canvas")

    twin = page.evaluate("url => fetch(url).then(r => r.json())", f"/api/sessions/{PLANNED}")
    assert twin["plan"]["tasks"] == tasks and twin["cache_misses"] == misses

    # the table: every task, its figures as the Markdown's Tasks section writes them
    rows = page.eval_on_selector_all("#tasks tbody tr[data-task]", """rows => rows.map(row => Object.fromEntries(
        [["number", row.dataset.task], ["costliest", row.classList.contains("costliest")]].concat(
        Array.from(row.querySelectorAll("[data-field]")).map(c => [c.dataset.field, c.textContent.trim()]))))""")
    assert [int(row["number"]) for row in rows] == [t["number"] for t in tasks]
    costliest = max(tasks, key=lambda t: (t["cost"]["usd"] or 0, t["tokens"]["output"]))
    for row, task, written in zip(rows, tasks, markdown_rows(report), strict=True):
        use = task["tool_use"]
        assert row["name"].removesuffix(" costliest") == task["name"]
        assert row["costliest"] == (task is costliest) == row["name"].endswith(" costliest")
        assert row["output"] == f"{task['tokens']['output']:,}"
        assert row["tokens"] == f"{sum(task['tokens'].values()):,}"
        assert row["calls"] == f"{use['calls']:,}" and row["wasted"] == f"{use['calls'] - use['productive']:,}"
        assert row["efficiency"] == ("—" if use["efficiency"] is None else f"{use['efficiency'] * 100:.0f}%")
        usd = task["cost"]["usd"]
        assert row["cost"] == money(usd)
        assert row["status"] == task["status"] + ("" if task["ended_at"] else " (current)")
        assert [row[k] for k in ("status", "time", "output", "tokens", "cost", "calls", "efficiency", "wasted")] \
            == written[2:], task["number"]
    outside = page.text_content("#outside-tasks [data-field=time]")
    summary = report["summary"]
    times = ("claude_s", "tool_s", "human_s", "away_s")
    want = sum(summary[k] for k in times) - sum(t[k] for t in tasks for k in times)
    assert outside == format.duration(max(want, 0)) and f"Outside every task: {outside}." in markdown.render(report)

    # the timeline: each window a bar in the tasks' lane, in its task's shade
    where = page.eval_on_selector("#timeline", """el => ({left: el.chart.bbox.left, top: el.chart.bbox.top,
        width: el.chart.bbox.width, ratio: devicePixelRatio})""")
    ratio = where["ratio"]

    def x_of(iso: str) -> float:
        return page.eval_on_selector("#timeline", "(el, v) => el.chart.valToPos(v, 'x', true)", epoch(iso))

    last = page.eval_on_selector("#timeline", "el => el.chart.scales.x.max")
    windows = 0
    for i, task in enumerate(tasks):
        for w in task["windows"]:
            x0 = x_of(w["start"])
            x1 = x_of(w["end"]) if w["end"] else page.eval_on_selector(
                "#timeline", "(el, v) => el.chart.valToPos(v, 'x', true)", last)
            colour = pixel_at(page, (x0 + x1) / 2, where["top"] + TASK_LANE_Y * ratio)
            assert any(near(colour, shade) for shade in TASK_SHADES), (task["number"], w, colour)
            if x1 - x0 >= 8 * ratio:  # wide enough that no neighbour's bar covers its middle
                assert near(colour, TASK_SHADES[i % 2]), (task["number"], w, colour)
            windows += 1
    assert windows == sum(len(t["windows"]) for t in tasks) > len(tasks) - 1
    # ... each cache miss a marker in its cause's colour (the later drawn on top where two meet)
    spots = [x_of(m["at"]) for m in misses]
    for x, miss in zip(spots, misses, strict=True):
        drawn_last = [m for other, m in zip(spots, misses, strict=True) if abs(other - x) <= 6 * ratio][-1]
        colour = pixel_at(page, x, where["top"] + MISS_Y * ratio)
        assert near(colour, MISS_COLOURS[drawn_last["cause"]]), (miss, colour)
    legend = page.eval_on_selector_all(".legend .key i", "keys => keys.map(k => k.className)")
    assert "mark task" in legend and {"mark miss-expired", "mark miss-invalidated"} <= set(legend)
    assert "mark miss-model" not in legend

    # pointing at a marker names the miss; at a bar, its task
    box = page.eval_on_selector("#timeline canvas", "c => { const r = c.getBoundingClientRect(); return [r.x, r.y]; }")
    alone = next(i for i, x in enumerate(spots) if all(abs(x - o) > 14 * ratio for j, o in enumerate(spots) if j != i))
    miss = misses[alone]
    page.mouse.move(box[0] + spots[alone] / ratio, box[1] + where["top"] / ratio + MISS_Y)
    tip = page.wait_for_selector("#timeline .phase-tip:not([hidden])", timeout=2000)
    titles = {"expired": "Pause past the cache's lifetime", "invalidated": "Prefix changed or dropped"}
    reason = f" ({miss['reason']})" if miss["reason"] else ""
    agent = f" · {miss['agent']}" if miss["agent"] else ""
    assert tip.text_content() == (f"Cache miss: {titles[miss['cause']]}{reason} · {miss['at'][:10]} "
                                  f"{miss['at'][11:19]} UTC{agent} · {miss['rewritten']:,} tokens rewritten · "
                                  f"{money(miss['extra_usd'])} extra")
    widest = max(((t, w) for t in tasks for w in t["windows"] if w["end"]),
                 key=lambda tw: epoch(tw[1]["end"]) - epoch(tw[1]["start"]))
    middle = (x_of(widest[1]["start"]) + x_of(widest[1]["end"])) / 2
    page.mouse.move(box[0] + middle / ratio, box[1] + where["top"] / ratio + TASK_LANE_Y + 4)
    page.wait_for_function("""n => { const t = document.querySelector("#timeline .phase-tip");
        return t && !t.hidden && t.textContent.startsWith("Task " + n + ": "); }""", arg=widest[0]["number"],
                           timeout=2000)
    assert widest[0]["name"] in page.text_content("#timeline .phase-tip")
    screenshot(page, "session-tasks")


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_the_html_report_is_one_file_that_opens_offline(page, fixture_db: str, reports, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "retrod", "report", SPOTTER, "--format", "html", "--output", str(out)],
                          env={**os.environ, "RETROD_DATABASE_URL": fixture_db, "RETROD_PROJECTS_DIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("<!doctype html>") and out.read_text(encoding="utf-8") == done.stdout
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    page.goto(out.as_uri())
    page.wait_for_selector("#timeline canvas")
    assert fetched == [out.as_uri()]  # its styles, scripts and data inside: nothing else fetched
    assert drawn_pixels(page, "#timeline canvas") > 20_000
    cost = page.text_content("#summary .card[data-field=cost] .value")
    assert cost == money(reports[SPOTTER]["summary"]["cost"]["usd"])


def test_the_trends_page_adds_up_the_reports_of_each_month_and_names_the_costliest(page, served, reports) -> None:  # noqa: F811
    server, token = served
    base = f"http://127.0.0.1:{server.port}"
    page.goto(f"{base}/trends?by=month&tz=UTC&token={token}")
    page.wait_for_url(f"{base}/trends?by=month&tz=UTC")
    page.wait_for_selector("#trends-chart canvas")
    months: dict[str, list[dict]] = {}
    for report in reports.values():  # each session wholly in the month it started (UTC here)
        months.setdefault((report["session"]["started_at"] or "")[:7] or "undated", []).append(report)
    rows = {row["uuid"]: row for row in cells(page, "#trends tbody tr[data-period]") if "sessions" in row}
    assert {period[:7] for period in rows} == set(months)
    for period, row in rows.items():
        month = months[period[:7]]
        summaries = [r["summary"] for r in month]
        assert row["sessions"] == f"{len(month):,}", period
        assert row["tool_calls"] == f"{sum(s['tool_use']['calls'] for s in summaries):,}", period
        assert row["output"] == f"{sum(s['tokens']['total']['output'] for s in summaries):,}", period
        costs = [s["cost"] for s in summaries]
        usd = sum(c["usd"] or 0 for c in costs)
        assert row["cost"] == (money(usd) if all(c["complete"] for c in costs) else f"≥ {money(usd)}"), period
        assert row["cache_waste"] == format.usd(sum(s["cache"]["waste_usd"] for s in summaries)), period
    total = cells(page, "#trends tfoot tr")[0]
    assert total["sessions"] == f"{len(reports):,}"
    cards = dict(page.eval_on_selector_all(
        "#totals .card", "cards => cards.map(c => [c.dataset.field, c.querySelector('.value').textContent])"))
    assert cards["sessions"] == total["sessions"] and cards["cost"] == total["cost"]
    assert drawn_pixels(page, "#trends-chart canvas") > 5_000
    # the outliers: the costliest sessions, each against the average session
    by_cost = sorted(reports, key=lambda u: -(reports[u]["summary"]["cost"]["usd"] or 0))[:data.OUTLIERS]
    costliest = cells(page, "#costliest tbody tr")
    assert [row["uuid"] for row in costliest] == by_cost and by_cost[0] == SPOTTER
    average = sum(r["summary"]["cost"]["usd"] or 0 for r in reports.values()) / len(reports)
    top = reports[SPOTTER]["summary"]["cost"]["usd"]
    assert costliest[0]["cost"] == money(top) and costliest[0]["times"] == f"{top / average:,.1f}×"

    # per project, without reading any docs: the split's menu; each month's projects under it
    page.select_option("select[name=split]", "project")
    page.click("form.filters button[type=submit]")
    assert "split=project" in page.url and "by=month" in page.url
    spotter_month = reports[SPOTTER]["session"]["started_at"][:7]
    under = page.eval_on_selector_all(
        f'#trends tbody tr[data-period^="{spotter_month}"] ~ tr', """rows => {
            const out = []; for (const r of rows) { if (r.dataset.period) break;
            if (r.dataset.project) out.push(r.dataset.project); } return out; }""")
    assert sorted(under) == sorted({r["session"]["project_slug"] for r in months[spotter_month]})
    screenshot(page, "trends")
    page.click("a.chip >> text=By week")
    assert page.text_content("#trends thead th") == "Week of" and "by=" not in page.url


# --- live, with the daemon running for real ---------------------------------------------------

def _assistant_line(template: dict, output_tokens: int) -> str:
    """A new response of the session's, stamped now: what Claude Code appends as it works."""
    line = json.loads(json.dumps(template))
    stamp = uuids.uuid4().hex
    line.update(uuid=str(uuids.uuid4()), requestId=f"req_live_{stamp}",
                timestamp=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
    line["message"]["id"] = f"msg_live_{stamp}"
    line["message"]["usage"]["output_tokens"] = output_tokens
    return json.dumps(line) + "\n"


def test_a_line_written_reaches_the_live_page_within_2_s(page, db_url: str, projects: Path, tmp_path: Path) -> None:
    port, data_dir = free_port(), tmp_path / "data"
    env = {**os.environ, "RETROD_DATABASE_URL": db_url, "RETROD_PROJECTS_DIR": str(projects),
           "RETROD_DATA_DIR": str(data_dir), "RETROD_UI_PORT": str(port), "RETROD_SCAN_INTERVAL_S": "3600"}
    daemon = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    log: list[str] = []
    ready = threading.Event()

    def follow() -> None:
        for line in daemon.stderr:  # type: ignore[union-attr]
            log.append(line)
            if '"caught up"' in line:
                ready.set()

    threading.Thread(target=follow, daemon=True).start()
    try:
        assert ready.wait(120), "".join(log[-20:])
        transcript = next(projects.glob(f"*/{SPOTTER}.jsonl"))
        template = next(json.loads(x) for x in transcript.read_text().splitlines()
                        if '"type":"assistant"' in x.replace(" ", "") and '"usage"' in x)
        page.goto(f"http://127.0.0.1:{port}/live?token={secret.read(data_dir)}")
        page.wait_for_url(f"http://127.0.0.1:{port}/live")
        page.wait_for_selector("#live-status.on")
        assert page.is_visible("#live-empty")  # the fixtures are old: nothing active yet

        for output in (1234, 4321):  # it appears, then its figures move
            with transcript.open("a") as out:
                out.write(_assistant_line(template, output))
            written = time.monotonic()
            with psycopg.connect(db_url) as conn:
                before = page.text_content(f'#live tr[data-uuid="{SPOTTER}"] [data-field=output]') \
                    if page.query_selector(f'#live tr[data-uuid="{SPOTTER}"]') else None
                page.wait_for_function(
                    f"""prev => {{ const c = document.querySelector(
                        '#live tr[data-uuid="{SPOTTER}"] [data-field=output]');
                    return c && c.textContent !== prev; }}""", arg=before, timeout=LIVE_WITHIN_S * 1000 + 500)
                seen = time.monotonic() - written
                report = model.build(conn, SPOTTER)
            row = cells(page, f'#live tr[data-uuid="{SPOTTER}"]')[0]
            assert seen <= LIVE_WITHIN_S, f"{seen:.2f} s"
            assert row["output"] == f"{report['summary']['tokens']['total']['output']:,}"
            assert row["cost"] == money(report["summary"]["cost"]["usd"])
            assert row["requests"] == f"{report['summary']['requests']:,}"
        assert not page.is_visible("#live-empty")
        screenshot(page, "live")
    finally:
        page.goto("about:blank")  # the page's stream closes before the daemon does (no reconnecting)
        daemon.terminate()
        daemon.wait(30)
    assert daemon.returncode == 0
