-- Every statement retrod runs, by name. Loaded by retrod.store.queries.

-- name: all_files
SELECT path, id, kind, session_uuid, device, inode, size, "offset", state, missing, head
FROM retrod.files WHERE host_id = %(host_id)s;

-- Files' rows, each created on first sight (and revived if it was marked missing).
-- name: files
INSERT INTO retrod.files (host_id, path, kind, slug, session_uuid, agent_id)
SELECT %(host_id)s, path, kind, slug, session_uuid, agent_id
FROM json_to_recordset(%(files)s::json)
     AS x(path TEXT, kind TEXT, slug TEXT, session_uuid TEXT, agent_id TEXT)
ON CONFLICT (host_id, path, db_role) DO UPDATE SET missing = false
RETURNING path, id, kind, session_uuid, device, inode, size, "offset", state, missing, head;

-- name: lock_files
SELECT id, "offset" FROM retrod.files WHERE id = ANY(%(ids)s) ORDER BY id FOR UPDATE;

-- Two ingesters (the daemon and a report bringing its session up to date, or two hosts) may
-- commit files of one session at once; their rollup upserts touch the same rows in no set
-- order and could deadlock. Each takes its sessions' locks first, in one order.
-- name: lock_sessions
SELECT pg_advisory_xact_lock(hashtext('retrod.session'), hashtext(s))
FROM (SELECT DISTINCT unnest(%(sessions)s::text[]) AS s ORDER BY 1) x;

-- The files of a session this host has read, transcripts and sidecars (a project-level agent
-- file belongs to it once its sessionId said so).
-- name: session_files_of_host
SELECT path, id, kind, session_uuid, device, inode, size, "offset", state, missing, head
FROM retrod.files WHERE host_id = %(host_id)s AND session_uuid = %(session)s AND NOT missing;

-- name: save_files
UPDATE retrod.files f
SET session_uuid = x.session_uuid, device = x.device, inode = x.inode, size = x.size,
    "offset" = x."offset", state = x.state, head = x.head, missing = false, updated_at = now()
FROM json_to_recordset(%(files)s::json)
     AS x(id BIGINT, session_uuid TEXT, device BIGINT, inode BIGINT, size BIGINT, "offset" BIGINT, state JSONB,
          head TEXT)
WHERE f.id = x.id;

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

-- A batch's rows come as one JSON document per table, encoded in C on the client: binding
-- one array per column cost more client time than the server spent on the rows.
-- The usage of a request is that of its record with the largest (main, output, input,
-- cache_create, cache_read) tuple, and its model that record's (in a tie on the tuple and the
-- 5m/1h split, a model before none, then the smallest: fold.Request.usage_beaten_by); its
-- owner is the record with the smallest (sidechain, foreign, timestamp, session, agent) tuple,
-- the unnamed and inline threads (fold.THREADS) after every named agent; its time is the
-- earliest (DESIGN §2.2).
-- name: upsert_requests
INSERT INTO retrod.requests AS r (
    key, session_uuid, agent, ts, attr_sidechain, attr_foreign, attr_ts, usage_main,
    input_tokens, output_tokens, cache_read_tokens, cache_create_tokens,
    cache_create_5m_tokens, cache_create_1h_tokens, has_tool_use, model)
SELECT key, session_uuid, agent, retrod.us_to_ts(ts_us), attr_sidechain, attr_foreign,
       retrod.us_to_ts(attr_ts_us), usage_main, (usage->>'input')::BIGINT, (usage->>'output')::BIGINT,
       (usage->>'cache_read')::BIGINT, (usage->>'cache_create')::BIGINT,
       (usage->>'cache_create_5m')::BIGINT, (usage->>'cache_create_1h')::BIGINT, has_tool_use, model
FROM json_to_recordset(%(requests)s::json)
     AS x(key TEXT, session_uuid TEXT, agent TEXT, ts_us BIGINT, attr_sidechain BOOL, attr_foreign BOOL,
          attr_ts_us BIGINT, usage_main BOOL, usage JSON, has_tool_use BOOL, model TEXT)
ON CONFLICT (key) DO UPDATE SET
    (usage_main, input_tokens, output_tokens, cache_read_tokens, cache_create_tokens,
     cache_create_5m_tokens, cache_create_1h_tokens, model) = (
        SELECT * FROM (VALUES
            (excluded.usage_main, excluded.input_tokens, excluded.output_tokens,
             excluded.cache_read_tokens, excluded.cache_create_tokens,
             excluded.cache_create_5m_tokens, excluded.cache_create_1h_tokens, excluded.model),
            (r.usage_main, r.input_tokens, r.output_tokens, r.cache_read_tokens,
             r.cache_create_tokens, r.cache_create_5m_tokens, r.cache_create_1h_tokens, r.model)
        ) AS u (m, i, o, cr, cc, c5, c1, md)
        ORDER BY m DESC, o DESC, i DESC, cc DESC, cr DESC, c5 DESC, c1 DESC, md = '', md LIMIT 1),
    (session_uuid, agent, attr_sidechain, attr_foreign, attr_ts) = (
        SELECT * FROM (VALUES
            (excluded.session_uuid, excluded.agent, excluded.attr_sidechain,
             excluded.attr_foreign, excluded.attr_ts),
            (r.session_uuid, r.agent, r.attr_sidechain, r.attr_foreign, r.attr_ts)
        ) AS w (s, a, sc, fo, t)
        ORDER BY sc, fo, coalesce(t, 'infinity'), s, a IN ('<inline>', '<unnamed>'), a LIMIT 1),
    ts = least(r.ts, excluded.ts),
    has_tool_use = r.has_tool_use OR excluded.has_tool_use;

-- The per-file tables: one element per file, {file_id, session_uuid, rows}.
-- name: insert_events
INSERT INTO retrod.events (file_id, "offset", session_uuid, ts, prev_ts, kind, gap_us, tool_result_bytes)
SELECT f.file_id, e."offset", f.session_uuid, retrod.us_to_ts(e.ts_us), retrod.us_to_ts(e.prev_us),
       e.kind, e.gap_us, e.tool_result_bytes
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
     json_to_recordset(f.rows)
     AS e("offset" BIGINT, ts_us BIGINT, prev_us BIGINT, kind TEXT, gap_us BIGINT, tool_result_bytes BIGINT)
ON CONFLICT (file_id, "offset") DO NOTHING;

-- name: upsert_tool_calls
INSERT INTO retrod.tool_calls AS c (file_id, tool_use_id, session_uuid, name, ts, description, subagent_type)
SELECT f.file_id, t.id, f.session_uuid, t.name, retrod.us_to_ts(t.ts_us), t.description, t.subagent_type
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
     json_to_recordset(f.rows) AS t(id TEXT, name TEXT, ts_us BIGINT, description TEXT, subagent_type TEXT)
ON CONFLICT (file_id, tool_use_id) DO UPDATE
SET name = excluded.name, ts = excluded.ts, description = excluded.description,
    subagent_type = excluded.subagent_type
WHERE excluded.ts < c.ts OR (c.ts IS NULL AND excluded.ts IS NOT NULL);

-- name: upsert_subagents
INSERT INTO retrod.subagents AS s (file_id, session_uuid, agent_id, first_ts, last_ts)
SELECT f.file_id, f.session_uuid, a.agent_id, retrod.us_to_ts(a.min_us), retrod.us_to_ts(a.max_us)
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
     json_to_recordset(f.rows) AS a(agent_id TEXT, min_us BIGINT, max_us BIGINT)
ON CONFLICT (file_id, agent_id) DO UPDATE
SET first_ts = least(s.first_ts, excluded.first_ts), last_ts = greatest(s.last_ts, excluded.last_ts);

-- name: insert_links
INSERT INTO retrod.subagent_links (file_id, session_uuid, agent_id, tool_use_id)
SELECT f.file_id, f.session_uuid, l->>0, l->>1
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
     json_array_elements(f.rows) AS l
ON CONFLICT DO NOTHING;

-- name: upsert_meta
INSERT INTO retrod.subagent_meta (session_uuid, agent_id, agent_type, description)
VALUES (%(session_uuid)s, %(agent_id)s, %(agent_type)s, %(description)s)
ON CONFLICT (session_uuid, agent_id) DO UPDATE
SET agent_type = excluded.agent_type, description = excluded.description;
