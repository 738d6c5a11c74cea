-- `retrod statusline` (issue 21): what only Claude Code's status line sees, kept per session and
-- member (migration 0017), and today's cost across all of a member's sessions.

-- name: statusline_save_session_status
-- One row per session and member, updated in place. A field Claude Code did not send (an older
-- version, a window not reported yet) keeps what was stored; a window's most-used share only
-- grows, and remembers the reset of the window it was reached in. A render that brings nothing
-- new (the same message's figures again, a timed refresh) writes nothing: the WHERE below.
INSERT INTO retrod.session_status AS s (
    session_uuid, cc_version, cc_cost_usd, cc_duration_ms, cc_api_duration_ms,
    five_hour_pct, five_hour_resets_at, five_hour_max_pct, five_hour_max_resets_at,
    seven_day_pct, seven_day_resets_at, seven_day_max_pct, seven_day_max_resets_at)
SELECT session, cc_version, cc_cost_usd, cc_duration_ms, cc_api_duration_ms,
       five_hour_pct, CASE WHEN five_hour_pct IS NOT NULL THEN five_hour_resets_at END,
       five_hour_pct, CASE WHEN five_hour_pct IS NOT NULL THEN five_hour_resets_at END,
       seven_day_pct, CASE WHEN seven_day_pct IS NOT NULL THEN seven_day_resets_at END,
       seven_day_pct, CASE WHEN seven_day_pct IS NOT NULL THEN seven_day_resets_at END
FROM (SELECT %(session)s::text AS session, %(cc_version)s::text AS cc_version,
             %(cc_cost_usd)s::float8 AS cc_cost_usd, %(cc_duration_ms)s::bigint AS cc_duration_ms,
             %(cc_api_duration_ms)s::bigint AS cc_api_duration_ms,
             %(five_hour_pct)s::float8 AS five_hour_pct,
             to_timestamp(%(five_hour_resets_at)s::float8) AS five_hour_resets_at,
             %(seven_day_pct)s::float8 AS seven_day_pct,
             to_timestamp(%(seven_day_resets_at)s::float8) AS seven_day_resets_at) given
ON CONFLICT (session_uuid, db_role) DO UPDATE SET
    updated_at = now(),
    cc_version = coalesce(excluded.cc_version, s.cc_version),
    cc_cost_usd = coalesce(excluded.cc_cost_usd, s.cc_cost_usd),
    cc_duration_ms = coalesce(excluded.cc_duration_ms, s.cc_duration_ms),
    cc_api_duration_ms = coalesce(excluded.cc_api_duration_ms, s.cc_api_duration_ms),
    five_hour_pct = coalesce(excluded.five_hour_pct, s.five_hour_pct),
    five_hour_resets_at = CASE WHEN excluded.five_hour_pct IS NULL THEN s.five_hour_resets_at
                               ELSE excluded.five_hour_resets_at END,
    five_hour_max_pct = greatest(s.five_hour_max_pct, excluded.five_hour_pct),
    five_hour_max_resets_at = CASE WHEN excluded.five_hour_pct > coalesce(s.five_hour_max_pct, '-infinity')
                                   THEN excluded.five_hour_resets_at ELSE s.five_hour_max_resets_at END,
    seven_day_pct = coalesce(excluded.seven_day_pct, s.seven_day_pct),
    seven_day_resets_at = CASE WHEN excluded.seven_day_pct IS NULL THEN s.seven_day_resets_at
                               ELSE excluded.seven_day_resets_at END,
    seven_day_max_pct = greatest(s.seven_day_max_pct, excluded.seven_day_pct),
    seven_day_max_resets_at = CASE WHEN excluded.seven_day_pct > coalesce(s.seven_day_max_pct, '-infinity')
                                   THEN excluded.seven_day_resets_at ELSE s.seven_day_max_resets_at END
WHERE (excluded.cc_version IS NOT NULL AND excluded.cc_version IS DISTINCT FROM s.cc_version)
   OR (excluded.cc_cost_usd IS NOT NULL AND excluded.cc_cost_usd IS DISTINCT FROM s.cc_cost_usd)
   OR (excluded.cc_duration_ms IS NOT NULL AND excluded.cc_duration_ms IS DISTINCT FROM s.cc_duration_ms)
   OR (excluded.cc_api_duration_ms IS NOT NULL AND excluded.cc_api_duration_ms IS DISTINCT FROM s.cc_api_duration_ms)
   OR (excluded.five_hour_pct IS NOT NULL AND (excluded.five_hour_pct, excluded.five_hour_resets_at)
                                              IS DISTINCT FROM (s.five_hour_pct, s.five_hour_resets_at))
   OR (excluded.seven_day_pct IS NOT NULL AND (excluded.seven_day_pct, excluded.seven_day_resets_at)
                                              IS DISTINCT FROM (s.seven_day_pct, s.seven_day_resets_at));

-- name: statusline_session_status
SELECT first_seen, updated_at, cc_version, cc_cost_usd, cc_duration_ms, cc_api_duration_ms,
       five_hour_pct, five_hour_resets_at, five_hour_max_pct, five_hour_max_resets_at,
       seven_day_pct, seven_day_resets_at, seven_day_max_pct, seven_day_max_resets_at
FROM retrod.session_status WHERE session_uuid = %(session)s AND db_role = %(member)s;

-- name: statusline_current_member
-- The database role whose rows a status line with no session reads: one's own.
SELECT current_user AS member;

-- name: statusline_member_tokens_by_model_between
-- A member's tokens in [start, end) across all sessions, by what their price depends on (as
-- session_tokens_by_model): the status line's "today". Whole minutes, through
-- request_minutes_member_minute (a local day's bounds fall on whole minutes in every time zone in use today).
SELECT model, (minute AT TIME ZONE 'UTC')::date AS day, fast, tier_floor, sum(parts)::bigint AS parts,
       sum(requests)::bigint AS requests,
       sum(input_tokens)::bigint AS input, sum(output_tokens)::bigint AS output,
       sum(cache_read_tokens)::bigint AS cache_read, sum(cache_create_tokens)::bigint AS cache_create,
       sum(cache_create_5m_tokens)::bigint AS cache_create_5m, sum(cache_create_1h_tokens)::bigint AS cache_create_1h,
       sum(web_searches)::bigint AS web_searches, sum(priced_1h_tokens)::bigint AS priced_1h
FROM retrod.request_minutes
WHERE db_role = %(member)s AND minute >= %(start)s AND minute < %(end)s
GROUP BY 1, 2, 3, 4;

-- name: statusline_session_cache_main_tail
-- accounting.md §2.8's live state, cheaply: the main stream's elements (as retrod.cache_elements reads
-- them, in its order) from the time of its last element that wrote the cache on. That writer sets
-- the lifetime in force after the last element, so report/cache.py's walk over these few rows
-- gives the report's `summary.cache.live` without reading the whole session. The writer is found
-- by walking the (session, ts) index back from the end; a stream that never wrote: all of it.
WITH since AS (
    SELECT r.ts FROM retrod.requests r
    WHERE r.session_uuid = %(session)s AND r.db_role = %(member)s AND r.agent = '' AND r.ts IS NOT NULL
      AND CASE WHEN r.parts IS NULL THEN r.cache_create_tokens > 0
               ELSE EXISTS (SELECT 1 FROM jsonb_array_elements(r.parts::jsonb) p
                            WHERE p ->> 'model' = r.parts::jsonb -> -1 ->> 'model'
                              AND (p ->> 'cache_create')::bigint > 0) END
    ORDER BY r.ts DESC LIMIT 1
)
SELECT agent, ts, model, fast, input, cache_read, cache_create, c5, c1, reason FROM (
    SELECT r.agent, r.ts, r.key, r.place_path, r.place_offset, 1::bigint AS n, r.model, r.fast,
           r.input_tokens AS input, r.cache_read_tokens AS cache_read, r.cache_create_tokens AS cache_create,
           r.cache_create_5m_tokens AS c5, r.cache_create_1h_tokens AS c1, r.cache_miss_reason AS reason
    FROM retrod.requests r
    WHERE r.session_uuid = %(session)s AND r.db_role = %(member)s AND r.agent = ''
      AND r.ts >= coalesce((SELECT ts FROM since), '-infinity') AND r.parts IS NULL
      AND r.cache_read_tokens + r.cache_create_tokens > 0
    UNION ALL
    SELECT r.agent, r.ts, r.key, r.place_path, r.place_offset, j.n, j.model, r.fast, j.input, j.cache_read,
           j.cache_create, j.cache_create_5m, j.cache_create_1h, r.cache_miss_reason
    FROM retrod.requests r,
         ROWS FROM (jsonb_to_recordset(r.parts::jsonb)
                    AS (model TEXT, input BIGINT, cache_read BIGINT, cache_create BIGINT,
                        cache_create_5m BIGINT, cache_create_1h BIGINT)) WITH ORDINALITY
         AS j (model, input, cache_read, cache_create, cache_create_5m, cache_create_1h, n)
    WHERE r.session_uuid = %(session)s AND r.db_role = %(member)s AND r.agent = ''
      AND r.ts >= coalesce((SELECT ts FROM since), '-infinity') AND r.parts IS NOT NULL
      AND j.cache_read + j.cache_create > 0 AND j.model = (r.parts::jsonb -> -1 ->> 'model')
) e
ORDER BY agent, ts, place_path IS NOT NULL, CASE WHEN place_path IS NULL THEN key END, place_path, place_offset, n;

-- name: statusline_session_plan_key
-- What the plan (accounting.md §2.9) is derived from, summed up: it changes whenever a plan call is stored
-- or its result read (session_plan_calls reads the same rows, through the same partial index), so
-- the status line derives the current task again only then.
SELECT count(*), min(ts), max(ts), count(*) FILTER (WHERE has_result), count(*) FILTER (WHERE failed OR refused),
       count(task_id)
FROM retrod.tool_uses
WHERE session_uuid = %(session)s AND db_role = %(member)s AND counted AND plan IS NOT NULL AND agent = ''
  AND ts IS NOT NULL;
