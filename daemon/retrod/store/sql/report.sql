-- Read side: everything `retrod report` shows comes from these precomputed rows.
--
-- %(member)s: the database role whose rows a report reads (accounting.md §3: on a team's database every
-- key includes the member; a reader sees every member's rows and names one). The user's tables
-- have a db_role column only on a team's database (`retrod team` adds it): a row without one is
-- the solo user's, which `coalesce(to_jsonb(row) ->> 'db_role', member)` matches either way.

-- name: report_current_role
SELECT current_user;

-- name: report_session_members
-- The members whose rows name a session: a report reads one of them (model.member_of).
SELECT current_user AS me, ARRAY(
    SELECT db_role FROM retrod.files WHERE session_uuid = %(session)s
    UNION
    SELECT db_role FROM retrod.session_requests WHERE session_uuid = %(session)s  -- (copied history)
    UNION
    SELECT to_jsonb(s) ->> 'db_role' FROM public.cc_sessions s
    WHERE session_uuid = %(session)s AND to_jsonb(s) ? 'db_role'
    ORDER BY 1) AS holders;

-- name: report_find_sessions
-- Sessions with a transcript (meta and tool-results files alone make none), or tracked by the user.
SELECT session_uuid FROM (
    SELECT session_uuid FROM retrod.files
    WHERE kind IN ('main', 'subagent', 'agent_root') AND starts_with(session_uuid, %(prefix)s)
    UNION
    SELECT session_uuid COLLATE "C" FROM public.cc_sessions WHERE starts_with(session_uuid, %(prefix)s)
) s
ORDER BY session_uuid LIMIT 2;

-- name: report_session_files
SELECT
    coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug,
    (array_agg(cwd ORDER BY slug, path) FILTER (WHERE kind = 'main' AND cwd IS NOT NULL))[1]
        AS project_path,  -- the folder Claude Code ran in (the slug is its name, with / and . as -)
    count(*) FILTER (WHERE kind IN ('main', 'subagent', 'agent_root')) AS transcripts,
    count(*) FILTER (WHERE kind IN ('main', 'subagent', 'agent_root') AND missing) AS transcripts_deleted,
    coalesce(sum((state ->> 'bad_lines')::bigint)::bigint, 0) AS bad_lines,
    count(*) FILTER (WHERE kind = 'tool_result') AS persisted_outputs,
    coalesce((sum(size) FILTER (WHERE kind = 'tool_result'))::bigint, 0) AS persisted_bytes
FROM retrod.files WHERE session_uuid = %(session)s AND db_role = %(member)s;

-- name: report_session_compactions
-- accounting.md §2.4: compaction boundaries counted once on the session's timeline (migration 0014).
SELECT count(*) AS compactions FROM retrod.events
WHERE session_uuid = %(session)s AND db_role = %(member)s AND ts IS NULL AND compaction AND counted;

-- name: report_session_tokens
-- The session's figures from its per-session rollups (migration 0018), kept by the triggers
-- that keep the per-minute ones and equal to their sums (tests/test_session_rollups.py): a read
-- of a few rows, whatever the session's length.
SELECT bucket, sum(requests)::bigint AS requests, sum(split_requests)::bigint AS split_requests,
       sum(input_tokens)::bigint AS input, sum(output_tokens)::bigint AS output,
       sum(cache_read_tokens)::bigint AS cache_read, sum(cache_create_tokens)::bigint AS cache_create
FROM retrod.session_requests WHERE session_uuid = %(session)s AND db_role = %(member)s
GROUP BY 1;

-- name: report_session_tokens_by_model
-- The session's tokens by what their price depends on (accounting.md §2.7): each part's model ('' =
-- none named), the day (prices change by date; 'infinity': no timestamp), fast mode and the
-- price tier of the part's own size. Priced at read time (report/prices.py), so an upgraded price
-- table applies at once.
SELECT model, CASE WHEN day = 'infinity' THEN NULL ELSE day END AS day, fast, tier_floor,
       sum(parts)::bigint AS parts, sum(input_tokens)::bigint AS input, sum(output_tokens)::bigint AS output,
       sum(cache_read_tokens)::bigint AS cache_read, sum(cache_create_tokens)::bigint AS cache_create,
       sum(cache_create_5m_tokens)::bigint AS cache_create_5m, sum(cache_create_1h_tokens)::bigint AS cache_create_1h,
       sum(web_searches)::bigint AS web_searches, sum(priced_1h_tokens)::bigint AS priced_1h
FROM retrod.session_requests WHERE session_uuid = %(session)s AND db_role = %(member)s
GROUP BY 1, 2, 3, 4;

-- name: report_session_times
-- Classified time and tool output (the per-minute pieces of the gaps plus their whole-minute
-- spans, summed) and the session's start and end (accounting.md §2.3, §4) as every surface reads them:
-- its counted events', main or subagent timeline (migration 0022); none: undated.
SELECT coalesce(t.claude_us, 0)::bigint AS claude_us, coalesce(t.tool_us, 0)::bigint AS tool_us,
       coalesce(t.human_us, 0)::bigint AS human_us, coalesce(t.tool_result_bytes, 0)::bigint AS tool_result_bytes,
       t.first_ts, t.last_ts
FROM (VALUES (1)) AS one (n)
LEFT JOIN retrod.session_times t ON t.session_uuid = %(session)s AND t.db_role = %(member)s;

-- name: report_session_away
-- The human gaps longer than the away threshold (accounting.md §2.3): `away` as a whole. Few rows,
-- through a partial index: each is at least the threshold long.
SELECT coalesce(sum(gap_us), 0)::bigint AS away_us
FROM retrod.events
WHERE session_uuid = %(session)s AND kind = 'human' AND gap_us > %(away_us)s AND db_role = %(member)s;

-- name: report_session_tool_calls
SELECT coalesce((SELECT tool_calls FROM retrod.session_tool_calls
                  WHERE session_uuid = %(session)s AND db_role = %(member)s), 0) AS tool_calls;

-- name: report_session_subagents
-- A subagent's description and type: its .meta.json, else the Task/Agent tool_use it answers,
-- else the nearest Task/Agent tool_use before it started, else unknown (accounting.md §2.4). The agents
-- listed and the links are the files' rows and those of the main transcripts' lines with a uuid
-- (line_holders, migration 0036) that are no fork copies (§2.1).
SELECT s.agent_id, s.first_ts, s.last_ts,
       retrod.ts_to_us(s.last_ts) - retrod.ts_to_us(s.first_ts) AS span_us,
       m.agent_type AS meta_type, m.description AS meta_description,
       linked.subagent_type AS linked_type, linked.description AS linked_description,
       linked.tool_use_id AS linked_tool_use_id,
       nearest.subagent_type AS nearest_type, nearest.description AS nearest_description,
       nearest.tool_use_id AS nearest_tool_use_id,
       coalesce(t.requests, 0) AS requests, coalesce(t.input, 0) AS input,
       coalesce(t.output, 0) AS output, coalesce(t.cache_read, 0) AS cache_read,
       coalesce(t.cache_create, 0) AS cache_create
FROM (
    SELECT session_uuid, agent_id, min(first_ts) AS first_ts, max(last_ts) AS last_ts
    FROM (
        SELECT session_uuid, agent_id, first_ts, last_ts
        FROM retrod.subagents WHERE session_uuid = %(session)s AND db_role = %(member)s
        UNION ALL  -- the named agents of its holder lines' agent_progress records, but fork copies' (§2.1)
        SELECT session_uuid, agent, ts, ts
        FROM retrod.line_holders
        WHERE session_uuid = %(session)s AND db_role = %(member)s AND (sidechain OR link_agent IS NOT NULL)
          AND sidechain AND line_uuid IS NOT NULL AND NOT copy AND agent NOT IN ('<inline>', '<unnamed>')
          AND NOT starts_with(agent, 'acompact')
    ) a
    GROUP BY session_uuid, agent_id
) s
LEFT JOIN retrod.subagent_meta m ON m.session_uuid = s.session_uuid AND m.agent_id = s.agent_id
                                 AND m.db_role = %(member)s
LEFT JOIN LATERAL (
    SELECT c.tool_use_id, c.subagent_type, c.description
    FROM (
        SELECT l.tool_use_id FROM retrod.subagent_links l
        WHERE l.session_uuid = s.session_uuid AND l.agent_id = s.agent_id AND l.db_role = %(member)s
        UNION ALL  -- its holder lines' links, but fork copies' (§2.1)
        SELECT h.link_tool_use FROM retrod.line_holders h
        WHERE h.session_uuid = s.session_uuid AND h.db_role = %(member)s AND (h.sidechain OR h.link_agent IS NOT NULL)
          AND h.link_agent = s.agent_id AND h.line_uuid IS NOT NULL AND NOT h.copy
    ) l
    JOIN retrod.tool_calls c ON c.session_uuid = s.session_uuid AND c.tool_use_id = l.tool_use_id
                             AND c.db_role = %(member)s
    WHERE c.name IN ('Task', 'Agent')
    ORDER BY c.ts NULLS LAST, c.tool_use_id LIMIT 1
) linked ON true
LEFT JOIN LATERAL (
    SELECT c.tool_use_id, c.subagent_type, c.description
    FROM retrod.tool_calls c
    WHERE c.session_uuid = s.session_uuid AND c.db_role = %(member)s AND c.name IN ('Task', 'Agent')
      AND c.ts <= s.first_ts
    ORDER BY c.ts DESC, c.tool_use_id LIMIT 1
) nearest ON true
LEFT JOIN LATERAL (
    SELECT sum(requests)::bigint AS requests, sum(input_tokens)::bigint AS input,
           sum(output_tokens)::bigint AS output, sum(cache_read_tokens)::bigint AS cache_read,
           sum(cache_create_tokens)::bigint AS cache_create
    FROM retrod.request_minutes r
    WHERE r.session_uuid = s.session_uuid AND r.agent = s.agent_id AND r.db_role = %(member)s
) t ON true
ORDER BY s.first_ts NULLS LAST, s.agent_id;

-- name: report_user_session
SELECT id, description, started_at, ended_at FROM public.cc_sessions s
WHERE session_uuid = %(session)s AND coalesce(to_jsonb(s) ->> 'db_role', %(member)s) = %(member)s;

-- name: report_session_phases
SELECT p.id, p.task, p.phase, p.verdict, p.started_at, p.ended_at,
       p.actions_summary, p.subagents, p.useful_info, p.lessons_learned, p.notes
FROM public.cc_session_phases p JOIN public.cc_sessions s ON s.id = p.session_id
WHERE s.session_uuid = %(session)s AND coalesce(to_jsonb(s) ->> 'db_role', %(member)s) = %(member)s
ORDER BY p.started_at, p.id;

-- name: report_window_bounds
-- A window's bounds, as window_figures and windows_tokens_by_model read them (a fragment, not a
-- statement: `-- include: report_window_bounds` takes it in). Each window of the arguments `ids`, `starts`
-- and `ends`, arrays in step (an end null: open, until now), with the ranges its figures come from: its
-- whole minutes [whole_from, whole_to), of them its whole UTC hours [hours_from, hours_to) (from
-- the hour rollups, migration 0031) and the minutes before and after them (from the per-minute
-- ones); the partial minutes at each edge, [s, edge1_end) and [edge2_start, e), from the raw rows;
-- so the cost does not grow with the session.
SELECT id, s, e, whole_from, whole_to, hours_from,
       greatest(hours_from, retrod.hour_of(whole_to)) AS hours_to,
       CASE WHEN whole_from < whole_to THEN whole_from ELSE e END AS edge1_end,
       CASE WHEN whole_from < whole_to THEN whole_to ELSE e END AS edge2_start
FROM (
    SELECT w.*, least(retrod.hour_of(whole_from + interval '1 hour' - interval '1 microsecond'), whole_to)
                    AS hours_from
    FROM (
        SELECT w.id, w.s, coalesce(w.e, now()) AS e,
               retrod.minute_of(w.s + interval '1 minute' - interval '1 microsecond') AS whole_from,
               retrod.minute_of(coalesce(w.e, now())) AS whole_to
        -- (binary arrays: a plan's thousands of windows, as JSON, cost more to write and read than to sum)
        FROM unnest(%(ids)b::text[], %(starts)b::timestamptz[], %(ends)b::timestamptz[]) AS w(id, s, e)
    ) w
) w

-- name: report_window_price_groups
-- The request parts whose timestamp falls in window `p` (a row of window_bounds), as rows of the
-- rollups' columns — model, minute (an hour row's hour), fast, tier_floor, requests (n), parts
-- (np), tool turns, tokens, web searches, the writes priced at 1h (p1, migration 0036) — to be
-- summed by price group (accounting.md §2.5, §2.7): the minutes around its whole hours, the hours, and
-- the parts of the requests in its edges. (A fragment: `-- include: report_window_price_groups`.)
-- Each range (the minutes before and after the whole hours, the two edges) is a LATERAL of its
-- own, kept apart by OFFSET 0: as one OR of two ranges, or a plain join to them, the planner
-- scanned the session's every minute and event per window (0.2 s for 12 phases of the ~200 MB
-- benchmark session under a prepared statement's plans).
SELECT model, minute, fast, tier_floor, requests AS n, parts AS np, tool_turns AS tools,
       input_tokens AS i, output_tokens AS o, cache_read_tokens AS cr, cache_create_tokens AS cc,
       cache_create_5m_tokens AS c5, cache_create_1h_tokens AS c1, web_searches AS ws, priced_1h_tokens AS p1
FROM (VALUES (p.whole_from, p.hours_from), (p.hours_to, p.whole_to)) AS span(a, b),
     LATERAL (SELECT * FROM retrod.request_minutes
              WHERE session_uuid = %(session)s AND db_role = %(member)s
                AND minute >= span.a AND minute < span.b OFFSET 0) x
WHERE span.a < span.b
UNION ALL
SELECT model, hour, fast, tier_floor, requests, parts, tool_turns, input_tokens, output_tokens,
       cache_read_tokens, cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens, web_searches,
       priced_1h_tokens
FROM retrod.request_hours
WHERE p.hours_from < p.hours_to AND session_uuid = %(session)s AND db_role = %(member)s
  AND hour >= p.hours_from AND hour < p.hours_to
UNION ALL
SELECT q.model, retrod.minute_of(q.ts), q.fast,
       retrod.tier_floor(q.input + q.cache_read + q.cache_create,
                         (SELECT thresholds FROM retrod.price_tiers WHERE db_role = %(member)s)),
       q.first::int, 1, (q.first AND q.has_tool_use)::int, q.input, q.output, q.cache_read,
       q.cache_create, q.cache_create_5m, q.cache_create_1h, q.web_searches,
       retrod.priced_1h(q.cache_create, q.cache_create_5m, q.cache_create_1h)
FROM (VALUES (p.s, p.edge1_end), (p.edge2_start, p.e)) AS edge(a, b),
     LATERAL (SELECT r.ts, r.fast, r.has_tool_use, q.* FROM retrod.requests r, retrod.request_parts(r) q
              WHERE r.session_uuid = %(session)s AND r.db_role = %(member)s
                AND r.ts >= edge.a AND r.ts < edge.b OFFSET 0) q
WHERE edge.a < edge.b

-- name: report_window_figures
-- Per window [s, e) (window_bounds), accounting.md §2.5 (a phase's) and §2.9 (a task's: each of its
-- windows): the requests whose timestamp falls in it (window_price_groups), the overlap of each
-- classified gap with it, the tool output read in it, each from the rollups for its whole minutes
-- and the raw rows for its edges, as window_bounds splits it; summed by `id`: windows given the
-- same id (a task's, which never overlap) come out as one row, their figures added up, their
-- price groups summed in one aggregate (a plan can have thousands of windows: a JSON document of
-- groups per window cost more to build and read than the figures themselves).
-- human_us counts every human gap; away_us is the part of it that is away (see session_away).
-- by_model: the tokens by what their price depends on (as session_tokens_by_model), a JSON array.
-- A range that is empty (most of a short window's: no whole hour, one side of minutes) is not
-- read: each LATERAL is gated by its bounds.
WITH longest AS (  -- no span is longer: bounds the spans that can overlap a window
    SELECT coalesce(max(span_end - span_start), interval '0') AS gap
    FROM retrod.gap_spans WHERE session_uuid = %(session)s AND db_role = %(member)s
), p AS MATERIALIZED (  -- (once: inlined, each use of a bound would work it out again)
    -- include: report_window_bounds
), per_window AS (
    SELECT p.id, g.*, a.*, c.*
    FROM p
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(claude), 0)::bigint AS claude_us, coalesce(sum(tool), 0)::bigint AS tool_us,
               coalesce(sum(human), 0)::bigint AS human_us, coalesce(sum(bytes), 0)::bigint AS tool_result_bytes
        FROM (
            SELECT claude_us AS claude, tool_us AS tool, human_us AS human, tool_result_bytes AS bytes
            FROM (VALUES (p.whole_from, p.hours_from), (p.hours_to, p.whole_to)) AS span(a, b),
                 LATERAL (SELECT * FROM retrod.event_minutes
                          WHERE session_uuid = %(session)s AND db_role = %(member)s
                            AND minute >= span.a AND minute < span.b OFFSET 0) x
            WHERE span.a < span.b
            UNION ALL
            SELECT claude_us, tool_us, human_us, tool_result_bytes FROM retrod.event_hours
            WHERE p.hours_from < p.hours_to AND session_uuid = %(session)s AND db_role = %(member)s
              AND hour >= p.hours_from AND hour < p.hours_to
            UNION ALL
            SELECT CASE WHEN kind = 'claude' THEN us END, CASE WHEN kind = 'tool' THEN us END,
                   CASE WHEN kind = 'human' THEN us END, 0
            FROM (  -- in an edge [a, b), each gap's first and last minutes' pieces: its overlap with
                    -- the edge less that of its whole minutes between (gap_spans counts those)
                SELECT kind, retrod.interval_us(
                           greatest(least(ts, b) - greatest(prev_ts, a), interval '0')
                           - greatest(least(retrod.minute_of(ts - interval '1 microsecond'), b)
                                      - greatest(retrod.minute_of(prev_ts) + interval '1 minute', a), interval '0')) AS us
                FROM (
                    SELECT edge_start AS a, edge_end AS b, retrod.minute_of(edge_start) AS first_minute,
                           retrod.minute_of(edge_end - interval '1 microsecond') + interval '1 minute' AS minutes_end
                    FROM (VALUES (p.s, p.edge1_end), (p.edge2_start, p.e)) AS edge(edge_start, edge_end)
                    WHERE edge_start < edge_end
                ) edge,
                LATERAL (  -- the gaps that end in the edge's minutes, and those that start in them and
                           -- end later (a file's gaps never overlap: one per file); of the first, only
                           -- those that overlap the edge (most end before it), before any arithmetic
                    SELECT kind, prev_ts, ts FROM retrod.events
                    WHERE session_uuid = %(session)s AND db_role = %(member)s AND kind IS NOT NULL
                      AND ts > first_minute AND ts <= minutes_end AND ts > a AND prev_ts < b
                    UNION ALL
                    SELECT kind, prev_ts, ts FROM retrod.events
                    WHERE session_uuid = %(session)s AND db_role = %(member)s AND kind IS NOT NULL
                      AND retrod.crosses_minute(prev_ts, ts)
                      AND prev_ts >= first_minute AND prev_ts < b AND ts > minutes_end
                ) g
            ) pieces WHERE us > 0
            UNION ALL
            SELECT CASE WHEN kind = 'claude' THEN us END, CASE WHEN kind = 'tool' THEN us END,
                   CASE WHEN kind = 'human' THEN us END, 0
            FROM (
                SELECT kind, retrod.interval_us(least(span_end, p.e) - greatest(span_start, p.s)) AS us
                FROM retrod.gap_spans
                WHERE session_uuid = %(session)s AND db_role = %(member)s AND span_start < p.e
                  AND span_start >= p.s - (SELECT gap FROM longest) AND span_end > p.s
            ) spans WHERE us > 0
            UNION ALL
            SELECT 0, 0, 0, tool_result_bytes
            FROM (VALUES (p.s, p.edge1_end), (p.edge2_start, p.e)) AS edge(a, b),
                 LATERAL (SELECT * FROM retrod.events
                          WHERE session_uuid = %(session)s AND db_role = %(member)s AND counted
                            AND ts >= edge.a AND ts < edge.b OFFSET 0) x
            WHERE edge.a < edge.b
        ) x
    ) g
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(retrod.interval_us(least(ts, p.e) - greatest(prev_ts, p.s))), 0)::bigint AS away_us
        FROM retrod.events
        WHERE session_uuid = %(session)s AND db_role = %(member)s AND kind = 'human' AND gap_us > %(away_us)s
          AND ts > p.s AND prev_ts < p.e
    ) a
    CROSS JOIN LATERAL (  -- accounting.md §2.6: the calls whose time falls in the window, productive or by signal
        SELECT coalesce(sum(productive), 0)::bigint AS productive,
               coalesce(sum(sibling_error), 0)::bigint AS sibling_error,
               coalesce(sum(error_retry), 0)::bigint AS error_retry,
               coalesce(sum(persisted_output_read), 0)::bigint AS persisted_output_read,
               coalesce(sum(post_write_read), 0)::bigint AS post_write_read,
               coalesce(sum(duplicate), 0)::bigint AS duplicate, coalesce(sum(re_read), 0)::bigint AS re_read
        FROM (
            SELECT productive, sibling_error, error_retry, persisted_output_read, post_write_read, duplicate, re_read
            FROM (VALUES (p.whole_from, p.hours_from), (p.hours_to, p.whole_to)) AS span(a, b),
                 LATERAL (SELECT * FROM retrod.call_minutes
                          WHERE session_uuid = %(session)s AND db_role = %(member)s
                            AND minute >= span.a AND minute < span.b OFFSET 0) x
            WHERE span.a < span.b
            UNION ALL
            SELECT productive, sibling_error, error_retry, persisted_output_read, post_write_read, duplicate, re_read
            FROM retrod.call_hours
            WHERE p.hours_from < p.hours_to AND session_uuid = %(session)s AND db_role = %(member)s
              AND hour >= p.hours_from AND hour < p.hours_to
            UNION ALL
            SELECT (signal IS NULL)::int, (signal = 'sibling_error')::int, (signal = 'error_retry')::int,
                   (signal = 'persisted_output_read')::int, (signal = 'post_write_read')::int,
                   (signal = 'duplicate')::int, (signal = 're_read')::int
            FROM (VALUES (p.s, p.edge1_end), (p.edge2_start, p.e)) AS edge(a, b),
                 LATERAL (SELECT * FROM retrod.tool_uses
                          WHERE session_uuid = %(session)s AND db_role = %(member)s AND counted
                            AND ts >= edge.a AND ts < edge.b OFFSET 0) x
            WHERE edge.a < edge.b
        ) x
    ) c
), groups AS (  -- request parts by price group; the window's totals are their sums
    SELECT p.id, x.model, CASE WHEN x.minute = 'infinity' THEN NULL ELSE (x.minute AT TIME ZONE 'UTC')::date END AS day,
           x.fast, x.tier_floor, sum(n)::bigint AS n, sum(np)::bigint AS np, sum(tools)::bigint AS tools,
           sum(i)::bigint AS i, sum(o)::bigint AS o, sum(cr)::bigint AS cr, sum(cc)::bigint AS cc,
           sum(c5)::bigint AS c5, sum(c1)::bigint AS c1, sum(ws)::bigint AS ws, sum(p1)::bigint AS p1
    FROM p CROSS JOIN LATERAL (
        -- include: report_window_price_groups
    ) x
    GROUP BY 1, 2, 3, 4, 5
)
SELECT f.*, coalesce(m.by_model, '[]') AS by_model
FROM (
    SELECT id, sum(claude_us)::bigint AS claude_us, sum(tool_us)::bigint AS tool_us,
           sum(human_us)::bigint AS human_us, sum(tool_result_bytes)::bigint AS tool_result_bytes,
           sum(away_us)::bigint AS away_us, sum(productive)::bigint AS productive,
           sum(sibling_error)::bigint AS sibling_error, sum(error_retry)::bigint AS error_retry,
           sum(persisted_output_read)::bigint AS persisted_output_read,
           sum(post_write_read)::bigint AS post_write_read, sum(duplicate)::bigint AS duplicate,
           sum(re_read)::bigint AS re_read
    FROM per_window GROUP BY id
) f
LEFT JOIN (
    SELECT id, json_agg(json_build_object(
               'model', model, 'day', day, 'fast', fast, 'tier_floor', tier_floor, 'requests', n, 'parts', np,
               'tool_turns', tools, 'input', i, 'output', o, 'cache_read', cr, 'cache_create', cc,
               'cache_create_5m', c5, 'cache_create_1h', c1, 'web_searches', ws, 'priced_1h', p1)
               ORDER BY model, day, fast, tier_floor) AS by_model
    FROM groups GROUP BY id
) m USING (id);

-- name: report_windows_tokens_by_model
-- accounting.md §2.9's current task on the status line: the requests of a task's windows (window_bounds'
-- arguments), by price group, as window_figures' by_model sums them, without its
-- times and calls: the cost alone, after every message.
WITH p AS MATERIALIZED (  -- (once: inlined, each use of a bound worked it out again)
    -- include: report_window_bounds
)
SELECT model, CASE WHEN minute = 'infinity' THEN NULL ELSE (minute AT TIME ZONE 'UTC')::date END AS day,
       fast, tier_floor, sum(n)::bigint AS requests, sum(np)::bigint AS parts,
       sum(i)::bigint AS input, sum(o)::bigint AS output, sum(cr)::bigint AS cache_read,
       sum(cc)::bigint AS cache_create, sum(c5)::bigint AS cache_create_5m, sum(c1)::bigint AS cache_create_1h,
       sum(ws)::bigint AS web_searches, sum(p1)::bigint AS priced_1h
FROM p CROSS JOIN LATERAL (
    -- include: report_window_price_groups
) x
GROUP BY 1, 2, 3, 4;

-- name: report_window_marks
-- What the tasks' kept window figures are checked against (report/kept_windows.py, migration
-- 0038): the database and role reading (with the cluster's start: a database made again gets a
-- new oid), the member's price tiers (the edges' tier floors), the count of the tables' emptyings,
-- and the session's marks: its hours (their numbers since the epoch, in order) with their counts
-- of changes, and the sum of its plan calls' counts.
SELECT (SELECT oid FROM pg_database WHERE datname = current_database()) AS database,
       pg_postmaster_start_time() AS started, current_user AS reader,
       (SELECT thresholds FROM retrod.price_tiers WHERE db_role = %(member)s) AS thresholds,
       (SELECT changes FROM retrod.window_marks WHERE session_uuid = '' AND db_role = '' AND hour = -1) AS emptied,
       m.*
FROM (SELECT coalesce(array_agg(hour ORDER BY hour), '{}') AS hours,
             coalesce(array_agg(changes ORDER BY hour), '{}') AS changes,
             coalesce(sum(plan_changes), 0)::bigint AS plan_changes
      FROM retrod.window_marks WHERE session_uuid = %(session)s AND db_role = %(member)s) m;

-- name: report_session_plan_calls
-- accounting.md §2.6: the session's counted calls by agent, productive or by signal, from the rollup.
-- accounting.md §2.9: the session's plan calls (migration 0025) — its counted calls of the main thread
-- that are TodoWrite / TaskCreate / TaskUpdate with a timestamp — in order: time, project
-- folder, line, block. report/plan.py derives the tasks from them.
SELECT t.ts, t.name, t.plan, t.has_result AND (t.failed OR t.refused) AS failed,
       CASE WHEN t.has_result THEN t.task_id END AS task_id
FROM retrod.tool_uses t JOIN retrod.files f ON f.id = t.file_id AND f.db_role = t.db_role
WHERE t.session_uuid = %(session)s AND t.db_role = %(member)s AND t.counted AND t.plan IS NOT NULL
  AND t.agent = '' AND t.ts IS NOT NULL
ORDER BY t.ts, f.slug, t."offset", t.block;

-- name: report_session_tool_use
SELECT agent, productive, sibling_error, error_retry, persisted_output_read, post_write_read, duplicate, re_read
FROM retrod.call_agents WHERE session_uuid = %(session)s AND db_role = %(member)s;

-- name: report_session_tools
-- Per tool: calls, failed calls, result sizes (of the calls with a result) and the time from
-- call to result (of those with both times), from the rollup. A median is the middle value, or
-- the mean of the two middle ones, read in order from an index: half the tool's calls at most.
SELECT t.name, t.calls, t.failed, t.rejected, t.result_bytes, t.result_us,
       (SELECT avg(v)::float FROM (
            SELECT result_bytes AS v FROM retrod.tool_uses
            WHERE session_uuid = t.session_uuid AND name = t.name AND db_role = t.db_role AND counted AND has_result
            ORDER BY result_bytes OFFSET (t.results - 1) / 2 LIMIT 2 - t.results %% 2) m
        WHERE t.results > 0) AS median_result_bytes,
       (SELECT avg(v)::float FROM (
            SELECT result_us AS v FROM retrod.tool_uses
            WHERE session_uuid = t.session_uuid AND name = t.name AND db_role = t.db_role AND counted
              AND result_us IS NOT NULL
            ORDER BY result_us OFFSET (t.timed - 1) / 2 LIMIT 2 - t.timed %% 2) m
        WHERE t.timed > 0) AS median_result_us
FROM retrod.call_tools t WHERE t.session_uuid = %(session)s AND t.db_role = %(member)s
ORDER BY t.calls DESC, t.name;

-- name: report_session_waste_examples
-- The first few calls of each signal, in time order: found in the first minutes the rollup shows
-- holding one (calls without a timestamp come last, in minute 'infinity').
SELECT k.signal, e.ts, e.name, coalesce(e.path, e.detail) AS detail, e.agent
FROM unnest(%(signals)s::text[]) AS k(signal)
CROSS JOIN LATERAL (
    SELECT c.* FROM (
        SELECT minute FROM retrod.call_minutes m
        WHERE m.session_uuid = %(session)s AND m.db_role = %(member)s
          AND CASE k.signal WHEN 'sibling_error' THEN m.sibling_error WHEN 'error_retry' THEN m.error_retry
                  WHEN 'persisted_output_read' THEN m.persisted_output_read
                  WHEN 'post_write_read' THEN m.post_write_read WHEN 'duplicate' THEN m.duplicate
                  WHEN 're_read' THEN m.re_read END > 0
        ORDER BY minute LIMIT %(examples)s
    ) m
    CROSS JOIN LATERAL (
        SELECT ts, name, path, detail, agent, file_path, "offset", block FROM retrod.tool_uses
        WHERE session_uuid = %(session)s AND db_role = %(member)s AND counted AND signal = k.signal
          AND ts >= m.minute AND ts < m.minute + interval '1 minute'
        UNION ALL
        SELECT ts, name, path, detail, agent, file_path, "offset", block FROM retrod.tool_uses
        WHERE m.minute = 'infinity' AND session_uuid = %(session)s AND db_role = %(member)s AND counted
          AND signal = k.signal AND ts IS NULL
    ) c
    ORDER BY c.ts NULLS LAST, c.file_path, c."offset", c.block LIMIT %(examples)s
) e;

-- name: report_sessions_price_groups
-- The price groups of these sessions (`sessions`, `members`: pairs), from session_requests
-- (migration 0018), for report/prices.py to price each session as its report prices it
-- (session_tokens_by_model): the session list, `retrod sessions`, the MCP tool's.
SELECT g.session_uuid, g.db_role, g.model, CASE WHEN g.day = 'infinity' THEN NULL ELSE g.day END AS day, g.fast,
       g.tier_floor, g.parts, g.input_tokens AS input, g.output_tokens AS output, g.cache_read_tokens AS cache_read,
       g.cache_create_tokens AS cache_create, g.cache_create_5m_tokens AS cache_create_5m,
       g.cache_create_1h_tokens AS cache_create_1h, g.web_searches, g.priced_1h_tokens AS priced_1h
FROM unnest(%(sessions)s::text[], %(members)s::text[]) AS k(session_uuid, db_role)
JOIN retrod.session_requests g ON g.session_uuid = k.session_uuid AND g.db_role = k.db_role;

-- name: report_session_cache_misses
-- accounting.md §2.8: the session's prompt-cache misses, found at commit (migration 0031), in time order
-- (at one time: by stream, then in their stream's order), with what pricing them needs.
SELECT ts, agent, cause, reason, model, fast, size, rewritten, rewritten_1h, pause_us, prefix_before
FROM retrod.cache_misses
WHERE session_uuid = %(session)s AND db_role = %(member)s
ORDER BY ts, agent, place_path IS NOT NULL, CASE WHEN place_path IS NULL THEN key END, place_path, place_offset, n;

-- name: report_session_cache_last
-- accounting.md §2.8: the main stream's last element and the lifetime in force after it (the live state).
SELECT last_ts, last_model, last_fast, last_prefix, last_ttl_s FROM retrod.cache_streams
WHERE session_uuid = %(session)s AND agent = '' AND db_role = %(member)s AND last_ts IS NOT NULL;

-- name: report_session_state
-- What a kept report (report/kept_reports.py) is checked against beside the window marks: its
-- files' rows as written (every commit that reads one of them writes its row: its offset, its
-- time; a folder settled or a file gone), its count of changes (migration 0041: any commit
-- changing its rollups, its events or its fork copies, §2.1, undated rows too, whoever wrote),
-- its tracked row (what the report reads of it: the totals it fills are not), its phases (whole
-- rows; any open), and the status Claude Code last gave. Hashed, as only their change is asked.
SELECT (SELECT t.changes FROM retrod.trend_sessions t
        WHERE t.session_uuid = %(session)s AND t.db_role = %(member)s) AS changes,
       (SELECT md5(string_agg(row(f.id, f.updated_at, f.kind, f.slug, f.path, f.cwd, f.missing, f.size,
                                  f."offset")::text, ',' ORDER BY f.id))
        FROM retrod.files f WHERE f.session_uuid = %(session)s AND f.db_role = %(member)s) AS files,
       (SELECT md5(string_agg(row(s.id, s.description, s.started_at, s.ended_at)::text, ',' ORDER BY s.id))
        FROM public.cc_sessions s
        WHERE s.session_uuid = %(session)s AND coalesce(to_jsonb(s) ->> 'db_role', %(member)s) = %(member)s) AS tracked,
       ph.phases, coalesce(ph.phase_open, false) AS phase_open,
       (SELECT md5(st::text) FROM retrod.session_status st
        WHERE st.session_uuid = %(session)s AND st.db_role = %(member)s) AS status
FROM (SELECT md5(string_agg(p::text, ',' ORDER BY p.id)) AS phases, bool_or(p.ended_at IS NULL) AS phase_open
      FROM public.cc_session_phases p JOIN public.cc_sessions s ON s.id = p.session_id
      WHERE s.session_uuid = %(session)s AND coalesce(to_jsonb(s) ->> 'db_role', %(member)s) = %(member)s) ph;
