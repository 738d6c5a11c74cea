-- Read side: everything `retrod report` shows comes from these precomputed rows.

-- name: find_sessions
SELECT DISTINCT session_uuid FROM retrod.files
WHERE kind IN ('main', 'subagent', 'agent_root')  -- meta and tool-results files alone make no session
  AND session_uuid IS NOT NULL AND starts_with(session_uuid, %(prefix)s)
ORDER BY session_uuid LIMIT 2;

-- name: session_files
SELECT
    coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug,
    count(*) FILTER (WHERE kind IN ('main', 'subagent', 'agent_root')) AS transcripts,
    count(*) FILTER (WHERE kind IN ('main', 'subagent', 'agent_root') AND missing) AS transcripts_deleted,
    coalesce(sum((state ->> 'bad_lines')::bigint)::bigint, 0) AS bad_lines,
    coalesce((sum((state ->> 'compactions')::bigint) FILTER (WHERE kind = 'main'))::bigint, 0) AS compactions,
    count(*) FILTER (WHERE kind = 'tool_result') AS persisted_outputs,
    coalesce((sum(size) FILTER (WHERE kind = 'tool_result'))::bigint, 0) AS persisted_bytes
FROM retrod.files WHERE session_uuid = %(session)s;

-- name: session_tokens
SELECT CASE WHEN agent = '' THEN 'main'
            WHEN starts_with(agent, 'acompact') THEN 'compaction'
            ELSE 'subagents' END AS bucket,
       count(*) AS requests,
       sum(input_tokens)::bigint AS input, sum(output_tokens)::bigint AS output,
       sum(cache_read_tokens)::bigint AS cache_read, sum(cache_create_tokens)::bigint AS cache_create,
       min(ts) AS first_ts, max(ts) AS last_ts
FROM retrod.requests WHERE session_uuid = %(session)s
GROUP BY 1;

-- name: session_times
SELECT coalesce((sum(gap_us) FILTER (WHERE kind = 'claude'))::bigint, 0) AS claude_us,
       coalesce((sum(gap_us) FILTER (WHERE kind = 'tool'))::bigint, 0) AS tool_us,
       coalesce((sum(gap_us) FILTER (WHERE kind = 'human'))::bigint, 0) AS human_us,
       coalesce(retrod.ts_to_us(max(ts)) - retrod.ts_to_us(min(ts)), 0) AS wall_us,
       min(ts) AS first_ts, max(ts) AS last_ts,
       coalesce(sum(tool_result_bytes)::bigint, 0) AS tool_result_bytes
FROM retrod.events WHERE session_uuid = %(session)s;

-- name: session_tool_calls
SELECT count(DISTINCT tool_use_id) AS tool_calls FROM retrod.tool_calls WHERE session_uuid = %(session)s;

-- A subagent's description and type: its .meta.json, else the Task/Agent tool_use it answers,
-- else the nearest Task/Agent tool_use before it started, else unknown (DESIGN §2.4).
-- name: session_subagents
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
    FROM retrod.subagents WHERE session_uuid = %(session)s GROUP BY session_uuid, agent_id
) s
LEFT JOIN retrod.subagent_meta m USING (session_uuid, agent_id)
LEFT JOIN LATERAL (
    SELECT c.tool_use_id, c.subagent_type, c.description
    FROM retrod.subagent_links l
    JOIN retrod.tool_calls c ON c.session_uuid = l.session_uuid AND c.tool_use_id = l.tool_use_id
    WHERE l.session_uuid = s.session_uuid AND l.agent_id = s.agent_id AND c.name IN ('Task', 'Agent')
    ORDER BY c.ts NULLS LAST, c.tool_use_id LIMIT 1
) linked ON true
LEFT JOIN LATERAL (
    SELECT c.tool_use_id, c.subagent_type, c.description
    FROM retrod.tool_calls c
    WHERE c.session_uuid = s.session_uuid AND c.name IN ('Task', 'Agent') AND c.ts <= s.first_ts
    ORDER BY c.ts DESC, c.tool_use_id LIMIT 1
) nearest ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS requests, sum(input_tokens)::bigint AS input, sum(output_tokens)::bigint AS output,
           sum(cache_read_tokens)::bigint AS cache_read, sum(cache_create_tokens)::bigint AS cache_create
    FROM retrod.requests r WHERE r.session_uuid = s.session_uuid AND r.agent = s.agent_id
) t ON true
ORDER BY s.first_ts NULLS LAST, s.agent_id;

-- name: user_session
SELECT id, description, started_at, ended_at FROM public.cc_sessions WHERE session_uuid = %(session)s;

-- name: session_phases
SELECT p.id, p.task, p.phase, p.verdict, p.started_at, p.ended_at,
       p.actions_summary, p.subagents, p.useful_info, p.lessons_learned, p.notes
FROM public.cc_session_phases p JOIN public.cc_sessions s ON s.id = p.session_id
WHERE s.session_uuid = %(session)s
ORDER BY p.started_at, p.id;

-- Per phase window [started_at, ended_at) (open: until now), DESIGN §2.5: the requests whose
-- timestamp falls in it, the overlap of each classified gap with it, the tool output read in it.
-- name: phase_figures
WITH p AS (
    SELECT ph.id, ph.started_at, coalesce(ph.ended_at, now()) AS window_end
    FROM public.cc_session_phases ph JOIN public.cc_sessions s ON s.id = ph.session_id
    WHERE s.session_uuid = %(session)s
), longest AS (  -- no gap is longer: bounds the events that can overlap a window
    SELECT coalesce(max((state ->> 'max_gap_us')::bigint), 0) * interval '1 microsecond' AS gap
    FROM retrod.files WHERE session_uuid = %(session)s AND kind = 'main'
)
SELECT p.id, t.*, g.*, b.tool_result_bytes
FROM p
CROSS JOIN LATERAL (
    SELECT count(*) AS requests,
           count(*) FILTER (WHERE r.has_tool_use) AS tool_turns,
           count(*) FILTER (WHERE NOT r.has_tool_use) AS text_turns,
           coalesce(sum(r.input_tokens), 0)::bigint AS input,
           coalesce(sum(r.output_tokens), 0)::bigint AS output,
           coalesce(sum(r.cache_read_tokens), 0)::bigint AS cache_read,
           coalesce(sum(r.cache_create_tokens), 0)::bigint AS cache_create
    FROM retrod.requests r
    WHERE r.session_uuid = %(session)s AND r.ts >= p.started_at AND r.ts < p.window_end
) t
CROSS JOIN LATERAL (
    -- Interval arithmetic: exact to the microsecond, converted once per sum.
    SELECT coalesce(retrod.interval_us(sum(x.overlap) FILTER (WHERE x.kind = 'claude')), 0) AS claude_us,
           coalesce(retrod.interval_us(sum(x.overlap) FILTER (WHERE x.kind = 'tool')), 0) AS tool_us,
           coalesce(retrod.interval_us(sum(x.overlap) FILTER (WHERE x.kind = 'human')), 0) AS human_us
    FROM (
        SELECT e.kind, least(e.ts, p.window_end) - greatest(e.prev_ts, p.started_at) AS overlap
        FROM retrod.events e
        WHERE e.session_uuid = %(session)s AND e.kind IS NOT NULL
          AND e.ts > p.started_at AND e.ts <= p.window_end + (SELECT gap FROM longest)
          AND e.prev_ts < p.window_end AND e.ts > e.prev_ts
    ) x
    WHERE x.overlap > interval '0'
) g
CROSS JOIN LATERAL (
    SELECT coalesce(sum(e.tool_result_bytes), 0)::bigint AS tool_result_bytes
    FROM retrod.events e
    WHERE e.session_uuid = %(session)s AND e.ts >= p.started_at AND e.ts < p.window_end
) b;
