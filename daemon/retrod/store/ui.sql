-- `retrod ui`, the web dashboard (issue 23): its session list, a session's timeline, the live
-- page. Read-only, from the rollups: no statement here scans requests, events or calls.

-- The price groups the stored sessions hold (session_prices, migration 0019): the list prices
-- each one once (report/prices.py), then sums them per session below.
-- name: ui_price_keys
-- (day as text: 'infinity', requests without a timestamp, is no Python date)
SELECT DISTINCT model, day::text AS day, fast, tier_floor FROM retrod.session_prices;

-- The list's choices: the projects and models there are.
-- name: ui_projects
SELECT DISTINCT coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug
FROM retrod.files WHERE kind IN ('main', 'subagent', 'agent_root') AND session_uuid IS NOT NULL
GROUP BY session_uuid, db_role ORDER BY 1;

-- name: ui_models
SELECT DISTINCT model FROM retrod.session_prices WHERE parts > 0 ORDER BY 1;

-- Every session (one per member, §3) with its figures, filtered, sorted and paged, with how many
-- match (`total`). Start and end from the main transcripts' fold state, as `retrod sessions`;
-- tokens, requests and cost from session_prices, each group priced at the rates given
-- (%(rate_*)s: USD per token of each kind, by model, day, fast and tier, as report/prices.py
-- prices a group; `priced` false: no price known). A group with no tokens costs nothing, priced
-- or not, as in the report. `sessions`: only these (the live page), else every one.
-- name: ui_sessions
WITH rates AS (
    SELECT * FROM unnest(%(rate_model)s::text[], %(rate_day)s::text[]::date[], %(rate_fast)s::bool[],
                         %(rate_tier)s::bigint[], %(rate_priced)s::bool[], %(rate_input)s::numeric[],
                         %(rate_output)s::numeric[], %(rate_cache_read)s::numeric[],
                         %(rate_cache_5m)s::numeric[], %(rate_cache_1h)s::numeric[], %(rate_part)s::numeric[])
        AS r(model, day, fast, tier_floor, priced, input, output, cache_read, cache_5m, cache_1h, part)
), s AS (
    SELECT session_uuid, db_role,
           coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug,
           (array_agg(state ->> 'cwd' ORDER BY slug, path) FILTER (WHERE kind = 'main' AND state ? 'cwd'))[1]
               AS project_path,
           min((state ->> 'first_event_us')::bigint) FILTER (WHERE kind = 'main') AS first_us,
           max((state ->> 'high_water_us')::bigint) FILTER (WHERE kind = 'main') AS last_us
    FROM retrod.files
    WHERE kind IN ('main', 'subagent', 'agent_root') AND session_uuid IS NOT NULL
      AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[]))
    GROUP BY session_uuid, db_role
), p AS (
    SELECT g.session_uuid, g.db_role, sum(g.requests)::bigint AS requests,
           sum(g.input_tokens)::bigint AS input, sum(g.output_tokens)::bigint AS output,
           sum(g.cache_read_tokens)::bigint AS cache_read, sum(g.cache_create_tokens)::bigint AS cache_create,
           sum(CASE WHEN r.priced THEN
                   g.input_tokens * r.input + g.output_tokens * r.output + g.cache_read_tokens * r.cache_read
                   + least(g.cache_create_1h_tokens, g.cache_create_tokens) * r.cache_1h
                   + (g.cache_create_tokens - least(g.cache_create_1h_tokens, g.cache_create_tokens)) * r.cache_5m
                   + g.parts * r.part END)
               FILTER (WHERE g.input_tokens + g.output_tokens + g.cache_read_tokens + g.cache_create_tokens > 0)
               AS usd,
           bool_or(r.priced) FILTER (WHERE g.input_tokens + g.output_tokens + g.cache_read_tokens
                                          + g.cache_create_tokens > 0) AS priced_any,
           -- the models with tokens no price knows (NULL: the transcript named none)
           array_agg(DISTINCT nullif(g.model, '')) FILTER (
               WHERE NOT coalesce(r.priced, false)
                 AND g.input_tokens + g.output_tokens + g.cache_read_tokens + g.cache_create_tokens > 0)
               AS unknown_models,
           array_agg(DISTINCT g.model ORDER BY g.model) FILTER (WHERE g.model <> '' AND g.parts > 0) AS models
    FROM retrod.session_prices g
    LEFT JOIN rates r ON (r.model, r.day, r.fast, r.tier_floor) = (g.model, g.day, g.fast, g.tier_floor)
    WHERE %(sessions)s::text[] IS NULL OR g.session_uuid = ANY(%(sessions)s::text[])
    GROUP BY g.session_uuid, g.db_role
), c AS (
    SELECT session_uuid, db_role,
           sum(productive + sibling_error + error_retry + persisted_output_read + post_write_read + duplicate
               + re_read)::bigint AS calls,
           sum(productive)::bigint AS productive
    FROM retrod.call_agents
    WHERE %(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[])
    GROUP BY session_uuid, db_role
), u AS (
    SELECT u.session_uuid, coalesce(to_jsonb(u) ->> 'db_role', current_user) AS db_role, u.description,
           (SELECT count(*) FROM public.cc_session_phases ph WHERE ph.session_id = u.id) AS phases
    FROM public.cc_sessions u
    WHERE %(sessions)s::text[] IS NULL OR u.session_uuid = ANY(%(sessions)s::text[])
), rows AS (
    SELECT s.session_uuid AS uuid, s.db_role AS member, s.project_slug, s.project_path,
           -- a session without a main transcript (its subagents' files only): its requests' span, as
           -- the report dates it; two index lookups, for those few sessions only
           coalesce(s.first_us, (SELECT retrod.ts_to_us(min(r.ts)) FROM retrod.requests r
                                 WHERE r.session_uuid = s.session_uuid AND r.db_role = s.db_role)) AS first_us,
           coalesce(s.last_us, (SELECT retrod.ts_to_us(max(r.ts)) FROM retrod.requests r
                                WHERE r.session_uuid = s.session_uuid AND r.db_role = s.db_role)) AS last_us,
           round(coalesce(s.last_us - s.first_us, 0) / 1e6, 3)::float AS wall_s,
           coalesce(p.requests, 0) AS requests, coalesce(p.input, 0) AS input, coalesce(p.output, 0) AS output,
           coalesce(p.cache_read, 0) AS cache_read, coalesce(p.cache_create, 0) AS cache_create,
           coalesce(p.input + p.output + p.cache_read + p.cache_create, 0) AS total_tokens,
           -- as the report: null only when something could not be priced and nothing could
           CASE WHEN p.unknown_models IS NOT NULL AND NOT coalesce(p.priced_any, false) THEN NULL
                ELSE coalesce(p.usd, 0) END AS usd,  -- rounded as the report rounds (prices.usd)
           p.unknown_models,
           coalesce(p.models, '{}') AS models,
           coalesce(c.calls, 0) AS tool_calls, c.productive::float / nullif(c.calls, 0) AS efficiency,
           u.description, coalesce(u.phases, 0) AS phases, u.session_uuid IS NOT NULL AS tracked
    FROM s
    LEFT JOIN p ON p.session_uuid = s.session_uuid AND p.db_role = s.db_role
    LEFT JOIN c ON c.session_uuid = s.session_uuid AND c.db_role = s.db_role
    LEFT JOIN u ON u.session_uuid = s.session_uuid AND u.db_role = s.db_role
    WHERE (%(project)s::text IS NULL OR s.project_slug = %(project)s::text)

      AND (%(model)s::text IS NULL OR %(model)s::text = ANY(p.models))
      AND (%(search)s::text IS NULL OR u.description ILIKE %(search)s::text
           OR s.session_uuid LIKE %(prefix)s::text OR s.project_slug ILIKE %(search)s::text)
)
SELECT rows.*, retrod.us_to_ts(first_us) AS started_at, retrod.us_to_ts(last_us) AS ended_at,
       count(*) OVER () AS total
FROM rows
WHERE (%(since)s::timestamptz IS NULL OR first_us >= retrod.ts_to_us(%(since)s::timestamptz))
  AND (%(until)s::timestamptz IS NULL OR first_us < retrod.ts_to_us(%(until)s::timestamptz))
ORDER BY CASE WHEN %(desc)s THEN CASE %(sort)s WHEN 'start' THEN first_us::numeric WHEN 'cost' THEN usd
                                               WHEN 'tokens' THEN total_tokens WHEN 'wall' THEN wall_s::numeric
                                               WHEN 'efficiency' THEN efficiency::numeric END END DESC NULLS LAST,
         CASE WHEN NOT %(desc)s THEN CASE %(sort)s WHEN 'start' THEN first_us::numeric WHEN 'cost' THEN usd
                                                   WHEN 'tokens' THEN total_tokens WHEN 'wall' THEN wall_s::numeric
                                                   WHEN 'efficiency' THEN efficiency::numeric END END ASC NULLS LAST,
         first_us DESC NULLS LAST, uuid, member
LIMIT %(limit)s OFFSET %(offset)s;

-- Sessions with transcript time in the last hour (as `retrod status` counts them): the live
-- page's first rows.
-- name: ui_active_sessions
SELECT DISTINCT session_uuid FROM retrod.event_minutes
WHERE minute >= date_trunc('minute', now() - interval '1 hour') AND minute <> 'infinity'
UNION
SELECT DISTINCT session_uuid FROM retrod.request_minutes
WHERE minute >= date_trunc('minute', now() - interval '1 hour') AND minute <> 'infinity';

-- A session's timeline: per minute, its request parts by price group (all agents; the report's
-- tokens by model, by minute), and the compaction agents' output apart. Priced per group by
-- report/timeline.py as the report prices a group.
-- name: ui_timeline_minutes
SELECT minute, model, fast, tier_floor, sum(requests)::bigint AS requests, sum(parts)::bigint AS parts,
       sum(input_tokens)::bigint AS input, sum(output_tokens)::bigint AS output,
       sum(cache_read_tokens)::bigint AS cache_read, sum(cache_create_tokens)::bigint AS cache_create,
       sum(cache_create_5m_tokens)::bigint AS cache_create_5m, sum(cache_create_1h_tokens)::bigint AS cache_create_1h,
       sum(output_tokens) FILTER (WHERE starts_with(agent, 'acompact'))::bigint AS compaction_output
FROM retrod.request_minutes
WHERE session_uuid = %(session)s AND db_role = %(member)s AND minute <> 'infinity'
GROUP BY minute, model, fast, tier_floor
ORDER BY minute;

-- When each counted compaction happened: a compact_boundary line has no timestamp of its own
-- (migration 0014), so the first timestamped line after it in its file tells.
-- name: ui_compactions
SELECT (SELECT n.ts FROM retrod.events n
        WHERE n.file_id = e.file_id AND n."offset" > e."offset" AND n.ts IS NOT NULL
        ORDER BY n."offset" LIMIT 1) AS at
FROM retrod.events e
WHERE e.session_uuid = %(session)s AND e.db_role = %(member)s AND e.ts IS NULL AND e.compaction AND e.counted
ORDER BY 1 NULLS LAST;

-- A session's tool calls flagged by a waste signal (DESIGN §2.6), per minute: the timeline marks
-- where waste happened.
-- name: ui_timeline_waste
SELECT minute, sum(sibling_error + error_retry + persisted_output_read + post_write_read + duplicate
                   + re_read)::bigint AS flagged
FROM retrod.call_minutes
WHERE session_uuid = %(session)s AND db_role = %(member)s AND minute <> 'infinity'
GROUP BY minute HAVING sum(sibling_error + error_retry + persisted_output_read + post_write_read + duplicate
                           + re_read) > 0
ORDER BY minute;
