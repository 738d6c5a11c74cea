-- Every statement retrod runs, by name. Loaded by retrod.store.queries.

-- name: get_file
SELECT id, kind, session_uuid, device, inode, size, "offset", state, missing
FROM retrod.files WHERE host_id = %(host_id)s AND path = %(path)s;

-- name: all_files
SELECT path, device, inode, size, "offset", missing
FROM retrod.files WHERE host_id = %(host_id)s;

-- name: insert_file
INSERT INTO retrod.files (host_id, path, kind, slug, session_uuid, agent_id)
VALUES (%(host_id)s, %(path)s, %(kind)s, %(slug)s, %(session_uuid)s, %(agent_id)s)
ON CONFLICT (host_id, path) DO UPDATE SET missing = false
RETURNING id, kind, session_uuid, device, inode, size, "offset", state, missing;

-- name: lock_file
SELECT "offset", device, inode FROM retrod.files WHERE id = %(id)s FOR UPDATE;

-- name: save_file
UPDATE retrod.files
SET session_uuid = %(session_uuid)s, device = %(device)s, inode = %(inode)s, size = %(size)s,
    "offset" = %(offset)s, state = %(state)s, missing = false, updated_at = now()
WHERE id = %(id)s;

-- name: mark_missing
UPDATE retrod.files SET missing = true, updated_at = now()
WHERE host_id = %(host_id)s AND path = %(path)s AND NOT missing;

-- A file read again from its start: its time, tool and compaction figures follow its new
-- content; requests stay counted (their global key makes the re-read idempotent).
-- name: forget_file_events
DELETE FROM retrod.events WHERE file_id = %(id)s;

-- name: forget_file_tool_calls
DELETE FROM retrod.tool_calls WHERE file_id = %(id)s;

-- name: forget_file_subagents
DELETE FROM retrod.subagents WHERE file_id = %(id)s;

-- name: forget_file_links
DELETE FROM retrod.subagent_links WHERE file_id = %(id)s;

-- The usage of a request is that of its record with the largest (main, output, input,
-- cache_create, cache_read) tuple; its owner is the record with the smallest (sidechain,
-- foreign, timestamp, session, agent) tuple; its time is the earliest (DESIGN §2.2).
-- name: upsert_requests
INSERT INTO retrod.requests AS r (
    key, session_uuid, agent, ts, attr_sidechain, attr_foreign, attr_ts, usage_main,
    input_tokens, output_tokens, cache_read_tokens, cache_create_tokens,
    cache_create_5m_tokens, cache_create_1h_tokens, has_tool_use)
SELECT k, s, a, retrod.us_to_ts(t), sc, fo, retrod.us_to_ts(at), um, i, o, cr, cc, c5, c1, tu
FROM unnest(%(key)s::text[], %(session_uuid)s::text[], %(agent)s::text[], %(ts_us)s::bigint[],
            %(sidechain)s::bool[], %(foreign)s::bool[], %(attr_ts_us)s::bigint[], %(usage_main)s::bool[],
            %(input)s::bigint[], %(output)s::bigint[], %(cache_read)s::bigint[],
            %(cache_create)s::bigint[], %(cache_create_5m)s::bigint[], %(cache_create_1h)s::bigint[],
            %(has_tool_use)s::bool[])
     AS x(k, s, a, t, sc, fo, at, um, i, o, cr, cc, c5, c1, tu)
ON CONFLICT (key) DO UPDATE SET
    (usage_main, input_tokens, output_tokens, cache_read_tokens, cache_create_tokens,
     cache_create_5m_tokens, cache_create_1h_tokens) = (
        SELECT * FROM (VALUES
            (excluded.usage_main, excluded.input_tokens, excluded.output_tokens,
             excluded.cache_read_tokens, excluded.cache_create_tokens,
             excluded.cache_create_5m_tokens, excluded.cache_create_1h_tokens),
            (r.usage_main, r.input_tokens, r.output_tokens, r.cache_read_tokens,
             r.cache_create_tokens, r.cache_create_5m_tokens, r.cache_create_1h_tokens)
        ) AS u (m, i, o, cr, cc, c5, c1)
        ORDER BY m DESC, o DESC, i DESC, cc DESC, cr DESC, c5 DESC, c1 DESC LIMIT 1),
    (session_uuid, agent, attr_sidechain, attr_foreign, attr_ts) = (
        SELECT * FROM (VALUES
            (excluded.session_uuid, excluded.agent, excluded.attr_sidechain,
             excluded.attr_foreign, excluded.attr_ts),
            (r.session_uuid, r.agent, r.attr_sidechain, r.attr_foreign, r.attr_ts)
        ) AS w (s, a, sc, fo, t)
        ORDER BY sc, fo, coalesce(t, 'infinity'), s, a LIMIT 1),
    ts = least(r.ts, excluded.ts),
    has_tool_use = r.has_tool_use OR excluded.has_tool_use;

-- name: insert_events
INSERT INTO retrod.events (file_id, "offset", session_uuid, ts, prev_ts, kind, gap_us, tool_result_bytes)
SELECT %(file_id)s, o, %(session_uuid)s, retrod.us_to_ts(t), retrod.us_to_ts(p), k, g, b
FROM unnest(%(offset)s::bigint[], %(ts_us)s::bigint[], %(prev_us)s::bigint[], %(kind)s::text[],
            %(gap_us)s::bigint[], %(bytes)s::bigint[]) AS x(o, t, p, k, g, b)
ON CONFLICT (file_id, "offset") DO NOTHING;

-- name: upsert_tool_calls
INSERT INTO retrod.tool_calls AS c (file_id, tool_use_id, session_uuid, name, ts, description, subagent_type)
SELECT %(file_id)s, i, %(session_uuid)s, n, retrod.us_to_ts(t), d, st
FROM unnest(%(id)s::text[], %(name)s::text[], %(ts_us)s::bigint[], %(description)s::text[],
            %(subagent_type)s::text[]) AS x(i, n, t, d, st)
ON CONFLICT (file_id, tool_use_id) DO UPDATE
SET name = excluded.name, ts = excluded.ts, description = excluded.description,
    subagent_type = excluded.subagent_type
WHERE excluded.ts < c.ts OR (c.ts IS NULL AND excluded.ts IS NOT NULL);

-- name: upsert_subagents
INSERT INTO retrod.subagents AS s (file_id, session_uuid, agent_id, first_ts, last_ts)
SELECT %(file_id)s, %(session_uuid)s, a, retrod.us_to_ts(f), retrod.us_to_ts(l)
FROM unnest(%(agent_id)s::text[], %(first_us)s::bigint[], %(last_us)s::bigint[]) AS x(a, f, l)
ON CONFLICT (file_id, agent_id) DO UPDATE
SET first_ts = least(s.first_ts, excluded.first_ts), last_ts = greatest(s.last_ts, excluded.last_ts);

-- name: insert_links
INSERT INTO retrod.subagent_links (file_id, session_uuid, agent_id, tool_use_id)
SELECT %(file_id)s, %(session_uuid)s, a, t FROM unnest(%(agent_id)s::text[], %(tool_use_id)s::text[]) AS x(a, t)
ON CONFLICT DO NOTHING;

-- name: upsert_meta
INSERT INTO retrod.subagent_meta (session_uuid, agent_id, agent_type, description)
VALUES (%(session_uuid)s, %(agent_id)s, %(agent_type)s, %(description)s)
ON CONFLICT (session_uuid, agent_id) DO UPDATE
SET agent_type = excluded.agent_type, description = excluded.description;
