-- `retrod ui`, the web dashboard (issue 23): its session list, a session's timeline, the live
-- page. Read-only, from the rollups: no statement here scans requests, events or calls.

-- name: ui_price_keys
-- The price groups every session stored holds (session_requests, migration 0018): the list and
-- the timeline price them (report/rates.py). (The day as text: 'infinity', requests without a
-- timestamp, is no Python date.)
SELECT DISTINCT model, day::text AS day, fast, tier_floor FROM retrod.session_requests;

-- name: ui_working_folders
-- Every folder Claude Code ran a stored main transcript in: the names the list's short names are
-- made distinct among (data.short_names; a few more than the projects' when a session's folder
-- moved, which can only lengthen a name), without grouping the files by session.
SELECT DISTINCT cwd FROM retrod.files WHERE kind = 'main' AND cwd IS NOT NULL;

-- name: ui_models
-- The list's choices: the models there are (the projects: tracking.sql's known_projects).
SELECT DISTINCT model FROM retrod.session_requests WHERE model <> '' AND parts > 0 ORDER BY 1;

-- name: ui_machines
-- The machines (host ids, accounting.md §4) transcripts are stored under.
SELECT DISTINCT host_id FROM retrod.files
WHERE kind IN ('main', 'subagent', 'agent_root') AND session_uuid IS NOT NULL ORDER BY 1;

-- name: ui_rates_per_token
-- A fragment (`-- include: ui_rates_per_token`): the rates given (`rates`: report/rates.py's
-- spans of days with one price per model, fast and tier; null: no price known), typed by
-- retrod.typed_rates (migration 0037), in USD per token, part and web search, in doubles.
SELECT model, fast, tier_floor, day_from, day_to, input::float8 / 1e6 AS input, output::float8 / 1e6 AS output,
       cache_read::float8 / 1e6 AS cache_read, cache_create_5m::float8 / 1e6 AS cache_5m,
       cache_create_1h::float8 / 1e6 AS cache_1h, per_part::float8 AS part, web_search::float8 AS search
FROM retrod.typed_rates(%(rates)s::json)

-- name: ui_group_usd
-- A fragment (`-- include: ui_group_usd`): the cost in doubles of a price group `g` (a row of
-- session_requests or request_minutes) at its rates `r` (ui_rates_per_token), as prices.py's
-- `_cost` prices it: the writes priced at 1h (migration 0036: a part's 1h writes when its 5m and
-- 1h writes add up to its cache writes) at the 1h rate, the rest of them at the 5m rate.
g.input_tokens * r.input + g.output_tokens * r.output + g.cache_read_tokens * r.cache_read
+ g.priced_1h_tokens * r.cache_1h + (g.cache_create_tokens - g.priced_1h_tokens) * r.cache_5m
+ g.parts * r.part + g.web_searches * coalesce(r.search, 0)

-- name: ui_sessions
-- Every session (one per member, §3) with its figures, filtered, sorted and paged, with how many
-- match (`total`): one row each from session_figures (migration 0019). Start and end are its main
-- transcripts' first event and high-water mark, as `retrod sessions` reads them (for a session
-- with requests and no such event, its requests' span, as the report dates it: two index lookups,
-- for those few). Sorted by cost, each session's price groups (session_requests) are summed at the rates
-- given (`rates`: report/rates.py's spans of days with one price per model, fast and tier, USD per
-- million tokens of each kind, per part and per web search; null: no price known),
-- in doubles: the page's own rows are priced again exactly, as the report prices them (ui/data.py,
-- from report.sql's sessions_price_groups). Sorted by cache waste, the misses kept at commit
-- (migration 0031) are priced the same way, each in the tier of its size by its member's stored
-- thresholds (the page's rows: exactly, as their reports). A group with no tokens and no web
-- searches costs nothing, priced or not, as in the report; web searches without a web-search price
-- are unpriced, the group's tokens priced;
-- a session's cost is null only when something could not be priced and nothing could.
-- `sessions`: only these (the live page), else every one. `projects`: these projects' sessions
-- (their names, resolve.match_project: a session's working folder, else its Claude Code folder
-- name), narrowed first by their folders' names (`slugs`: session_figures holds no working folder).
-- The sort handles narrow rows (a session's key and the figure it is ordered by); what the page
-- shows is looked up for its rows
-- alone, after the limit.
WITH rates AS MATERIALIZED (  -- read once
    -- include: ui_rates_per_token
), cost AS (  -- only when sorting by it
    SELECT g.session_uuid, g.db_role,
           sum(
               -- include: ui_group_usd
           ) FILTER (WHERE used AND r.input IS NOT NULL) AS usd,
           coalesce(bool_or(r.input IS NOT NULL AND (tokens OR r.search IS NOT NULL)) FILTER (WHERE used), false)
               AS priced_any,
           coalesce(bool_or(r.input IS NULL OR g.web_searches > 0 AND r.search IS NULL) FILTER (WHERE used), false)
               AS unpriced_any,
           bool_or(r.model IS NULL) AS unrated  -- a group the rates given do not cover
    FROM (SELECT *, input_tokens + output_tokens + cache_read_tokens + cache_create_tokens > 0 AS tokens,
                 input_tokens + output_tokens + cache_read_tokens + cache_create_tokens + web_searches > 0 AS used
          FROM retrod.session_requests
          WHERE %(sort)s = 'cost' AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[]))) g
    LEFT JOIN rates r ON (r.model, r.fast, r.tier_floor) = (g.model, g.fast, g.tier_floor)
                     AND g.day BETWEEN r.day_from AND r.day_to
    GROUP BY g.session_uuid, g.db_role
), waste AS (  -- only when sorting by it: accounting.md §2.8's waste, the misses (migration 0031) but
    -- compactions', each at (5m write − read) for its 5m tokens and (1h write − read) for its 1h ones
    SELECT c.session_uuid, c.db_role,
           sum((c.rewritten - c.rewritten_1h) * (r.cache_5m - r.cache_read)
               + c.rewritten_1h * (r.cache_1h - r.cache_read)) AS usd,
           bool_or(r.model IS NULL) AS unrated  -- (as cost's: a miss of a group the rates do not cover)
    FROM retrod.cache_misses c
    LEFT JOIN rates r ON (r.model, r.fast) = (c.model, c.fast)
                     AND r.tier_floor = retrod.tier_floor(c.size, (SELECT t.thresholds FROM retrod.price_tiers t
                                                                  WHERE t.db_role = c.db_role))
                     AND (c.ts AT TIME ZONE 'UTC')::date BETWEEN r.day_from AND r.day_to
    WHERE %(sort)s = 'cache' AND c.cause <> 'compaction'
      AND (%(sessions)s::text[] IS NULL OR c.session_uuid = ANY(%(sessions)s::text[]))
    GROUP BY c.session_uuid, c.db_role
), u AS (
    SELECT u.id, u.session_uuid, coalesce(to_jsonb(u) ->> 'db_role', current_user) AS db_role, u.description
    FROM public.cc_sessions u
    WHERE %(sessions)s::text[] IS NULL OR u.session_uuid = ANY(%(sessions)s::text[])
), matching AS (  -- narrow rows: what filters and orders, no more (they go through the sort)
    SELECT s.session_uuid, s.db_role, t.first_us,
           CASE %(sort)s WHEN 'start' THEN t.first_us::float8
                         WHEN 'cost' THEN CASE WHEN c.session_uuid IS NULL THEN 0 ELSE c.usd END  -- (no tokens: 0)
                         WHEN 'tokens' THEN (s.input_tokens + s.output_tokens + s.cache_read_tokens
                                             + s.cache_create_tokens)::float8
                         WHEN 'wall' THEN coalesce(s.last_us - s.first_us, 0)::float8
                         WHEN 'efficiency' THEN s.productive::float8 / nullif(s.calls, 0)
                         WHEN 'cache' THEN coalesce(w.usd, 0) END AS sort_key,  -- (no misses: 0)
           coalesce(c.unrated, false) OR coalesce(w.unrated, false) AS unrated
    FROM retrod.session_figures s
    CROSS JOIN LATERAL (SELECT s.first_us) t  -- the session's start (accounting.md §2.3; migration 0022)
    LEFT JOIN (SELECT session_uuid, db_role, unrated,
                      CASE WHEN unpriced_any AND NOT priced_any THEN NULL ELSE coalesce(usd, 0) END AS usd
               FROM cost) c ON c.session_uuid = s.session_uuid AND c.db_role = s.db_role
    LEFT JOIN waste w ON w.session_uuid = s.session_uuid AND w.db_role = s.db_role
    WHERE s.transcripts > 0
      AND (%(sessions)s::text[] IS NULL OR s.session_uuid = ANY(%(sessions)s::text[]))
      AND (%(slugs)s::text[] IS NULL OR s.project_slug = ANY(%(slugs)s::text[]) AND coalesce(
          (SELECT (array_agg(f.cwd ORDER BY f.slug, f.path)
                       FILTER (WHERE f.kind = 'main' AND f.cwd IS NOT NULL))[1]
           FROM retrod.files f WHERE f.session_uuid = s.session_uuid AND f.db_role = s.db_role),
          s.project_slug) = ANY(%(projects)s::text[]))
      AND (%(member)s::text IS NULL OR s.db_role = %(member)s::text)
      AND (%(machine)s::text IS NULL OR EXISTS (  -- a transcript of it on that machine (accounting.md §4)
          SELECT FROM retrod.files f
          WHERE f.session_uuid = s.session_uuid AND f.db_role = s.db_role AND f.host_id = %(machine)s::text
            AND f.kind IN ('main', 'subagent', 'agent_root')))
      AND (%(model)s::text IS NULL OR EXISTS (
          SELECT FROM retrod.session_requests g
          WHERE g.session_uuid = s.session_uuid AND g.db_role = s.db_role AND g.model = %(model)s::text
            AND g.parts > 0))
      AND (%(search)s::text IS NULL OR s.session_uuid LIKE %(prefix)s::text OR s.project_slug ILIKE %(search)s::text
           OR EXISTS (SELECT FROM u WHERE u.session_uuid = s.session_uuid AND u.db_role = s.db_role
                                      AND u.description ILIKE %(search)s::text))
      AND (%(since)s::timestamptz IS NULL OR t.first_us >= retrod.ts_to_us(%(since)s::timestamptz))
      AND (%(until)s::timestamptz IS NULL OR t.first_us < retrod.ts_to_us(%(until)s::timestamptz))
), page AS (
    -- `stale_rates`: a group stored since the rates were read (a new day, a new model): read again
    SELECT matching.*, count(*) OVER () AS total, bool_or(unrated) OVER () AS stale_rates
    FROM matching
    ORDER BY CASE WHEN %(desc)s THEN sort_key END DESC NULLS LAST,
             CASE WHEN NOT %(desc)s THEN sort_key END ASC NULLS LAST, first_us DESC NULLS LAST,
             session_uuid, db_role
    LIMIT %(limit)s OFFSET %(offset)s
)
SELECT s.session_uuid AS uuid, s.db_role AS member, s.project_slug, page.total, page.stale_rates,
       retrod.us_to_ts(page.first_us) AS started_at,
       retrod.us_to_ts(s.last_us) AS ended_at,
       round(coalesce(s.last_us - s.first_us, 0) / 1e6, 3)::float AS wall_s,
       s.requests, s.input_tokens AS input, s.output_tokens AS output, s.cache_read_tokens AS cache_read,
       s.cache_create_tokens AS cache_create,
       s.input_tokens + s.output_tokens + s.cache_read_tokens + s.cache_create_tokens AS total_tokens,
       s.calls AS tool_calls, s.productive::float / nullif(s.calls, 0) AS efficiency,
       u.id AS user_session_id, u.description,
       (SELECT (array_agg(f.cwd ORDER BY f.slug, f.path)
                FILTER (WHERE f.kind = 'main' AND f.cwd IS NOT NULL))[1]
        FROM retrod.files f WHERE f.session_uuid = s.session_uuid AND f.db_role = s.db_role) AS project_path,
       (SELECT count(*) FROM public.cc_session_phases ph WHERE ph.session_id = u.id) AS phases
FROM page
JOIN retrod.session_figures s ON s.session_uuid = page.session_uuid AND s.db_role = page.db_role
LEFT JOIN u ON u.session_uuid = s.session_uuid AND u.db_role = s.db_role
ORDER BY CASE WHEN %(desc)s THEN page.sort_key END DESC NULLS LAST,
         CASE WHEN NOT %(desc)s THEN page.sort_key END ASC NULLS LAST, page.first_us DESC NULLS LAST,
         page.session_uuid, page.db_role;

-- name: ui_active_sessions
-- Sessions with transcript time in the last hour (as `retrod status` counts them), the most
-- recent first, at most `limit`: the live page's first rows. Not later than a few minutes from
-- now: a line stamped in the future is a wrong clock, not activity.
SELECT session_uuid FROM (
    SELECT session_uuid, minute FROM retrod.event_minutes
    WHERE minute >= date_trunc('minute', now() - interval '1 hour') AND minute < now() + interval '5 minutes'
    UNION ALL
    SELECT session_uuid, minute FROM retrod.request_minutes
    WHERE minute >= date_trunc('minute', now() - interval '1 hour') AND minute < now() + interval '5 minutes'
) m
GROUP BY session_uuid ORDER BY max(minute) DESC, session_uuid LIMIT %(limit)s;

-- name: ui_timeline_minutes
-- A session's timeline: per minute, its requests and tokens (all agents; the compaction agents'
-- output apart), and their cost: each price group at the rates given (`rates`, as ui_sessions
-- reads them; report/rates.py), in doubles. `unpriced`: tokens or web searches no price knows; `unrated`: a group
-- the rates given do not cover (read them again).
WITH rates AS MATERIALIZED (
    -- include: ui_rates_per_token
)
SELECT g.minute, sum(g.requests)::bigint AS requests, sum(g.input_tokens)::bigint AS input,
       sum(g.output_tokens)::bigint AS output, sum(g.cache_read_tokens)::bigint AS cache_read,
       sum(g.cache_create_tokens)::bigint AS cache_create,
       coalesce(sum(g.output_tokens) FILTER (WHERE starts_with(g.agent, 'acompact')), 0)::bigint AS compaction_output,
       coalesce(sum(
                    -- include: ui_group_usd
                ) FILTER (WHERE g.used AND r.input IS NOT NULL), 0) AS usd,
       coalesce(bool_or(g.used AND (r.input IS NULL OR g.web_searches > 0 AND r.search IS NULL)), false) AS unpriced,
       coalesce(bool_or(r.model IS NULL), false) AS unrated
FROM (SELECT *, input_tokens + output_tokens + cache_read_tokens + cache_create_tokens + web_searches > 0 AS used
      FROM retrod.request_minutes
      WHERE session_uuid = %(session)s AND db_role = %(member)s AND minute <> 'infinity') g
LEFT JOIN rates r ON (r.model, r.fast, r.tier_floor) = (g.model, g.fast, g.tier_floor)
                 AND (g.minute AT TIME ZONE 'UTC')::date BETWEEN r.day_from AND r.day_to
GROUP BY g.minute
ORDER BY g.minute;

-- name: ui_compactions
-- When each counted compaction happened: a compact_boundary line has no timestamp of its own
-- (migration 0014), so the first timestamped line after it in its file tells.
SELECT (SELECT n.ts FROM retrod.events n
        WHERE n.file_id = e.file_id AND n."offset" > e."offset" AND n.ts IS NOT NULL
        ORDER BY n."offset" LIMIT 1) AS at
FROM retrod.events e
WHERE e.session_uuid = %(session)s AND e.db_role = %(member)s AND e.ts IS NULL AND e.compaction AND e.counted
ORDER BY 1 NULLS LAST;

-- name: ui_timeline_waste
-- A session's tool calls flagged by a waste signal (accounting.md §2.6), per minute: the timeline marks
-- where waste happened.
SELECT minute, sum(sibling_error + error_retry + persisted_output_read + post_write_read + duplicate
                   + re_read)::bigint AS flagged
FROM retrod.call_minutes
WHERE session_uuid = %(session)s AND db_role = %(member)s AND minute <> 'infinity'
GROUP BY minute HAVING sum(sibling_error + error_retry + persisted_output_read + post_write_read + duplicate
                           + re_read) > 0
ORDER BY minute;

-- name: ui_sessions_cache_misses
-- The prompt-cache misses (accounting.md §2.8, migration 0031) of these sessions (each with its member),
-- as session_cache_misses reads one session's: the list prices each page's rows' waste as their
-- reports do.
SELECT c.session_uuid, c.db_role, c.ts, c.agent, c.cause, c.reason, c.model, c.fast, c.size, c.rewritten,
       c.rewritten_1h, c.pause_us, c.prefix_before
FROM unnest(%(sessions)s::text[], %(members)s::text[]) AS k(session_uuid, db_role)
JOIN retrod.cache_misses c ON c.session_uuid = k.session_uuid AND c.db_role = k.db_role;
