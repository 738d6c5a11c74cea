-- Phase logging: writes go to the user's own tables, so rows written by other tools work the same.

-- name: tracking_describe_user_session
-- The user's row of a session: described again if it exists (and locked: one phase command at a
-- time), else created. Two statements rather than ON CONFLICT (session_uuid): on a team's
-- database the key is (session_uuid, db_role) (store/team.sql), the designed table's alone.
UPDATE public.cc_sessions s SET description = coalesce(%(description)s, description)
WHERE session_uuid = %(session)s AND coalesce(to_jsonb(s) ->> 'db_role', current_user) = current_user
RETURNING id, description, started_at, ended_at;

-- name: tracking_insert_user_session
INSERT INTO public.cc_sessions (session_uuid, project_slug, started_at, description)
VALUES (%(session)s, %(project_slug)s, %(started_at)s, %(description)s)
ON CONFLICT DO NOTHING
RETURNING id, description, started_at, ended_at;

-- name: tracking_get_user_session
-- A member's row (accounting.md §3): one's own, or, for a team's reader, the member named.
SELECT id, description, started_at, ended_at FROM public.cc_sessions s
WHERE session_uuid = %(session)s
  AND coalesce(to_jsonb(s) ->> 'db_role', coalesce(%(member)s, current_user)) = coalesce(%(member)s, current_user);

-- name: tracking_session_first_seen
-- When the transcripts say the session started (else the caller uses now()).
-- (One's own rows: a role that row-level security does not bind, the owner, sees a team's.)
SELECT least((SELECT min(ts) FROM retrod.events WHERE session_uuid = %(session)s AND db_role = current_user),
             (SELECT min(ts) FROM retrod.requests WHERE session_uuid = %(session)s AND db_role = current_user))
           AS started_at,
       (SELECT coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug))
        FROM retrod.files WHERE session_uuid = %(session)s AND db_role = current_user) AS project_slug;

-- name: tracking_open_phases
SELECT id, task, phase, started_at FROM public.cc_session_phases
WHERE session_id = %(session_id)s AND ended_at IS NULL
ORDER BY started_at DESC, id DESC;

-- name: tracking_overlapping_phase
-- The first phase of the session whose window meets [started_at, ended_at) (an open phase, or
-- an open end, runs on), with its number in the session's list.
SELECT number, task, phase, started_at, ended_at FROM (
    SELECT row_number() OVER (ORDER BY started_at, id) AS number, task, phase, started_at, ended_at
    FROM public.cc_session_phases WHERE session_id = %(session_id)s
) p
WHERE started_at < coalesce(%(ended_at)s::timestamptz, 'infinity')
  AND coalesce(ended_at, 'infinity') > %(started_at)s::timestamptz
ORDER BY started_at LIMIT 1;

-- name: tracking_session_span
-- When the session's transcripts start, and the database's now (the clock phases are cut by).
SELECT least((SELECT min(ts) FROM retrod.events WHERE session_uuid = %(session)s AND db_role = current_user),
             (SELECT min(ts) FROM retrod.requests WHERE session_uuid = %(session)s AND db_role = current_user))
           AS first_ts,
       now() AS now;

-- name: tracking_insert_phase
INSERT INTO public.cc_session_phases (session_id, task, phase, started_at, ended_at, verdict,
    actions_summary, subagents, useful_info, lessons_learned, notes)
VALUES (%(session_id)s, %(task)s, %(phase)s, coalesce(%(started_at)s, now()), %(ended_at)s,
        %(verdict)s, %(actions)s, %(subagents)s, %(useful_info)s, %(lessons)s, %(notes)s)
RETURNING id, started_at;

-- name: tracking_last_pending_phase
-- The session's latest phase that ended with no verdict (`pending`: `report --close` ended it):
-- the one `phase end` gives its verdict when no phase is open.
SELECT id, task, phase, started_at, ended_at FROM public.cc_session_phases
WHERE session_id = %(session_id)s AND ended_at IS NOT NULL AND verdict = 'pending'
ORDER BY started_at DESC, id DESC LIMIT 1;

-- name: tracking_end_phase
UPDATE public.cc_session_phases
SET ended_at = coalesce(%(ended_at)s, now()), verdict = %(verdict)s,
    actions_summary = coalesce(%(actions)s, actions_summary),
    subagents = coalesce(%(subagents)s, subagents),
    useful_info = coalesce(%(useful_info)s, useful_info),
    lessons_learned = coalesce(%(lessons)s, lessons_learned),
    notes = coalesce(%(notes)s, notes)
WHERE id = %(id)s
RETURNING started_at, ended_at;

-- name: tracking_list_phases
SELECT id, task, phase, started_at, ended_at, verdict, actions_summary, subagents, useful_info,
       lessons_learned, notes
FROM public.cc_session_phases WHERE session_id = %(session_id)s
ORDER BY started_at, id;

-- name: tracking_close_open_phases
-- `report --close`: open phases end now. One that starts now or later (another host's clock)
-- would end as a zero-length phase: when it holds nothing but the `pending` verdict, it is
-- removed; one that holds anything the user wrote is left as it is.
WITH ended AS (
    UPDATE public.cc_session_phases SET ended_at = now()
    WHERE session_id = %(session_id)s AND ended_at IS NULL AND started_at < now()
)
DELETE FROM public.cc_session_phases
WHERE session_id = %(session_id)s AND ended_at IS NULL AND started_at >= now() AND verdict = 'pending'
  AND num_nonnulls(actions_summary, subagents, useful_info, lessons_learned, notes) = 0;

-- name: tracking_fill_session_totals
-- The columns "filled by retrospective".
UPDATE public.cc_sessions
SET total_output_tokens = %(output)s, total_input_tokens = %(input)s,
    total_cache_read_tokens = %(cache_read)s, total_cache_create_tokens = %(cache_create)s,
    claude_time_seconds = %(claude_s)s, tool_time_seconds = %(tool_s)s, human_time_seconds = %(human_s)s,
    ended_at = CASE WHEN %(close)s THEN coalesce(ended_at, now()) ELSE ended_at END
WHERE session_uuid = %(session)s AND coalesce(to_jsonb(cc_sessions) ->> 'db_role', current_user) = current_user;

-- name: tracking_idle_open_sessions
-- Tracked sessions still open whose transcripts have been quiet for longer than the idle time.
SELECT u.session_uuid, last.ts AS last_activity
FROM public.cc_sessions u
CROSS JOIN LATERAL (SELECT max(ts) AS ts FROM retrod.events e
                    WHERE e.session_uuid = u.session_uuid AND e.db_role = current_user) last
WHERE u.ended_at IS NULL AND last.ts < now() - %(idle)s * interval '1 second'
  AND coalesce(to_jsonb(u) ->> 'db_role', current_user) = current_user;

-- name: tracking_end_session_at
UPDATE public.cc_sessions s SET ended_at = %(ended_at)s
WHERE session_uuid = %(session)s AND ended_at IS NULL
  AND coalesce(to_jsonb(s) ->> 'db_role', current_user) = current_user;

-- name: tracking_recent_sessions
-- `retrod sessions`: the newest sessions first, or those with the most tokens, or the least
-- efficient tool use (accounting.md §2.6) first. Start and end are the session's (accounting.md §2.3, §4: its
-- counted events', main or subagent timeline), as session_figures keeps them for every surface
-- (migration 0022); tokens and calls come from the per-minute rollups: no scan of events,
-- requests or calls. `projects`: the projects' names (resolve.match_project), `slugs` their
-- Claude Code folders' (a session's project: its working folder, else its folder name). Undated
-- sessions come last and never pass `since`.
-- (A session per member: on a team's database one id may be several members' sessions, §3.)
WITH s AS (
    SELECT session_uuid, db_role, project_slug, first_us, last_us
    FROM retrod.session_figures
    WHERE transcripts > 0
), candidates AS (  -- `matching`: how many there are before the limit
    SELECT *, count(*) OVER () AS matching FROM s
    WHERE (%(slugs)s::text[] IS NULL OR project_slug = ANY(%(slugs)s::text[])
                                      AND coalesce((SELECT (array_agg(f.cwd ORDER BY f.slug, f.path)
                                                     FILTER (WHERE f.kind = 'main' AND f.cwd IS NOT NULL))[1]
                                                FROM retrod.files f
                                                WHERE f.session_uuid = s.session_uuid AND f.db_role = s.db_role),
                                               project_slug) = ANY(%(projects)s::text[]))
      AND (%(since)s::timestamptz IS NULL OR first_us >= retrod.ts_to_us(%(since)s::timestamptz))
    ORDER BY first_us DESC NULLS LAST, session_uuid
    LIMIT CASE WHEN %(sort)s = 'start' THEN %(limit)s END  -- the other orders need every session's figures
), figures AS (
    SELECT n.*, coalesce(t.total, 0) AS total_tokens, coalesce(t.requests, 0) AS requests,
           coalesce(c.calls, 0) AS tool_calls, c.productive::float / nullif(c.calls, 0) AS efficiency
    FROM candidates n
    LEFT JOIN LATERAL (
        SELECT sum(requests)::bigint AS requests,
               sum(input_tokens + output_tokens + cache_read_tokens + cache_create_tokens)::bigint AS total
        FROM retrod.request_minutes r WHERE r.session_uuid = n.session_uuid AND r.db_role = n.db_role
    ) t ON true
    LEFT JOIN LATERAL (
        SELECT sum(productive + sibling_error + error_retry + persisted_output_read + post_write_read + duplicate
                   + re_read)::bigint AS calls, sum(productive)::bigint AS productive
        FROM retrod.call_agents a WHERE a.session_uuid = n.session_uuid AND a.db_role = n.db_role
    ) c ON true
)
SELECT f.session_uuid AS uuid, f.db_role AS member, f.project_slug,
       (SELECT (array_agg(w.cwd ORDER BY w.slug, w.path)  -- (worked out after the limit)
                    FILTER (WHERE w.kind = 'main' AND w.cwd IS NOT NULL))[1]
        FROM retrod.files w WHERE w.session_uuid = f.session_uuid AND w.db_role = f.db_role) AS project_path,
       f.matching, retrod.us_to_ts(f.first_us) AS started_at,
       round(coalesce(f.last_us - f.first_us, 0) / 1e6, 3)::float AS wall_s,
       f.total_tokens, f.requests, f.tool_calls, f.efficiency,
       u.id IS NOT NULL AS tracked, u.description,
       (SELECT count(*) FROM public.cc_session_phases p WHERE p.session_id = u.id) AS phases
FROM figures f
LEFT JOIN public.cc_sessions u
       ON u.session_uuid = f.session_uuid AND coalesce(to_jsonb(u) ->> 'db_role', f.db_role) = f.db_role
ORDER BY CASE WHEN %(sort)s = 'tokens' THEN f.total_tokens END DESC NULLS LAST,
         CASE WHEN %(sort)s = 'efficiency' THEN f.efficiency END NULLS LAST,
         f.first_us DESC NULLS LAST, f.session_uuid, f.db_role
LIMIT %(limit)s;

-- name: tracking_known_projects
-- Every project there is (accounting.md §4), as one (working folder, Claude Code folder name) pair per
-- session: its working folder is the first `cwd` of its main transcripts in the order of their
-- folder names (null: none names one), its folder the main transcript's (else the smallest, which
-- session_figures holds for a session with no main transcript). `member`: whose sessions (null:
-- every one the role may read). Only the main transcripts are grouped: a third of the files.
SELECT DISTINCT project_path, project_slug FROM (
    SELECT (array_agg(cwd ORDER BY slug, path)
                FILTER (WHERE cwd IS NOT NULL))[1] AS project_path,
           min(slug) AS project_slug
    FROM retrod.files
    WHERE kind = 'main' AND session_uuid IS NOT NULL AND (%(member)s::text IS NULL OR db_role = %(member)s::text)
    GROUP BY session_uuid, db_role
) s
UNION
SELECT DISTINCT NULL, project_slug FROM retrod.session_figures
WHERE NOT has_main AND transcripts > 0 AND (%(member)s::text IS NULL OR db_role = %(member)s::text);
