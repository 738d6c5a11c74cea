"""Prompt-cache misses where many sessions add up (issue 29): `retrod trends` sums the stored
misses (migration 0029) to the reference's §2.8 figures, and a session changed after its misses
were stored is walked again before the next answer."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

import reference
from helpers import ingest, reports
from retrod import trends
from retrod.report import cache_rollup, markdown, model
from retrod.store.queries import q
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


def test_a_session_changed_after_its_misses_were_stored_is_walked_again(db_url: str, tmp_path: Path) -> None:
    """DESIGN §2.8's worked example without request f, then with it: f's invalidated miss
    counts once it is read."""
    lines = [user("10:00:00"), request("msg_a", "10:00:01", 0, 20_000), request("msg_b", "10:00:10", 20_000, 1_000),
             user("10:05:59"), request("msg_c", "10:06:00", 0, 21_500),
             request("msg_d", "10:06:05", 21_500, 5_000), request("msg_e", "10:06:05", 26_500, 300)]
    path = tmp_path / "-p" / f"{SESSION}.jsonl"
    write(path, lines)
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url) as conn:
        stale = "SELECT count(*) FROM retrod.cache_stale"
        assert conn.execute(stale).fetchone()[0] == 1  # read: marked, not walked yet
        assert cache_rollup.refresh(conn) == 1  # (what the daemon does every few seconds)
        assert conn.execute(stale).fetchone()[0] == 0 and cache_rollup.refresh(conn) == 0
        before = trends.trends(conn, by="day", tz="UTC")["total"]["cache"]
    # c: 21,000 tokens written again past the 5-minute lifetime, at $3.75 − $0.30 per million
    assert {c: m["count"] for c, m in before["misses"].items()} == {
        "compaction": 0, "model": 0, "expired": 1, "invalidated": 0}
    assert before["waste_usd"] == 0.07245
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(request("msg_f", "10:07:00", 3_000, 19_800)) + "\n")
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM retrod.cache_stale").fetchone()[0] == 1
        answer = trends.trends(conn, by="day", tz="UTC")  # walks it first
        after = answer["total"]["cache"]
        report = model.build(conn, SESSION)
    # f: 19,800 more, the prefix changed within the lifetime
    assert after["misses"]["invalidated"] == {"count": 1, "rewritten": 19_800, "extra_usd": 0.06831}
    assert after["waste_usd"] == 0.14076 == report["summary"]["cache"]["waste_usd"]
    assert after["waste_share"] == pytest.approx(after["waste_usd"] / report["summary"]["cost"]["usd"], rel=1e-6)
    assert reports(db_url)[SESSION]["summary"]["cache"]["misses"] == after["misses"]
    # the command's text: the waste in its column, the misses by cause and their share under the day
    lines = trends.render(answer).splitlines()
    assert "cache$" in lines[1].split()
    day = next(line for line in lines if line.startswith("2025-11-03"))
    assert day.split()[5] == "$0.14" == markdown.usd(after["waste_usd"])  # (sess, cost, $/sess, Δ$/sess, cache$)
    share = after["waste_usd"] / report["summary"]["cost"]["usd"] * 100
    assert f"cache misses: expired 1, invalidated 1 ({share:.1f}% of cost)" in lines[lines.index(day) + 1]


def test_a_mark_a_commit_holds_or_changed_since_it_was_read_waits_for_the_next_walk(db_url: str,
                                                                                     tmp_path: Path) -> None:
    """A walk never waits for a committer (which may be waiting for it), and never clears a mark
    whose change it may not have seen."""
    write(tmp_path / "-p" / f"{SESSION}.jsonl", [user("10:00:00"), request("msg_a", "10:00:01", 0, 20_000),
                                                 request("msg_b", "10:20:00", 0, 20_500)])
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url) as committing, psycopg.connect(db_url, autocommit=True) as conn:
        committing.execute("UPDATE retrod.cache_stale SET marks = marks + 1")  # a commit under way
        assert cache_rollup.refresh(conn) == 0  # (returns: the mark was skipped, not waited for)
        committing.rollback()
        session, mark = conn.execute("SELECT session_uuid, marks FROM retrod.cache_stale").fetchone()
        assert session == SESSION
        # read before a change that has committed since: not cleared
        assert conn.execute(q("cache_stale_clear"), {"sessions": [session], "marks": [mark - 1]}).fetchall() == []
        assert conn.execute("SELECT count(*) FROM retrod.cache_miss_rollup").fetchone()[0] == 0
        assert cache_rollup.refresh(conn) == 1
        assert conn.execute("SELECT cause, rewritten FROM retrod.cache_miss_rollup").fetchall() == [("expired", 20_000)]


def test_the_daemons_job_walks_the_marked_sessions_but_not_during_a_long_scan(db_url: str, tmp_path: Path) -> None:
    from psycopg_pool import ConnectionPool

    from retrod import daemon
    from retrod.progress import Progress

    write(tmp_path / "-p" / f"{SESSION}.jsonl", [user("10:00:00"), request("msg_a", "10:00:01", 0, 20_000),
                                                 request("msg_b", "10:20:00", 0, 20_500)])
    ingest(db_url, [tmp_path])
    scanning = Progress(None)
    scanning.active = True  # (a long scan showing its progress)
    with ConnectionPool(db_url, min_size=1, max_size=1) as pool, psycopg.connect(db_url, autocommit=True) as conn:
        daemon._store_cache_misses(pool, scanning)
        assert conn.execute("SELECT count(*) FROM retrod.cache_stale").fetchone()[0] == 1
        daemon._store_cache_misses(pool, Progress(None))
        assert conn.execute("SELECT count(*) FROM retrod.cache_stale").fetchone()[0] == 0
        stored = conn.execute("SELECT session_uuid, cause FROM retrod.cache_miss_rollup").fetchall()
        assert stored == [(SESSION, "expired")]


def test_new_price_tiers_put_the_stored_misses_in_their_tiers(db_url: str, tmp_path: Path) -> None:
    """A stored miss is priced by its part's tier, as the price groups are: thresholds that
    change (a price data upgrade, store/tiers.py) move it as they move the groups."""
    from retrod.store import tiers

    write(tmp_path / "-p" / f"{SESSION}.jsonl", [user("10:00:00"), request("msg_a", "10:00:01", 0, 20_000),
                                                 request("msg_b", "10:20:00", 0, 20_500)])
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert cache_rollup.refresh(conn) == 1
        size, floor = conn.execute("SELECT size, tier_floor FROM retrod.cache_miss_rollup").fetchone()
        assert (size, floor) == (3 + 0 + 20_500, 0)  # input + read + written: under any of the package's tiers
        assert tiers.ensure(conn, [10_000], "99.0")  # (a newer price data's thresholds)
        assert conn.execute("SELECT tier_floor FROM retrod.cache_miss_rollup").fetchone()[0] == 10_000
