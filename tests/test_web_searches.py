"""Web searches are counted and priced (accounting.md §2.2 "Web searches", §2.7; issue 29): a part's
`server_tool_use.web_search_requests` — the iteration's when the iterations are the parts —,
counted when a non-negative integer, priced by genai-prices' own web-search unit at the
request's day ($10 per 1,000 on Anthropic's list), shown per model and per session, on every
surface that prices a session. Expected figures are worked out by hand in
tests/web_search_transcripts.py, or come from the independent reference (tests/reference.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

import reference
import web_search_transcripts as ws
from helpers import HOST, ingest, reports, rollups_match_raw, snapshot
from retrod.history import trends
from retrod.report import model, timeline
from retrod.report import prices as pricing
from retrod.statusline import figures as statusline
from retrod.transcript.parser import parse_line
from retrod.ui import data, pages


@pytest.fixture
def root(tmp_path: Path) -> Path:
    projects = tmp_path / "projects"
    ws.write(projects)
    return projects


def by_model(rows: list[dict]) -> dict:
    return {row["model"]: row for row in rows}


def test_a_parts_web_searches_are_its_own_usage_objects_count() -> None:
    """A non-negative integer counts; a bool, a negative, a string, a float, a missing or
    mistyped server_tool_use count 0, and spoil nothing else of the line."""
    def parsed(server_tool_use: object, iterations: list | None = None):
        use: dict = {"input_tokens": 3, "output_tokens": 4, "server_tool_use": server_tool_use}
        if iterations is not None:
            use["iterations"] = iterations
        line = {"type": "assistant", "message": {"id": "m", "model": "claude-opus-4-6", "usage": use}}
        entry = parse_line(json.dumps(line).encode())
        assert entry is not None and entry.msg.usage is not None
        assert (entry.msg.usage.input, entry.msg.usage.output) == (3, 4)  # the rest of the line stands
        return entry.msg

    for value, want in ((2, 2), (0, 0), (True, 0), (False, 0), (-1, 0), ("3", 0), (2.0, 0), (None, 0),
                        ([1], 0), (2**53, 0)):
        assert parsed({"web_search_requests": value, "web_fetch_requests": 0}).usage.web_searches == want, value
    for odd in ("x", 7, [], None, {}):
        assert parsed(odd).usage.web_searches == 0
    # the iterations are the parts: each its own; the top level's figure is not a part's
    msg = parsed({"web_search_requests": 9}, [
        {"input_tokens": 1, "output_tokens": 2, "server_tool_use": {"web_search_requests": 3}},
        {"input_tokens": 2, "output_tokens": 2, "server_tool_use": {"web_search_requests": True}, "model": "x"}])
    assert msg.parts is not None and [p.usage.web_searches for p in msg.parts] == [3, 0]


def test_web_searches_by_model_and_their_cost_by_hand_and_as_the_reference(db_url: str, root: Path) -> None:
    ingest(db_url, [root])
    got = reports(db_url)
    summary = got[ws.SESSION]["summary"]
    rows = by_model(summary["tokens_by_model"])
    assert {m: r["web_searches"] for m, r in rows.items()} == ws.WEB_SEARCHES
    assert {m: r["cost_usd"] for m, r in rows.items()} == ws.COST_USD
    assert summary["web_searches"] == 12
    # the unknown model's searches and tokens, the old model's searches: unpriced, named
    assert summary["cost"] == {"usd": ws.TOTAL_USD, "unknown_models": [ws.OLD_HAIKU, ws.UNKNOWN], "complete": False}
    assert got[ws.CHEAP]["summary"]["web_searches"] == 0
    assert got[ws.CHEAP]["summary"]["cost"] == {"usd": 0.015, "unknown_models": [], "complete": True}

    want = reference.compute(root)
    assert want.keys() == got.keys()
    for session, expected in want.items():
        report = got[session]
        assert {k: report["summary"][k] for k in expected["summary"]} == expected["summary"], session
        assert {m: {f: r[f] for f in expected["tokens_by_model"][m]}
                for m, r in by_model(report["summary"]["tokens_by_model"]).items()} == expected["tokens_by_model"]
        assert report["summary"]["cost"] == expected["cost"], session
    rollups_match_raw(db_url)


def test_a_phase_carries_the_web_searches_and_their_cost_of_its_window(db_url: str, root: Path) -> None:
    ingest(db_url, [root])
    # w1 to w5 (seconds 1-6) in the phase; the rest after it
    start, end = datetime(2026, 4, 1, 10, 0, 1, tzinfo=UTC), datetime(2026, 4, 1, 10, 0, 6, 500000, tzinfo=UTC)
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO cc_sessions (session_uuid, project_slug, started_at) VALUES (%s, 'p', %s)",
                     (ws.SESSION, start))
        conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                     " SELECT id, 't', 'p1', %s, %s, 'high_impact' FROM cc_sessions WHERE session_uuid = %s",
                     (start, end, ws.SESSION))
    (phase,) = reports(db_url)[ws.SESSION]["phases"]
    rows = by_model(phase["tokens_by_model"])
    # opus: w1 (2 searches) + w2's first part (3) + w3..w5 (0); haiku: w2's second part (1)
    assert {m: r["web_searches"] for m, r in rows.items()} == {ws.OPUS: 5, ws.HAIKU: 1}
    # opus 1,750 + 550 + 3 × 30 = 2,390 µ$ + 5 searches; haiku 110 µ$ + 1 search
    assert {m: r["cost_usd"] for m, r in rows.items()} == {ws.OPUS: 0.05239, ws.HAIKU: 0.01011}
    (expected,) = reference.compute_phase_models(root, ws.SESSION, [(start, end)], with_cost=True)
    assert {m: {f: r[f] for f in expected["tokens_by_model"][m]} for m, r in rows.items()} == \
        expected["tokens_by_model"]
    assert phase["cost"] == expected["cost"]


def test_a_prices_file_keeps_the_packages_web_search_price(db_url: str, root: Path, tmp_path: Path) -> None:
    ingest(db_url, [root])
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"models": ws.OVERRIDE}))
    with psycopg.connect(db_url) as conn:
        report = model.build(conn, ws.SESSION, prices=pricing.load(path))
    summary = report["summary"]
    assert {m: r["cost_usd"] for m, r in by_model(summary["tokens_by_model"]).items()} == ws.OVERRIDE_COST_USD
    assert summary["cost"] == {"usd": ws.OVERRIDE_TOTAL_USD, "unknown_models": [ws.OLD_HAIKU, ws.UNKNOWN],
                               "complete": False}
    assert summary["cost"] == reference.compute(root, prices_override=ws.OVERRIDE)[ws.SESSION]["cost"]


def test_every_surface_that_prices_the_session_adds_its_searches(db_url: str, root: Path) -> None:
    """The sessions list (exact and as the web UI sorts it), trends, the timeline and the status
    line's today price the same groups as the report: the searches included."""
    ingest(db_url, [root])
    costs = {s: r["summary"]["cost"] for s, r in reports(db_url).items()}
    with psycopg.connect(db_url) as conn:
        member = conn.execute("SELECT current_user").fetchone()[0]
        listed = model.session_costs(conn, [(ws.SESSION, member), (ws.CHEAP, member)], pricing.DEFAULT)
        assert {s: cost for (s, _m), (_rows, cost) in listed.items()} == costs
        # by cost, SESSION first: only its searches make it dearer than CHEAP (ui.sql in doubles)
        page = data.sessions(conn, data.SessionQuery(sort="cost", order="desc"))
        assert [row["uuid"] for row in page["sessions"]] == [ws.SESSION, ws.CHEAP]
        assert [row["cost"] for row in page["sessions"]] == [costs[ws.SESSION], costs[ws.CHEAP]]

        period = trends.trends(conn, by="day", split="model", tz="UTC")["periods"][0]
        assert period["cost"]["usd"] == round(ws.TOTAL_USD + 0.015, 6)
        assert period["cost"]["unknown_models"] == [ws.OLD_HAIKU, ws.UNKNOWN]
        rows = by_model(period["tokens_by_model"])
        assert {m: r["web_searches"] for m, r in rows.items()} == ws.WEB_SEARCHES
        assert rows[ws.HAIKU]["cost_usd"] == ws.COST_USD[ws.HAIKU] and rows[ws.UNKNOWN]["cost_usd"] is None

        minutes = timeline.series(conn, ws.SESSION)  # one minute: unpriced (some of it has no price)
        assert minutes["cost_usd"] == [None]
        # the minute without the unpriced parts' (their tokens priced): what the report's total holds
        day = (datetime(2026, 4, 1, tzinfo=UTC), datetime(2026, 4, 2, tzinfo=UTC))
        today = statusline.figures(conn, None, day)["today"]
        assert today == {"cost_usd": round(ws.TOTAL_USD + 0.015, 6), "cost_complete": False, "requests": 10}


def test_the_markdown_shows_a_web_searches_column_only_when_a_model_made_some(db_url: str, root: Path,
                                                                              tmp_path: Path) -> None:
    ingest(db_url, [root])
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(root), RETROD_HOST_ID=HOST,
               RETROD_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path / "home"))

    def markdown(session: str) -> str:
        done = subprocess.run([sys.executable, "-m", "retrod", "report", session, "--no-save"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    text = markdown(ws.SESSION)
    header = next(line for line in text.splitlines() if line.startswith("| Model"))
    assert "| Web searches |" in header
    opus = next(line for line in text.splitlines() if line.startswith(f"| `{ws.OPUS}`"))
    total = next(line for line in text.splitlines() if line.startswith("| **Total**"))
    assert opus.split("|")[-3].strip() == "6" and total.split("|")[-3].strip() == "12"
    assert "web searches at the list price" in text
    assert "Web searches" not in markdown(ws.CHEAP)


def test_the_web_uis_session_page_shows_the_searches_by_model_only_when_some(db_url: str, root: Path) -> None:
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        page, cheap = (pages.session_page(data.session(conn, s, 1800, pricing.DEFAULT, None))
                       for s in (ws.SESSION, ws.CHEAP))
    assert ">Web searches</th>" in page
    assert page.count('data-field="web_searches"') == len(ws.WEB_SEARCHES)
    assert '<td class="num" data-field="web_searches">6</td>' in page  # opus
    assert "Web searches" not in cheap


def test_any_order_and_one_line_at_a_time_end_in_the_same_rows(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    path = root / ws.SLUG / f"{ws.SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    # w8's two records tie on the usage tuple: the first line counts (§2.2), so they keep their
    # order (one unit); every other line comes in any order
    units = [[line] for line in ws.lines()]
    w8 = [i for i, unit in enumerate(units) if unit[0].get("requestId") == "req_w8"]
    units[w8[0]:w8[1] + 1] = [[units[w8[0]][0], units[w8[1]][0]]]
    want = None
    for order in ([line for unit in ordered for line in unit]
                  for ordered in (units, units[::-1], units[1::2] + units[::2])):
        with psycopg.connect(db_url) as conn:  # start over: the same records in another order
            conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
        path.write_text("")
        for one in order:  # one line per ingest: each record meets the stored one in the upsert
            with path.open("a") as f:
                f.write(json.dumps(one) + "\n")
            ingest(db_url, [root])
        got = snapshot(db_url)
        assert {m: r["web_searches"] for m, r in by_model(
            reports(db_url)[ws.SESSION]["summary"]["tokens_by_model"]).items()} == ws.WEB_SEARCHES
        # (the chosen record's line is where this order wrote it: its offset is left out)
        got["requests"] = _without_usage_offset(db_url)
        want = want or got
        for table in ("requests", "request_minutes", "session_requests"):
            assert got[table] == want[table], table
        rollups_match_raw(db_url)


def _without_usage_offset(db_url: str) -> list:
    with psycopg.connect(db_url) as conn:
        cursor = conn.execute("SELECT * FROM retrod.requests ORDER BY key")
        names = [column.name for column in cursor.description]
        return [{n: str(v) for n, v in zip(names, row, strict=True) if n != "usage_offset"} for row in cursor]


def test_files_read_before_the_migration_are_read_again_and_gain_their_searches(db_url: str, root: Path) -> None:
    """A file read under fold.RULES 4 (before migration 0027) stored no searches: it is read
    again from its start, keeping its rows, and each request gains its own."""
    ingest(db_url, [root])
    want = snapshot(db_url)
    with psycopg.connect(db_url) as conn:  # what an older retrod left: no searches anywhere
        conn.execute("UPDATE retrod.requests SET web_searches = 0,"
                     " parts = regexp_replace(parts, ',\"web_searches\":[0-9]+', '', 'g')")
        conn.execute("UPDATE retrod.files SET state = jsonb_set(state, '{rules}', '4')")
        assert conn.execute("SELECT sum(web_searches) FROM retrod.request_minutes").fetchone()[0] == 0
    assert reports(db_url)[ws.SESSION]["summary"]["web_searches"] == 0
    ingest(db_url, [root])
    got = snapshot(db_url)
    for table in ("requests", "request_minutes", "session_requests"):
        assert got[table] == want[table], table
    assert reports(db_url)[ws.SESSION]["summary"]["web_searches"] == 12
    rollups_match_raw(db_url)
