"""basics/format.py: each kind of figure's one rendering, its boundary cases written by hand from
the rules in docs/reference.md ("How figures are shown"), and the same figure printed the same way
by the Markdown report, the session's page, `trends`' text and the brief."""

from __future__ import annotations

import html
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from helpers import ingest
from retrod.basics import format
from retrod.history import brief, trends
from retrod.report import markdown, model, prices, timeline
from retrod.ui import pages

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"
SPOTTER_PROJECT = "/home/USER/projects/spotter-worktrees/spotter-gqc"


@pytest.mark.parametrize(("seconds", "shown"), [
    (None, "—"), (-3, "0.0s"), (0, "0.0s"), (0.04, "0.0s"), (0.05, "0.1s"), (2.5, "2.5s"), (9.94, "9.9s"),
    (9.96, "10s"), (10, "10s"), (45.4, "45s"), (45.5, "46s"), (59.4, "59s"), (59.5, "1m 00s"),
    (59.999, "1m 00s"), (60, "1m 00s"), (125, "2m 05s"), (3599.4, "59m 59s"), (3599.5, "1h 00m"),
    (3600, "1h 00m"), (3629, "1h 00m"), (3630, "1h 01m"), (4180.2, "1h 10m"), (86_369, "23h 59m"),
    (86_370, "1d 00h"), (86_400, "1d 00h"), (3 * 86_400 + 4 * 3600 - 20, "3d 04h"), (40 * 86_400, "40d 00h"),
])
def test_duration(seconds: float | None, shown: str) -> None:
    assert format.duration(seconds) == shown


@pytest.mark.parametrize(("value", "shown"), [
    (None, "not priced"), (0, "$0.00"), (0.001, "<$0.01"), (0.003, "<$0.01"), (0.0049, "<$0.01"),
    (0.005, "$0.01"), (0.014, "$0.01"), (0.016, "$0.02"), (0.994, "$0.99"), (0.996, "$1.00"), (12.01, "$12.01"),
    (999.999, "$1,000.00"), (1234.5, "$1,234.50"), (1_234_567.891, "$1,234,567.89"), (-1.5, "−$1.50"),
    (-0.001, "$0.00"),
])
def test_usd(value: float | None, shown: str) -> None:
    assert format.usd(value) == shown


def test_usd_where_none_means_nothing_to_count() -> None:
    assert format.usd(None, format.NONE) == "—" and format.usd(0.5, format.NONE) == "$0.50"


@pytest.mark.parametrize(("value", "complete", "priced", "shown"), [
    (1.5, True, True, "$1.50"), (1.5, False, False, "≥ $1.50"), (0.003, False, False, "≥ <$0.01"),
    (None, True, True, "—"), (None, False, False, "not priced"),
])
def test_cost(value: float | None, complete: bool, priced: bool, shown: str) -> None:
    assert format.cost(value, complete, priced) == shown


@pytest.mark.parametrize(("value", "shown"), [
    (None, "—"), (0, "+$0.00"), (0.004, "+$0.00"), (-0.004, "+$0.00"), (0.005, "+$0.01"), (-0.005, "−$0.01"),
    (1.5, "+$1.50"), (-1234.5, "−$1,234.50"),
])
def test_usd_change(value: float | None, shown: str) -> None:
    assert format.usd_change(value) == shown


@pytest.mark.parametrize(("ratio", "shown"), [
    (None, "—"), (0, "0%"), (0.0001, "<1%"), (0.0049, "<1%"), (0.005, "1%"), (0.125, "13%"), (0.235, "24%"),
    (0.5, "50%"), (0.9349, "93%"), (0.994, "99%"), (0.995, ">99%"), (0.9999, ">99%"), (1, "100%"),
])
def test_share(ratio: float | None, shown: str) -> None:
    assert format.share(ratio) == shown


@pytest.mark.parametrize(("change", "shown"), [
    (None, "—"), (0, "+0"), (0.004, "+0"), (-0.004, "+0"), (0.05, "+5"), (-0.12, "−12"), (1, "+100"),
])
def test_points(change: float | None, shown: str) -> None:
    assert format.points(change) == shown


@pytest.mark.parametrize(("per_100", "shown"), [(None, "—"), (0, "0.0"), (3.44, "3.4"), (3.45, "3.5"), (12, "12.0")])
def test_rate(per_100: float | None, shown: str) -> None:
    assert format.rate(per_100) == shown


@pytest.mark.parametrize(("n", "shown"), [(None, "—"), (0, "0"), (999, "999"), (1000, "1,000"),
                                          (1_234_567, "1,234,567")])
def test_count(n: int | None, shown: str) -> None:
    assert format.count(n) == shown


@pytest.mark.parametrize(("n", "shown"), [
    (None, "—"), (0, "0"), (999, "999"), (1000, "1k"), (1049, "1k"), (1050, "1.1k"), (38_900, "38.9k"),
    (99_950, "100k"), (100_000, "100k"), (123_456, "123.5k"), (999_949, "999.9k"), (999_950, "1M"),
    (999_999, "1M"), (1_500_000, "1.5M"), (15_400_000, "15.4M"), (999_950_000, "1G"), (2_000_000_000_000, "2,000G"),
])
def test_tokens(n: int | None, shown: str) -> None:
    assert format.tokens(n) == shown


@pytest.mark.parametrize(("n", "shown"), [
    (None, "—"), (0, "0 B"), (999, "999 B"), (1000, "1 KB"), (1536, "1.5 KB"), (999_999, "1 MB"),
    (12_345_678, "12.3 MB"), (3_000_000_000, "3 GB"), (999_950_000_000, "1 TB"),
])
def test_size(n: int | None, shown: str) -> None:
    assert format.size(n) == shown


@pytest.mark.parametrize(("ts", "shown"), [
    (None, None),
    (datetime(2026, 2, 11, 20, 36, 45, 618_999, tzinfo=UTC), "2026-02-11T20:36:45.618Z"),  # truncated
    (datetime(2026, 2, 11, 20, 36, 45, tzinfo=UTC), "2026-02-11T20:36:45.000Z"),
    (datetime(2026, 2, 11, 21, 36, 45, 999, tzinfo=timezone(timedelta(hours=1))), "2026-02-11T20:36:45.000Z"),
    (datetime(2026, 1, 1, 0, 59, 59, 999_999, tzinfo=timezone(timedelta(hours=1))), "2025-12-31T23:59:59.999Z"),
])
def test_instant(ts: datetime | None, shown: str | None) -> None:
    assert format.instant(ts) == shown


def test_an_instant_without_a_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="without a time zone"):
        format.instant(datetime(2026, 2, 11, 20, 36, 45))


# ---- every surface prints a figure the same way -----------------------------------------------

@pytest.fixture(scope="module")
def surfaces(pg_cluster, tmp_path_factory) -> dict:
    """One fixture session (the spotter one, alone in its project) as each surface prints it."""
    import shutil

    from conftest import FIXTURES, fresh_database

    projects = tmp_path_factory.mktemp("format") / "projects"
    shutil.copytree(FIXTURES, projects)
    with fresh_database(pg_cluster) as db_url:
        ingest(db_url, [projects])
        with psycopg.connect(db_url) as conn:
            report = model.build(conn, SPOTTER)
            series = timeline.series(conn, SPOTTER, prices.DEFAULT, report["session"]["member"])
            periods = trends.trends(conn, by="month", tz="UTC", sessions=[SPOTTER])
            told = brief.brief(conn, project=SPOTTER_PROJECT)
    assert [s["session"] for s in told["sessions"]] == [SPOTTER]
    return {"report": report, "markdown": markdown.render(report),
            "page": html.unescape(pages.session_page({**report, "timeline": series})), "trends": trends.render(periods),
            "brief": brief.render(told), "total": periods["total"]}


def test_a_cost_reads_the_same_on_every_surface(surfaces: dict) -> None:
    cost = surfaces["report"]["summary"]["cost"]
    shown = format.cost(cost["usd"], cost["complete"], not cost["unknown_models"])
    assert shown.startswith("$") and surfaces["total"]["cost"]["usd"] == cost["usd"]
    assert f"Estimated cost: {shown}" in surfaces["markdown"]
    assert f'<div class="label">Est. cost</div><div class="value">{shown}</div>' in surfaces["page"]
    assert f" {shown} " in surfaces["trends"].splitlines()[-2]  # the total's row
    assert f"  {shown}  " in surfaces["brief"]  # the per-session line


def test_a_share_reads_the_same_on_every_surface(surfaces: dict) -> None:
    shown = format.share(surfaces["report"]["summary"]["tool_use"]["efficiency"])
    assert shown.endswith("%")
    assert f"tool calls productive ({shown})" in surfaces["markdown"]
    assert f'<div class="label">Efficiency</div><div class="value">{shown}</div>' in surfaces["page"]
    assert f" {shown} " in surfaces["trends"].splitlines()[-2]
    assert f"{shown} of " in surfaces["brief"]


def test_a_duration_reads_the_same_on_every_surface(surfaces: dict) -> None:
    summary = surfaces["report"]["summary"]
    shown = format.duration(summary["claude_s"])
    assert "m " in shown  # minutes and seconds, or hours and minutes: the forms with two units
    assert f"| Time and work | {format.duration(summary['wall_s'])} | {shown} |" in surfaces["markdown"]
    assert f'<div class="label">Claude</div><div class="value">{shown}</div>' in surfaces["page"]
    total = surfaces["trends"].splitlines()[-2]
    assert f" {shown} " in f"{total} "
    brief_claude = [line for line in surfaces["brief"].splitlines() if " Claude " in line]
    for line in brief_claude:  # a phase's or a task's Claude time, when the brief names one
        assert line.split(" Claude ", 1)[1].split(",")[0] in {format.duration(p["claude_s"]) for p in
                                                              surfaces["report"]["phases"]} | {
            format.duration(t["claude_s"]) for t in surfaces["report"]["plan"]["tasks"]}


def test_token_counts_read_the_same_on_every_surface(surfaces: dict) -> None:
    output = surfaces["report"]["summary"]["tokens"]["total"]["output"]
    assert f" {format.tokens(output)} " in surfaces["trends"].splitlines()[-2]  # a small cell: the short form
    exact = format.count(output)
    assert "," in exact  # thousands, separated the same way everywhere an exact count is shown
    assert f'<div class="label">Output tokens</div><div class="value">{exact}</div>' in surfaces["page"]
    assert f"| Output | {format.count(surfaces['report']['summary']['tokens']['main']['output'])} |" \
        in surfaces["markdown"]


def test_bytes_read_the_same_on_the_report_and_the_page(surfaces: dict) -> None:
    tool = max(surfaces["report"]["tools"], key=lambda t: t["result_bytes"])
    shown = format.size(tool["result_bytes"])
    assert shown.endswith(("KB", "MB"))
    assert f"| {tool['name']} | {format.count(tool['calls'])} |" in surfaces["markdown"]
    assert f" | {shown} | " in next(line for line in surfaces["markdown"].splitlines()
                                    if line.startswith(f"| {tool['name']} |"))
    assert f'<td class="num">{shown}</td>' in surfaces["page"]


def test_instants_in_the_reports_json_are_utc_milliseconds(surfaces: dict) -> None:
    session = surfaces["report"]["session"]
    for iso in (session["started_at"], session["ended_at"], *(p["started_at"] for p in surfaces["report"]["phases"])):
        assert len(iso) == 24 and iso.endswith("Z") and iso[19] == ".", iso
    assert session["started_at"].startswith("2026-02-11T")


def test_the_status_line_imports_the_one_module() -> None:
    """No lighter copy: the status line shows figures with basics/format.py's own functions."""
    from retrod.statusline import render

    assert render.duration is format.duration and render.usd is format.usd and render.tokens is format.tokens
    assert render.share is format.share
    assert Path(format.__file__).read_text().count("\nimport ") == 0  # nothing imported at module level
