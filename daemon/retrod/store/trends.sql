-- `retrod trends` and `retrod brief`: many sessions' figures at once, from the per-session
-- rollups (migration 0018), the tool-call rollup by agent and the user's phases. Every figure is a
-- sum of the per-session figures `retrod report` shows, read from rollups those are read from too.
-- %(member)s: whose rows (DESIGN §3), as in report.sql.

-- Per period (and, with %(by_project)s, per project within it), the sessions that started in it.
-- A session belongs wholly to the period its first counted event falls in (the report's
-- started_at; a session with no main-transcript event: its first request's minute), periods cut
-- by date_trunc(%(by)s) in the time zone %(tz)s (weeks start on Monday). `undated`: no timestamp
-- at all (period NULL). Filters: %(slugs)s (a project folder's names) or %(pattern)s (part of
-- one), %(since)s (started at or after), %(sessions)s (these sessions only: the brief's).
-- GROUPING SETS: one row per period (`split` false), and one per period and project (`split`).
-- Each row carries its price groups (as session_tokens_by_model, by bucket too) and verdicts.
-- name: trend_figures
WITH s AS (  -- the member's sessions with a transcript (as `retrod sessions`), and their project
    SELECT session_uuid,
           coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug,
           (array_agg(state ->> 'cwd' ORDER BY slug, path) FILTER (WHERE kind = 'main' AND state ? 'cwd'))[1]
               AS project_path
    FROM retrod.files
    WHERE db_role = %(member)s AND kind IN ('main', 'subagent', 'agent_root') AND session_uuid IS NOT NULL
      AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[]))
    GROUP BY session_uuid
), dated AS (
    SELECT s.*, t.claude_us, t.tool_us, t.human_us, t.tool_result_bytes,
           retrod.interval_us(t.last_ts - t.first_ts) AS wall_us,
           coalesce(t.first_ts, (SELECT min(minute) FROM retrod.request_minutes m
                                 WHERE m.session_uuid = s.session_uuid AND m.db_role = %(member)s
                                   AND m.minute < 'infinity')) AS started_at
    FROM s LEFT JOIN retrod.session_times t ON t.session_uuid = s.session_uuid AND t.db_role = %(member)s
    WHERE (%(slugs)s::text[] IS NULL OR s.project_slug = ANY(%(slugs)s::text[]))
      AND (%(pattern)s::text IS NULL OR s.project_slug ILIKE %(pattern)s::text)
), p AS (
    SELECT d.*, date_trunc(%(by)s, d.started_at AT TIME ZONE %(tz)s)::date AS period,
           CASE WHEN %(by_project)s THEN d.project_slug END AS grp
    FROM dated d
    WHERE %(since)s::timestamptz IS NULL OR d.started_at >= %(since)s::timestamptz
), calls AS (
    SELECT session_uuid, sum(productive)::bigint AS productive, sum(sibling_error)::bigint AS sibling_error,
           sum(error_retry)::bigint AS error_retry, sum(persisted_output_read)::bigint AS persisted_output_read,
           sum(post_write_read)::bigint AS post_write_read, sum(duplicate)::bigint AS duplicate,
           sum(re_read)::bigint AS re_read
    FROM retrod.call_agents WHERE db_role = %(member)s AND session_uuid IN (SELECT session_uuid FROM p)
    GROUP BY 1
), away AS (  -- human gaps longer than the away threshold (report.sql session_away)
    SELECT session_uuid, sum(gap_us)::bigint AS away_us
    FROM retrod.events
    WHERE kind = 'human' AND gap_us > %(away_us)s AND db_role = %(member)s
      AND session_uuid IN (SELECT session_uuid FROM p)
    GROUP BY 1
), tokens AS (  -- by price group and bucket
    SELECT p.period, p.grp, GROUPING(p.grp) AS whole, q.bucket, q.model, q.day, q.fast, q.tier_floor,
           sum(q.requests)::bigint AS requests, sum(q.parts)::bigint AS parts,
           sum(q.input_tokens)::bigint AS input, sum(q.output_tokens)::bigint AS output,
           sum(q.cache_read_tokens)::bigint AS cache_read, sum(q.cache_create_tokens)::bigint AS cache_create,
           sum(q.cache_create_5m_tokens)::bigint AS cache_create_5m,
           sum(q.cache_create_1h_tokens)::bigint AS cache_create_1h,
           count(DISTINCT p.session_uuid) AS sessions
    FROM p JOIN retrod.session_requests q ON q.session_uuid = p.session_uuid AND q.db_role = %(member)s
    GROUP BY GROUPING SETS ((p.period, q.bucket, q.model, q.day, q.fast, q.tier_floor),
                            (p.period, p.grp, q.bucket, q.model, q.day, q.fast, q.tier_floor))
), models AS (  -- the sessions that used each model (for a split by model)
    SELECT p.period, q.model, count(DISTINCT p.session_uuid) AS sessions
    FROM p JOIN retrod.session_requests q ON q.session_uuid = p.session_uuid AND q.db_role = %(member)s
    WHERE %(by_model)s GROUP BY 1, 2
), verdicts AS (  -- the phases logged in the period's sessions, by verdict
    SELECT p.period, p.grp, GROUPING(p.grp) AS whole, ph.verdict, count(*) AS phases
    FROM p
    JOIN public.cc_sessions u ON u.session_uuid = p.session_uuid
                              AND coalesce(to_jsonb(u) ->> 'db_role', %(member)s) = %(member)s
    JOIN public.cc_session_phases ph ON ph.session_id = u.id
    GROUP BY GROUPING SETS ((p.period, ph.verdict), (p.period, p.grp, ph.verdict))
), figures AS (
    SELECT p.period, p.grp, GROUPING(p.grp) AS whole, min(p.project_path) AS project_path,
           count(*) AS sessions,
           coalesce(sum(p.wall_us), 0)::bigint AS wall_us, coalesce(sum(p.claude_us), 0)::bigint AS claude_us,
           coalesce(sum(p.tool_us), 0)::bigint AS tool_us, coalesce(sum(p.human_us), 0)::bigint AS human_us,
           coalesce(sum(a.away_us), 0)::bigint AS away_us,
           coalesce(sum(p.tool_result_bytes), 0)::bigint AS tool_result_bytes,
           coalesce(sum(c.productive), 0)::bigint AS productive,
           coalesce(sum(c.sibling_error), 0)::bigint AS sibling_error,
           coalesce(sum(c.error_retry), 0)::bigint AS error_retry,
           coalesce(sum(c.persisted_output_read), 0)::bigint AS persisted_output_read,
           coalesce(sum(c.post_write_read), 0)::bigint AS post_write_read,
           coalesce(sum(c.duplicate), 0)::bigint AS duplicate, coalesce(sum(c.re_read), 0)::bigint AS re_read
    FROM p LEFT JOIN calls c USING (session_uuid) LEFT JOIN away a USING (session_uuid)
    GROUP BY GROUPING SETS ((p.period), (p.period, p.grp))
), tokens_json AS (
    SELECT coalesce(period, 'infinity') AS k_period, coalesce(grp, '') AS k_grp, whole,
           json_agg(json_build_object(
               'bucket', bucket, 'model', model, 'day', CASE WHEN day = 'infinity' THEN NULL ELSE day END,
               'fast', fast, 'tier_floor', tier_floor, 'requests', requests, 'parts', parts, 'input', input,
               'output', output, 'cache_read', cache_read, 'cache_create', cache_create,
               'cache_create_5m', cache_create_5m, 'cache_create_1h', cache_create_1h)) AS price_groups
    FROM tokens GROUP BY 1, 2, 3
), models_json AS (
    SELECT coalesce(period, 'infinity') AS k_period, json_object_agg(model, sessions) AS model_sessions
    FROM models GROUP BY 1
), verdicts_json AS (
    SELECT coalesce(period, 'infinity') AS k_period, coalesce(grp, '') AS k_grp, whole,
           json_object_agg(verdict, phases) AS verdicts
    FROM verdicts GROUP BY 1, 2, 3
)
SELECT f.*, coalesce(t.price_groups, '[]') AS price_groups,
       coalesce(CASE WHEN f.whole = 1 THEN m.model_sessions END, '{}') AS model_sessions,
       coalesce(v.verdicts, '{}') AS verdicts
FROM figures f
LEFT JOIN tokens_json t ON t.k_period = coalesce(f.period, 'infinity') AND t.k_grp = coalesce(f.grp, '')
                       AND t.whole = f.whole
LEFT JOIN models_json m ON m.k_period = coalesce(f.period, 'infinity')
LEFT JOIN verdicts_json v ON v.k_period = coalesce(f.period, 'infinity') AND v.k_grp = coalesce(f.grp, '')
                         AND v.whole = f.whole
WHERE f.whole = 1 OR %(by_project)s
ORDER BY f.period NULLS LAST, f.whole DESC, f.grp;
