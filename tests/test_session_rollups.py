"""Migration 0018's per-session rollups equal the per-minute ones they stand beside: per session,
the same tokens by model, day, fast mode and tier, the same classified time and tool output, and
the span the report shows. They are kept by the same trigger functions, so every ingest path that
keeps the minutes keeps them too (tests/helpers.py holds both to the raw rows after each path);
here, on the fixture corpus, against the minutes and the reports themselves, and on a database
that had rows before the migration (or before 0020, which keeps 0019's session_figures from
them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest

from conftest import FIXTURES
from helpers import ingest, older_migrations, reports, rollups_match_raw
from report_checks import utc_ms
from retrod.store.migrate import migrate

# The per-minute rollups summed per session, by what the per-session ones are keyed by.
MINUTES_BY_SESSION = """
SELECT session_uuid, CASE WHEN agent = '' THEN 'main' WHEN starts_with(agent, 'acompact') THEN 'compaction'
                          ELSE 'subagents' END AS bucket,
       model, (minute AT TIME ZONE 'UTC')::date::text AS day, fast, tier_floor,
       sum(requests), sum(parts), sum(split_requests), sum(tool_turns), sum(input_tokens), sum(output_tokens),
       sum(cache_read_tokens), sum(cache_create_tokens), sum(cache_create_5m_tokens), sum(cache_create_1h_tokens)
FROM retrod.request_minutes GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
"""
SESSION_REQUESTS = """
SELECT session_uuid, bucket, model, day::text, fast, tier_floor, requests, parts, split_requests, tool_turns,
       input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
       cache_create_1h_tokens
FROM retrod.session_requests ORDER BY 1, 2, 3, 4, 5, 6
"""
# event_minutes holds a gap's first and last minutes, gap_spans the whole minutes between.
TIMES_FROM_MINUTES = """
SELECT m.session_uuid, m.claude + coalesce(s.claude, 0), m.tool + coalesce(s.tool, 0),
       m.human + coalesce(s.human, 0), m.bytes
FROM (SELECT session_uuid, sum(claude_us) AS claude, sum(tool_us) AS tool, sum(human_us) AS human,
             sum(tool_result_bytes) AS bytes FROM retrod.event_minutes GROUP BY 1) m
LEFT JOIN (SELECT session_uuid, sum(retrod.interval_us(span_end - span_start)) FILTER (WHERE kind = 'claude') AS claude,
                  sum(retrod.interval_us(span_end - span_start)) FILTER (WHERE kind = 'tool') AS tool,
                  sum(retrod.interval_us(span_end - span_start)) FILTER (WHERE kind = 'human') AS human
           FROM retrod.gap_spans GROUP BY 1) s USING (session_uuid)
WHERE (m.claude, m.tool, m.human, m.bytes) <> (0, 0, 0, 0) OR s.session_uuid IS NOT NULL
ORDER BY 1
"""
SESSION_TIMES = """
SELECT session_uuid, claude_us, tool_us, human_us, tool_result_bytes FROM retrod.session_times
WHERE (claude_us, tool_us, human_us, tool_result_bytes) <> (0, 0, 0, 0) ORDER BY 1
"""


def _equal_to_the_minutes(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        by_minutes = conn.execute(MINUTES_BY_SESSION).fetchall()
        assert conn.execute(SESSION_REQUESTS).fetchall() == by_minutes
        assert len(by_minutes) > 40
        from_minutes = conn.execute(TIMES_FROM_MINUTES).fetchall()
        assert [tuple(map(int, row[1:])) for row in conn.execute(SESSION_TIMES)] == [
            tuple(map(int, row[1:])) for row in from_minutes]
        assert [row[0] for row in conn.execute(SESSION_TIMES)] == [row[0] for row in from_minutes]


def test_per_session_rollups_equal_the_minutes_and_the_reports(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    rollups_match_raw(db_url)
    _equal_to_the_minutes(db_url)
    with psycopg.connect(db_url) as conn:
        spans = {row[0]: row[1:] for row in conn.execute(
            "SELECT session_uuid, first_ts, last_ts, claude_us, tool_us, human_us, tool_result_bytes"
            " FROM retrod.session_times")}
    checked = 0
    for session, report in reports(db_url).items():
        if session not in spans:  # no line of its main transcript: no events, no times
            assert report["summary"]["claude_s"] == report["summary"]["tool_s"] == 0
            continue
        first, last, claude_us, tool_us, human_us, tool_bytes = spans[session]
        summary = report["summary"]
        if first is not None:
            assert utc_ms(first) == report["session"]["started_at"]
            assert utc_ms(last) == report["session"]["ended_at"]
            assert round((last - first).total_seconds(), 3) == summary["wall_s"]
        assert round(claude_us / 1e6, 3) == summary["claude_s"]
        assert round(tool_us / 1e6, 3) == summary["tool_s"]
        assert round(human_us / 1e6, 3) == round(summary["human_s"] + summary["away_s"], 3)
        assert tool_bytes == summary["tool_result_bytes"]
        checked += 1
    assert checked > 20


STUB_CACHE_STREAM_TRIGGER = """
CREATE FUNCTION retrod.stub_trigger() RETURNS TRIGGER LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER cache_stream_marked AFTER INSERT ON retrod.files
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION retrod.stub_trigger();
"""


@pytest.mark.parametrize("version", [18, 20])
def test_a_database_with_rows_from_before_the_migration_gets_them_summed(pg_cluster, tmp_path: Path,
                                                                        version: int) -> None:
    """The rows an older retrod stored, every member's with its own role: the migration sums
    them from the minutes and the events, and from then on the triggers keep them. 20: rows
    stored while 0019's price-group table kept session_figures' tokens, which 0020 drops."""
    from conftest import fresh_database

    # (0023 to 0030 only add columns, tables, functions and triggers, which today's ingest writes and
    # uses; 0022's, 0027's and 0035's are added by hand below)
    before = older_migrations(tmp_path / "before", lambda v: v < version or v in (23, 24, 25, 26, 28, 29, 30))
    projects = tmp_path / "projects"
    shutil.copytree(FIXTURES, projects)
    table = {18: "retrod.session_times", 20: "retrod.session_prices"}[version]
    with fresh_database(pg_cluster) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA retrod CASCADE")
            conn.execute("DROP TABLE cc_session_phases, cc_sessions")
            migrate(conn, before)
            assert (conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None) == (version == 18)
            # today's ingest writes the subagent timeline's column, as migration 0022 adds it,
            # a request's web searches, as 0027 adds them, and its chosen record's place, as 0035,
            conn.execute("ALTER TABLE retrod.events ADD COLUMN sub BOOLEAN NOT NULL DEFAULT false")
            conn.execute("ALTER TABLE retrod.requests ADD COLUMN web_searches BIGINT NOT NULL DEFAULT 0")
            conn.execute('ALTER TABLE retrod.requests ADD COLUMN usage_path TEXT COLLATE "C",'
                         " ADD COLUMN usage_offset BIGINT")
            # and a holder line's link and folder, and a file's folder, as 0036 adds them
            conn.execute("ALTER TABLE retrod.line_holders ADD COLUMN link_agent TEXT, ADD COLUMN link_tool_use TEXT,"
                         " ADD COLUMN cwd_changed BOOLEAN NOT NULL DEFAULT false, ADD COLUMN cwd TEXT")
            conn.execute("ALTER TABLE retrod.files ADD COLUMN cwd TEXT")
            # and it sets 0031's deferred trigger immediate by name (one that does nothing here)
            conn.execute(STUB_CACHE_STREAM_TRIGGER)
            # and the fork decision marks the sessions whose lines it changes in 0034's table
            conn.execute('CREATE TABLE retrod.trend_sessions (session_uuid TEXT COLLATE "C", db_role TEXT'
                         ' COLLATE "C", changed BOOLEAN NOT NULL DEFAULT true, PRIMARY KEY (session_uuid, db_role))')
        ingest(url, [projects])
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP FUNCTION retrod.stub_trigger() CASCADE")
            conn.execute("DROP TABLE retrod.trend_sessions")  # (0034 makes it)
            assert migrate(conn)[0] == version
            assert conn.execute("SELECT to_regclass('retrod.session_prices')").fetchone()[0] is None
        rollups_match_raw(url)
        _equal_to_the_minutes(url)
        with psycopg.connect(url, autocommit=True) as conn:  # from then on, the triggers: a file read again
            main, session = conn.execute("SELECT id, session_uuid FROM retrod.files WHERE kind = 'main'"
                                         " ORDER BY id LIMIT 1").fetchone()
            conn.execute("DELETE FROM retrod.events WHERE file_id = %s", (main,))
            # (and a session's requests: its rows by price group and session_figures' tokens follow)
            assert conn.execute("DELETE FROM retrod.requests WHERE session_uuid = %s", (session,)).rowcount > 0
        rollups_match_raw(url)
        _equal_to_the_minutes(url)
