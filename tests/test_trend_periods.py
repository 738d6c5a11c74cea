"""Trends from kept periods (issue 32, migration 0034): an answer kept between asks equals one
summed from scratch after every change any path makes — ingest in random chunks and orders, a
session's start moving to another day or out of the undated ones, a phase logged, changed or
deleted by retrod or by another tool, a tracked session re-keyed, new price tiers —, in time
zones whose days are not UTC days; only the changed periods are summed again; and the web UI's
JSON is the answer's, byte for byte."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from starlette.responses import JSONResponse

from helpers import HOST, ingest, rollups_match_raw
from retrod import tracking
from retrod.basics.kept import KeptValues
from retrod.history import trend_periods, trends
from retrod.ingest.ingester import Ingester
from retrod.report import prices
from retrod.store import tiers
from retrod.store.store import Store
from test_incremental import _corpus
from test_trends import _session, log_phases

# Days cut at 18:30 and 18:15 UTC, weeks at 03:30 (02:30 in summer), months at midnight UTC.
SHAPES = ({"by": "day", "tz": "Asia/Kolkata"}, {"by": "week", "tz": "America/St_Johns", "split": "project"},
          {"by": "month", "tz": "UTC", "split": "model"}, {"by": "day", "tz": "Asia/Kathmandu", "split": "project"})


@contextmanager
def apart() -> Iterator[None]:
    """Asks summed from scratch, the kept answers set aside meanwhile (and kept on after)."""
    kept = trend_periods._kept
    trend_periods._kept = KeptValues(kept.most, kept.most_weight, kept.weigh)
    try:
        yield
    finally:
        trend_periods._kept = kept


def answers(conn: psycopg.Connection, shapes: tuple[dict, ...] = SHAPES) -> list[dict]:
    return [trends.trends(conn, **shape) for shape in shapes]


def kept_equals_fresh(url: str, shapes: tuple[dict, ...] = SHAPES) -> list[dict]:
    """The kept answers (summed again where they changed) are those of a sum from scratch; and
    the web UI's bytes are the answer's as Starlette encodes a dict."""
    with psycopg.connect(url) as conn:
        kept = answers(conn, shapes)
        with apart():
            fresh = answers(conn, shapes)
        assert kept == fresh
        for shape, answer in zip(shapes, kept, strict=True):
            assert trends.trends_json(conn, **shape) == JSONResponse(answer).body
    return kept


def test_kept_answers_follow_ingest_in_random_chunks_and_phases(pg_cluster, tmp_path: Path) -> None:
    """The incremental tests' corpus (subagents, compactions, copied folders, cache misses, odd
    lines) written in random chunks and orders, with restarts; phases logged, changed and
    deleted between scans."""
    from conftest import fresh_database

    final = tmp_path / "final"
    _corpus(final)
    contents = {p.relative_to(final): p.read_bytes() for p in sorted(final.rglob("*")) if p.is_file()}
    for seed in range(2):
        rng = random.Random(seed)
        root = tmp_path / f"projects-{seed}"
        written = dict.fromkeys(contents, 0)
        with fresh_database(pg_cluster) as url, ConnectionPool(url, min_size=1, max_size=2) as pool:
            with pool.connection() as conn:
                prices.store_tiers(conn)
            ingester = Ingester(Store(pool, HOST), [root], rng.choice([4096, 65536]))
            steps = 0
            while pending := [rel for rel, n in written.items() if n < len(contents[rel])]:
                rel = rng.choice(pending)
                upto = rng.randint(written[rel] + 1, len(contents[rel]))
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                with open(root / rel, "ab") as f:
                    f.write(contents[rel][written[rel]:upto])
                written[rel] = upto
                if rng.random() < 0.12:
                    if rng.random() < 0.3:
                        ingester = Ingester(Store(pool, HOST), [root], rng.choice([4096, 65536]))
                    ingester.scan()
                    steps += 1
                    kept_equals_fresh(url, SHAPES[steps % 2::2])  # (half the shapes each time: the others
                    if steps % 3 == 0:  # are asked after more changes) phases: logged, changed, deleted
                        _phases_change(url, rng)
                        kept_equals_fresh(url, SHAPES[steps % 2::2])
            ingester.scan()
            answer = kept_equals_fresh(url)
            rollups_match_raw(url)
        assert steps >= 3 and answer[0]["total"]["sessions"] > 5


def _phases_change(url: str, rng: random.Random) -> None:
    with psycopg.connect(url) as conn:
        sessions = [r[0] for r in conn.execute("SELECT session_uuid FROM retrod.session_times ORDER BY 1")]
        phases = conn.execute("SELECT id FROM public.cc_session_phases ORDER BY id").fetchall()
    if phases and rng.random() < 0.5:
        with psycopg.connect(url) as conn:  # (as a tool writing the user's tables itself would)
            victim = rng.choice(phases)[0]
            if rng.random() < 0.5:
                conn.execute("UPDATE public.cc_session_phases SET verdict = 'high_impact' WHERE id = %s", (victim,))
            else:
                conn.execute("DELETE FROM public.cc_session_phases WHERE id = %s", (victim,))
    elif sessions:  # (each its own minute: phases may not overlap)
        session, minute = rng.choice(sessions), next(_MINUTES)
        with psycopg.connect(url) as conn:
            first = conn.execute("SELECT first_ts FROM retrod.session_times WHERE session_uuid = %s",
                                 (session,)).fetchone()[0]
            tracking.phase_log(conn, session, "task", f"phase {minute}", first + timedelta(minutes=minute),
                               first + timedelta(minutes=minute, seconds=30), rng.choice(VERDICTS),
                               tracking.PhaseNotes())


_MINUTES = itertools.count()
VERDICTS = ["high_impact", "avoidable_waste", "exploratory_waste", "moderate_impact"]


def test_a_session_moving_to_another_period_leaves_the_one_it_was_in(db_url: str, tmp_path: Path) -> None:
    """A line dated before a session's first moves its start to the day before (in Kolkata: past
    the 18:30 UTC cut), and a session read first without any time gets one: the periods they
    leave and the ones they enter change."""
    root = tmp_path / "projects"
    moving, undated = "55555555-0000-4000-8000-000000000005", "66666666-0000-4000-8000-000000000006"
    _session(root, moving, datetime(2026, 3, 10, 19, 0, tzinfo=UTC), 3, 100)  # 11 March, 00:30 there
    (root / "-home-me-app" / f"{undated}.jsonl").write_text(json.dumps(
        {"type": "summary", "summary": "no time yet", "leafUuid": "x"}) + "\n")
    ingest(db_url, [root])
    before = kept_equals_fresh(db_url)[0]
    days = {p["period"]: p["sessions"] for p in before["periods"]}
    assert days == {"2026-03-11": 1, None: 1}
    # a line of the same session an hour earlier (written last): 10 March there
    with (root / "-home-me-app" / f"{moving}.jsonl").open("a") as f:
        f.write(json.dumps({"type": "user", "sessionId": moving, "timestamp": "2026-03-10T18:00:00Z",
                            "uuid": "early", "message": {"role": "user", "content": "before"}}) + "\n")
    with (root / "-home-me-app" / f"{undated}.jsonl").open("a") as f:
        f.write(json.dumps({"type": "user", "sessionId": undated, "timestamp": "2026-03-12T10:00:00Z",
                            "uuid": "u-late", "message": {"role": "user", "content": "now"}}) + "\n")
    ingest(db_url, [root])
    after = kept_equals_fresh(db_url)[0]
    days = {p["period"]: p["sessions"] for p in after["periods"]}
    assert days == {"2026-03-10": 1, "2026-03-11": 0, "2026-03-12": 1}
    rollups_match_raw(db_url)


def test_only_the_changed_periods_are_summed_again(db_url: str, tmp_path: Path) -> None:
    """A response more in one session (on 11 March, UTC): that day's figures are new objects,
    the other days' the ones kept (read, not summed again), but for Kolkata's 12 March, which
    the UTC day overlaps (its first 5½ hours): a day is what the store marks."""
    root = tmp_path / "projects"
    sessions = [f"7777777{n}-0000-4000-8000-00000000000{n}" for n in range(3)]
    for n, session in enumerate(sessions):
        _session(root, session, datetime(2026, 3, 10 + n, 12, 0, tzinfo=UTC), 3, 100)
    ingest(db_url, [root])
    zones = ("UTC", "Asia/Kolkata")
    with psycopg.connect(db_url) as conn:
        first = {z: {p["period"]: p for p in trends.trends(conn, by="day", tz=z)["periods"]} for z in zones}
    path = root / "-home-me-app" / f"{sessions[1]}.jsonl"
    with path.open("a") as f:
        f.write(json.dumps({"type": "assistant", "sessionId": sessions[1], "timestamp": "2026-03-11T12:30:00Z",
                            "uuid": "more", "message": {"id": "msg-more", "role": "assistant",
                                                        "model": "claude-sonnet-4-20250514", "content": [],
                                                        "usage": {"input_tokens": 1, "output_tokens": 7}}}) + "\n")
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        second = {z: {p["period"]: p for p in trends.trends(conn, by="day", tz=z)["periods"]} for z in zones}
    for zone in zones:
        changed = second[zone]["2026-03-11"]
        assert changed["tokens"]["total"]["output"] == first[zone]["2026-03-11"]["tokens"]["total"]["output"] + 7
        assert changed["tokens"] is not first[zone]["2026-03-11"]["tokens"]
        assert second[zone]["2026-03-10"]["tokens"] is first[zone]["2026-03-10"]["tokens"]
    assert second["UTC"]["2026-03-12"]["tokens"] is first["UTC"]["2026-03-12"]["tokens"]
    kept_equals_fresh(db_url)


def test_walking_the_cache_streams_early_leaves_the_days_counted_at_commit(db_url: str, tmp_path: Path) -> None:
    """A batch walks its prompt-cache streams before it takes the fork-copies lock; that must not
    count trends' days then too: a day's row written before the lock, by two committers, is what
    each would wait on while the other waited for the lock (a deadlock the full suite met)."""
    from retrod.store.queries import q

    root = tmp_path / "projects"
    session = "77777779-0000-4000-8000-000000000009"
    _session(root, session, datetime(2026, 3, 10, 12, 0, tzinfo=UTC), 3, 100)
    ingest(db_url, [root])
    days = "SELECT coalesce(sum(changes), 0) FROM retrod.trend_days"
    with psycopg.connect(db_url, autocommit=True) as conn:
        before = conn.execute(days).fetchone()[0]
        with conn.transaction():
            conn.execute(q("ingest_walk_cache_streams"))
            marked = conn.execute("UPDATE retrod.trend_sessions SET changed = true WHERE session_uuid = %s", (session,))
            assert marked.rowcount == 1
            assert conn.execute(days).fetchone()[0] == before  # not yet: at commit
        assert conn.execute(days).fetchone()[0] == before + 1


def test_a_tracked_session_re_keyed_and_new_price_tiers_change_the_kept_answers(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    sessions = sorted({p.stem for p in projects.glob("*/*.jsonl") if len(p.stem) == 36})
    log_phases(db_url, sessions[:6])
    before = kept_equals_fresh(db_url)
    with psycopg.connect(db_url) as conn:  # another tool moves a tracked session's phases to another session
        old, new = conn.execute("SELECT u.session_uuid, (SELECT min(session_uuid) FROM retrod.session_times"
                                " WHERE session_uuid NOT IN (SELECT session_uuid FROM public.cc_sessions))"
                                " FROM public.cc_sessions u ORDER BY id LIMIT 1").fetchone()
        conn.execute("UPDATE public.cc_sessions SET session_uuid = %s WHERE session_uuid = %s", (new, old))
    moved = kept_equals_fresh(db_url)
    assert moved[0]["total"]["verdicts"] == before[0]["total"]["verdicts"] and moved != before
    with psycopg.connect(db_url) as conn:  # a newer price data's thresholds: every group summed again
        assert tiers.ensure(conn, [10_000], "99.0")
        conn.commit()
    kept_equals_fresh(db_url)


@pytest.mark.parametrize("change", [
    # a retime may change an away gap alone (an event's row, not the session's sums)
    ("UPDATE retrod.events SET gap_us = gap_us + 7200000000 WHERE kind = 'human'"
    " AND session_uuid = (SELECT min(session_uuid) FROM retrod.events WHERE kind = 'human')"),
    # a working folder read at last (a file's column, not its lines' figures: migration 0036)
    ("UPDATE retrod.files SET cwd = '/somewhere/else'"
    " WHERE id = (SELECT min(id) FROM retrod.files WHERE kind = 'main' AND cwd IS NOT NULL)"),
    # a phase's verdict changed, by another tool
    ("UPDATE public.cc_session_phases SET verdict = 'exploratory_waste' WHERE id = (SELECT min(id) FROM"
    " public.cc_session_phases WHERE verdict <> 'exploratory_waste')"),
    # a miss's cause found again at commit (its requests' sums the same)
    ("UPDATE retrod.cache_misses SET cause = 'expired' WHERE ctid = (SELECT min(ctid) FROM retrod.cache_misses"
    " WHERE cause = 'invalidated')"),
])
def test_a_change_of_one_thing_trends_reads_changes_the_kept_answers(db_url: str, projects: Path, change: str) -> None:
    """Each of what trends reads changed alone, as only some path of the store or another tool
    would: the kept answers follow."""
    ingest(db_url, [projects])
    log_phases(db_url, sorted({p.stem for p in projects.glob("*/*.jsonl") if len(p.stem) == 36})[:6])
    before = kept_equals_fresh(db_url)
    with psycopg.connect(db_url) as conn:
        assert conn.execute(change).rowcount >= 1
    assert kept_equals_fresh(db_url) != before


def test_without_the_phase_triggers_nothing_is_kept(db_url: str, projects: Path) -> None:
    """A role that may not add triggers to the user's tables migrated: a phase written there
    would not be seen, so every ask sums every period."""
    shutil.rmtree(projects / "-home-USER-projects-spotter-worktrees-spotter-gqc")  # (a smaller corpus)
    ingest(db_url, [projects])
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE public.cc_session_phases DISABLE TRIGGER cc_session_phases_trend_inserted")
        session = conn.execute("SELECT min(session_uuid) FROM retrod.session_times").fetchone()[0]
        first = trends.trends(conn, by="week", tz="UTC")["total"]["verdicts"]
        conn.execute("INSERT INTO public.cc_sessions (session_uuid, project_slug, started_at) VALUES (%s, '', now())",
                     (session,))
        conn.execute("INSERT INTO public.cc_session_phases (session_id, task, phase, started_at, verdict)"
                     " SELECT id, 't', 'p', now(), 'high_impact' FROM public.cc_sessions WHERE session_uuid = %s",
                     (session,))
        assert trends.trends(conn, by="week", tz="UTC")["total"]["verdicts"] == {
            **first, "high_impact": first.get("high_impact", 0) + 1}


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "America/St_Johns", "Pacific/Chatham"])
def test_a_change_near_a_zones_midnight_is_summed_again(db_url: str, tmp_path: Path, zone: str) -> None:
    """A session a minute before and one a minute after the zone's midnight (a UTC day's middle
    there): each change lands in its own local day, kept or summed again."""
    from zoneinfo import ZoneInfo

    root = tmp_path / "projects"
    midnight = datetime(2026, 5, 20, tzinfo=ZoneInfo(zone)).astimezone(UTC)
    before, after = "88888888-0000-4000-8000-000000000008", "99999999-0000-4000-8000-000000000009"
    _session(root, before, midnight - timedelta(minutes=1), 1, 10)
    _session(root, after, midnight + timedelta(minutes=1), 1, 20)
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        days = {p["period"]: p["tokens"]["total"]["output"] for p in trends.trends(conn, by="day", tz=zone)["periods"]}
    assert days == {"2026-05-19": 10, "2026-05-20": 20}
    _session(root, after, midnight + timedelta(minutes=1), 2, 20)  # one response more
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        days = {p["period"]: p["tokens"]["total"]["output"] for p in trends.trends(conn, by="day", tz=zone)["periods"]}
        with apart():
            assert days == {p["period"]: p["tokens"]["total"]["output"]
                            for p in trends.trends(conn, by="day", tz=zone)["periods"]}
    assert days == {"2026-05-19": 10, "2026-05-20": 40}


def test_a_backfill_gathers_the_statistics_trends_is_planned_by(db_url: str, projects: Path, tmp_path: Path,
                                                                 monkeypatch) -> None:
    """Planned before autovacuum's next round, the sum of every session nested a full read of the
    calls and price groups in each session's (~90 s over 10,000 sessions): a scan that read a
    backfill's worth gathers them (those of a smaller scan are left to autovacuum)."""
    from retrod import daemon

    def analyzed(url: str) -> set[str]:
        with psycopg.connect(url) as conn:
            return {r[0] for r in conn.execute("SELECT relname FROM pg_stat_user_tables"
                                               " WHERE schemaname = 'retrod' AND last_analyze IS NOT NULL")}

    with ConnectionPool(db_url, min_size=1, max_size=2) as pool:
        with pool.connection() as conn:
            prices.store_tiers(conn)
        small = tmp_path / "small"
        shutil.copytree(projects / "-Users-chip-dev-ai-music", small / "-Users-chip-dev-ai-music")
        daemon._scan(Ingester(Store(pool, HOST), [small]), "caught up")  # (a few hundred kB)
        assert analyzed(db_url) == set()
        monkeypatch.setattr(daemon, "ANALYZE_FROM_BYTES", 1_000_000)
        daemon._scan(Ingester(Store(pool, HOST), [projects]), "caught up")
    assert analyzed(db_url) >= {"files", "session_times", "session_requests", "call_agents", "session_figures"}



def test_answers_are_kept_within_a_number_of_figures(db_url: str, projects: Path, monkeypatch) -> None:
    """An answer of more figures than the kept ones may hold (KEPT_FIGURES) is summed on each ask (and right), and the
    least recently asked answers go first when the kept ones would hold more."""
    ingest(db_url, [projects])
    with psycopg.connect(db_url) as conn:
        small, large = {"by": "month", "tz": "UTC"}, {"by": "day", "tz": "UTC", "split": "project"}
        with apart():
            monkeypatch.setattr(trend_periods._kept, "most_weight", 60)
            month = trends.trends(conn, **small)
            assert len(month["periods"]) < 60 and len(trend_periods._kept.values()) == 1
            day = trends.trends(conn, **large)
            assert sum(1 + len(p["projects"]) for p in day["periods"] if p["sessions"]) > 60
            assert len(trend_periods._kept.values()) == 1  # (not kept: the month's stays)
            assert trends.trends(conn, **large) == day and trends.trends(conn, **small) == month
            monkeypatch.setattr(trend_periods._kept, "most_weight", 10_000)
            trends.trends(conn, **large)
            assert len(trend_periods._kept.values()) == 2
            weights = sum(k.weight for k in trend_periods._kept.values())
            monkeypatch.setattr(trend_periods._kept, "most_weight", weights - 1)
            trends.trends(conn, by="week", tz="UTC")  # a third: the month's, asked least recently, goes first
            assert [k.weight for k in trend_periods._kept.values()][-1] < 60
            assert sum(k.weight for k in trend_periods._kept.values()) <= trend_periods._kept.most_weight
