-- Migration 0038's marks missed an event stored behind its session's high-water mark (a line
-- read late, or retimed: its prev_ts, the mark, after its own time): its span began at prev_ts,
-- so its own hour, where it still counts (its tool-result bytes, its place at a window's edge),
-- was not marked when it was the statement's only row, and a kept window over it stayed as it
-- was. An event's span now starts at the earlier of the two (least() passes over a NULL
-- prev_ts). Nothing is marked again: marks are read by processes, which keep nothing across the
-- start that runs this migration.
CREATE OR REPLACE FUNCTION retrod.window_rows_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'events' THEN
        IF TG_OP = 'INSERT' THEN
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(least(prev_ts, ts)) a, max(ts) b, false p
                  FROM new_rows WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        ELSIF TG_OP = 'UPDATE' THEN
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(least(prev_ts, ts)) a, max(ts) b, false p
                  FROM (SELECT session_uuid, db_role, prev_ts, ts FROM new_rows
                        UNION ALL SELECT session_uuid, db_role, prev_ts, ts FROM old_rows) n
                  WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        ELSE
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(least(prev_ts, ts)) a, max(ts) b, false p
                  FROM old_rows WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        END IF;
    ELSIF TG_TABLE_NAME = 'tool_uses' THEN
        IF TG_OP = 'INSERT' THEN
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(ts) a, max(ts) b, bool_or(plan IS NOT NULL) p
                  FROM new_rows WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        ELSIF TG_OP = 'UPDATE' THEN
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(ts) a, max(ts) b, bool_or(plan IS NOT NULL) p
                  FROM (SELECT session_uuid, db_role, ts, plan FROM new_rows
                        UNION ALL SELECT session_uuid, db_role, ts, plan FROM old_rows) n
                  WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        ELSE
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(ts) a, max(ts) b, bool_or(plan IS NOT NULL) p
                  FROM old_rows WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        END IF;
    ELSE
        IF TG_OP = 'INSERT' THEN
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(ts) a, max(ts) b, false p
                  FROM new_rows WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        ELSIF TG_OP = 'UPDATE' THEN
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(ts) a, max(ts) b, false p
                  FROM (SELECT session_uuid, db_role, ts FROM new_rows
                        UNION ALL SELECT session_uuid, db_role, ts FROM old_rows) n
                  WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        ELSE
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(ts) a, max(ts) b, false p
                  FROM old_rows WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        END IF;
    END IF;
    RETURN NULL;
END $$;
