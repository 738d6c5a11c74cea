-- A session's subagent timeline, and one stored start and end for every surface (accounting.md §2.3,
-- §4; issue 28).
--
-- More than a quarter of real sessions have no main-transcript event (its main transcript gone
-- or empty): they showed no time and no date. Such a session's events are its subagent
-- timeline: the timestamped user and assistant lines of its subagent files, its main
-- transcripts' isSidechain lines and the user/assistant messages agent_progress lines embed,
-- merged by time (then the file's path, then line), a uuid counting once.
--
-- Those lines are rows of retrod.events with `sub` set, stored from every transcript (fold.py)
-- but counting for nothing (counted false, no gap) while the session has a main event; when it
-- has none, store/queries.sql `subtime_sessions` places them on their merged timeline (the
-- update trigger moves their gaps into the rollups, as retime_sessions does for main rows). A
-- main event arriving later turns them off again; its rows leaving (a file read again) turns
-- them on.
ALTER TABLE retrod.events ADD COLUMN IF NOT EXISTS sub BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX events_sub ON retrod.events (session_uuid) WHERE sub;
-- (0014's index of main rows that do not count: sub rows mostly do not.)
DROP INDEX retrod.events_uncounted;
CREATE INDEX events_uncounted ON retrod.events (session_uuid) WHERE NOT counted AND NOT sub;

-- The session's start and end, as every surface reads them (`sessions`, the web UI's list from
-- session_figures, `trends` and `brief` from session_times, the report): its counted events'
-- earliest and latest timestamps, main or subagent timeline. session_figures kept the main
-- transcripts' fold state instead (first event, high-water mark), which counted a copied line
-- and knew no subagent timeline: it now follows session_times, in the same statements.
CREATE OR REPLACE FUNCTION retrod.session_figures_span(sessions TEXT[]) RETURNS void LANGUAGE sql AS $$
    UPDATE retrod.session_figures f
    SET first_us = retrod.ts_to_us(t.first_ts), last_us = retrod.ts_to_us(t.last_ts)
    FROM (SELECT DISTINCT session_uuid FROM unnest(sessions) s(session_uuid)) k
    LEFT JOIN retrod.session_times t ON t.session_uuid = k.session_uuid AND t.db_role = current_user
    WHERE f.session_uuid = k.session_uuid AND f.db_role = current_user
      AND (f.first_us, f.last_us) IS DISTINCT FROM (retrod.ts_to_us(t.first_ts), retrod.ts_to_us(t.last_ts))
$$;

-- 0018's function, then the span copied to session_figures.
CREATE OR REPLACE FUNCTION retrod.add_event_minutes(changed retrod.events[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.event_minutes AS m (session_uuid, minute, claude_us, tool_us, human_us, tool_result_bytes)
    SELECT session_uuid, minute, direction * coalesce(sum(us) FILTER (WHERE kind = 'claude'), 0),
           direction * coalesce(sum(us) FILTER (WHERE kind = 'tool'), 0),
           direction * coalesce(sum(us) FILTER (WHERE kind = 'human'), 0), direction * sum(bytes)
    FROM (
        SELECT c.session_uuid, p.minute, c.kind, retrod.interval_us(p.piece_end - p.piece_start) AS us,
               0 AS bytes
        FROM unnest(changed) c, retrod.pieces_of(c.prev_ts, c.ts) p WHERE c.kind IS NOT NULL
        UNION ALL
        SELECT session_uuid, retrod.minute_of(ts), NULL, 0, tool_result_bytes
        FROM unnest(changed) c WHERE tool_result_bytes <> 0 AND counted
    ) d
    GROUP BY 1, 2
    ON CONFLICT (session_uuid, minute, db_role) DO UPDATE SET
        claude_us = m.claude_us + excluded.claude_us, tool_us = m.tool_us + excluded.tool_us,
        human_us = m.human_us + excluded.human_us,
        tool_result_bytes = m.tool_result_bytes + excluded.tool_result_bytes;

    INSERT INTO retrod.session_times AS s (session_uuid, events, first_ts, last_ts, claude_us, tool_us, human_us,
                                           tool_result_bytes)
    SELECT session_uuid, direction * count(*),
           CASE WHEN direction > 0 THEN min(ts) FILTER (WHERE counted) END,
           CASE WHEN direction > 0 THEN max(ts) FILTER (WHERE counted) END,
           direction * coalesce(sum(gap) FILTER (WHERE kind = 'claude'), 0),
           direction * coalesce(sum(gap) FILTER (WHERE kind = 'tool'), 0),
           direction * coalesce(sum(gap) FILTER (WHERE kind = 'human'), 0),
           direction * coalesce(sum(tool_result_bytes) FILTER (WHERE counted), 0)
    FROM (SELECT c.*, CASE WHEN c.ts > c.prev_ts THEN retrod.interval_us(c.ts - c.prev_ts) END AS gap
          FROM unnest(changed) c) c
    GROUP BY 1
    ON CONFLICT (session_uuid, db_role) DO UPDATE SET
        events = s.events + excluded.events,
        first_ts = least(s.first_ts, excluded.first_ts), last_ts = greatest(s.last_ts, excluded.last_ts),
        claude_us = s.claude_us + excluded.claude_us, tool_us = s.tool_us + excluded.tool_us,
        human_us = s.human_us + excluded.human_us, tool_result_bytes = s.tool_result_bytes + excluded.tool_result_bytes;

    IF direction < 0 THEN
        DELETE FROM retrod.event_minutes m
        WHERE m.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed)) AND m.db_role = current_user
          AND (m.claude_us, m.tool_us, m.human_us, m.tool_result_bytes) = (0, 0, 0, 0);
        DELETE FROM retrod.session_times s
        WHERE s.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed)) AND s.db_role = current_user
          AND s.events = 0;
        UPDATE retrod.session_times s SET
            first_ts = (SELECT min(ts) FROM retrod.events e
                        WHERE e.session_uuid = s.session_uuid AND e.db_role = s.db_role AND e.counted),
            last_ts = (SELECT max(ts) FROM retrod.events e
                       WHERE e.session_uuid = s.session_uuid AND e.db_role = s.db_role AND e.counted)
        WHERE s.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed)) AND s.db_role = current_user;
    END IF;
    PERFORM retrod.session_figures_span(ARRAY(SELECT DISTINCT session_uuid FROM unnest(changed)));
END $$;

-- 0019's function: the span from session_times, not from the files' fold state (a session's
-- row may be made after its events: a 2.0.x agent file is named its session when saved).
CREATE OR REPLACE FUNCTION retrod.session_figures_from_files(sessions TEXT[], roles TEXT[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.session_figures AS s (session_uuid, db_role, transcripts, project_slug, first_us, last_us,
                                             has_main)
    SELECT k.session_uuid, k.db_role, count(f.id),
           coalesce(min(f.slug) FILTER (WHERE f.kind = 'main'), min(f.slug)),
           (SELECT retrod.ts_to_us(t.first_ts) FROM retrod.session_times t
            WHERE t.session_uuid = k.session_uuid AND t.db_role = k.db_role),
           (SELECT retrod.ts_to_us(t.last_ts) FROM retrod.session_times t
            WHERE t.session_uuid = k.session_uuid AND t.db_role = k.db_role),
           coalesce(bool_or(f.kind = 'main'), false)
    FROM (SELECT DISTINCT * FROM unnest(sessions, roles)) k(session_uuid, db_role)
    LEFT JOIN retrod.files f ON f.session_uuid = k.session_uuid AND f.db_role = k.db_role
                             AND f.kind IN ('main', 'subagent', 'agent_root')
    WHERE k.session_uuid IS NOT NULL
    GROUP BY 1, 2
    ON CONFLICT (session_uuid, db_role) DO UPDATE SET
        transcripts = excluded.transcripts, project_slug = excluded.project_slug, first_us = excluded.first_us,
        last_us = excluded.last_us, has_main = excluded.has_main;
    PERFORM retrod.session_figures_gone(sessions, roles);
END $$;

-- What is stored: every member's rows (the transcripts are read again under fold.RULES 3, which
-- brings the subagent timelines' rows).
UPDATE retrod.session_figures f
SET first_us = retrod.ts_to_us(t.first_ts), last_us = retrod.ts_to_us(t.last_ts)
FROM retrod.session_figures k
LEFT JOIN retrod.session_times t ON t.session_uuid = k.session_uuid AND t.db_role = k.db_role
WHERE (f.session_uuid, f.db_role) = (k.session_uuid, k.db_role);
