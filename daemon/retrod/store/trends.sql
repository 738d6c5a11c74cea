-- `retrod trends` and `retrod brief`: many sessions' figures at once, from the per-session
-- rollups (migration 0018), the tool-call rollup by agent and the user's phases. Every figure is a
-- sum of the per-session figures `retrod report` shows, read from rollups those are read from too.
-- `member`: whose rows (DESIGN §3), as in report.sql.

-- What the member's tokens' prices depend on (DESIGN §2.7): trends.py looks each key's prices up
-- (report/prices.py) and hands them to trend_figures, which prices the groups where they are.
-- name: price_keys
SELECT DISTINCT model, day::text AS day, fast, tier_floor  -- (day 'infinity': no timestamp)
FROM retrod.session_requests
WHERE db_role = %(member)s AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[]));

-- One row per period and `grp` (trends.py adds a period's rows up): the sums of the figures of
-- the sessions that started in it. A session belongs wholly to the period its first counted event
-- falls in (the report's started_at; a session with no main-transcript event: its first request's
-- minute), periods cut by date_trunc(`by`) in the time zone `tz` (weeks start on Monday).
-- period NULL: no timestamp at all. grp: the project (`by_project`), the session
-- (`by_session`), else NULL. Filters: `slugs` (a project folder's names) or `pattern`
-- (part of one), `since` (started at or after), `sessions` (these sessions only).
-- models: per model, its sessions, requests (parts), tokens by bucket and kind, and cost: each
-- per-session price group priced as a report prices it (prices.py `_cost`, at the rates in
-- `rates`, USD per million tokens and per part), `unpriced` when one with tokens has none.
-- name: trend_figures
WITH rates AS (
    SELECT * FROM jsonb_to_recordset(%(rates)s::jsonb)
        AS r(model TEXT, fast BOOLEAN, tier_floor BIGINT, day_from DATE, day_to DATE, input NUMERIC, output NUMERIC,
             cache_read NUMERIC, cache_create_5m NUMERIC, cache_create_1h NUMERIC, per_part NUMERIC)
), s AS (  -- the member's sessions with a transcript (as `retrod sessions`), and their project
    SELECT session_uuid, coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug
    FROM retrod.files
    WHERE db_role = %(member)s AND kind IN ('main', 'subagent', 'agent_root') AND session_uuid IS NOT NULL
      AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[]))
    GROUP BY session_uuid
), p AS MATERIALIZED (
    SELECT d.*, date_trunc(%(by)s, d.started_at AT TIME ZONE %(tz)s)::date AS period,
           CASE WHEN %(by_project)s THEN d.project_slug WHEN %(by_session)s THEN d.session_uuid END AS grp
    FROM (
        SELECT s.session_uuid, s.project_slug, t.claude_us, t.tool_us, t.human_us, t.tool_result_bytes,
               retrod.interval_us(t.last_ts - t.first_ts) AS wall_us,
               coalesce(t.first_ts, CASE WHEN r.session_uuid IS NOT NULL THEN (  -- (it has requests)
                   SELECT min(minute) FROM retrod.request_minutes m
                   WHERE m.session_uuid = s.session_uuid AND m.db_role = %(member)s AND m.minute < 'infinity') END)
                   AS started_at
        FROM s
        LEFT JOIN retrod.session_times t ON t.session_uuid = s.session_uuid AND t.db_role = %(member)s
        LEFT JOIN (SELECT DISTINCT session_uuid FROM retrod.session_requests WHERE db_role = %(member)s) r
               ON t.first_ts IS NULL AND r.session_uuid = s.session_uuid
        WHERE (%(slugs)s::text[] IS NULL OR s.project_slug = ANY(%(slugs)s::text[]))
          AND (%(pattern)s::text IS NULL OR s.project_slug ILIKE %(pattern)s::text)
        OFFSET 0  -- (evaluated once per session: the start is used twice below)
    ) d
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
), figures AS (
    SELECT p.period, p.grp, count(*) AS sessions,
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
    GROUP BY 1, 2
), priced AS (  -- each per-session price group with its cost (NULL: not priced)
    SELECT p.period, p.grp, q.session_uuid, q.bucket, q.model, q.fast, q.requests, q.parts, q.input_tokens,
           q.output_tokens, q.cache_read_tokens, q.cache_create_tokens, q.cache_create_5m_tokens,
           q.cache_create_1h_tokens,
           (q.input_tokens * r.input + q.output_tokens * r.output + q.cache_read_tokens * r.cache_read
            + least(q.cache_create_1h_tokens, q.cache_create_tokens) * r.cache_create_1h
            + (q.cache_create_tokens - least(q.cache_create_1h_tokens, q.cache_create_tokens)) * r.cache_create_5m)
           / 1000000 + q.parts * r.per_part AS cost
    FROM p
    JOIN retrod.session_requests q ON q.session_uuid = p.session_uuid AND q.db_role = %(member)s
    LEFT JOIN rates r ON r.model = q.model AND r.fast = q.fast AND r.tier_floor = q.tier_floor
                     AND q.day BETWEEN r.day_from AND r.day_to
), models AS (
    SELECT coalesce(period, 'infinity') AS k_period, coalesce(grp, '') AS k_grp,
           json_agg(json_build_object(
               'model', model, 'sessions', sessions, 'requests', requests, 'parts', parts, 'fast_parts', fast_parts,
               'main', json_build_array(mi, mo, mr, mc), 'subagents', json_build_array(si, so, sr, sc),
               'compaction', json_build_array(ci, co, cr, cc), 'cache_create_5m', c5, 'cache_create_1h', c1,
               'cost', cost::text, 'unpriced', unpriced)) AS models
    FROM (  -- per model: summed per session first, so that its sessions are counted by a hash
        SELECT period, grp, model, count(*) AS sessions, sum(requests) AS requests, sum(parts) AS parts,
               sum(fast_parts) AS fast_parts, sum(mi) AS mi, sum(mo) AS mo, sum(mr) AS mr, sum(mc) AS mc,
               sum(si) AS si, sum(so) AS so, sum(sr) AS sr, sum(sc) AS sc, sum(ci) AS ci, sum(co) AS co,
               sum(cr) AS cr, sum(cc) AS cc, sum(c5) AS c5, sum(c1) AS c1, sum(cost) AS cost,
               bool_or(unpriced) AS unpriced
        FROM (
            SELECT period, grp, session_uuid, model, sum(requests) AS requests, sum(parts) AS parts,
                   coalesce(sum(parts) FILTER (WHERE fast), 0) AS fast_parts,
                   coalesce(sum(input_tokens) FILTER (WHERE bucket = 'main'), 0) AS mi,
                   coalesce(sum(output_tokens) FILTER (WHERE bucket = 'main'), 0) AS mo,
                   coalesce(sum(cache_read_tokens) FILTER (WHERE bucket = 'main'), 0) AS mr,
                   coalesce(sum(cache_create_tokens) FILTER (WHERE bucket = 'main'), 0) AS mc,
                   coalesce(sum(input_tokens) FILTER (WHERE bucket = 'subagents'), 0) AS si,
                   coalesce(sum(output_tokens) FILTER (WHERE bucket = 'subagents'), 0) AS so,
                   coalesce(sum(cache_read_tokens) FILTER (WHERE bucket = 'subagents'), 0) AS sr,
                   coalesce(sum(cache_create_tokens) FILTER (WHERE bucket = 'subagents'), 0) AS sc,
                   coalesce(sum(input_tokens) FILTER (WHERE bucket = 'compaction'), 0) AS ci,
                   coalesce(sum(output_tokens) FILTER (WHERE bucket = 'compaction'), 0) AS co,
                   coalesce(sum(cache_read_tokens) FILTER (WHERE bucket = 'compaction'), 0) AS cr,
                   coalesce(sum(cache_create_tokens) FILTER (WHERE bucket = 'compaction'), 0) AS cc,
                   sum(cache_create_5m_tokens) AS c5, sum(cache_create_1h_tokens) AS c1,
                   coalesce(sum(cost), 0) AS cost,
                   bool_or(cost IS NULL AND (input_tokens, output_tokens, cache_read_tokens, cache_create_tokens,
                                             cache_create_5m_tokens, cache_create_1h_tokens) <> (0, 0, 0, 0, 0, 0))
                       AS unpriced
            FROM priced GROUP BY 1, 2, 3, 4
        ) per_session
        GROUP BY 1, 2, 3
    ) m
    GROUP BY 1, 2
), verdicts AS (  -- the phases logged in the sessions, by verdict
    SELECT coalesce(period, 'infinity') AS k_period, coalesce(grp, '') AS k_grp,
           json_object_agg(verdict, phases) AS verdicts
    FROM (SELECT p.period, p.grp, ph.verdict, count(*) AS phases
          FROM p
          JOIN public.cc_sessions u ON u.session_uuid = p.session_uuid
                                    AND coalesce(to_jsonb(u) ->> 'db_role', %(member)s) = %(member)s
          JOIN public.cc_session_phases ph ON ph.session_id = u.id
          GROUP BY 1, 2, 3) v
    GROUP BY 1, 2
)
SELECT f.*, coalesce(m.models, '[]') AS models, coalesce(v.verdicts, '{}') AS verdicts
FROM figures f
LEFT JOIN models m ON m.k_period = coalesce(f.period, 'infinity') AND m.k_grp = coalesce(f.grp, '')
LEFT JOIN verdicts v ON v.k_period = coalesce(f.period, 'infinity') AND v.k_grp = coalesce(f.grp, '')
ORDER BY f.period NULLS LAST, f.grp;

-- The folder Claude Code ran in for each project folder name (a main transcript's first cwd).
-- name: project_paths
SELECT DISTINCT ON (slug) slug, state ->> 'cwd' AS path
FROM retrod.files
WHERE db_role = %(member)s AND kind = 'main' AND slug = ANY(%(slugs)s::text[]) AND state ? 'cwd'
ORDER BY slug, path;

-- `retrod brief`: the member's sessions of these project folders (`slugs`, or folder names like
-- `pattern`), newest first by the report's started_at, leaving out `exclude` (the session asking)
-- and sessions that never did anything (no timestamp at all).
-- name: brief_sessions
SELECT s.session_uuid, s.project_slug,
       coalesce(t.first_ts, (SELECT min(minute) FROM retrod.request_minutes m
                             WHERE m.session_uuid = s.session_uuid AND m.db_role = %(member)s
                               AND m.minute < 'infinity')) AS started_at,
       u.description
FROM (
    SELECT session_uuid, coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug
    FROM retrod.files
    WHERE db_role = %(member)s AND kind IN ('main', 'subagent', 'agent_root')
      AND session_uuid IN (SELECT session_uuid FROM retrod.files
                           WHERE db_role = %(member)s AND kind IN ('main', 'subagent', 'agent_root')
                             AND (%(slugs)s::text[] IS NULL OR slug = ANY(%(slugs)s::text[]))
                             AND (%(pattern)s::text IS NULL OR slug ILIKE %(pattern)s::text))
    GROUP BY session_uuid
) s
LEFT JOIN retrod.session_times t ON t.session_uuid = s.session_uuid AND t.db_role = %(member)s
LEFT JOIN public.cc_sessions u ON u.session_uuid = s.session_uuid
                              AND coalesce(to_jsonb(u) ->> 'db_role', %(member)s) = %(member)s
WHERE (%(slugs)s::text[] IS NULL OR s.project_slug = ANY(%(slugs)s::text[]))
  AND (%(pattern)s::text IS NULL OR s.project_slug ILIKE %(pattern)s::text)
  AND s.session_uuid IS DISTINCT FROM %(exclude)s::text
ORDER BY 3 DESC NULLS LAST, 1;

-- The phases of these sessions, newest first, with what was written about them.
-- name: brief_phases
SELECT u.session_uuid, p.id, p.task, p.phase, p.verdict, p.started_at, p.ended_at, p.actions_summary,
       p.useful_info, p.lessons_learned, p.notes
FROM public.cc_session_phases p
JOIN public.cc_sessions u ON u.id = p.session_id
WHERE u.session_uuid = ANY(%(sessions)s::text[]) AND coalesce(to_jsonb(u) ->> 'db_role', %(member)s) = %(member)s
ORDER BY p.started_at DESC, p.id DESC;

-- Per waste signal (DESIGN §2.6), over these sessions: the path (or short input) it hit most often,
-- and how often, as the example the brief names.
-- name: brief_waste_examples
SELECT signal, detail, n FROM (
    SELECT signal, coalesce(path, detail) AS detail, count(*) AS n,
           row_number() OVER (PARTITION BY signal ORDER BY count(*) DESC, coalesce(path, detail)) AS rank
    FROM retrod.tool_uses
    WHERE session_uuid = ANY(%(sessions)s::text[]) AND db_role = %(member)s AND counted AND signal IS NOT NULL
    GROUP BY 1, 2
) x
WHERE rank = 1;
