-- Phase logging: writes go to the user's own tables, so rows written by other tools work the same.

-- name: upsert_user_session
INSERT INTO public.cc_sessions (session_uuid, project_slug, started_at, description)
VALUES (%(session)s, %(project_slug)s, %(started_at)s, %(description)s)
ON CONFLICT (session_uuid) DO UPDATE
SET description = coalesce(excluded.description, cc_sessions.description)
RETURNING id, description, started_at;

-- name: get_user_session
SELECT id, description, started_at, ended_at FROM public.cc_sessions WHERE session_uuid = %(session)s;

-- When the transcripts say the session started (else the caller uses now()).
-- name: session_first_seen
SELECT least((SELECT min(ts) FROM retrod.events WHERE session_uuid = %(session)s),
             (SELECT min(ts) FROM retrod.requests WHERE session_uuid = %(session)s)) AS started_at,
       (SELECT coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug))
        FROM retrod.files WHERE session_uuid = %(session)s) AS project_slug;

-- name: open_phases
SELECT id, task, phase, started_at FROM public.cc_session_phases
WHERE session_id = %(session_id)s AND ended_at IS NULL
ORDER BY started_at DESC, id DESC;

-- name: insert_phase
INSERT INTO public.cc_session_phases (session_id, task, phase, started_at, ended_at, verdict,
    actions_summary, subagents, useful_info, lessons_learned, notes)
VALUES (%(session_id)s, %(task)s, %(phase)s, coalesce(%(started_at)s, now()), %(ended_at)s,
        %(verdict)s, %(actions)s, %(subagents)s, %(useful_info)s, %(lessons)s, %(notes)s)
RETURNING id, started_at;

-- name: end_phase
UPDATE public.cc_session_phases
SET ended_at = coalesce(%(ended_at)s, now()), verdict = %(verdict)s,
    actions_summary = coalesce(%(actions)s, actions_summary),
    subagents = coalesce(%(subagents)s, subagents),
    useful_info = coalesce(%(useful_info)s, useful_info),
    lessons_learned = coalesce(%(lessons)s, lessons_learned),
    notes = coalesce(%(notes)s, notes)
WHERE id = %(id)s
RETURNING started_at, ended_at;

-- name: list_phases
SELECT id, task, phase, started_at, ended_at, verdict, actions_summary, subagents, useful_info,
       lessons_learned, notes
FROM public.cc_session_phases WHERE session_id = %(session_id)s
ORDER BY started_at, id;

-- name: close_open_phases
UPDATE public.cc_session_phases SET ended_at = now()
WHERE session_id = %(session_id)s AND ended_at IS NULL;

-- The columns "filled by retrospective".
-- name: fill_session_totals
UPDATE public.cc_sessions
SET total_output_tokens = %(output)s, total_input_tokens = %(input)s,
    total_cache_read_tokens = %(cache_read)s, total_cache_create_tokens = %(cache_create)s,
    claude_time_seconds = %(claude_s)s, tool_time_seconds = %(tool_s)s, human_time_seconds = %(human_s)s,
    ended_at = CASE WHEN %(close)s THEN coalesce(ended_at, now()) ELSE ended_at END
WHERE session_uuid = %(session)s;

-- Tracked sessions still open whose transcripts have been quiet for longer than the idle time.
-- name: idle_open_sessions
SELECT u.session_uuid, last.ts AS last_activity
FROM public.cc_sessions u
CROSS JOIN LATERAL (SELECT max(ts) AS ts FROM retrod.events e WHERE e.session_uuid = u.session_uuid) last
WHERE u.ended_at IS NULL AND last.ts < now() - %(idle)s * interval '1 second';

-- name: end_session_at
UPDATE public.cc_sessions SET ended_at = %(ended_at)s WHERE session_uuid = %(session)s AND ended_at IS NULL;
