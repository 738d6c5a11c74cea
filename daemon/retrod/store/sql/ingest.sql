-- Every statement retrod runs, by name. Loaded by retrod.store.queries.

-- name: ingest_all_files
-- A role's own files only (files are keyed by role, migration 0008): a superuser sees every
-- role's rows, and must neither read on from another's offset nor hang rows on its file.
SELECT path, id, kind, session_uuid, device, inode, size, "offset", state, missing, head
FROM retrod.files WHERE host_id = %(host_id)s AND db_role = current_user;

-- name: ingest_files
-- Files' rows, each created on first sight (and revived if it was marked missing).
INSERT INTO retrod.files (host_id, path, kind, slug, session_uuid, agent_id)
SELECT %(host_id)s, path, kind, slug, session_uuid, agent_id
FROM json_to_recordset(%(files)s::json)
     AS x(path TEXT, kind TEXT, slug TEXT, session_uuid TEXT, agent_id TEXT)
ON CONFLICT (host_id, retrod.index_text(path), db_role) DO UPDATE SET missing = false
RETURNING path, id, kind, session_uuid, device, inode, size, "offset", state, missing, head;

-- name: ingest_lock_files
SELECT id, "offset" FROM retrod.files WHERE id = ANY(%(ids)s) AND db_role = current_user ORDER BY id FOR UPDATE;

-- name: ingest_lock_sessions
-- Two ingesters (the daemon and a report bringing its session up to date, or two hosts) may
-- commit files of one session at once; their rollup upserts touch the same rows in no set
-- order and could deadlock. Each takes its sessions' locks first, in one order.
SELECT pg_advisory_xact_lock(hashtext('retrod.session'), hashtext(s))
FROM (SELECT DISTINCT unnest(%(sessions)s::text[]) AS s ORDER BY 1) x;

-- name: ingest_may_skip_row_checks
-- The bulk path (migration 0011): the foreign keys' checks, row by row, skipped for a
-- transaction whose rows are right by construction. Only a superuser may (PostgreSQL 15 can
-- grant it to others; not asked for), and only while every trigger of retrod's still fires in
-- replica mode: `ENABLE TRIGGER ALL` (pg_restore --disable-triggers does it) would otherwise
-- leave the rollups silently behind.
SELECT current_setting('is_superuser') = 'on' AND NOT EXISTS (
    SELECT FROM pg_trigger
    WHERE NOT tgisinternal AND tgenabled <> 'A'
      AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'retrod'::regnamespace));

-- name: ingest_skip_row_checks
SET LOCAL session_replication_role = replica;

-- name: ingest_skip_row_checks_in_session
-- A bulk lane's connection (Store.lane): for its whole session, then back.
SET session_replication_role = replica;

-- name: ingest_check_rows_in_session
RESET session_replication_role;

-- name: ingest_check_rows
SET LOCAL session_replication_role = origin;

-- name: ingest_session_files_of_host
-- The files of a session this host has read, transcripts and sidecars (a project-level agent
-- file belongs to it once its sessionId said so).
SELECT path, id, kind, session_uuid, device, inode, size, "offset", state, missing, head
FROM retrod.files
WHERE host_id = %(host_id)s AND session_uuid = %(session)s AND NOT missing AND db_role = current_user;

-- name: ingest_save_files
UPDATE retrod.files f
SET session_uuid = x.session_uuid, device = x.device, inode = x.inode, size = x.size,
    "offset" = x."offset", state = x.state, head = x.head, missing = false, updated_at = now()
FROM json_to_recordset(%(files)s::json)
     AS x(id BIGINT, session_uuid TEXT, device BIGINT, inode BIGINT, size BIGINT, "offset" BIGINT, state JSONB,
          head TEXT)
WHERE f.id = x.id;

-- name: ingest_mark_missing
UPDATE retrod.files SET missing = true, updated_at = now()
WHERE host_id = %(host_id)s AND retrod.index_text(path) = retrod.index_text(%(path)s) AND path = %(path)s
  AND NOT missing AND db_role = current_user;

-- name: ingest_mark_missing_under
UPDATE retrod.files SET missing = true, updated_at = now()
WHERE host_id = %(host_id)s AND starts_with(path, %(folder)s || '/') AND NOT missing AND db_role = current_user;

-- name: ingest_forget_file_events
-- A file read again from its start: its time, tool and compaction figures follow its new
-- content; requests stay counted (their global key makes the re-read idempotent).
DELETE FROM retrod.events WHERE file_id = %(id)s;

-- name: ingest_forget_file_legacy_compactions
-- A file read again from its start under newer fold rules keeps its rows, but for the
-- compactions that migration 0014 kept as rows of their own until its real ones come.
DELETE FROM retrod.events WHERE file_id = %(id)s AND "offset" < 0;

-- name: ingest_forget_file_cache_boundaries
DELETE FROM retrod.cache_boundaries WHERE file_id = %(id)s;

-- name: ingest_forget_file_tool_calls
DELETE FROM retrod.tool_calls WHERE file_id = %(id)s;

-- name: ingest_forget_file_parked_tool_calls
DELETE FROM retrod.parked_tool_calls WHERE file_id = %(id)s;

-- name: ingest_forget_file_subagents
DELETE FROM retrod.subagents WHERE file_id = %(id)s;

-- name: ingest_forget_file_links
DELETE FROM retrod.subagent_links WHERE file_id = %(id)s;

-- name: ingest_forget_file_line_holders
-- A file read again from its start holds no uuid any more; the records on its lines stay (accounting.md
-- §2.1: requests already counted stay counted), as a row that holds none (migration 0030).
-- Returns the shared uuids: their other holders are ranked again.
WITH held AS (
    SELECT line_uuid, shared FROM retrod.line_holders WHERE file_id = %(id)s AND line_uuid IS NOT NULL
), gone AS (
    DELETE FROM retrod.line_holders WHERE file_id = %(id)s AND key IS NULL
), kept AS (
    UPDATE retrod.line_holders SET line_uuid = NULL, bg = false, shared = false, copy = false,
                                   link_agent = NULL, link_tool_use = NULL, cwd_changed = false, cwd = NULL
    WHERE file_id = %(id)s AND key IS NOT NULL AND line_uuid IS NOT NULL
)
SELECT DISTINCT line_uuid FROM held WHERE shared;

-- name: ingest_upsert_requests
-- A batch's rows come as one JSON document per table, encoded in C on the client: binding
-- one array per column cost more client time than the server spent on the rows.
-- The usage of a request is that of its record with the largest (main, output, input,
-- cache_create, cache_read) tuple, and its model, parts, speed and cache-miss reason that record's
-- (in a tie on the tuple: the first by its file's path below the projects root, code-point, then
-- line — fold.Request.usage_beaten_by; a row stored before migration 0035 knows no place and
-- comes last; the same place is the same record, read again: the new reading, under the current
-- fold rules, counts); its owner is the record with the
-- smallest (sidechain, foreign, timestamp, session, agent) tuple, the unnamed and inline threads
-- (fold.THREADS) after every named agent; its time is the earliest (accounting.md §2.2). The key is the
-- member's (§3). `machine`: the host whose file holds the owning record (§4 "Machines"; every
-- record of one batch is this host's): the same record on two hosts ties on the rest and goes to
-- the smaller host id, and a known one before none (migration 0023: NULL sorts last).
INSERT INTO retrod.requests AS r (
    key, session_uuid, agent, ts, attr_sidechain, attr_foreign, attr_ts, usage_main,
    input_tokens, output_tokens, cache_read_tokens, cache_create_tokens,
    cache_create_5m_tokens, cache_create_1h_tokens, has_tool_use, model, parts, fast, machine, cache_miss_reason,
    web_searches, place_path, place_offset, base_session, base_agent, base_sidechain, base_foreign, base_ts, base_machine,
    usage_path, usage_offset)
SELECT key, session_uuid, agent, retrod.us_to_ts(ts_us), attr_sidechain, attr_foreign,
       retrod.us_to_ts(attr_ts_us), usage_main, (usage->>'input')::BIGINT, (usage->>'output')::BIGINT,
       (usage->>'cache_read')::BIGINT, (usage->>'cache_create')::BIGINT,
       (usage->>'cache_create_5m')::BIGINT, (usage->>'cache_create_1h')::BIGINT, has_tool_use, model, parts, fast,
       %(host_id)s::text, reason, (usage->>'web_searches')::BIGINT, place_path, place_offset,
       base_session, CASE WHEN base_session IS NOT NULL THEN base_agent END,
       CASE WHEN base_session IS NOT NULL THEN base_sidechain END,
       CASE WHEN base_session IS NOT NULL THEN base_foreign END, retrod.us_to_ts(base_ts_us),
       CASE WHEN base_session IS NOT NULL THEN %(host_id)s::text END, usage_path, usage_offset
FROM json_to_recordset(%(requests)s::json)
     AS x(key TEXT, session_uuid TEXT, agent TEXT, ts_us BIGINT, attr_sidechain BOOL, attr_foreign BOOL,
          attr_ts_us BIGINT, usage_main BOOL, usage JSON, has_tool_use BOOL, model TEXT, parts TEXT, fast BOOL,
          reason TEXT, place_path TEXT, place_offset BIGINT, base_session TEXT, base_agent TEXT,
          base_sidechain BOOL, base_foreign BOOL, base_ts_us BIGINT, usage_path TEXT, usage_offset BIGINT)
ON CONFLICT (key, db_role) DO UPDATE SET
    -- (the owner among the records not held: the same order, none last)
    (base_session, base_agent, base_sidechain, base_foreign, base_ts, base_machine) = (
        SELECT * FROM (VALUES
            (excluded.base_session, excluded.base_agent, excluded.base_sidechain, excluded.base_foreign,
             excluded.base_ts, excluded.base_machine),
            (r.base_session, r.base_agent, r.base_sidechain, r.base_foreign, r.base_ts, r.base_machine)
        ) AS b (s, a, sc, fo, t, h)
        ORDER BY s IS NULL, sc, fo, coalesce(t, 'infinity'), s, a IN ('<inline>', '<unnamed>'), a, h LIMIT 1),
    (usage_main, input_tokens, output_tokens, cache_read_tokens, cache_create_tokens,
     cache_create_5m_tokens, cache_create_1h_tokens, model, parts, fast, cache_miss_reason, web_searches,
     usage_path, usage_offset) = (
        SELECT m, i, o, cr, cc, c5, c1, md, pt, fa, rs, ws, up, uo FROM (VALUES
            (excluded.usage_main, excluded.input_tokens, excluded.output_tokens,
             excluded.cache_read_tokens, excluded.cache_create_tokens,
             excluded.cache_create_5m_tokens, excluded.cache_create_1h_tokens, excluded.model,
             excluded.parts, excluded.fast, excluded.cache_miss_reason, excluded.web_searches,
             excluded.usage_path, excluded.usage_offset, 0),
            (r.usage_main, r.input_tokens, r.output_tokens, r.cache_read_tokens,
             r.cache_create_tokens, r.cache_create_5m_tokens, r.cache_create_1h_tokens, r.model,
             r.parts, r.fast, r.cache_miss_reason, r.web_searches, r.usage_path, r.usage_offset, 1)
        ) AS u (m, i, o, cr, cc, c5, c1, md, pt, fa, rs, ws, up, uo, stored)
        ORDER BY m DESC, o DESC, i DESC, cc DESC, cr DESC, up IS NULL, up COLLATE "C", uo, stored LIMIT 1),
    -- (a keyless request's place is its key's: the same whenever its record is read again)
    (place_path, place_offset) = (excluded.place_path, excluded.place_offset),
    (session_uuid, agent, attr_sidechain, attr_foreign, attr_ts, machine) = (
        SELECT * FROM (VALUES
            (excluded.session_uuid, excluded.agent, excluded.attr_sidechain,
             excluded.attr_foreign, excluded.attr_ts, excluded.machine),
            (r.session_uuid, r.agent, r.attr_sidechain, r.attr_foreign, r.attr_ts, r.machine)
        ) AS w (s, a, sc, fo, t, h)
        ORDER BY sc, fo, coalesce(t, 'infinity'), s, a IN ('<inline>', '<unnamed>'), a, h LIMIT 1),
    ts = least(r.ts, excluded.ts),
    has_tool_use = r.has_tool_use OR excluded.has_tool_use;

-- name: ingest_insert_events
-- The per-file tables: one element per file, {file_id, session_uuid, rows}.
-- A line read again brings what it has anyway; a row stored before migration 0014 gets its uuid
-- and class (its file is read again under fold.RULES 2).
-- Lines past the last one a file holds are new (its row is locked: no one else adds any), and go
-- in by a plain insert; only the others (a file read again from its start) by the upsert: its
-- conflict check and speculative insertion were a quarter of the rows' index work.
-- A subagent timeline's row (sub) counts for nothing until subtime_sessions places it.
WITH e AS (
    SELECT f.file_id, e."offset", f.session_uuid, retrod.us_to_ts(e.ts_us) AS ts,
           retrod.us_to_ts(e.prev_us) AS prev_ts, e.kind, e.gap_us, e.tool_result_bytes, e.line_uuid, e.gap_class,
           e.compaction, e.sub
    FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
         json_to_recordset(f.rows)
         AS e("offset" BIGINT, ts_us BIGINT, prev_us BIGINT, kind TEXT, gap_us BIGINT, tool_result_bytes BIGINT,
              line_uuid TEXT, gap_class TEXT, compaction BOOL, sub BOOL)
), last AS (
    SELECT f.file_id, (SELECT max(o."offset") FROM retrod.events o WHERE o.file_id = f.file_id) AS "offset"
    FROM (SELECT DISTINCT file_id FROM e) f
), new AS (
    INSERT INTO retrod.events (file_id, "offset", session_uuid, ts, prev_ts, kind, gap_us, tool_result_bytes,
                               line_uuid, gap_class, compaction, sub, counted)
    SELECT e.file_id, e."offset", e.session_uuid, e.ts, e.prev_ts, e.kind, e.gap_us, e.tool_result_bytes,
           e.line_uuid, e.gap_class, e.compaction, e.sub, NOT e.sub
    FROM e JOIN last l USING (file_id)
    WHERE l."offset" IS NULL OR e."offset" > l."offset"
)
INSERT INTO retrod.events AS o (file_id, "offset", session_uuid, ts, prev_ts, kind, gap_us, tool_result_bytes,
                                line_uuid, gap_class, compaction, sub, counted)
SELECT e.file_id, e."offset", e.session_uuid, e.ts, e.prev_ts, e.kind, e.gap_us, e.tool_result_bytes,
       e.line_uuid, e.gap_class, e.compaction, e.sub, NOT e.sub
FROM e JOIN last l USING (file_id)
WHERE e."offset" <= l."offset"
ON CONFLICT (file_id, "offset", db_role) DO UPDATE SET line_uuid = excluded.line_uuid, gap_class = excluded.gap_class
WHERE (o.line_uuid, o.gap_class) IS DISTINCT FROM (excluded.line_uuid, excluded.gap_class);

-- name: ingest_sessions_to_retime
-- accounting.md §2.3: the sessions whose timeline is not just each file's own, among those whose events
-- a batch wrote: several main transcripts (a project folder copied or moved), or a line already
-- found not to count (a file's fold goes on from its own high-water mark, which may hold that
-- line's time); the third reason, a line uuid met before, insert_line_holders tells (each main
-- event with a uuid is a holder's line). Their timelines are worked out again (retime_sessions).
-- Each batch file looks its match up by index (LATERAL ... LIMIT 1): as EXISTS, the planner took
-- json_to_recordset's 100 × 100 rows for granted and hashed all of the member's events for every
-- batch, one line's included (~20 ms per commit on 150 MB of history, growing with it). The
-- batch's files with main-timeline events come as two arrays: parsing the events' document again
-- for them cost a backfill several percent of its database time.
WITH batch AS (
    SELECT * FROM unnest(%(sessions)s::text[], %(file_ids)s::bigint[]) AS b(session_uuid, file_id)
)
SELECT s.session_uuid FROM batch s
CROSS JOIN LATERAL (SELECT FROM retrod.files o WHERE o.session_uuid = s.session_uuid AND o.kind = 'main'
                    AND o.db_role = current_user AND o.id <> s.file_id LIMIT 1) another_main
UNION
SELECT s.session_uuid FROM (SELECT DISTINCT session_uuid FROM batch) s
CROSS JOIN LATERAL (SELECT FROM retrod.events e WHERE e.session_uuid = s.session_uuid AND NOT e.counted
                    AND NOT e.sub AND e.db_role = current_user LIMIT 1) not_counted;

-- name: ingest_retime_sessions
-- accounting.md §2.3/§2.4: a session's one timeline, over all its main transcripts (deleted ones too):
-- in the order of their project folders' names (then host and path: two hosts' copies), each
-- in file order; a line whose uuid is known counts once, where it is first met; the high-water
-- mark runs across files. Only the rows that change are written (the update trigger moves
-- their gaps in the rollups).
WITH lines AS (  -- (a fork copy, §2.1, is no own line: it counts for nothing, and hides no other)
    SELECT e.file_id, e."offset", e.session_uuid, e.ts, e.gap_class, e.compaction,
           c.file_id IS NULL AND (e.line_uuid IS NULL OR row_number() OVER (
               PARTITION BY e.session_uuid, e.line_uuid, c.file_id IS NULL
               ORDER BY f.slug, f.host_id, f.path, e."offset") = 1) AS counts,
           f.slug, f.host_id, f.path
    FROM retrod.events e JOIN retrod.files f ON f.id = e.file_id
    LEFT JOIN retrod.line_holders c ON (c.file_id, c."offset") = (e.file_id, e."offset") AND c.copy
    WHERE e.session_uuid = ANY(%(sessions)s::text[]) AND e.db_role = current_user AND NOT e.sub
), timeline AS (
    SELECT file_id, "offset", ts, gap_class, counts,
           max(ts) FILTER (WHERE counts) OVER (
               PARTITION BY session_uuid ORDER BY slug, host_id, path, "offset"
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS high
    FROM lines
), placed AS (
    SELECT file_id, "offset", counts,
           CASE WHEN counts AND ts IS NOT NULL THEN high END AS prev_ts,
           CASE WHEN counts AND ts > high THEN gap_class END AS kind,
           -- (a row stored before 0014 that closed no gap has no class: its new gap is not known)
           CASE WHEN counts AND ts > high AND gap_class IS NOT NULL
                THEN retrod.ts_to_us(ts) - retrod.ts_to_us(high) ELSE 0 END AS gap_us
    FROM timeline
)
UPDATE retrod.events e SET counted = p.counts, prev_ts = p.prev_ts, kind = p.kind, gap_us = p.gap_us
FROM placed p
WHERE (e.file_id, e."offset") = (p.file_id, p."offset")
  AND (e.counted, e.prev_ts, e.kind, e.gap_us) IS DISTINCT FROM (p.counts, p.prev_ts, p.kind, p.gap_us);

-- name: ingest_subtime_sessions
-- accounting.md §2.3 "Sessions without a main event": a session with no main event (a counted, timestamped
-- main row) has its subagent timeline: its sub rows ordered by time, then the file's path below
-- the projects root (the path from its project folder on), host and line; a uuid counts once, at
-- its first place; the gaps run from the high-water mark as on a main timeline (in time order,
-- the previous counted row). A session with a main event has none: its sub rows that count are
-- turned off. Only the rows that change are written (the update trigger moves the rollups).
-- Run after retime_sessions, which decides which main rows count.
-- Both reads go through an index by the batch's sessions, whatever the statistics say (a
-- backfill's are stale): a session's main event once per session, in time order up to the first
-- (MATERIALIZED, ORDER BY ... LIMIT 1), then its sub rows (LATERAL). As EXISTS and a join, the
-- planner hashed every event of the member for each batch, which grew with the history (14 s of
-- a 1 GB backfill's database time); as a LATERAL join, it looked a session's main event up
-- again for each of its sub rows. A session with a main event (most) reads only its sub rows
-- that count, which a partial index holds: every one of them, each batch, before.
WITH s AS MATERIALIZED (
    SELECT k.session_uuid, main.found IS NOT NULL AS has_main
    FROM (SELECT DISTINCT session_uuid FROM unnest(%(sessions)s::text[]) u(session_uuid)) k
    LEFT JOIN LATERAL (
        SELECT true AS found FROM retrod.events m
        WHERE m.session_uuid = k.session_uuid AND m.db_role = current_user AND NOT m.sub AND m.counted
          AND m.ts IS NOT NULL
        ORDER BY m.ts LIMIT 1) main ON true
), lines AS (
    SELECT e.file_id, e."offset", e.session_uuid, e.ts, e.gap_class, e.line_uuid, s.has_main,
           substr(f.path, strpos(f.path, '/' || f.slug || '/') + 1) AS below_root, f.host_id,
           c.file_id IS NOT NULL AS copy  -- (an agent_progress line that is a fork copy, §2.1)
    FROM s CROSS JOIN LATERAL (
        SELECT e.* FROM retrod.events e  -- (no main event: every sub row, to place)
        WHERE NOT s.has_main AND e.session_uuid = s.session_uuid AND e.sub AND e.db_role = current_user
        UNION ALL  -- (a main event: the sub rows that count, to turn off; by migration 0033's index, a few)
        SELECT e.* FROM retrod.events e
        WHERE s.has_main AND e.session_uuid = s.session_uuid AND e.sub AND (e.counted OR e.prev_ts IS NOT NULL)
          AND e.db_role = current_user
    ) e
    JOIN retrod.files f ON f.id = e.file_id
    LEFT JOIN retrod.line_holders c ON (c.file_id, c."offset") = (e.file_id, e."offset") AND c.copy
), ordered AS (
    SELECT *, NOT has_main AND NOT copy AND (line_uuid IS NULL OR row_number() OVER (
               PARTITION BY session_uuid, line_uuid, copy ORDER BY ts, below_root, host_id, "offset") = 1) AS counts
    FROM lines
), timeline AS (
    SELECT file_id, "offset", ts, gap_class, counts,
           max(ts) FILTER (WHERE counts) OVER (
               PARTITION BY session_uuid ORDER BY ts, below_root, host_id, "offset"
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS high
    FROM ordered
), placed AS (
    SELECT file_id, "offset", counts,
           CASE WHEN counts THEN high END AS prev_ts,
           CASE WHEN counts AND ts > high THEN gap_class END AS kind,
           CASE WHEN counts AND ts > high THEN retrod.ts_to_us(ts) - retrod.ts_to_us(high) ELSE 0 END AS gap_us
    FROM timeline
)
UPDATE retrod.events e SET counted = p.counts, prev_ts = p.prev_ts, kind = p.kind, gap_us = p.gap_us
FROM placed p
WHERE (e.file_id, e."offset", e.db_role) = (p.file_id, p."offset", current_user)
  AND (e.counted, e.prev_ts, e.kind, e.gap_us) IS DISTINCT FROM (p.counts, p.prev_ts, p.kind, p.gap_us);

-- name: ingest_upsert_tool_calls
INSERT INTO retrod.tool_calls AS c (file_id, tool_use_id, session_uuid, name, ts, description, subagent_type, "offset")
SELECT f.file_id, t.id, f.session_uuid, t.name, retrod.us_to_ts(t.ts_us), t.description, t.subagent_type, t."offset"
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
     json_to_recordset(f.rows)
     AS t(id TEXT, name TEXT, ts_us BIGINT, description TEXT, subagent_type TEXT, "offset" BIGINT)
ON CONFLICT (file_id, tool_use_id) DO UPDATE
SET name = excluded.name, ts = excluded.ts, description = excluded.description,
    subagent_type = excluded.subagent_type, "offset" = excluded."offset"
WHERE excluded.ts < c.ts OR (c.ts IS NULL AND excluded.ts IS NOT NULL)
   OR (c."offset" IS NULL AND excluded.ts IS NOT DISTINCT FROM c.ts);  -- (stored before 0026: its line)

-- name: ingest_upsert_subagents
INSERT INTO retrod.subagents AS s (file_id, session_uuid, agent_id, first_ts, last_ts)
SELECT f.file_id, f.session_uuid, a.agent_id, retrod.us_to_ts(a.min_us), retrod.us_to_ts(a.max_us)
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
     json_to_recordset(f.rows) AS a(agent_id TEXT, min_us BIGINT, max_us BIGINT)
ON CONFLICT (file_id, agent_id) DO UPDATE
SET first_ts = least(s.first_ts, excluded.first_ts), last_ts = greatest(s.last_ts, excluded.last_ts);

-- name: ingest_insert_links
INSERT INTO retrod.subagent_links (file_id, session_uuid, agent_id, tool_use_id)
SELECT f.file_id, f.session_uuid, l->>0, l->>1
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
     json_array_elements(f.rows) AS l
ON CONFLICT DO NOTHING;

-- name: ingest_insert_cache_boundaries
-- accounting.md §2.8: a stream's compaction boundaries with their time; a line read again is the same row.
INSERT INTO retrod.cache_boundaries (file_id, "offset", session_uuid, agent, ts)
SELECT f.file_id, b."offset", f.session_uuid, b.agent, retrod.us_to_ts(b.ts_us)
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
     json_to_recordset(f.rows) AS b("offset" BIGINT, agent TEXT, ts_us BIGINT)
ON CONFLICT DO NOTHING;

-- name: ingest_insert_line_holders
-- accounting.md §2.1 unmarked fork copies: a main transcript's unmarked candidate lines with a uuid, each
-- with the record on it if any (§2.2: key NULL, none); a line read again is the same row, its
-- record as read last. One index lookup per line of the batch tells who else holds its uuid:
-- - another session (here or in the batch): every holder of the uuid is marked shared, and only
--   shared uuids are ranked after a batch;
-- - its own session, at another line: returned, for retime_sessions (§2.3: a line whose uuid
--   is known counts once). Every main-timeline event with a uuid is such a line, so this is
--   sessions_to_retime's "met before" for the events of the batch (and a little more: a line of
--   another type with the uuid; retiming a session is exact whenever it runs).
-- Run under lock_fork_copies: a holder another transaction adds at the same time is then seen.
-- (A row is written once per statement: the batch's own rows get `shared` as they are written,
-- the others by `marked`.) The other holders of the batch's uuids are found in one scan of the
-- index by every uuid of the batch (= ANY): a lookup per line (LATERAL) cost an executor rescan
-- each, most of them finding nothing.
WITH batch AS (
    SELECT f.file_id, h."offset", f.session_uuid, h.uuid, h.bg, h.key, h.agent, h.sidechain, h.ts_us,
           h.link_agent, h.link_tool_use, coalesce(h.cwd_changed, false) AS cwd_changed, h.cwd  -- (absent: default)
    FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
         json_to_recordset(f.rows)
         AS h("offset" BIGINT, uuid TEXT, bg BOOL, key TEXT, agent TEXT, sidechain BOOL, ts_us BIGINT,
              link_agent TEXT, link_tool_use TEXT, cwd_changed BOOL, cwd TEXT)
), others AS (  -- (the holders of a line's uuid at other lines: the session of each)
    SELECT b.session_uuid, b.uuid, o.session_uuid AS holder
    FROM retrod.line_holders o JOIN batch b ON b.uuid = o.line_uuid
    WHERE o.line_uuid = ANY(ARRAY(SELECT uuid FROM batch)) AND o.db_role = current_user
      AND (o.file_id, o."offset") <> (b.file_id, b."offset")
), found AS (
    SELECT uuid FROM others WHERE holder <> session_uuid
    UNION
    SELECT uuid FROM batch GROUP BY uuid HAVING min(session_uuid) <> max(session_uuid)  -- (hashed, not sorted)
), last AS (  -- (lines past a file's last holder are new: a plain insert, as insert_events)
    SELECT f.file_id, (SELECT max(h."offset") FROM retrod.line_holders h WHERE h.file_id = f.file_id) AS "offset"
    FROM (SELECT DISTINCT file_id FROM batch) f
), new AS (
    INSERT INTO retrod.line_holders (file_id, "offset", session_uuid, line_uuid, bg, shared,
                                     key, agent, sidechain, ts, link_agent, link_tool_use, cwd_changed, cwd)
    SELECT b.file_id, b."offset", b.session_uuid, b.uuid, b.bg, b.uuid IN (SELECT uuid FROM found),
           b.key, b.agent, b.sidechain, retrod.us_to_ts(b.ts_us), b.link_agent, b.link_tool_use, b.cwd_changed,
           b.cwd
    FROM batch b JOIN last l USING (file_id)
    WHERE l."offset" IS NULL OR b."offset" > l."offset"
), written AS (
    INSERT INTO retrod.line_holders AS h (file_id, "offset", session_uuid, line_uuid, bg, shared,
                                          key, agent, sidechain, ts, link_agent, link_tool_use, cwd_changed, cwd)
    SELECT b.file_id, b."offset", b.session_uuid, b.uuid, b.bg, b.uuid IN (SELECT uuid FROM found),
           b.key, b.agent, b.sidechain, retrod.us_to_ts(b.ts_us), b.link_agent, b.link_tool_use, b.cwd_changed,
           b.cwd
    FROM batch b JOIN last l USING (file_id)
    WHERE b."offset" <= l."offset"
    ON CONFLICT (file_id, "offset") DO UPDATE SET
        -- (a row that holds no uuid: its file was read again from its start, store.reset)
        line_uuid = coalesce(h.line_uuid, excluded.line_uuid),
        bg = CASE WHEN h.line_uuid IS NULL THEN excluded.bg ELSE h.bg END,
        -- (what the line says, as its file's fold said it last: a line read again says the same)
        (link_agent, link_tool_use, cwd_changed, cwd)
            = (excluded.link_agent, excluded.link_tool_use, excluded.cwd_changed, excluded.cwd),
        shared = h.shared OR coalesce(h.line_uuid, excluded.line_uuid) IN (SELECT uuid FROM found),
        (key, agent, sidechain, ts) = (
            SELECT excluded.key, excluded.agent, excluded.sidechain, excluded.ts WHERE excluded.key IS NOT NULL
            UNION ALL
            SELECT h.key, h.agent, h.sidechain, h.ts WHERE excluded.key IS NULL)
    WHERE h.line_uuid IS NULL OR (NOT h.shared AND h.line_uuid IN (SELECT uuid FROM found))
       OR (h.link_agent, h.link_tool_use, h.cwd_changed, h.cwd)
          IS DISTINCT FROM (excluded.link_agent, excluded.link_tool_use, excluded.cwd_changed, excluded.cwd)
       OR (excluded.key IS NOT NULL
           AND (h.key, h.agent, h.sidechain, h.ts)
               IS DISTINCT FROM (excluded.key, excluded.agent, excluded.sidechain, excluded.ts))
), marked AS (  -- (= ANY(ARRAY(...)): by index; a join with `found` let the planner scan every holder)
    UPDATE retrod.line_holders h SET shared = true
    WHERE h.line_uuid = ANY(ARRAY(SELECT uuid FROM found)) AND h.db_role = current_user AND NOT h.shared
      AND NOT EXISTS (SELECT FROM batch b WHERE (b.file_id, b."offset") = (h.file_id, h."offset"))
)
SELECT session_uuid FROM others WHERE holder = session_uuid
UNION
SELECT session_uuid FROM batch GROUP BY session_uuid, uuid HAVING count(*) > 1;

-- name: ingest_settle_file_cwds
-- accounting.md §4 with §2.1: each given main transcript's working folder, the first `cwd` of its own
-- lines: its first holder that is no fork copy and whose folder (its last change at or before it,
-- line_holders.cwd_changed) is one, unless its first own line without a uuid that has one
-- (`cwd_offset` of its fold state) comes before. Only the files whose folder is not found yet,
-- or `again` (read from their start, or holding lines that became or stopped being fork copies):
-- an own line found stays the first, as later lines cannot come before it.
WITH f AS (
    SELECT id, state ->> 'cwd' AS own_cwd, (state ->> 'cwd_offset')::bigint AS own_offset, cwd
    FROM retrod.files
    WHERE id = ANY(%(ids)s::bigint[]) AND kind = 'main' AND (cwd IS NULL OR id = ANY(%(again)s::bigint[]))
), found AS (
    SELECT f.id, f.cwd, coalesce((
        SELECT r.cwd FROM (  -- (a file's changes of folder: few)
            SELECT c."offset" AS start, lead(c."offset") OVER (ORDER BY c."offset") AS stop, c.cwd
            FROM retrod.line_holders c WHERE c.file_id = f.id AND c.cwd_changed AND c.line_uuid IS NOT NULL
        ) r
        WHERE r.cwd IS NOT NULL AND (f.own_offset IS NULL OR r.start < f.own_offset)
          AND EXISTS (SELECT FROM retrod.line_holders h
                      WHERE h.file_id = f.id AND h."offset" >= r.start AND (r.stop IS NULL OR h."offset" < r.stop)
                        AND (f.own_offset IS NULL OR h."offset" < f.own_offset)
                        AND h.line_uuid IS NOT NULL AND NOT h.copy)
        ORDER BY r.start LIMIT 1), f.own_cwd) AS first
    FROM f
)
UPDATE retrod.files x SET cwd = found.first
FROM found WHERE x.id = found.id AND x.cwd IS DISTINCT FROM found.first;

-- name: ingest_uuid_writers
-- accounting.md §2.1 unmarked fork copies: which session wrote each uuid more than one session holds.
SELECT line_uuid, session_uuid FROM retrod.uuid_writers(ARRAY(
    SELECT DISTINCT line_uuid FROM retrod.line_holders WHERE shared AND db_role = current_user));

-- name: ingest_walk_cache_streams
-- The prompt-cache streams marked so far in this transaction walked now: migration 0031's
-- deferred trigger made immediate runs what is pending, and from then on walks a stream at the
-- end of the statement that marks it (a walk is exact whenever it runs). Named, not ALL: trends'
-- days (migration 0034) must still be counted at commit, after the fork-copies lock below is
-- taken, or two committers would each hold what the other waits for (a day's row, the lock).
SET CONSTRAINTS retrod.cache_stream_marked IMMEDIATE;

-- name: ingest_lock_fork_copies
-- Who wrote a uuid depends on other sessions' holders and spans, which a transaction committing
-- at the same time (the bulk path's other lane, another host) would not show: from here to its
-- commit, a transaction that writes main transcripts' lines waits for any other doing the same
-- (its member's), so the later one sees the earlier one's and decides for both.
SELECT pg_advisory_xact_lock(hashtext('retrod.line_holders'), hashtext(current_user));

-- name: ingest_decide_fork_copies
-- The shared uuids of the given sessions (their span may have moved) and the given uuids (a
-- file's, forgotten) are ranked again; each holder is a fork copy unless its session wrote the
-- uuid. Returns the lines that changed: their sessions are re-timed, their requests owned again
-- and their calls counted again. Their sessions are marked changed (migrations 0034, 0041): a
-- line that became a copy may change what a session's report lists (a subagent's link) with no
-- row of a marked table changing.
WITH uuids AS (
    SELECT line_uuid FROM retrod.line_holders
    WHERE session_uuid = ANY(%(sessions)s::text[]) AND shared AND db_role = current_user
    UNION
    SELECT unnest(%(uuids)s::text[])
), writers AS (
    SELECT * FROM retrod.uuid_writers(ARRAY(SELECT line_uuid FROM uuids))
), changed AS (  -- (= ANY(ARRAY(...)): the holders by index, whatever the planner thinks of `writers`)
    UPDATE retrod.line_holders h SET copy = h.session_uuid <> w.session_uuid
    FROM writers w
    WHERE h.line_uuid = ANY(ARRAY(SELECT line_uuid FROM writers)) AND h.line_uuid = w.line_uuid
      AND h.db_role = current_user AND h.copy <> (h.session_uuid <> w.session_uuid)
    RETURNING h.session_uuid, h.file_id, h."offset"
), marked AS (
    INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
    SELECT DISTINCT session_uuid, current_user FROM changed ORDER BY 1, 2
    ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed
)
SELECT session_uuid, file_id, "offset" FROM changed;

-- name: ingest_park_tool_calls
-- accounting.md §2.4 with §2.1: the tool_use ids of lines that are fork copies (`changed` lines, and the
-- fork copies of the `sessions` whose tool_calls a batch wrote) are set aside, and those of lines
-- that stopped being one come back (the rollup's triggers count them out and in). A fork copy's
-- uuid is shared (only shared uuids are ranked): its session's are found by the index of those,
-- rather than by parsing the batch's tool_calls again (most lines are no fork copy).
-- The calls are looked up among their sessions' (by index), not joined to the whole table.
WITH lines AS (
    SELECT session_uuid, file_id, "offset"
    FROM json_to_recordset(%(changed)s::json) AS c(session_uuid TEXT, file_id BIGINT, "offset" BIGINT)
    UNION
    SELECT c.session_uuid, c.file_id, c."offset" FROM retrod.line_holders c
    WHERE c.session_uuid = ANY(%(sessions)s::text[]) AND c.shared AND c.copy AND c.db_role = current_user
), moved AS (
    DELETE FROM retrod.tool_calls t USING lines l, retrod.line_holders c
    WHERE t.session_uuid = ANY(ARRAY(SELECT DISTINCT session_uuid FROM lines))
      AND (t.file_id, t."offset") = (l.file_id, l."offset") AND (c.file_id, c."offset") = (l.file_id, l."offset")
      AND c.copy AND t.db_role = current_user
    RETURNING t.*
)
INSERT INTO retrod.parked_tool_calls SELECT * FROM moved
ON CONFLICT (file_id, tool_use_id) DO NOTHING;

-- name: ingest_unpark_tool_calls
WITH back AS (
    DELETE FROM retrod.parked_tool_calls p
    USING json_to_recordset(%(changed)s::json) AS l(file_id BIGINT, "offset" BIGINT)
    WHERE (p.file_id, p."offset") = (l.file_id, l."offset") AND p.db_role = current_user
      AND NOT EXISTS (SELECT FROM retrod.line_holders c
                      WHERE (c.file_id, c."offset") = (p.file_id, p."offset") AND c.copy)
    RETURNING p.*
)
INSERT INTO retrod.tool_calls SELECT * FROM back
ON CONFLICT (file_id, tool_use_id) DO NOTHING;

-- name: ingest_reown_requests
-- accounting.md §2.2 with §2.1: the owner of the requests of the given lines (`changed`: lines that
-- became, or stopped being, fork copies; `batch`: the stretch of each file a batch read, whose
-- lines' records are owned again where the line is a fork copy, which upsert_requests ranked
-- as the session's own) among the records held on lines (line_holders.key), a fork copy's as
-- foreign, and their other records' owner (base_*).
-- Every lookup goes through an index whatever the statistics say (a backfill's are stale, and
-- the planner takes a JSON document's rows for 100 × 100): the changed lines one by one (LATERAL
-- ... LIMIT 1), the fork copies in a batch's stretches through the index of copies (migration
-- 0033: a few rows, where a probe per line cost a lookup for every record), the requests by key
-- (= ANY: a join hashed every request of the member).
WITH keys AS (
    SELECT d.key
    FROM json_to_recordset(%(changed)s::json) AS c(file_id BIGINT, "offset" BIGINT)
    CROSS JOIN LATERAL (SELECT d.key FROM retrod.line_holders d
                        WHERE (d.file_id, d."offset") = (c.file_id, c."offset") AND d.key IS NOT NULL LIMIT 1) d
    UNION
    SELECT d.key
    FROM json_to_recordset(%(batch)s::json) AS b(file_id BIGINT, start BIGINT, "end" BIGINT)
    CROSS JOIN LATERAL (SELECT d.key FROM retrod.line_holders d
                        WHERE d.copy AND d.file_id = b.file_id AND d."offset" >= b.start AND d."offset" < b."end"
                          AND d.key IS NOT NULL) d
), owners AS (
    SELECT k.key, o.*
    FROM keys k CROSS JOIN LATERAL (
        SELECT * FROM (
            SELECT r.base_session AS s, r.base_agent AS a, r.base_sidechain AS sc, r.base_foreign AS fo,
                   r.base_ts AS t, r.base_machine AS h
            FROM retrod.requests r
            WHERE r.key = k.key AND r.db_role = current_user AND r.base_session IS NOT NULL
            UNION ALL
            SELECT d.session_uuid, d.agent, d.sidechain, d.copy, d.ts, f.host_id
            FROM retrod.line_holders d JOIN retrod.files f ON f.id = d.file_id
            WHERE d.key = k.key AND d.db_role = current_user
        ) o
        ORDER BY sc, fo, coalesce(t, 'infinity'), s, a IN ('<inline>', '<unnamed>'), a, h LIMIT 1) o
)
UPDATE retrod.requests r SET (session_uuid, agent, attr_sidechain, attr_foreign, attr_ts, machine) =
    (o.s, o.a, o.sc, o.fo, o.t, o.h)
FROM owners o
WHERE r.key = ANY(ARRAY(SELECT key FROM owners)) AND r.key = o.key AND r.db_role = current_user
  AND (r.session_uuid, r.agent, r.attr_sidechain, r.attr_foreign, r.attr_ts, r.machine)
      IS DISTINCT FROM (o.s, o.a, o.sc, o.fo, o.t, o.h);

-- name: ingest_upsert_metas
-- Subagents' meta files: read whole, committed with the batch they came in.
INSERT INTO retrod.subagent_meta (session_uuid, agent_id, agent_type, description)
SELECT session_uuid, agent_id, agent_type, description
FROM json_to_recordset(%(metas)s::json) AS x(session_uuid TEXT, agent_id TEXT, agent_type TEXT, description TEXT)
ON CONFLICT (session_uuid, agent_id, db_role) DO UPDATE
SET agent_type = excluded.agent_type, description = excluded.description;

-- name: ingest_upsert_tool_use_calls
-- Tool uses (accounting.md §2.6; migration 0010). A batch writes its calls, then their results, then
-- settles which occurrence of an id counts, then judges again the calls whose signal may have
-- changed: from the first call a change touches to the agent's end, and the call before it
-- (whose "next call" it may be). Each statement returns where its rows sit in their agent.
--
-- A call fills its row, unless the file's first block with that id did already; with its result
-- when the same batch holds that (most do: one insert, no update), unless the row has one
-- already (a result written before its call, in an earlier batch). A repeated call line brings
-- the first result of a call read before: that fills the result alone. (A result stored before
-- migration 0016 learns there whether it was a refusal, when its file is read again.)
INSERT INTO retrod.tool_uses AS t (file_id, tool_use_id, session_uuid, agent, file_path, "offset", block,
                                   name, input_hash, path, detail, ts, counted, plan, example,
                                   has_result, failed, sibling, rejected, result_bytes, result_ts, refused, task_id)
SELECT f.file_id, c.id, f.session_uuid, c.agent, f.file_path, c."offset", c.block, c.name,
       c.input_hash::uuid, c.path, c.detail, retrod.us_to_ts(c.ts_us), true, c.plan, c.example,
       c.has_result, c.failed, c.sibling, c.rejected, c.result_bytes, retrod.us_to_ts(c.result_ts_us),
       c.refused, c.task_id
FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, file_path TEXT, rows JSON),
     json_to_recordset(f.rows) AS c(id TEXT, agent TEXT, "offset" BIGINT, block INT, name TEXT, input_hash TEXT,
                                    path TEXT, detail TEXT, ts_us BIGINT, plan JSONB, example TEXT, has_result BOOL, failed BOOL,
                                    sibling BOOL, rejected BOOL, result_bytes BIGINT, result_ts_us BIGINT,
                                    refused BOOL, task_id TEXT)
ON CONFLICT (session_uuid, tool_use_id, file_id) DO UPDATE
SET (agent, file_path, "offset", block, name, input_hash, path, detail, ts, counted) = (
        SELECT excluded.agent, excluded.file_path, excluded."offset", excluded.block, excluded.name,
               excluded.input_hash, excluded.path, excluded.detail, excluded.ts, true WHERE t.agent IS NULL
        UNION ALL
        SELECT t.agent, t.file_path, t."offset", t.block, t.name, t.input_hash, t.path, t.detail, t.ts, t.counted
        WHERE t.agent IS NOT NULL),
    -- (a call stored before migration 0025 learns its plan input when its file is read again)
    plan = CASE WHEN t.agent IS NULL OR t.plan IS NULL THEN excluded.plan ELSE t.plan END,
    -- (and its example text, migration 0028)
    example = CASE WHEN t.agent IS NULL OR t.example IS NULL THEN excluded.example ELSE t.example END,
    (has_result, failed, sibling, rejected, result_bytes, result_ts, refused, task_id) = (
        SELECT excluded.has_result, excluded.failed, excluded.sibling, excluded.rejected, excluded.result_bytes,
               excluded.result_ts, excluded.refused, excluded.task_id
        WHERE NOT t.has_result
        UNION ALL
        SELECT t.has_result, t.failed, t.sibling,
               t.rejected OR (excluded.rejected AND retrod.same_result(t, excluded)), t.result_bytes, t.result_ts,
               t.refused OR (excluded.refused AND retrod.same_result_read(t, excluded)),
               coalesce(t.task_id, CASE WHEN retrod.same_result_read(t, excluded) THEN excluded.task_id END)
        WHERE t.has_result)
WHERE t.agent IS NULL OR (NOT t.has_result AND excluded.has_result)
   OR (t.has_result AND excluded.rejected AND NOT t.rejected AND retrod.same_result(t, excluded))
   OR (t.plan IS NULL AND excluded.plan IS NOT NULL)
   OR (t.example IS NULL AND excluded.example IS NOT NULL)
   OR (excluded.has_result AND retrod.same_result_read(t, excluded)
       AND ((excluded.refused AND NOT t.refused) OR (t.task_id IS NULL AND excluded.task_id IS NOT NULL)))
RETURNING t.session_uuid, t.tool_use_id, t.agent, t.file_path, t."offset", t.block;

-- name: ingest_upsert_tool_use_results
-- A result whose call is not in the batch fills its row, unless the file's first tool_result for
-- that id did already. A failed result of a call already read changes that call's judgement,
-- and maybe the later calls'.
WITH filled AS (
    INSERT INTO retrod.tool_uses AS t (file_id, tool_use_id, session_uuid, has_result, failed, sibling, rejected,
                                       result_bytes, result_ts, refused, task_id)
    SELECT f.file_id, r.tool_use_id, f.session_uuid, true, r.failed, r.sibling, r.rejected, r.bytes,
           retrod.us_to_ts(r.ts_us), r.refused, r.task_id
    FROM json_to_recordset(%(files)s::json) AS f(file_id BIGINT, session_uuid TEXT, rows JSON),
         json_to_recordset(f.rows)
         AS r(tool_use_id TEXT, ts_us BIGINT, bytes BIGINT, failed BOOL, sibling BOOL, rejected BOOL,
              refused BOOL, task_id TEXT)
    ON CONFLICT (session_uuid, tool_use_id, file_id) DO UPDATE
    SET (has_result, failed, sibling, rejected, result_bytes, result_ts, refused, task_id) = (
            SELECT true, excluded.failed, excluded.sibling, excluded.rejected, excluded.result_bytes,
                   excluded.result_ts, excluded.refused, excluded.task_id
            WHERE NOT t.has_result
            UNION ALL  -- read again: only what the stored result did not tell yet (migrations 0016, 0025)
            SELECT true, t.failed, t.sibling,
                   t.rejected OR (excluded.rejected AND retrod.same_result(t, excluded)), t.result_bytes,
                   t.result_ts, t.refused OR (excluded.refused AND retrod.same_result_read(t, excluded)),
                   coalesce(t.task_id, CASE WHEN retrod.same_result_read(t, excluded) THEN excluded.task_id END)
            WHERE t.has_result)
    WHERE NOT t.has_result OR (excluded.rejected AND NOT t.rejected AND retrod.same_result(t, excluded))
       OR (retrod.same_result_read(t, excluded)
           AND ((excluded.refused AND NOT t.refused) OR (t.task_id IS NULL AND excluded.task_id IS NOT NULL)))
    RETURNING t.session_uuid, t.agent, t.file_path, t."offset", t.block, t.counted, t.failed
)
SELECT session_uuid, agent, file_path, "offset", block FROM filled WHERE counted AND failed;

-- name: ingest_recount_tool_uses
-- An id seen in several files of a session counts once, where it is seen first: in a main
-- transcript if it is there (with several, the first in §2.3's order: its project folder's name,
-- code-point, then host and path as retime_sessions), else on the machine with the smaller host
-- id (accounting.md §4: the same call on two machines, as a request's record; not whichever copy was
-- read first), then in the file whose path sorts first; then in file order.
WITH ids AS (
    SELECT DISTINCT session_uuid, tool_use_id
    FROM json_to_recordset(%(ids)s::json) AS i(session_uuid TEXT, tool_use_id TEXT)
), ranked AS (
    SELECT t.session_uuid, t.tool_use_id, t.file_id,
           c.file_id IS NULL AND row_number() OVER (PARTITION BY t.session_uuid, t.tool_use_id, c.file_id IS NULL
                              ORDER BY t.agent <> '', CASE WHEN t.agent = '' THEN f.slug END, f.host_id,
                                       t.file_path, t."offset", t.block, t.file_id) = 1
               AS counts
    FROM ids JOIN retrod.tool_uses t
         ON t.session_uuid = ids.session_uuid AND t.tool_use_id = ids.tool_use_id AND t.agent IS NOT NULL
            AND t.db_role = current_user
    JOIN retrod.files f ON f.id = t.file_id
    -- (a fork copy's call is none: §2.1, §2.6)
    LEFT JOIN retrod.line_holders c ON (c.file_id, c."offset") = (t.file_id, t."offset") AND c.copy
)
UPDATE retrod.tool_uses t SET counted = r.counts, signal = CASE WHEN r.counts THEN t.signal END
FROM ranked r
WHERE (t.session_uuid, t.tool_use_id, t.file_id) = (r.session_uuid, r.tool_use_id, r.file_id) AND t.counted <> r.counts
RETURNING t.session_uuid, t.agent, t.file_path, t."offset", t.block;

-- name: ingest_calls_at_lines
-- The calls on lines that became, or stopped being, fork copies (§2.1), to be counted again.
-- (Among their sessions' calls, by index: no index has a call's line.)
WITH lines AS (
    SELECT * FROM json_to_recordset(%(lines)s::json) AS c(session_uuid TEXT, file_id BIGINT, "offset" BIGINT)
)
SELECT t.session_uuid, t.tool_use_id, t.agent, t.file_path, t."offset", t.block
FROM retrod.tool_uses t
WHERE t.session_uuid = ANY(ARRAY(SELECT DISTINCT session_uuid FROM lines)) AND t.agent IS NOT NULL
  AND (t.file_id, t."offset") IN (SELECT file_id, "offset" FROM lines);

-- name: ingest_judge_tool_uses
-- The signals of accounting.md §2.6, the first that applies, judged within the call's agent. Only the
-- judgements that change are written.
WITH dirty AS (  -- per agent, the first call a change touched
    SELECT DISTINCT ON (session_uuid, agent) session_uuid, agent, file_path COLLATE "C" AS file_path,
           "offset", block
    FROM json_to_recordset(%(dirty)s::json)
         AS d(session_uuid TEXT, agent TEXT, file_path TEXT, "offset" BIGINT, block INT)
    ORDER BY session_uuid, agent, file_path COLLATE "C", "offset", block
), judged AS (
    SELECT y.session_uuid, y.tool_use_id, y.file_id, y.signal AS was,
           CASE
               WHEN y.failed AND y.sibling THEN 'sibling_error'
               WHEN y.failed AND NOT y.rejected AND next_call.name = y.name THEN 'error_retry'
               WHEN y.name = 'Read' AND strpos(y.path, '/tool-results/') > 0 THEN 'persisted_output_read'
               WHEN naming.is_write THEN 'post_write_read'
               WHEN same.file_path IS NOT NULL AND write_between.found IS NULL THEN 'duplicate'
               WHEN read_before.file_path IS NOT NULL AND path_write_between.found IS NULL THEN 're_read'
           END AS signal
    FROM dirty d
    CROSS JOIN LATERAL (
        (SELECT * FROM retrod.tool_uses p  -- the call before: the first changed one may be its next
         WHERE p.session_uuid = d.session_uuid AND p.db_role = current_user AND p.agent = d.agent AND p.counted
           AND (p.file_path, p."offset", p.block) < (d.file_path, d."offset", d.block)
         ORDER BY p.file_path DESC, p."offset" DESC, p.block DESC LIMIT 1)
        UNION ALL
        (SELECT * FROM retrod.tool_uses t
         WHERE t.session_uuid = d.session_uuid AND t.db_role = current_user AND t.agent = d.agent AND t.counted
           AND (t.file_path, t."offset", t.block) >= (d.file_path, d."offset", d.block))
    ) y
    LEFT JOIN LATERAL (  -- the agent's next call
        SELECT n.name FROM retrod.tool_uses n
        WHERE y.failed AND n.session_uuid = y.session_uuid AND n.db_role = current_user AND n.agent = y.agent AND n.counted
          AND (n.file_path, n."offset", n.block) > (y.file_path, y."offset", y.block)
        ORDER BY n.file_path, n."offset", n.block LIMIT 1
    ) next_call ON true
    LEFT JOIN LATERAL (  -- a Read's path: the latest earlier call naming it
        SELECT retrod.is_write(w.name, w.failed) AS is_write FROM retrod.tool_uses w
        WHERE y.name = 'Read' AND w.session_uuid = y.session_uuid AND w.db_role = current_user AND w.agent = y.agent AND w.counted
          AND w.path = y.path AND (w.file_path, w."offset", w.block) < (y.file_path, y."offset", y.block)
        ORDER BY w.file_path DESC, w."offset" DESC, w.block DESC LIMIT 1
    ) naming ON true
    LEFT JOIN LATERAL (  -- the latest earlier call with the same name and input that did not fail
        SELECT s.file_path, s."offset", s.block FROM retrod.tool_uses s
        WHERE s.session_uuid = y.session_uuid AND s.db_role = current_user AND s.agent = y.agent AND s.counted AND NOT s.failed
          AND s.input_hash = y.input_hash AND (s.file_path, s."offset", s.block) < (y.file_path, y."offset", y.block)
        ORDER BY s.file_path DESC, s."offset" DESC, s.block DESC LIMIT 1
    ) same ON true
    LEFT JOIN LATERAL (  -- a write (of any path) between that call and this one
        SELECT true AS found FROM retrod.tool_uses w
        WHERE same.file_path IS NOT NULL AND w.session_uuid = y.session_uuid AND w.db_role = current_user AND w.agent = y.agent
          AND w.counted AND retrod.is_write(w.name, w.failed)
          AND (w.file_path, w."offset", w.block) > (same.file_path, same."offset", same.block)
          AND (w.file_path, w."offset", w.block) < (y.file_path, y."offset", y.block)
        LIMIT 1
    ) write_between ON true
    LEFT JOIN LATERAL (  -- a Read's path: the latest earlier Read of it that did not fail
        SELECT r.file_path, r."offset", r.block FROM retrod.tool_uses r
        WHERE y.name = 'Read' AND r.session_uuid = y.session_uuid AND r.db_role = current_user AND r.agent = y.agent AND r.counted
          AND r.path = y.path AND r.name = 'Read' AND NOT r.failed
          AND (r.file_path, r."offset", r.block) < (y.file_path, y."offset", y.block)
        ORDER BY r.file_path DESC, r."offset" DESC, r.block DESC LIMIT 1
    ) read_before ON true
    LEFT JOIN LATERAL (  -- a write of that path between that Read and this one
        SELECT true AS found FROM retrod.tool_uses w
        WHERE read_before.file_path IS NOT NULL AND w.session_uuid = y.session_uuid AND w.db_role = current_user AND w.agent = y.agent
          AND w.counted AND w.path = y.path AND retrod.is_write(w.name, w.failed)
          AND (w.file_path, w."offset", w.block) > (read_before.file_path, read_before."offset", read_before.block)
          AND (w.file_path, w."offset", w.block) < (y.file_path, y."offset", y.block)
        LIMIT 1
    ) path_write_between ON true
)
UPDATE retrod.tool_uses t SET signal = j.signal
FROM judged j
WHERE (t.session_uuid, t.tool_use_id, t.file_id) = (j.session_uuid, j.tool_use_id, j.file_id)
  AND j.signal IS DISTINCT FROM j.was;

-- name: ingest_forget_file_tool_uses
-- A file read again from its start: its rows go; the calls they held leave their agents' order.
WITH gone AS (
    DELETE FROM retrod.tool_uses WHERE session_uuid = %(session)s AND file_id = %(id)s
    RETURNING session_uuid, tool_use_id, agent, file_path, "offset", block
)
SELECT * FROM gone WHERE agent IS NOT NULL;

-- name: ingest_stored_price_tiers
-- Price tiers (migration 0013): the thresholds this role's request rollup is summed by.
SELECT t.thresholds, t.source_version, has_table_privilege('retrod.price_tiers', 'INSERT') AS may_store
FROM (SELECT 1) one LEFT JOIN retrod.price_tiers t ON t.db_role = current_user;

-- name: ingest_lock_requests
-- Changed price data: new thresholds, and the rollup summed by them again, in one transaction
-- that first locks the requests: concurrent ingest waits (its triggers then read the new
-- thresholds), as this waits for ingest under way.
LOCK TABLE retrod.requests IN SHARE ROW EXCLUSIVE MODE;

-- name: ingest_store_price_tiers
INSERT INTO retrod.price_tiers (thresholds, source_version) VALUES (%(thresholds)s, %(version)s)
ON CONFLICT (db_role) DO UPDATE SET thresholds = excluded.thresholds, source_version = excluded.source_version;

-- name: ingest_rebuild_request_minutes
SELECT retrod.rebuild_request_minutes();
