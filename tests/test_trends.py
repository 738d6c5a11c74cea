"""`retrod trends` (issue 22): every figure of every period is the sum of the per-session reports
of the sessions that started in it — tokens, seconds and cents, on the fixture corpus with phases
logged, by day, week and month, in several time zones, per project and per model —, and the
periods are cut where the calendar of the time zone asked for cuts them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest

from helpers import HOST, ingest, reports
from retrod import tracking
from retrod.history import trends
from retrod.report.model import SIGNALS, TOKEN_FIELDS

BUCKETS = ("main", "subagents", "compaction", "total")
TIMES = ("wall_s", "claude_s", "tool_s", "human_s", "away_s")
CAUSES = ("compaction", "model", "expired", "invalidated")


def log_phases(db_url: str, sessions: list[str]) -> None:
    """A few phases with verdicts on some fixture sessions (their first hour, in thirds)."""
    verdicts = ["high_impact", "avoidable_waste", "exploratory_waste", "moderate_impact"]
    with psycopg.connect(db_url) as conn:
        for n, session in enumerate(sessions):
            first = conn.execute("SELECT min(ts) FROM retrod.events WHERE session_uuid = %s", (session,)).fetchone()[0]
            if first is None:
                continue
            for k in range(1 + n % 3):
                tracking.phase_log(conn, session, f"task {n}", f"phase {k}", first + timedelta(minutes=20 * k),
                                   first + timedelta(minutes=20 * (k + 1)), verdicts[(n + k) % len(verdicts)],
                                   tracking.PhaseNotes(lessons=f"lesson {n}.{k}"))


@pytest.fixture(scope="module")
def corpus(pg_cluster, tmp_path_factory) -> tuple[str, dict[str, dict]]:
    """The fixture corpus ingested, phases logged on a dozen sessions, and every session's report."""
    import shutil

    from conftest import FIXTURES, fresh_database

    projects = tmp_path_factory.mktemp("trends") / "projects"
    shutil.copytree(FIXTURES, projects)
    with fresh_database(pg_cluster) as url:
        ingest(url, [projects])
        log_phases(url, sorted(reports(url))[:12])
        yield url, reports(url)


def period_of(started_at: str | None, by: str, zone: str) -> str | None:
    """The period a session belongs to, worked out here from its report's start."""
    if started_at is None:
        return None
    day = datetime.fromisoformat(started_at).astimezone(ZoneInfo(zone)).date()
    if by == "week":
        day -= timedelta(days=day.weekday())
    elif by == "month":
        day = day.replace(day=1)
    return day.isoformat()


def expected(group: list[dict]) -> dict:
    """The sums of the per-session reports' figures."""
    summaries = [r["summary"] for r in group]
    usd = [s["cost"]["usd"] for s in summaries if s["cost"]["usd"] is not None]
    verdicts: dict[str, int] = {}
    for r in group:
        for verdict, v in r["verdicts"].items():
            if v["phases"]:
                verdicts[verdict] = verdicts.get(verdict, 0) + v["phases"]
    return {
        "sessions": len(group),
        "requests": sum(s["requests"] for s in summaries),
        "tokens": {b: {f: sum(s["tokens"][b][f] for s in summaries) for f in TOKEN_FIELDS} for b in BUCKETS},
        "times": {t: sum(s[t] for s in summaries) for t in TIMES},
        "usd": sum(usd) if usd else None,
        "unknown_models": {m for s in summaries for m in s["cost"]["unknown_models"]},
        "calls": sum(s["tool_use"]["calls"] for s in summaries),
        "productive": sum(s["tool_use"]["productive"] for s in summaries),
        "signals": {sig: sum(s["tool_use"]["signals"][sig] for s in summaries) for sig in SIGNALS},
        "tool_result_bytes": sum(s["tool_result_bytes"] for s in summaries),
        "verdicts": verdicts,
        "misses": {c: {k: sum(s["cache"]["misses"][c][k] for s in summaries)
                       for k in ("count", "rewritten", "extra_usd")} for c in CAUSES},
        "waste_usd": sum(s["cache"]["waste_usd"] for s in summaries),
    }


def assert_adds_up(figures: dict, group: list[dict]) -> None:
    """Tokens, calls and phases exactly; seconds and dollars to what rounding each session's
    report (to the millisecond, to the micro-dollar) can move: half a unit per session."""
    want, n = expected(group), len(group)
    assert figures["sessions"] == want["sessions"]
    assert figures["requests"] == want["requests"]
    assert figures["tokens"] == want["tokens"]
    for t in TIMES:
        assert abs(figures[t] - want["times"][t]) <= 0.0005 * n + 1e-9, (t, figures[t], want["times"][t])
    if want["usd"] is None:
        assert figures["cost"]["usd"] is None
    else:
        assert abs(figures["cost"]["usd"] - want["usd"]) <= 0.0000005 * n + 1e-9
    assert set(figures["cost"]["unknown_models"]) == want["unknown_models"]
    assert figures["tool_use"]["calls"] == want["calls"] and figures["tool_use"]["productive"] == want["productive"]
    assert figures["tool_use"]["signals"] == want["signals"]
    assert figures["tool_result_bytes"] == want["tool_result_bytes"]
    assert figures["verdicts"] == want["verdicts"]
    # accounting.md §2.8: the prompt cache's figures are the reports' summed too (issue 29)
    got = figures["cache"]
    total = want["tokens"]["total"]
    assert (got["read"], got["create"]) == (total["cache_read"], total["cache_create"])
    for cause in CAUSES:
        assert got["misses"][cause]["count"] == want["misses"][cause]["count"], cause
        assert got["misses"][cause]["rewritten"] == want["misses"][cause]["rewritten"], cause
        assert abs(got["misses"][cause]["extra_usd"] - want["misses"][cause]["extra_usd"]) <= 0.0000005 * n + 1e-9
    assert abs(got["waste_usd"] - want["waste_usd"]) <= 0.0000005 * n + 1e-9
    if figures["cost"]["usd"]:
        assert got["waste_share"] == pytest.approx(got["waste_usd"] / figures["cost"]["usd"], abs=1e-6)


@pytest.mark.parametrize(("by", "zone"), [("day", "UTC"), ("week", "UTC"), ("week", "Pacific/Kiritimati"),
                                          ("month", "America/Los_Angeles")])
def test_every_period_is_the_sum_of_its_sessions_reports(corpus, by: str, zone: str) -> None:
    url, by_session = corpus
    with psycopg.connect(url) as conn:
        data = trends.trends(conn, by=by, tz=zone)
    assert data["time_zone"] == zone and data["by"] == by
    assert_adds_up(data["total"], list(by_session.values()))
    groups: dict[str | None, list[dict]] = {}
    for report in by_session.values():
        groups.setdefault(period_of(report["session"]["started_at"], by, zone), []).append(report)
    listed = {p["period"]: p for p in data["periods"]}
    assert {k for k, p in listed.items() if p["sessions"]} == set(groups)
    for period, group in groups.items():
        assert_adds_up(listed[period], group)
    assert sum(p["sessions"] for p in data["periods"]) == len(by_session) > 40
    assert sum(sum(p["verdicts"].values()) for p in data["periods"]) > 12  # phases were counted
    # accounting.md §2.8's own count of the shared fixtures' misses: the stored ones are all there
    assert {c: m["count"] for c, m in data["total"]["cache"]["misses"].items()} == {
        "compaction": 3, "model": 1, "expired": 7, "invalidated": 17}
    assert round(data["total"]["cache"]["waste_usd"], 2) == 3.71


def test_by_project_each_project_is_the_sum_of_its_sessions(corpus) -> None:
    url, by_session = corpus
    with psycopg.connect(url) as conn:
        data = trends.trends(conn, by="month", split="project", tz="UTC")
    seen = 0
    for period in data["periods"]:
        rows = period["projects"]
        assert sum(r["sessions"] for r in rows) == period["sessions"]
        for row in rows:  # a project: its sessions' working folder, else their Claude Code folder (accounting.md §4)
            group = [r for r in by_session.values()
                     if (r["session"]["project_path"] or r["session"]["project_slug"]) == row["project"]
                     and period_of(r["session"]["started_at"], "month", "UTC") == period["period"]]
            assert_adds_up(row, group)
            assert row["project_path"] == group[0]["session"]["project_path"]
            assert row["project_slug"] in {r["session"]["project_slug"] for r in group}
            seen += 1
    assert seen > 10


def test_by_model_the_models_tokens_and_cost_add_up_to_the_reports(corpus) -> None:
    url, by_session = corpus
    with psycopg.connect(url) as conn:
        data = trends.trends(conn, by="week", split="model", tz="UTC")
    models_seen = set()
    for period in data["periods"]:
        group = [r for r in by_session.values()
                 if period_of(r["session"]["started_at"], "week", "UTC") == period["period"]]
        want: dict[str | None, dict] = {}
        for report in group:
            for m in report["summary"]["tokens_by_model"]:
                row = want.setdefault(m["model"], {"sessions": 0, "requests": 0, "usd": 0.0,
                                                   **dict.fromkeys(TOKEN_FIELDS, 0)})
                row["sessions"] += 1
                row["requests"] += m["requests"]
                row["usd"] += m["cost_usd"] or 0.0
                for f in TOKEN_FIELDS:
                    row[f] += m[f]
        got = {m["model"]: m for m in period["tokens_by_model"]}
        assert set(got) == set(want)
        for model, row in want.items():
            assert got[model]["sessions"] == row["sessions"] and got[model]["requests"] == row["requests"]
            assert {f: got[model][f] for f in TOKEN_FIELDS} == {f: row[f] for f in TOKEN_FIELDS}
            assert abs((got[model]["cost_usd"] or 0.0) - row["usd"]) <= 0.0000005 * row["sessions"] + 1e-9
            models_seen.add(model)
    assert len(models_seen) >= 3


# -- period edges, time zones and the change from the period before ----------------------------

def _session(root: Path, session: str, start: datetime, minutes: int, output: int, slug: str = "-home-me-app") -> None:
    """A session of `minutes` (a request each minute, `output` tokens each), from `start`."""
    def at(t: datetime) -> str:
        return t.isoformat().replace("+00:00", "Z")

    lines = [{"type": "user", "sessionId": session, "timestamp": at(start), "uuid": f"{session}-u",
              "cwd": slug.replace("-", "/"), "message": {"role": "user", "content": "go"}}]
    for n in range(1, minutes + 1):
        lines.append({"type": "assistant", "sessionId": session, "timestamp": at(start + timedelta(minutes=n)),
                      "uuid": f"{session}-a{n}", "message": {
                          "id": f"msg-{session[:8]}-{n}", "role": "assistant", "model": "claude-sonnet-4-20250514",
                          "content": [{"type": "text", "text": "ok"}],
                          "usage": {"input_tokens": 10, "output_tokens": output}}})
    path = root / slug / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


LATE_SUNDAY = "11111111-0000-4000-8000-000000000001"   # Sun 2026-03-01 23:30 UTC, an hour long
MONTH_EDGE = "22222222-0000-4000-8000-000000000002"    # Sat 2026-01-31 23:30 UTC
DST_WEEK = "33333333-0000-4000-8000-000000000003"      # Tue 2026-03-24 12:00 UTC
AFTER_DST = "44444444-0000-4000-8000-000000000004"     # Mon 2026-03-30 10:00 UTC


@pytest.fixture
def edges(db_url: str, tmp_path: Path) -> str:
    root = tmp_path / "projects"
    _session(root, LATE_SUNDAY, datetime(2026, 3, 1, 23, 30, tzinfo=UTC), 60, 100)
    _session(root, MONTH_EDGE, datetime(2026, 1, 31, 23, 30, tzinfo=UTC), 10, 1000)
    _session(root, DST_WEEK, datetime(2026, 3, 24, 12, 0, tzinfo=UTC), 5, 10_000)
    _session(root, AFTER_DST, datetime(2026, 3, 30, 10, 0, tzinfo=UTC), 5, 30_000, slug="-home-me-other")
    ingest(db_url, [root])
    return db_url


def _periods(url: str, **kwargs) -> dict[str | None, dict]:
    with psycopg.connect(url) as conn:
        return {p["period"]: p for p in trends.trends(conn, **kwargs)["periods"]}


def test_a_session_counts_wholly_in_the_week_it_started_in_the_zone_asked(edges: str) -> None:
    # 23:30 UTC on Sunday 1 March: the week of 23 February in UTC, but already Monday 2 March
    # (00:30) in Berlin; its hour runs past midnight either way, and stays whole.
    utc = _periods(edges, by="week", tz="UTC")
    berlin = _periods(edges, by="week", tz="Europe/Berlin")
    assert utc["2026-02-23"]["sessions"] == 1 and utc["2026-02-23"]["tokens"]["total"]["output"] == 60 * 100
    assert utc["2026-02-23"]["claude_s"] == 3600.0
    assert utc["2026-03-02"]["sessions"] == 0
    assert berlin["2026-03-02"]["sessions"] == 1 and berlin["2026-03-02"]["tokens"]["total"]["output"] == 6000
    assert "2026-02-23" not in berlin or berlin["2026-02-23"]["sessions"] == 0
    # every week between the first and the last is listed, empty ones too, in order
    assert list(utc) == [(date(2026, 1, 26) + timedelta(weeks=n)).isoformat() for n in range(10)]
    # weeks are cut at the zone's midnight, its offset changing with daylight saving (29 March)
    assert berlin["2026-03-23"]["start"] == "2026-03-23T00:00:00+01:00"
    assert berlin["2026-03-23"]["end"] == "2026-03-30T00:00:00+02:00"


def test_a_month_edge_falls_where_the_zone_puts_it(edges: str) -> None:
    assert _periods(edges, by="month", tz="UTC")["2026-01-01"]["tokens"]["total"]["output"] == 10 * 1000
    berlin = _periods(edges, by="month", tz="Europe/Berlin")
    assert "2026-01-01" not in berlin  # Sunday 1 February 00:30 there
    assert berlin["2026-02-01"]["tokens"]["total"]["output"] == 10 * 1000
    # Los Angeles: the late-Sunday session started on Sunday afternoon, 1 March already there
    la = _periods(edges, by="month", tz="America/Los_Angeles")
    assert la["2026-01-01"]["sessions"] == 1 and la["2026-03-01"]["sessions"] == 3
    assert la["2026-02-01"]["sessions"] == 0 and la["2026-02-01"]["change"]["sessions"] == -1


def test_the_change_is_from_the_period_right_before(edges: str) -> None:
    weeks = _periods(edges, by="week", tz="UTC")
    dst, after = weeks["2026-03-23"], weeks["2026-03-30"]
    assert after["change"]["sessions"] == 0
    assert after["change"]["output_tokens"] == 5 * 30_000 - 5 * 10_000
    assert after["change"]["cost_per_session"] == pytest.approx(
        after["cost_per_session"] - dst["cost_per_session"], abs=1e-6)
    assert weeks["2026-03-02"]["change"]["sessions"] == -1  # after the late-Sunday week: none
    assert weeks["2026-01-26"]["change"] is None  # the first


def test_since_and_project_choose_the_sessions(edges: str) -> None:
    with psycopg.connect(edges) as conn:
        since = trends.parse_since("2026-03-02", "Europe/Berlin")  # midnight in Berlin: 23:00 UTC the day before
        data = trends.trends(conn, by="week", tz="Europe/Berlin", since=since)
        assert sum(p["sessions"] for p in data["periods"]) == 3  # the late-Sunday one (00:30 there) included
        data = trends.trends(conn, by="week", tz="UTC", project="me-other")
        assert [p["period"] for p in data["periods"]] == ["2026-03-30"]
        data = trends.trends(conn, by="week", tz="UTC", project="/home/me/app")
        assert data["total"]["sessions"] == 3


def test_refused_choices_are_one_clear_error(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        with pytest.raises(trends.TrendsError, match="unknown time zone 'Mars/Olympus'"):
            trends.trends(conn, tz="Mars/Olympus")
        with pytest.raises(trends.TrendsError, match="--by 'year'"):
            trends.trends(conn, by="year")
    with pytest.raises(trends.TrendsError, match="not a date"):
        trends.parse_since("last tuesday", "UTC")
    assert trends.local_zone({"TZ": "Asia/Kolkata"}) == "Asia/Kolkata"
    assert trends.local_zone({"TZ": ":Europe/Paris"}) == "Europe/Paris"


# -- the command -----------------------------------------------------------------------------

def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_command_prints_the_function_and_refuses_mistakes(edges: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_"))}
    env.update(RETROD_DATABASE_URL=edges, RETROD_PROJECTS_DIR=str(tmp_path / "projects"),
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_HOST_ID=HOST, HOME=str(tmp_path), TZ="Europe/Berlin")
    done = _cli(env, "trends", "--by", "week", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["time_zone"] == "Europe/Berlin"  # the local zone, from TZ
    with psycopg.connect(edges) as conn:
        assert data == json.loads(json.dumps(trends.trends(conn, by="week", tz="Europe/Berlin")))
    text = _cli(env, "trends", "--by", "month", "--by-project", "--tz", "UTC").stdout
    assert "cut in UTC" in text and "/home/me/other" in text
    month = next(line for line in text.splitlines() if line.startswith("2026-03"))
    assert month.split()[1] == "3"  # three sessions started in March (UTC)
    assert "claude-sonnet-4-20250514" in _cli(env, "trends", "--by-model").stdout
    for args, needle in ((("--tz", "Mars/Olympus"), "unknown time zone"), (("--since", "soon"), "not a date")):
        done = _cli(env, "trends", *args)
        assert done.returncode == 2 and needle in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    done = _cli(env, "trends", "--by-project", "--by-model")  # argparse's usage, then the error
    assert done.returncode == 2 and "not allowed with" in done.stderr


def test_a_run_of_periods_without_sessions_is_shown_as_one_and_no_change_is_from_one() -> None:
    def period(day: str | None, sessions: int, before: int | None) -> dict:
        change = None if before is None else {"sessions": sessions - before}
        nothing_else = {"requests": 0, "tool_use": {"calls": 0}, "tool_result_bytes": 0, **dict.fromkeys(TIMES, 0.0)}
        return {"period": day, "sessions": sessions, "change": change, **nothing_else}

    periods = [period("2026-01-05", 1, None), period("2026-01-12", 0, 1), period("2026-01-19", 0, 0),
               period("2026-01-26", 0, 0), period("2026-02-02", 2, 0), period("2026-02-09", 0, 2),
               period("2026-02-16", 3, 0), period("2026-02-23", 4, 3), period(None, 0, None)]
    shown = [(p["period"], change, through) for p, change, through in trends.shown_periods(periods, "week")]
    assert shown == [
        ("2026-01-05", None, None),
        ("2026-01-12", None, "2026-01-26"),  # three weeks without sessions: one row
        ("2026-02-02", None, None),  # (its change is from a week without sessions: none shown)
        ("2026-02-09", None, None),  # one week without: a run of one
        ("2026-02-16", None, None),
        ("2026-02-23", {"sessions": 1}, None),
        (None, None, None),  # the undated, never part of a run
    ]
    assert trends.period_name({"period": "2026-02-01"}, "month") == "2026-02"
    assert trends.period_name({"period": None}, "day") == "undated"


def test_a_named_cache_cause_gets_its_rate_per_100_requests_each_period(corpus) -> None:
    """accounting.md §2.10 in trends: a cache cause a stored brief named to a project's session is one of
    its patterns, its rate per period 100 × the period's misses of that cause ÷ its requests."""
    url, by_session = corpus
    projects: dict[str, list[dict]] = {}
    for report in by_session.values():
        projects.setdefault(report["session"]["project_path"] or report["session"]["project_slug"], []).append(report)
    project, group = max(projects.items(), key=lambda kv: sum(
        r["summary"]["cache"]["misses"]["invalidated"]["count"] for r in kv[1]))
    assert sum(r["summary"]["cache"]["misses"]["invalidated"]["count"] for r in group) > 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO retrod.briefs (session_uuid, project, text, patterns) VALUES (%s, %s, 'x', %s)",
                     (group[0]["session"]["uuid"], project, json.dumps([{"pattern": "invalidated", "mode": "new"}])))
        try:
            data = trends.trends(conn, by="month", project=project, tz="UTC")
        finally:
            conn.execute("DELETE FROM retrod.briefs")
    assert data["patterns"] == ["invalidated"]
    checked = 0
    for period in data["periods"]:
        in_period = [r for r in group if period_of(r["session"]["started_at"], "month", "UTC") == period["period"]]
        requests = sum(r["summary"]["requests"] for r in in_period)
        misses = sum(r["summary"]["cache"]["misses"]["invalidated"]["count"] for r in in_period)
        assert period["pattern_rates"]["invalidated"] == (100 * misses / requests if requests else None)
        checked += bool(misses)
    assert checked > 0
    assert "per 100 requests" in trends.render(data)
