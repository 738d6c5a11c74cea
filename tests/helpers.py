"""Helpers shared by the database tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import psycopg
from psycopg_pool import ConnectionPool

from retrod.ingest.ingester import Ingester
from retrod.report import cache, model, prices
from retrod.store.migrate import load
from retrod.store.store import Store

HOST = "test-host"


def ingest(db_url: str, roots: Iterable[Path], batch_bytes: int = 4 << 20, host: str = HOST) -> None:
    """One catch-up scan with a fresh ingester (no state carried over in memory), after the
    price tiers are stored, as the daemon does at its start; `host`: the machine's id
    (RETROD_HOST_ID) its files are stored under."""
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        with pool.connection() as conn:
            prices.store_tiers(conn)
        Ingester(Store(pool, host), roots, batch_bytes).scan()


def older_migrations(folder: Path, keep: Callable[[int], bool]) -> Path:
    """`folder`, made, holding the shipped migrations whose version `keep` keeps: a database
    migrated from it (migrate(conn, folder)) is one an older retrod made."""
    folder.mkdir()
    for migration in load():
        if keep(migration.version):
            (folder / f"{migration.version:04d}_{migration.name}.sql").write_text(migration.sql)
    return folder


def output_tokens(db_url: str, session: str | None = None) -> int:
    """Output tokens stored, of one session or of all: what the daemon tests wait on."""
    with psycopg.connect(db_url) as conn:
        return int(conn.execute(
            "SELECT coalesce(sum(output_tokens), 0) FROM retrod.requests"
            " WHERE %(session)s::text IS NULL OR session_uuid = %(session)s", {"session": session}).fetchone()[0])


def reports(db_url: str) -> dict[str, dict]:
    with psycopg.connect(db_url) as conn:
        sessions = [r[0] for r in conn.execute(
            "SELECT DISTINCT session_uuid FROM retrod.files"
            " WHERE session_uuid IS NOT NULL AND kind IN ('main', 'subagent', 'agent_root')")]
        return {s: model.build(conn, s) for s in sessions}


_SIGNALS = ("sibling_error", "error_retry", "persisted_output_read", "post_write_read", "duplicate", "re_read")
_SIGNAL_COLUMNS = "productive, " + ", ".join(_SIGNALS)
_SIGNAL_COUNTS = "count(*) FILTER (WHERE signal IS NULL), " + ", ".join(
    f"count(*) FILTER (WHERE signal = '{s}')" for s in _SIGNALS)
# A part's cache writes priced at 1h (accounting.md §2.7, migration 0036): its 1h writes when its 5m and
# 1h writes add up to its cache writes, else none.
_PRICED_1H = "CASE WHEN p.cache_create_5m + p.cache_create_1h = p.cache_create THEN p.cache_create_1h ELSE 0 END"

# Every derived row, in a canonical order and without surrogate ids or clock times, so two
# databases can be compared for equality.
_SNAPSHOT = {
    "files": "SELECT path, kind, slug, session_uuid, agent_id, size, \"offset\", state, missing, cwd"
             " FROM retrod.files ORDER BY path",
    "requests": "SELECT * FROM retrod.requests ORDER BY key",
    "events": "SELECT f.path, e.\"offset\", e.session_uuid, e.ts, e.prev_ts, e.kind, e.gap_us,"
              " e.tool_result_bytes, e.line_uuid, e.gap_class, e.compaction, e.counted, e.sub"
              " FROM retrod.events e JOIN retrod.files f ON f.id = e.file_id ORDER BY 1, 2",
    "tool_calls": "SELECT f.path, c.tool_use_id, c.session_uuid, c.name, c.ts, c.description,"
                  " c.subagent_type FROM retrod.tool_calls c JOIN retrod.files f ON f.id = c.file_id"
                  " ORDER BY 1, 2",
    "subagents": "SELECT f.path, s.agent_id, s.session_uuid, s.first_ts, s.last_ts FROM retrod.subagents s"
                 " JOIN retrod.files f ON f.id = s.file_id ORDER BY 1, 2",
    "subagent_links": "SELECT f.path, l.agent_id, l.tool_use_id, l.session_uuid FROM retrod.subagent_links l"
                      " JOIN retrod.files f ON f.id = l.file_id ORDER BY 1, 2, 3",
    "subagent_meta": "SELECT * FROM retrod.subagent_meta ORDER BY 1, 2",
    "cache_boundaries": "SELECT f.path, b.\"offset\", b.session_uuid, b.agent, b.ts FROM retrod.cache_boundaries b"
                        " JOIN retrod.files f ON f.id = b.file_id ORDER BY 1, 2",
    # minute::text: 'infinity' (rows without a timestamp) does not load as a Python datetime
    "request_minutes": "SELECT session_uuid, minute::text, agent, model, fast, tier_floor, requests, parts,"
                       " split_requests, tool_turns, input_tokens, output_tokens, cache_read_tokens,"
                       " cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens, web_searches,"
                       " priced_1h_tokens"
                       " FROM retrod.request_minutes ORDER BY 1, minute, 3, 4, 5, 6",
    "event_minutes": "SELECT session_uuid, minute::text, claude_us, tool_us, human_us, tool_result_bytes"
                     " FROM retrod.event_minutes ORDER BY 1, minute",
    "session_figures": "SELECT session_uuid, transcripts, project_slug, first_us, last_us, has_main, parts, requests,"
                       " input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, calls, productive"
                       " FROM retrod.session_figures ORDER BY 1, db_role",
    "gap_spans": "SELECT f.path, g.\"offset\", g.session_uuid, g.kind, g.span_start, g.span_end"
                 " FROM retrod.gap_spans g JOIN retrod.files f ON f.id = g.file_id ORDER BY 1, 2",
    "session_tool_calls": "SELECT session_uuid, tool_calls FROM retrod.session_tool_calls ORDER BY 1",
    "tool_uses": "SELECT f.path, t.tool_use_id, t.session_uuid, t.agent, t.file_path, t.\"offset\", t.block, t.name,"
                 " t.input_hash, t.path, t.detail, t.ts, t.counted, t.signal, t.has_result, t.failed, t.sibling,"
                 " t.rejected, t.plan, t.refused, t.task_id,"
                 " t.result_bytes, t.result_ts, t.result_us"
                 " FROM retrod.tool_uses t JOIN retrod.files f ON f.id = t.file_id ORDER BY 1, 2",
    "call_minutes": f"SELECT session_uuid, minute::text, {_SIGNAL_COLUMNS} FROM retrod.call_minutes ORDER BY 1, minute",
    "call_agents": f"SELECT session_uuid, agent, {_SIGNAL_COLUMNS} FROM retrod.call_agents ORDER BY 1, 2",
    "call_tools": "SELECT session_uuid, name, calls, failed, rejected, results, result_bytes, timed, result_us"
                  " FROM retrod.call_tools ORDER BY 1, 2",
    # day::text: 'infinity' (requests without a timestamp) does not load as a Python date
    "session_requests": "SELECT session_uuid, bucket, model, day::text, fast, tier_floor, requests, parts,"
                        " split_requests, tool_turns, input_tokens, output_tokens, cache_read_tokens,"
                        " cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens, web_searches,"
                        " priced_1h_tokens"
                        " FROM retrod.session_requests ORDER BY 1, 2, 3, day, 5, 6",
    "session_times": "SELECT session_uuid, events, first_ts, last_ts, claude_us, tool_us, human_us, tool_result_bytes"
                     " FROM retrod.session_times ORDER BY 1",
    # migration 0031: the hour rollups, the misses found at commit, each stream's last element
    "request_hours": "SELECT session_uuid, hour::text, agent, model, fast, tier_floor, requests, parts,"
                     " split_requests, tool_turns, input_tokens, output_tokens, cache_read_tokens,"
                     " cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens, web_searches,"
                     " priced_1h_tokens"
                     " FROM retrod.request_hours ORDER BY 1, hour, 3, 4, 5, 6",
    "event_hours": "SELECT session_uuid, hour::text, claude_us, tool_us, human_us, tool_result_bytes"
                   " FROM retrod.event_hours ORDER BY 1, hour",
    "call_hours": f"SELECT session_uuid, hour::text, {_SIGNAL_COLUMNS} FROM retrod.call_hours ORDER BY 1, hour",
    "cache_misses": "SELECT session_uuid, agent, ts, key, place_path, place_offset, n, cause, reason, model, fast,"
                    " size, rewritten, rewritten_1h, pause_us, prefix_before FROM retrod.cache_misses"
                    " ORDER BY 1, 2, 3, 4, 5, 6, 7",
    "cache_streams": "SELECT session_uuid, agent, dirty_from, last_ts, last_model, last_fast, last_prefix, last_ttl_s"
                     " FROM retrod.cache_streams ORDER BY 1, 2",
}

# The rollups, recomputed from the raw rows: what the triggers must have kept.
ROLLUPS_FROM_RAW = {
    # migration 0031: each UTC hour the sum of its minutes (which are held to the raw rows below)
    "request_hours": "SELECT session_uuid, retrod.hour_of(minute)::text, agent, model, fast, tier_floor, sum(requests),"
                     " sum(parts), sum(split_requests), sum(tool_turns), sum(input_tokens), sum(output_tokens),"
                     " sum(cache_read_tokens), sum(cache_create_tokens), sum(cache_create_5m_tokens),"
                     " sum(cache_create_1h_tokens), sum(web_searches), sum(priced_1h_tokens)"
                     " FROM retrod.request_minutes"
                     " GROUP BY 1, retrod.hour_of(minute), 3, 4, 5, 6 ORDER BY 1, retrod.hour_of(minute), 3, 4, 5, 6",
    "event_hours": "SELECT session_uuid, retrod.hour_of(minute)::text, sum(claude_us), sum(tool_us), sum(human_us),"
                   " sum(tool_result_bytes) FROM retrod.event_minutes GROUP BY 1, retrod.hour_of(minute)"
                   " ORDER BY 1, retrod.hour_of(minute)",
    "call_hours": "SELECT session_uuid, retrod.hour_of(minute)::text, sum(productive), sum(sibling_error),"
                  " sum(error_retry), sum(persisted_output_read), sum(post_write_read), sum(duplicate), sum(re_read)"
                  " FROM retrod.call_minutes GROUP BY 1, retrod.hour_of(minute) ORDER BY 1, retrod.hour_of(minute)",
    # by part (migration 0013): each in its price tier, by the thresholds its role stored
    "request_minutes": "SELECT r.session_uuid, retrod.minute_of(r.ts)::text, r.agent, p.model, r.fast,"
                       " retrod.tier_floor(p.input + p.cache_read + p.cache_create,"
                       " (SELECT thresholds FROM retrod.price_tiers t WHERE t.db_role = r.db_role)) AS tier,"
                       " count(*) FILTER (WHERE p.first), count(*),"
                       " count(*) FILTER (WHERE p.first AND r.parts IS NOT NULL),"
                       " count(*) FILTER (WHERE p.first AND r.has_tool_use), sum(p.input), sum(p.output),"
                       " sum(p.cache_read), sum(p.cache_create), sum(p.cache_create_5m), sum(p.cache_create_1h),"
                       f" sum(p.web_searches), sum({_PRICED_1H})"
                       " FROM retrod.requests r, retrod.request_parts(r) p"
                       " GROUP BY 1, retrod.minute_of(r.ts), 3, 4, 5, 6"
                       " ORDER BY 1, retrod.minute_of(r.ts), 3, 4, 5, 6",
    # migration 0019: a session's files, request parts and counted calls
    # (start and end: the counted events', main or subagent timeline: migration 0022)
    "session_figures": "SELECT k.session_uuid, coalesce(f.n, 0), f.slug, t.first_us, t.last_us,"
                       " coalesce(f.main, false), coalesce(p.parts, 0), coalesce(p.requests, 0),"
                       " coalesce(p.i, 0), coalesce(p.o, 0),"
                       " coalesce(p.cr, 0), coalesce(p.cc, 0), coalesce(c.calls, 0), coalesce(c.productive, 0)"
                       " FROM (SELECT session_uuid, db_role FROM retrod.files WHERE session_uuid IS NOT NULL"
                       "  AND kind IN ('main', 'subagent', 'agent_root')"
                       "  UNION SELECT session_uuid, db_role FROM retrod.requests"
                       "  UNION SELECT session_uuid, db_role FROM retrod.tool_uses WHERE counted) k"
                       " LEFT JOIN (SELECT session_uuid, db_role, count(*) AS n,"
                       "  coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS slug,"
                       "  bool_or(kind = 'main') AS main FROM retrod.files"
                       "  WHERE kind IN ('main', 'subagent', 'agent_root') GROUP BY 1, 2) f"
                       "  USING (session_uuid, db_role)"
                       " LEFT JOIN (SELECT session_uuid, db_role, retrod.ts_to_us(min(ts)) AS first_us,"
                       "  retrod.ts_to_us(max(ts)) AS last_us FROM retrod.events WHERE counted GROUP BY 1, 2) t"
                       "  USING (session_uuid, db_role)"
                       " LEFT JOIN (SELECT r.session_uuid, r.db_role, count(*) AS parts,"
                       "  count(*) FILTER (WHERE p.first) AS requests, sum(p.input) AS i, sum(p.output) AS o,"
                       "  sum(p.cache_read) AS cr, sum(p.cache_create) AS cc"
                       "  FROM retrod.requests r, retrod.request_parts(r) p GROUP BY 1, 2) p"
                       "  USING (session_uuid, db_role)"
                       " LEFT JOIN (SELECT session_uuid, db_role, count(*) AS calls,"
                       "  count(*) FILTER (WHERE signal IS NULL) AS productive FROM retrod.tool_uses WHERE counted"
                       "  GROUP BY 1, 2) c USING (session_uuid, db_role)"
                       " WHERE coalesce(f.n, 0) > 0 OR coalesce(p.parts, 0) > 0 OR coalesce(c.calls, 0) > 0"
                       " ORDER BY 1, k.db_role",
    "event_minutes": "SELECT session_uuid, minute::text, sum(c), sum(t), sum(h), sum(b) FROM ("
                     " SELECT e.session_uuid, p.minute,"
                     " CASE WHEN e.kind = 'claude' THEN retrod.interval_us(p.piece_end - p.piece_start) ELSE 0 END c,"
                     " CASE WHEN e.kind = 'tool' THEN retrod.interval_us(p.piece_end - p.piece_start) ELSE 0 END t,"
                     " CASE WHEN e.kind = 'human' THEN retrod.interval_us(p.piece_end - p.piece_start) ELSE 0 END h,"
                     " 0 b FROM retrod.events e, retrod.pieces_of(e.prev_ts, e.ts) p WHERE e.kind IS NOT NULL"
                     " UNION ALL SELECT session_uuid, retrod.minute_of(ts), 0, 0, 0, tool_result_bytes"
                     " FROM retrod.events WHERE tool_result_bytes <> 0 AND counted) d"
                     " GROUP BY 1, minute ORDER BY 1, minute",
    "session_tool_calls": "SELECT session_uuid, count(DISTINCT tool_use_id) FROM retrod.tool_calls"
                          " GROUP BY 1 ORDER BY 1",
    "call_minutes": f"SELECT session_uuid, retrod.minute_of(ts)::text, {_SIGNAL_COUNTS} FROM retrod.tool_uses"
                    " WHERE counted GROUP BY 1, retrod.minute_of(ts) ORDER BY 1, retrod.minute_of(ts)",
    "call_agents": f"SELECT session_uuid, agent, {_SIGNAL_COUNTS} FROM retrod.tool_uses WHERE counted"
                   " GROUP BY 1, 2 ORDER BY 1, 2",
    # per session (migration 0018): the same parts by bucket and UTC day instead of minute and agent
    "session_requests": "SELECT r.session_uuid, CASE WHEN r.agent = '' THEN 'main'"
                        " WHEN starts_with(r.agent, 'acompact') THEN 'compaction' ELSE 'subagents' END AS bucket,"
                        " p.model, (coalesce(r.ts, 'infinity') AT TIME ZONE 'UTC')::date::text AS day, r.fast,"
                        " retrod.tier_floor(p.input + p.cache_read + p.cache_create,"
                        " (SELECT thresholds FROM retrod.price_tiers t WHERE t.db_role = r.db_role)) AS tier,"
                        " count(*) FILTER (WHERE p.first), count(*),"
                        " count(*) FILTER (WHERE p.first AND r.parts IS NOT NULL),"
                        " count(*) FILTER (WHERE p.first AND r.has_tool_use), sum(p.input), sum(p.output),"
                        " sum(p.cache_read), sum(p.cache_create), sum(p.cache_create_5m), sum(p.cache_create_1h),"
                        f" sum(p.web_searches), sum({_PRICED_1H})"
                        " FROM retrod.requests r, retrod.request_parts(r) p"
                        # (the day as text sorts 'infinity' last, as the date does)
                        " GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6",
    "session_times": "SELECT session_uuid, count(*), min(ts) FILTER (WHERE counted), max(ts) FILTER (WHERE counted),"
                     " coalesce(sum(extract(epoch FROM ts - prev_ts) * 1000000)"
                     " FILTER (WHERE kind = 'claude' AND ts > prev_ts), 0)::bigint,"
                     " coalesce(sum(extract(epoch FROM ts - prev_ts) * 1000000)"
                     " FILTER (WHERE kind = 'tool' AND ts > prev_ts), 0)::bigint,"
                     " coalesce(sum(extract(epoch FROM ts - prev_ts) * 1000000)"
                     " FILTER (WHERE kind = 'human' AND ts > prev_ts), 0)::bigint,"
                     " coalesce(sum(tool_result_bytes) FILTER (WHERE counted), 0)"
                     " FROM retrod.events GROUP BY 1 ORDER BY 1",
    "call_tools": "SELECT session_uuid, name, count(*), count(*) FILTER (WHERE failed AND NOT rejected),"
                  " count(*) FILTER (WHERE rejected),"
                  " count(*) FILTER (WHERE has_result), coalesce(sum(result_bytes), 0), count(result_us),"
                  " coalesce(sum(result_us), 0)"
                  " FROM retrod.tool_uses WHERE counted GROUP BY 1, 2 ORDER BY 1, 2",
}


def rollups_match_raw(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        for table, query in ROLLUPS_FROM_RAW.items():
            kept = conn.execute(_SNAPSHOT[table]).fetchall()
            assert kept == conn.execute(query).fetchall(), table
        cache_misses_match_a_walk(conn)
        trend_days_match_the_starts(conn)
        window_marks_cover_the_rows(conn)
        file_folders_match_their_lines(conn)


# accounting.md §4 with §2.1 (migration 0036): a main transcript's working folder, the first of its own
# lines' by offset: its holders that are no fork copy (each with the folder of the last change at
# or before it) and its first line without a uuid that names one (its fold state's).
_FIRST_OWN_CWD = """
SELECT f.id, f.cwd, (
    SELECT x.cwd FROM (
        SELECT h."offset", (SELECT c.cwd FROM retrod.line_holders c
                            WHERE c.file_id = h.file_id AND c.cwd_changed AND c.line_uuid IS NOT NULL
                              AND c."offset" <= h."offset" ORDER BY c."offset" DESC LIMIT 1) AS cwd
        FROM retrod.line_holders h WHERE h.file_id = f.id AND h.line_uuid IS NOT NULL AND NOT h.copy
        UNION ALL
        SELECT (f.state ->> 'cwd_offset')::bigint, f.state ->> 'cwd'
    ) x WHERE x.cwd IS NOT NULL ORDER BY x."offset" LIMIT 1)
FROM retrod.files f WHERE f.kind = 'main' ORDER BY 1
"""


def file_folders_match_their_lines(conn: psycopg.Connection) -> None:
    rows = conn.execute(_FIRST_OWN_CWD).fetchall()
    assert [(i, kept) for i, kept, _ in rows] == [(i, first) for i, _, first in rows]


def trend_days_match_the_starts(conn: psycopg.Connection) -> None:
    """Migration 0034: every session trends can count has its row, settled (none left marked
    after a commit) on the UTC day of its start ('infinity': none), and that day has a count."""
    sessions = ("SELECT session_uuid, db_role FROM retrod.files WHERE session_uuid IS NOT NULL"
                " UNION SELECT session_uuid, db_role FROM retrod.session_times"
                " UNION SELECT session_uuid, db_role FROM retrod.session_requests"
                " UNION SELECT session_uuid, db_role FROM retrod.call_agents"
                " UNION SELECT session_uuid, db_role FROM retrod.cache_misses")
    want = conn.execute(f"SELECT k.session_uuid, k.db_role, coalesce((t.first_ts AT TIME ZONE 'UTC')::date,"
                        f" 'infinity')::text FROM ({sessions}) k LEFT JOIN retrod.session_times t"
                        f" ON t.session_uuid = k.session_uuid AND t.db_role = k.db_role ORDER BY 1, 2").fetchall()
    kept = conn.execute("SELECT session_uuid, db_role, day::text FROM retrod.trend_sessions"
                        f" WHERE (session_uuid, db_role) IN ({sessions}) ORDER BY 1, 2").fetchall()
    assert kept == want
    assert conn.execute("SELECT count(*) FROM retrod.trend_sessions WHERE changed").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM retrod.trend_sessions s WHERE NOT EXISTS (SELECT FROM retrod.trend_days d"
                        " WHERE d.db_role = s.db_role AND d.day = s.day AND d.changes > 0)").fetchone()[0] == 0


def window_marks_cover_the_rows(conn: psycopg.Connection) -> None:
    """Migration 0038: every hour that holds a request's or a call's time, or overlaps an event's
    gap or holds its time (one behind the high-water mark: prev_ts after ts), has been marked (a
    count above 0), and one that holds a plan call as the plan's too."""
    assert conn.execute("""
        WITH held AS (
            SELECT session_uuid, db_role, retrod.window_hour(ts) AS a, retrod.window_hour(ts) AS b, false AS plan
            FROM retrod.requests WHERE ts IS NOT NULL
            UNION ALL
            SELECT session_uuid, db_role, retrod.window_hour(ts), retrod.window_hour(ts), plan IS NOT NULL
            FROM retrod.tool_uses WHERE ts IS NOT NULL
            UNION ALL
            SELECT session_uuid, db_role, retrod.window_hour(least(prev_ts, ts)), retrod.window_hour(ts), false
            FROM retrod.events WHERE ts IS NOT NULL
        )
        SELECT count(*) FROM held h, generate_series(h.a, h.b) hour
        WHERE NOT EXISTS (SELECT FROM retrod.window_marks m
                          WHERE (m.session_uuid, m.db_role, m.hour) = (h.session_uuid, h.db_role, hour)
                            AND m.changes > 0 AND (NOT h.plan OR m.plan_changes > 0))""").fetchone()[0] == 0


# A stream's elements in §2.8's order, named as the main stream (cache.walk keeps the last
# element of that one only).
_STREAM_ELEMENTS = ("SELECT '', ts, model, fast, input, cache_read, cache_create, c5, c1, reason"
                    " FROM retrod.cache_elements(%(session)s, %(agent)s, %(role)s, '-infinity', 'infinity')"
                    " ORDER BY ts, place_path IS NOT NULL, CASE WHEN place_path IS NULL THEN key END, place_path,"
                    " place_offset, n")


def cache_misses_match_a_walk(conn: psycopg.Connection) -> None:
    """The misses and last elements kept at commit (migration 0031) are those of a walk of every
    stream from its start (report/cache.py's, which test_cache holds to tests/reference.py)."""
    assert conn.execute("SELECT count(*) FROM retrod.cache_streams WHERE dirty_from IS NOT NULL").fetchone()[0] == 0
    streams = conn.execute("SELECT DISTINCT session_uuid, agent, db_role FROM retrod.requests WHERE ts IS NOT NULL"
                           " AND agent NOT IN ('<inline>', '<unnamed>') ORDER BY 1, 2, 3").fetchall()
    kept = {(s, a, r): rest for s, a, r, *rest in conn.execute(
        "SELECT session_uuid, agent, db_role, last_ts, last_model, last_fast, last_prefix, last_ttl_s"
        " FROM retrod.cache_streams WHERE last_ts IS NOT NULL")}
    walked_last = {}
    for session, agent, role in streams:
        args = {"session": session, "agent": agent, "role": role}
        boundaries = conn.execute("SELECT '', ts FROM retrod.cache_boundaries WHERE session_uuid = %(session)s"
                                  " AND agent = %(agent)s AND db_role = %(role)s ORDER BY ts", args).fetchall()
        walked, last = cache.walk(conn.execute(_STREAM_ELEMENTS, args).fetchall(), boundaries, prices.DEFAULT)
        stored = cache.priced(conn.execute(
            "SELECT ts, '', cause, reason, model, fast, size, rewritten, rewritten_1h, pause_us, prefix_before"
            " FROM retrod.cache_misses WHERE session_uuid = %(session)s AND agent = %(agent)s AND db_role = %(role)s"
            " ORDER BY ts, place_path IS NOT NULL, CASE WHEN place_path IS NULL THEN key END, place_path,"
            " place_offset, n", args), prices.DEFAULT)
        assert stored == walked, (session, agent)
        if last is not None:
            walked_last[(session, agent, role)] = [last.at, last.model, last.fast, last.prefix, last.ttl_s]
    assert kept == walked_last
    assert conn.execute("SELECT count(*) FROM retrod.cache_misses m WHERE NOT EXISTS (SELECT FROM retrod.requests r"
                        " WHERE r.session_uuid = m.session_uuid AND r.agent = m.agent AND r.db_role = m.db_role)"
                        ).fetchone()[0] == 0


def snapshot(db_url: str, relative_to: Path | None = None) -> dict[str, list]:
    """The derived tables as plain data; paths made relative so two trees can be compared."""
    out = {}
    with psycopg.connect(db_url) as conn:
        for table, query in _SNAPSHOT.items():
            rows = [list(r) for r in conn.execute(query)]
            out[table] = json.loads(json.dumps(rows, default=str).replace(f"{relative_to}/", "")
                                    if relative_to else json.dumps(rows, default=str))
    return out
