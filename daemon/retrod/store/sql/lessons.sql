-- accounting.md §2.10 (`retrod lessons`, the brief's policy): the per-session figures lessons.py
-- measures, read from the per-session rollups the report reads them from (session_times' start,
-- session_figures' requests, call_agents' calls by signal), the briefs stored (migration 0028),
-- the phases' lessons, and the examples. `member`: whose rows (accounting.md §3), as in report.sql.

-- name: lessons_member_sessions
-- The member's sessions (every project's), each once, ordered by (start, uuid), undated ones
-- (no start, §2.3) first: what a brief or `retrod lessons` reads of them, once. Their project as
-- known_projects names it (the working folder of their first main transcript by folder name and
-- path, else none; the main transcript's folder name, else the smallest: session_figures'), their
-- start (session_times) and figures (session_figures' requests, call_agents' calls by signal).
-- The calls and the folders are grouped once for every session (a hash join each), not looked up
-- per session. Without `projects` (a project found from a folder: by its folder names alone), no
-- working folder and no undated session: only a `--project` is matched against them.
SELECT f.session_uuid, f.project_slug, p.cwd AS project_path, coalesce(p.cwd, f.project_slug) AS project,
       t.first_ts AS started_at, f.requests, coalesce(c.productive, 0) AS productive,
       coalesce(c.sibling_error, 0) AS sibling_error, coalesce(c.error_retry, 0) AS error_retry,
       coalesce(c.persisted_output_read, 0) AS persisted_output_read,
       coalesce(c.post_write_read, 0) AS post_write_read, coalesce(c.duplicate, 0) AS duplicate,
       coalesce(c.re_read, 0) AS re_read
FROM retrod.session_figures f
LEFT JOIN retrod.session_times t ON t.session_uuid = f.session_uuid AND t.db_role = f.db_role
LEFT JOIN (
    SELECT DISTINCT ON (session_uuid) session_uuid, cwd
    FROM retrod.files
    WHERE %(projects)s AND db_role = %(member)s AND kind = 'main' AND session_uuid IS NOT NULL
      AND cwd IS NOT NULL
    ORDER BY session_uuid, slug, path
) p ON p.session_uuid = f.session_uuid
LEFT JOIN (
    SELECT session_uuid, sum(productive)::bigint AS productive, sum(sibling_error)::bigint AS sibling_error,
           sum(error_retry)::bigint AS error_retry, sum(persisted_output_read)::bigint AS persisted_output_read,
           sum(post_write_read)::bigint AS post_write_read, sum(duplicate)::bigint AS duplicate,
           sum(re_read)::bigint AS re_read
    FROM retrod.call_agents WHERE db_role = %(member)s
    GROUP BY session_uuid
) c ON c.session_uuid = f.session_uuid
WHERE f.db_role = %(member)s AND f.transcripts > 0 AND (%(projects)s OR t.first_ts IS NOT NULL)
ORDER BY t.first_ts NULLS FIRST, f.session_uuid;

-- name: lessons_session_descriptions
-- The description of these sessions (`retrod track start`), when they have one.
SELECT u.session_uuid, u.description
FROM public.cc_sessions u
WHERE u.session_uuid = ANY(%(sessions)s::text[]) AND coalesce(to_jsonb(u) ->> 'db_role', %(member)s) = %(member)s
  AND u.description IS NOT NULL;

-- name: lessons_given
-- The patterns each of the member's sessions was given (any stored brief for it named them).
SELECT DISTINCT b.session_uuid, p ->> 'pattern' AS pattern
FROM retrod.briefs b, jsonb_array_elements(b.patterns) p
WHERE b.db_role = %(member)s;

-- name: lessons_last_mentions
-- Each pattern's mode in the latest stored brief of the project (by the time it answered) that
-- named it: its "last mention".
SELECT DISTINCT ON (p ->> 'pattern') p ->> 'pattern' AS pattern, p ->> 'mode' AS mode
FROM retrod.briefs b, jsonb_array_elements(b.patterns) p
WHERE b.db_role = %(member)s AND b.project = %(project)s
ORDER BY p ->> 'pattern', b.answered_at DESC, b.id DESC;

-- name: lessons_member_phases
-- The member's phases (any project's: a lesson's sides are the project's, the member's for an
-- all-projects baseline), with what the lessons and the waste share need: read once, not by a
-- list of the project's sessions (thousands of them: a list that long costs more to send than
-- the member's phases to read).
SELECT u.session_uuid, p.task, p.phase, p.verdict, p.started_at, p.ended_at, p.lessons_learned
FROM public.cc_session_phases p
JOIN public.cc_sessions u ON u.id = p.session_id
WHERE coalesce(to_jsonb(u) ->> 'db_role', %(member)s) = %(member)s
ORDER BY u.session_uuid, p.started_at, p.id;

-- name: lessons_signal_calls
-- The counted calls with a waste signal of these sessions, each with its example text: its path,
-- else its tool name and the head of its canonical input (migration 0028).
SELECT session_uuid, signal, coalesce(path, example, coalesce(name, '') || ' ') AS example, count(*) AS n
FROM retrod.tool_uses
WHERE session_uuid = ANY(%(sessions)s::text[]) AND db_role = %(member)s AND counted AND signal IS NOT NULL
GROUP BY 1, 2, 3;

-- name: lessons_insert_brief
-- A brief given to a SessionStart hook (accounting.md §2.10 "Given").
INSERT INTO retrod.briefs (session_uuid, source, project, text, patterns)
VALUES (%(session)s, %(source)s, %(project)s, %(text)s, %(patterns)s::jsonb);
