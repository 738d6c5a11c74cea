"""Honest time (accounting.md §2.3): gaps from the high-water mark, the `away` class, and migration 0006
that recomputes the events stored under the old rule."""

from __future__ import annotations

import json
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

import reference
from helpers import ingest, rollups_match_raw, snapshot
from retrod.report import model
from retrod.store.migrate import load, migrate, migrations_dir

S = "dddddddd-0000-4000-8000-000000000000"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _user(at: float, text: str = "go", **extra) -> dict:
    return {"type": "user", "sessionId": S, "timestamp": _at(at), "uuid": f"u{at}",
            "message": {"role": "user", "content": text}, **extra}


def _tool_result(at: float) -> dict:
    return _user(at, [{"type": "tool_result", "tool_use_id": f"t{at}", "content": "ok"}])


def _assistant(at: float, key: str) -> dict:
    return {"type": "assistant", "sessionId": S, "timestamp": _at(at),
            "message": {"id": key, "role": "assistant", "content": [{"type": "text", "text": "x"}],
                        "usage": {"input_tokens": 1, "output_tokens": 2}}}


def _write(root: Path, lines: list[dict]) -> Path:
    path = root / "-proj" / f"{S}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# Seen in the field: one line stamped earlier than the line before it made the next gap count twice.
OUT_OF_ORDER = [
    _user(0),
    _assistant(100, "m1"),      # claude [0, 100]
    _tool_result(50),           # stamped before the high-water mark 100: no gap
    _assistant(130, "m2"),      # claude [100, 130], not [50, 130]
    _user(190),                 # human [130, 190]
]

# A session resumed two days later: that pause is away, not thinking.
TWO_DAYS = [
    _user(0),
    _assistant(20, "m1"),                   # claude 20
    _user(20 + 2 * 86400, "good morning"),  # away: 2 days
    _assistant(20 + 2 * 86400 + 7, "m2"),   # claude 7
    _user(20 + 2 * 86400 + 67),             # human 60
]


def test_a_line_stamped_early_does_not_count_the_next_gap_twice(db_url: str, tmp_path: Path) -> None:
    _write(tmp_path, OUT_OF_ORDER)
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url) as conn:
        summary = model.build(conn, S)["summary"]
    assert (summary["claude_s"], summary["tool_s"], summary["human_s"], summary["away_s"]) == (130.0, 0.0, 60.0, 0.0)
    assert summary["wall_s"] == 190.0  # = the sum of the four: the first line is the earliest
    assert summary == summary | reference.compute(tmp_path)[S]["summary"]


def test_a_two_day_pause_is_away_and_the_threshold_applies_when_read(db_url: str, tmp_path: Path) -> None:
    _write(tmp_path, TWO_DAYS)
    ingest(db_url, [tmp_path])
    with psycopg.connect(db_url) as conn:
        default = model.build(conn, S)["summary"]
        strict = model.build(conn, S, away_after_s=59.5)["summary"]  # no re-ingest needed
        lenient = model.build(conn, S, away_after_s=3 * 86400)["summary"]
    assert (default["claude_s"], default["human_s"], default["away_s"]) == (27.0, 60.0, 172800.0)
    assert (strict["human_s"], strict["away_s"]) == (0.0, 172860.0)
    assert (lenient["human_s"], lenient["away_s"]) == (172860.0, 0.0)
    for threshold, got in ((1800, default), (59.5, strict), (3 * 86400, lenient)):
        want = reference.compute(tmp_path, away_after_s=threshold)[S]["summary"]
        assert got == got | want
        assert got["claude_s"] + got["tool_s"] + got["human_s"] + got["away_s"] == got["wall_s"]


def test_phases_split_away_time_like_the_reference(db_url: str, tmp_path: Path) -> None:
    _write(tmp_path, TWO_DAYS)
    ingest(db_url, [tmp_path])
    windows = [(T0, T0 + timedelta(days=1)), (T0 + timedelta(days=1), T0 + timedelta(days=3))]
    with psycopg.connect(db_url) as conn, conn.transaction():
        conn.execute("INSERT INTO cc_sessions (session_uuid, project_slug, started_at) VALUES (%s, '-proj', %s)",
                     (S, T0))
        for n, (start, end) in enumerate(windows):
            conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                         " SELECT id, 't', %s, %s, %s, 'high_impact' FROM cc_sessions WHERE session_uuid = %s",
                         (f"p{n}", start, end, S))
    with psycopg.connect(db_url) as conn:
        phases = model.build(conn, S)["phases"]
    want = reference.compute_phases(tmp_path, S, windows)
    for got, expected in zip(phases, want, strict=True):
        assert {k: got[k] for k in ("claude_s", "tool_s", "human_s", "away_s")} == \
            {k: expected[k] for k in ("claude_s", "tool_s", "human_s", "away_s")}
    assert phases[0]["away_s"] == 86400 - 20.0 and phases[1]["away_s"] == 86400 + 20.0


def test_migration_0006_recomputes_events_stored_under_the_old_rule(pg_cluster, db_url: str, tmp_path: Path) -> None:
    """A database from before 0006 holds gaps measured from the previous line; migrating it must
    give what ingesting under the new rule gives, without reading the transcripts again (Claude
    Code may have deleted them)."""
    _write(tmp_path, OUT_OF_ORDER)
    old_migrations = tmp_path / "old-migrations"
    old_migrations.mkdir()
    for path in migrations_dir().glob("*.sql"):
        # every other one, today's ingest code needs the later ones; but 0012, which drops the
        # gap_pieces 0006 fills again, comes after it
        if int(path.name[:4]) not in (6, 12):
            shutil.copy(path, old_migrations)
    name = f"t_{uuid.uuid4().hex[:16]}"
    pg_cluster.create_database(name)
    old_url = pg_cluster.url(name)
    try:
        with psycopg.connect(old_url, autocommit=True) as conn:
            migrate(conn, old_migrations)
        ingest(old_url, [tmp_path])
        _rewrite_as_before_0006(old_url)
        with psycopg.connect(old_url, autocommit=True) as conn:
            assert conn.execute("SELECT sum(gap_us) FROM retrod.events").fetchone()[0] == 240_000_000  # 30 s twice
            assert migrate(conn) == [6, 12]
            # (0006 runs here after 0018, whose per-session rollup its rebuild of event_minutes fills
            # too, over what 0014's update trigger already moved: sum it again as 0018 would, after)
            backfill = [part for part in next(m for m in load() if m.version == 18).sql.split(";\n")
                        if "INSERT INTO retrod.session_times" in part][-1]  # (its last statement)
            conn.execute("DELETE FROM retrod.session_times")
            conn.execute(backfill)
            # (0006 runs here after 0014, which no longer keeps the longest gap in the state)
            conn.execute("UPDATE retrod.files SET state = state - 'max_gap_us'")
        ingest(db_url, [tmp_path])  # the new rule, from scratch
        assert snapshot(old_url) == snapshot(db_url)
        rollups_match_raw(old_url)
    finally:
        with psycopg.connect(pg_cluster.url("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _rewrite_as_before_0006(url: str) -> None:
    """The events of OUT_OF_ORDER as the old fold stored them: each gap from the previous line,
    clamped at 0, the out-of-order line classed (tool); the fold state's last_event_us."""
    with psycopg.connect(url) as conn, conn.transaction():
        rows = conn.execute('SELECT file_id, "offset", session_uuid, ts, tool_result_bytes, line_uuid, gap_class'
                            ' FROM retrod.events ORDER BY "offset"').fetchall()
        conn.execute("DELETE FROM retrod.events")  # and re-insert, so the rollup triggers follow
        kinds = [None, "claude", "tool", "claude", "human"]
        prev = None
        for (file_id, offset, session, ts, result_bytes, line_uuid, gap_class), kind in zip(rows, kinds, strict=True):
            gap = max(0, (ts - prev) // timedelta(microseconds=1)) if prev else 0
            # (the line's uuid and class as today's fold stores them: this test is about the gaps)
            conn.execute('INSERT INTO retrod.events (file_id, "offset", session_uuid, ts, prev_ts, kind, gap_us,'
                         ' tool_result_bytes, line_uuid, gap_class) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)',
                         (file_id, offset, session, ts, prev, kind, gap, result_bytes, line_uuid, gap_class))
            prev = ts
        conn.execute("UPDATE retrod.files SET state = state - 'high_water_us' - 'first_event_us'"
                     " || jsonb_build_object('last_event_us', retrod.ts_to_us(%s), 'max_gap_us', 100000000)"
                     " WHERE kind = 'main'", (rows[-1][3],))
