-- `retrod trends` and `retrod brief`: many sessions' figures at once, from the per-session
-- rollups (migration 0018), the tool-call rollup by agent and the user's phases. Every figure is a
-- sum of the per-session figures `retrod report` shows, read from rollups those are read from too.
-- `member`: whose rows (accounting.md §3), as in report.sql.

-- name: trends_analyze_rollups
-- After a scan that read a backfill's worth (daemon.py): the statistics of the tables trends and
-- the web UI's list plan their sums by, gathered at once rather than at autovacuum's next round
-- (a minute or more away, after a backfill that took less). Planned without them, the sum of
-- every session's figures nests a full read of the calls and price groups in each session's:
-- ~90 s over 10,000 sessions instead of ~0.2 s. Only the tables this role owns (a team's member
-- owns none: the owner's autovacuum gathers them).
DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['files', 'session_times', 'session_requests', 'call_agents', 'session_figures',
                             'cache_misses', 'trend_sessions'] LOOP
        IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = format('retrod.%I', t)::regclass),
                       'USAGE') THEN
            EXECUTE format('ANALYZE retrod.%I', t);
        END IF;
    END LOOP;
END $$;

-- name: trends_price_keys
-- What the member's tokens' prices depend on (accounting.md §2.7): trends.py looks each key's prices up
-- (report/prices.py) and hands them to trend_figures, which prices the groups where they are.
SELECT DISTINCT model, day::text AS day, fast, tier_floor  -- (day 'infinity': no timestamp)
FROM retrod.session_requests
WHERE db_role = %(member)s AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[]));

-- name: trends_marks
-- What trends' kept periods are checked against (trend_periods.py, migration 0034): the database
-- and role reading (with the cluster's start: a database made again gets a new oid), the
-- member's price tiers, whether the user's phase tables tell of their changes, and the member's
-- count of changes per UTC day of the sessions' starts, as JSON ({"2025-11-03": 4, "infinity": 1}).
SELECT (SELECT oid FROM pg_database WHERE datname = current_database()) AS database,
       pg_postmaster_start_time() AS started, current_user AS reader,
       (SELECT thresholds FROM retrod.price_tiers WHERE db_role = %(member)s) AS thresholds,
       (SELECT count(*) = 5 FROM pg_trigger
        WHERE tgrelid IN ('public.cc_sessions'::regclass, 'public.cc_session_phases'::regclass)
          AND tgname IN ('cc_session_phases_trend_inserted', 'cc_session_phases_trend_updated',
                         'cc_session_phases_trend_deleted', 'cc_sessions_trend_updated', 'cc_sessions_trend_deleted')
          AND tgenabled <> 'D') AS phases_marked,
       (SELECT coalesce(json_object_agg(day, changes), '{}') FROM retrod.trend_days
        WHERE db_role = %(member)s)::text AS days;

-- name: trends_changed_span
-- The periods (of `by`, cut in `tz`) that overlap these UTC days (`days`, ISO text; 'infinity':
-- the undated sessions): the first and the last (every one between is summed again with them),
-- and the span of starts trend_figures sums for them, a day wider on each side than any period
-- there is cut at (trend_periods.py keeps only the periods from first to last of what it sums).
WITH d AS (
    SELECT x::date AS day FROM unnest(%(days)s::text[]) x
), k AS (  -- each day's first and last microsecond's periods
    SELECT date_trunc(%(by)s, (d.day::timestamp AT TIME ZONE 'UTC') AT TIME ZONE %(tz)s) AS first,
           date_trunc(%(by)s, ((d.day + 1)::timestamp AT TIME ZONE 'UTC' - interval '1 microsecond')
                              AT TIME ZONE %(tz)s) AS last
    FROM d WHERE d.day <> 'infinity'
)
SELECT min(k.first)::date AS first_period, max(k.last)::date AS last_period,
       (min(k.first) AT TIME ZONE 'UTC') - interval '2 days' AS started_from,
       ((max(k.last) + ('1 ' || %(by)s)::interval) AT TIME ZONE 'UTC') + interval '2 days' AS started_to,
       EXISTS (SELECT FROM d WHERE d.day = 'infinity') AS undated
FROM k;

-- name: trends_figures
-- One row per period, `grp` and `machine` (trends.py adds a period's rows up): the sums of the
-- figures of the sessions that started in it. A session belongs wholly to the period its start
-- falls in (accounting.md §2.3: its first counted event, main or subagent timeline; the report's
-- started_at), periods cut by date_trunc(`by`) in the time zone `tz` (weeks start on Monday). period NULL: no timestamp at all. grp: the project (`by_project`: its working folder,
-- else its Claude Code folder name; `slug`, `path`: its folder name and working folder), the
-- session (`by_session`), else NULL. Filters: `projects` (the projects' names,
-- resolve.match_project) with `slugs` (their Claude Code folders), `since` (started at or after),
-- `sessions` (these only), and the span of starts summed (trend_periods.py: the periods whose
-- sessions changed since it last summed them): started in [`started_from`, `started_to`), and
-- the undated sessions when `undated`; `started_from` NULL: every session.
-- machine (accounting.md §4 "Machines"; NULL unless `by_machine`): the host id whose files hold the
-- figure. Requests go by the machine of their attributed record (requests.machine, migration
-- 0023; not known: the session's), time, tool-result bytes and calls by the host of the
-- transcript row that counts (events, tool_uses); the session itself (its count, wall time,
-- phases' verdicts) by the smallest host holding its main transcript, else any of its
-- transcripts. These come from the stored rows, not the per-session rollups, which hold no
-- machine; `machine`: that one's rows only.
-- models: per model, its sessions, requests (parts), tokens by bucket and kind, and cost: each
-- per-session price group priced as a report prices it (prices.py `_cost`, at the rates in
-- `rates`: report/rates.py's spans), `unpriced` when one with tokens has none, or one with web
-- searches no web-search price (its tokens still priced: docs/decisions.md).
-- cache_misses: per model and cause, the prompt-cache misses (accounting.md §2.8) of the sessions, their
-- rewritten tokens and extra cost (migration 0031's rows, kept at commit), by machine the machine
-- of each miss's request.
WITH rates AS (
    SELECT * FROM retrod.typed_rates(%(rates)s::json)  -- (migration 0037)
), c AS MATERIALIZED (  -- the sessions started in the span asked for (none asked: every session)
    SELECT t.session_uuid FROM retrod.session_times t
    WHERE %(started_from)s::timestamptz IS NOT NULL AND t.db_role = %(member)s
      AND t.first_ts >= %(started_from)s::timestamptz AND t.first_ts < %(started_to)s::timestamptz
    UNION ALL  -- and the undated ones, when asked
    SELECT DISTINCT f.session_uuid FROM retrod.files f
    WHERE %(started_from)s::timestamptz IS NOT NULL AND %(undated)s AND f.db_role = %(member)s
      AND f.kind IN ('main', 'subagent', 'agent_root') AND f.session_uuid IS NOT NULL
      AND NOT EXISTS (SELECT FROM retrod.session_times t
                      WHERE t.session_uuid = f.session_uuid AND t.db_role = %(member)s AND t.first_ts IS NOT NULL)
), s AS (  -- the member's sessions with a transcript (as `retrod sessions`), their project and machine
    SELECT session_uuid, coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug,
           -- (each read only when asked: files_member_sessions, the covering index, holds neither)
           CASE WHEN %(by_project)s OR %(projects)s::text[] IS NOT NULL
                THEN (array_agg(cwd ORDER BY slug, path)
                          FILTER (WHERE kind = 'main' AND cwd IS NOT NULL))[1] END AS project_path,
           CASE WHEN %(by_machine)s
                THEN coalesce(min(host_id) FILTER (WHERE kind = 'main'), min(host_id)) END AS machine
    FROM retrod.files
    WHERE db_role = %(member)s AND kind IN ('main', 'subagent', 'agent_root') AND session_uuid IS NOT NULL
      AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[]))
      AND (%(started_from)s::timestamptz IS NULL OR session_uuid = ANY(ARRAY(SELECT session_uuid FROM c)))
    GROUP BY session_uuid
), p AS MATERIALIZED (  -- each session's period and group (k_: NULL as a value a join can match)
    SELECT d.session_uuid, coalesce(date_trunc(%(by)s, d.started_at AT TIME ZONE %(tz)s)::date, 'infinity') AS k_period,
           coalesce(CASE WHEN %(by_project)s THEN coalesce(d.project_path, d.project_slug)
                         WHEN %(by_session)s THEN d.session_uuid END, '') AS k_grp,
           CASE WHEN %(by_machine)s THEN d.machine ELSE '' END AS k_machine,
           d.project_slug, d.project_path, d.claude_us, d.tool_us, d.human_us, d.tool_result_bytes, d.wall
    FROM (
        SELECT s.session_uuid, s.project_slug, s.project_path, s.machine, t.claude_us, t.tool_us, t.human_us,
               t.tool_result_bytes, t.last_ts - t.first_ts AS wall, t.first_ts AS started_at
        FROM s
        LEFT JOIN retrod.session_times t ON t.session_uuid = s.session_uuid AND t.db_role = %(member)s
        WHERE (%(slugs)s::text[] IS NULL OR s.project_slug = ANY(%(slugs)s::text[])
                                          AND coalesce(s.project_path, s.project_slug) = ANY(%(projects)s::text[]))
        OFFSET 0  -- (evaluated once per session: the start is used twice below)
    ) d
    WHERE %(since)s::timestamptz IS NULL OR d.started_at >= %(since)s::timestamptz
), figures AS (  -- each group's sums, straight to its period and group (no per-session step)
    SELECT k_period, k_grp, k_machine, sum(sessions) AS sessions, retrod.interval_us(coalesce(sum(wall), '0')) AS wall_us,
           coalesce(sum(claude_us), 0)::bigint AS claude_us, coalesce(sum(tool_us), 0)::bigint AS tool_us,
           coalesce(sum(human_us), 0)::bigint AS human_us,
           coalesce(sum(tool_result_bytes), 0)::bigint AS tool_result_bytes
    FROM (
        SELECT k_period, k_grp, k_machine, 1 AS sessions, wall, claude_us, tool_us, human_us, tool_result_bytes
        FROM p WHERE NOT %(by_machine)s
        UNION ALL  -- by machine: the session there, its time where its transcripts' counted lines are
        SELECT k_period, k_grp, k_machine, 1, wall, 0, 0, 0, 0 FROM p WHERE %(by_machine)s
        UNION ALL
        SELECT p.k_period, p.k_grp, f.host_id, 0, NULL,
               sum(retrod.interval_us(e.ts - e.prev_ts)) FILTER (WHERE e.kind = 'claude' AND e.ts > e.prev_ts),
               sum(retrod.interval_us(e.ts - e.prev_ts)) FILTER (WHERE e.kind = 'tool' AND e.ts > e.prev_ts),
               sum(retrod.interval_us(e.ts - e.prev_ts)) FILTER (WHERE e.kind = 'human' AND e.ts > e.prev_ts),
               sum(e.tool_result_bytes) FILTER (WHERE e.counted)
        FROM p
        JOIN retrod.events e ON e.session_uuid = p.session_uuid AND e.db_role = %(member)s
        JOIN retrod.files f ON f.id = e.file_id
        WHERE %(by_machine)s  -- (a copy's lines count on the other machine: they hold nothing here)
          AND ((e.kind IS NOT NULL AND e.ts > e.prev_ts) OR (e.counted AND e.tool_result_bytes <> 0))
        GROUP BY 1, 2, 3
    ) x
    GROUP BY 1, 2, 3
), calls AS (
    SELECT p.k_period, p.k_grp, coalesce(c.machine, p.k_machine) AS k_machine, sum(c.productive)::bigint AS productive,
           sum(c.sibling_error)::bigint AS sibling_error, sum(c.error_retry)::bigint AS error_retry,
           sum(c.persisted_output_read)::bigint AS persisted_output_read,
           sum(c.post_write_read)::bigint AS post_write_read, sum(c.duplicate)::bigint AS duplicate,
           sum(c.re_read)::bigint AS re_read
    FROM p JOIN (
        SELECT session_uuid, NULL AS machine, productive, sibling_error, error_retry, persisted_output_read,
               post_write_read, duplicate, re_read
        FROM retrod.call_agents WHERE db_role = %(member)s AND NOT %(by_machine)s
          AND (%(started_from)s::timestamptz IS NULL OR session_uuid = ANY(ARRAY(SELECT session_uuid FROM c)))
        UNION ALL  -- by machine: each counted call where its transcript is (call_agents' sums, by host)
        SELECT u.session_uuid, f.host_id, count(*) FILTER (WHERE u.signal IS NULL),
               count(*) FILTER (WHERE u.signal = 'sibling_error'), count(*) FILTER (WHERE u.signal = 'error_retry'),
               count(*) FILTER (WHERE u.signal = 'persisted_output_read'),
               count(*) FILTER (WHERE u.signal = 'post_write_read'), count(*) FILTER (WHERE u.signal = 'duplicate'),
               count(*) FILTER (WHERE u.signal = 're_read')
        FROM retrod.tool_uses u JOIN retrod.files f ON f.id = u.file_id
        WHERE u.db_role = %(member)s AND u.counted AND %(by_machine)s
        GROUP BY 1, 2
    ) c ON c.session_uuid = p.session_uuid
    GROUP BY 1, 2, 3
), away AS (  -- human gaps longer than the away threshold (report.sql session_away)
    SELECT p.k_period, p.k_grp, coalesce(f.host_id, p.k_machine) AS k_machine, sum(e.gap_us)::bigint AS away_us
    FROM p JOIN retrod.events e ON e.session_uuid = p.session_uuid AND e.kind = 'human' AND e.gap_us > %(away_us)s
                               AND e.db_role = %(member)s
    LEFT JOIN retrod.files f ON %(by_machine)s AND f.id = e.file_id
    GROUP BY 1, 2, 3
), models AS (  -- per model: its sessions, requests (parts), tokens by bucket, and cost
    SELECT k_period, k_grp, k_machine,
           json_agg(json_build_object(
               'model', model, 'sessions', sessions, 'requests', requests, 'parts', parts, 'fast_parts', fast_parts,
               'main', json_build_array(mi, mo, mr, mc), 'subagents', json_build_array(si, so, sr, sc),
               'compaction', json_build_array(ci, co, cr, cc), 'cache_create_5m', c5, 'cache_create_1h', c1,
               'web_searches', ws, 'cost', cost::text, 'unpriced', unpriced)) AS models
    FROM (
        SELECT p.k_period, p.k_grp, coalesce(q.machine, p.k_machine) AS k_machine, q.model,
               count(DISTINCT q.session_uuid) AS sessions,
               sum(q.requests) AS requests, sum(q.parts) AS parts,
               coalesce(sum(q.parts) FILTER (WHERE q.fast), 0) AS fast_parts,
               coalesce(sum(q.input_tokens) FILTER (WHERE q.bucket = 'main'), 0) AS mi,
               coalesce(sum(q.output_tokens) FILTER (WHERE q.bucket = 'main'), 0) AS mo,
               coalesce(sum(q.cache_read_tokens) FILTER (WHERE q.bucket = 'main'), 0) AS mr,
               coalesce(sum(q.cache_create_tokens) FILTER (WHERE q.bucket = 'main'), 0) AS mc,
               coalesce(sum(q.input_tokens) FILTER (WHERE q.bucket = 'subagents'), 0) AS si,
               coalesce(sum(q.output_tokens) FILTER (WHERE q.bucket = 'subagents'), 0) AS so,
               coalesce(sum(q.cache_read_tokens) FILTER (WHERE q.bucket = 'subagents'), 0) AS sr,
               coalesce(sum(q.cache_create_tokens) FILTER (WHERE q.bucket = 'subagents'), 0) AS sc,
               coalesce(sum(q.input_tokens) FILTER (WHERE q.bucket = 'compaction'), 0) AS ci,
               coalesce(sum(q.output_tokens) FILTER (WHERE q.bucket = 'compaction'), 0) AS co,
               coalesce(sum(q.cache_read_tokens) FILTER (WHERE q.bucket = 'compaction'), 0) AS cr,
               coalesce(sum(q.cache_create_tokens) FILTER (WHERE q.bucket = 'compaction'), 0) AS cc,
               sum(q.cache_create_5m_tokens) AS c5, sum(q.cache_create_1h_tokens) AS c1,
               sum(q.web_searches) AS ws,
               -- each per-session price group as a report prices it (prices.py _cost)
               coalesce(sum((q.input_tokens * r.input + q.output_tokens * r.output
                             + q.cache_read_tokens * r.cache_read
                             + q.priced_1h_tokens * r.cache_create_1h
                             + (q.cache_create_tokens - q.priced_1h_tokens) * r.cache_create_5m) / 1000000
                             + q.parts * r.per_part + q.web_searches * coalesce(r.web_search, 0)), 0) AS cost,
               coalesce(bool_or(r.input IS NULL AND (q.input_tokens, q.output_tokens, q.cache_read_tokens,
                                                     q.cache_create_tokens, q.cache_create_5m_tokens,
                                                     q.cache_create_1h_tokens) <> (0, 0, 0, 0, 0, 0)
                                OR q.web_searches > 0 AND r.web_search IS NULL), false)
                   AS unpriced
        FROM p
        JOIN (
            SELECT session_uuid, NULL AS machine, bucket, model, day, fast, tier_floor, requests, parts,
                   input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
                   cache_create_1h_tokens, web_searches, priced_1h_tokens
            FROM retrod.session_requests WHERE db_role = %(member)s AND NOT %(by_machine)s
              AND (%(started_from)s::timestamptz IS NULL OR session_uuid = ANY(ARRAY(SELECT session_uuid FROM c)))
            UNION ALL  -- by machine: the same price groups (migration 0018's), per attributed record's machine
            SELECT r.session_uuid, r.machine, retrod.bucket_of(r.agent), pt.model,
                   (retrod.minute_of(r.ts) AT TIME ZONE 'UTC')::date, r.fast,
                   retrod.tier_floor(pt.input + pt.cache_read + pt.cache_create,
                                     (SELECT thresholds FROM retrod.price_tiers WHERE db_role = %(member)s)),
                   count(*) FILTER (WHERE pt.first), count(*), sum(pt.input), sum(pt.output), sum(pt.cache_read),
                   sum(pt.cache_create), sum(pt.cache_create_5m), sum(pt.cache_create_1h), sum(pt.web_searches),
                   sum(retrod.priced_1h(pt.cache_create, pt.cache_create_5m, pt.cache_create_1h))
            FROM retrod.requests r, retrod.request_parts(r) pt
            WHERE r.db_role = %(member)s AND %(by_machine)s
            GROUP BY 1, 2, 3, 4, 5, 6, 7
        ) q ON q.session_uuid = p.session_uuid
        LEFT JOIN rates r ON r.model = q.model AND r.fast = q.fast AND r.tier_floor = q.tier_floor
                         AND q.day BETWEEN r.day_from AND r.day_to
        GROUP BY 1, 2, 3, 4
    ) m
    GROUP BY 1, 2, 3
), misses AS (  -- accounting.md §2.8's misses (migration 0031's rows), per model and cause, priced as
    -- report/cache.py's miss_extra: the rewritten 1h tokens at (1h write − read), the rest at (5m
    -- write − read), at the rates of their part's model, speed, tier (its size, by the member's
    -- stored thresholds, as the price groups') and UTC day (summed by those first, then priced
    -- once a group, as the models' tokens are); a miss no price knows costs 0
    SELECT k_period, k_grp, k_machine,
           json_agg(json_build_object('model', model, 'cause', cause, 'count', n, 'rewritten', rewritten,
                                      'extra', extra::text)) AS cache_misses
    FROM (
        SELECT g.k_period, g.k_grp, g.k_machine, g.model, g.cause, sum(g.n) AS n, sum(g.rewritten) AS rewritten,
               coalesce(sum((g.r5 * (r.cache_create_5m - r.cache_read) + g.r1 * (r.cache_create_1h - r.cache_read))
                            / 1000000), 0) AS extra
        FROM (
            SELECT p.k_period, p.k_grp, CASE WHEN %(by_machine)s THEN coalesce(
                       (SELECT q.machine FROM retrod.requests q WHERE q.key = c.key AND q.db_role = c.db_role),
                       p.k_machine) ELSE p.k_machine END AS k_machine,
                   c.model, c.cause, c.fast,
                   retrod.tier_floor(c.size, (SELECT thresholds FROM retrod.price_tiers WHERE db_role = %(member)s))
                       AS tier_floor,
                   (c.ts AT TIME ZONE 'UTC')::date AS day, count(*) AS n, sum(c.rewritten) AS rewritten,
                   sum(c.rewritten - c.rewritten_1h) AS r5, sum(c.rewritten_1h) AS r1
            FROM p JOIN retrod.cache_misses c ON c.session_uuid = p.session_uuid AND c.db_role = %(member)s
            GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        ) g
        LEFT JOIN rates r ON r.model = g.model AND r.fast = g.fast AND r.tier_floor = g.tier_floor
                         AND g.day BETWEEN r.day_from AND r.day_to
        GROUP BY 1, 2, 3, 4, 5
    ) x
    GROUP BY 1, 2, 3
), verdicts AS (  -- the phases logged in the sessions, by verdict
    SELECT k_period, k_grp, k_machine, json_object_agg(verdict, phases) AS verdicts
    FROM (SELECT p.k_period, p.k_grp, p.k_machine, ph.verdict, count(*) AS phases
          FROM p
          JOIN public.cc_sessions u ON u.session_uuid = p.session_uuid
                                    -- (p named, never null: tested on the joined rows only, not on
                                    -- every row scanned: a row made JSON is costly)
                                    AND (coalesce(to_jsonb(u) ->> 'db_role', %(member)s) = %(member)s
                                         OR p.session_uuid IS NULL)
          JOIN public.cc_session_phases ph ON ph.session_id = u.id
          GROUP BY 1, 2, 3, 4) v
    GROUP BY 1, 2, 3
), names AS (  -- a project group's folder name and working folder (whatever its machines hold)
    SELECT k_period, k_grp, min(project_slug) AS slug, min(project_path) AS path FROM p GROUP BY 1, 2
), k AS (  -- every group with a figure (by machine, one may hold calls or tokens and no session)
    SELECT k_period, k_grp, k_machine FROM figures
    UNION SELECT k_period, k_grp, k_machine FROM calls
    UNION SELECT k_period, k_grp, k_machine FROM models
)
SELECT nullif(k.k_period, 'infinity') AS period, nullif(k.k_grp, '') AS grp, nullif(k.k_machine, '') AS machine,
       n.slug, n.path,
       coalesce(f.sessions, 0) AS sessions, coalesce(f.wall_us, 0) AS wall_us, coalesce(f.claude_us, 0) AS claude_us,
       coalesce(f.tool_us, 0) AS tool_us, coalesce(f.human_us, 0) AS human_us,
       coalesce(f.tool_result_bytes, 0) AS tool_result_bytes, coalesce(a.away_us, 0) AS away_us,
       coalesce(c.productive, 0) AS productive, coalesce(c.sibling_error, 0) AS sibling_error,
       coalesce(c.error_retry, 0) AS error_retry, coalesce(c.persisted_output_read, 0) AS persisted_output_read,
       coalesce(c.post_write_read, 0) AS post_write_read, coalesce(c.duplicate, 0) AS duplicate,
       coalesce(c.re_read, 0) AS re_read, coalesce(m.models, '[]') AS models, coalesce(v.verdicts, '{}') AS verdicts,
       coalesce(x.cache_misses, '[]') AS cache_misses
FROM k
LEFT JOIN names n USING (k_period, k_grp)
LEFT JOIN figures f USING (k_period, k_grp, k_machine)
LEFT JOIN calls c USING (k_period, k_grp, k_machine)
LEFT JOIN away a USING (k_period, k_grp, k_machine)
LEFT JOIN models m USING (k_period, k_grp, k_machine)
LEFT JOIN verdicts v USING (k_period, k_grp, k_machine)
LEFT JOIN misses x USING (k_period, k_grp, k_machine)
WHERE %(machine)s::text IS NULL OR k.k_machine = %(machine)s::text
ORDER BY k.k_period, k.k_grp, k.k_machine;

-- name: trends_brief_phases
-- The phases of these sessions, newest first, with what was written about them.
SELECT u.session_uuid, p.id, p.task, p.phase, p.verdict, p.started_at, p.ended_at, p.actions_summary,
       p.subagents, p.useful_info, p.lessons_learned, p.notes
FROM public.cc_session_phases p
JOIN public.cc_sessions u ON u.id = p.session_id
WHERE u.session_uuid = ANY(%(sessions)s::text[]) AND coalesce(to_jsonb(u) ->> 'db_role', %(member)s) = %(member)s
ORDER BY p.started_at DESC, p.id DESC;

-- name: trends_brief_waste_examples
-- Per waste signal (accounting.md §2.6), over these sessions: the path (or short input) it hit most often,
-- and how often, as the example the brief names.
SELECT signal, detail, n FROM (
    SELECT signal, coalesce(path, detail) AS detail, count(*) AS n,
           row_number() OVER (PARTITION BY signal ORDER BY count(*) DESC, coalesce(path, detail)) AS rank
    FROM retrod.tool_uses
    WHERE session_uuid = ANY(%(sessions)s::text[]) AND db_role = %(member)s AND counted AND signal IS NOT NULL
    GROUP BY 1, 2
) x
WHERE rank = 1;
