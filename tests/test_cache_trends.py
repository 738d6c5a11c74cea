"""Prompt-cache misses where many sessions add up (issue 29): `retrod trends` and the web UI's
list sum the misses kept at commit (migration 0031) to the reference's §2.8 figures, count a
session's new misses as soon as they are read, and price each in its own price tier."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

import reference
from helpers import ingest, reports
from retrod.basics import format
from retrod.history import trends
from retrod.report import model
from retrod.ui import data
from test_cache import SESSION, request, user, write


def test_trends_cache_figures_are_the_references_sums(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    with psycopg.connect(db_url) as conn:
        total = trends.trends(conn, by="month", tz="UTC")["total"]["cache"]
    want = reference.compute_cache(projects)
    n = len(want)
    for cause in reference.CAUSES:
        mine = [w["summary"]["misses"][cause] for w in want.values()]
        assert total["misses"][cause]["count"] == sum(m["count"] for m in mine), cause
        assert total["misses"][cause]["rewritten"] == sum(m["rewritten"] for m in mine), cause
        assert abs(total["misses"][cause]["extra_usd"] - sum(m["extra_usd"] for m in mine)) <= 0.0000005 * n + 1e-9
    waste = sum(w["summary"]["waste_usd"] for w in want.values())
    assert waste > 3 and abs(total["waste_usd"] - waste) <= 0.0000005 * n + 1e-9


def test_a_session_changed_counts_its_new_misses_at_once(db_url: str, tmp_path: Path) -> None:
    """accounting.md §2.8's worked example without request f, then with it: f's invalidated miss
    counts in the next answer, with no walk in between (migration 0031 keeps them at commit)."""
    lines = [user("10:00:00"), request("msg_a", "10:00:01", 0, 20_000), request("msg_b", "10:00:10", 20_000, 1_000),
             user("10:05:59"), request("msg_c", "10:06:00", 0, 21_500),
             request("msg_d", "10:06:05", 21_500, 5_000), request("msg_e", "10:06:05", 26_500, 300)]
    path = tmp_path / "-p" / f"{SESSION}.jsonl"
    write(path, lines)
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url) as conn:
        before = trends.trends(conn, by="day", tz="UTC")["total"]["cache"]
    # c: 21,000 tokens written again past the 5-minute lifetime, at $3.75 − $0.30 per million
    assert {c: m["count"] for c, m in before["misses"].items()} == {
        "compaction": 0, "model": 0, "expired": 1, "invalidated": 0}
    assert before["waste_usd"] == 0.07245
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(request("msg_f", "10:07:00", 3_000, 19_800)) + "\n")
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url) as conn:
        answer = trends.trends(conn, by="day", tz="UTC")
        after = answer["total"]["cache"]
        report = model.build(conn, SESSION)
        listed = data.sessions(conn, data.SessionQuery(sort="cache"))["sessions"]
    # f: 19,800 more, the prefix changed within the lifetime
    assert after["misses"]["invalidated"] == {"count": 1, "rewritten": 19_800, "extra_usd": 0.06831}
    assert after["waste_usd"] == 0.14076 == report["summary"]["cache"]["waste_usd"]
    assert [row["cache_waste_usd"] for row in listed] == [0.14076]
    assert after["waste_share"] == pytest.approx(after["waste_usd"] / report["summary"]["cost"]["usd"], rel=1e-6)
    assert reports(db_url)[SESSION]["summary"]["cache"]["misses"] == after["misses"]
    # the command's text: the waste in its column, the misses by cause and their share under the day
    lines = trends.render(answer).splitlines()
    assert "cache$" in lines[1].split()
    day = next(line for line in lines if line.startswith("2025-11-03"))
    assert day.split()[5] == "$0.14" == format.usd(after["waste_usd"])  # (sess, cost, $/sess, Δ$/sess, cache$)
    assert round(after["waste_usd"] / report["summary"]["cost"]["usd"] * 100, 1) == 51.0  # a whole percent:
    assert "cache misses: expired 1, invalidated 1 (51% of cost)" in lines[lines.index(day) + 1]


def test_a_miss_is_priced_in_its_own_price_tier(db_url: str, tmp_path: Path) -> None:
    """A miss whose request is over 200,000 input tokens is priced at Sonnet 4.5's long-context
    rates ($7.50 5-minute write, $0.60 read per million: twice the first tier's), by the price
    tiers stored for its member, in trends and in the list (sorted by waste, and its rows) as in
    its report."""
    other = SESSION.replace("1", "2")
    write(tmp_path / "-p" / f"{SESSION}.jsonl", [
        user("10:00:00"), request("msg_a", "10:00:01", 0, 250_000), request("msg_b", "10:20:00", 0, 251_000)])
    write(tmp_path / "-p" / f"{other}.jsonl", [  # the same pause, in the first tier
        user("11:00:00", other), request("msg_x", "11:00:01", 0, 150_000, session=other),
        request("msg_y", "11:20:00", 0, 151_000, session=other)])
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url) as conn:
        total = trends.trends(conn, by="day", tz="UTC")["total"]["cache"]
        listed = data.sessions(conn, data.SessionQuery(sort="cache"))["sessions"]
        waste = {s: model.build(conn, s)["summary"]["cache"]["waste_usd"] for s in (SESSION, other)}
    # 250,000 × ($7.50 − $0.60) and 150,000 × ($3.75 − $0.30) per million
    assert waste == {SESSION: 1.725, other: 0.5175}
    assert total["misses"]["expired"] == {"count": 2, "rewritten": 400_000, "extra_usd": 2.2425}
    assert [(row["uuid"], row["cache_waste_usd"]) for row in listed] == [(SESSION, 1.725), (other, 0.5175)]
