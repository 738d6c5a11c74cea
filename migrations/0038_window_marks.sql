-- The tasks' window figures kept between reports (issue 30, report/kept_windows.py): a task
-- window's figures (accounting.md §2.5 over its range) depend only on the session's rows whose time
-- is in its range (a request's or a call's timestamp, a gap's [prev_ts, ts]), so a process keeps
-- them and sums again only the windows whose range a later commit touched. What tells it is kept
-- here, by the statement triggers below, whatever code path wrote (every ingest path, a file
-- forgotten, another tool).
--
-- Per member, session and UTC hour (an hour's number since the epoch), `changes` goes up at
-- every statement that inserts, updates or deletes a request or a call whose time is in that
-- hour, or an event whose gap [prev_ts, ts] overlaps it (each statement marks, per session, the
-- span from its rows' first time to their last); `plan_changes` goes up with it where the
-- statement's rows hold a plan call (migration 0025: a tool use with `plan`), which the task
-- windows themselves come from. Counts only go up and rows are never deleted, so a count read before a window's
-- figures differs from any read after a later change of its rows; an hour with no row has
-- never changed (count 0), and rows stored before this migration need none: a process kept
-- nothing then. A TRUNCATE of any of the three tables moves the row of session '' (hour -1),
-- which every kept window is checked against too.
--
-- The rollups the figures are read from (minutes, hours, gap spans) are kept from these rows by
-- their triggers in the same transaction, so marking the raw rows marks them too; the price
-- tiers' thresholds (the edges' tier floors) are part of what a kept window is keyed by.
CREATE TABLE retrod.window_marks (
    session_uuid TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    hour BIGINT NOT NULL,  -- floor(epoch seconds / 3600) of the time touched
    changes BIGINT NOT NULL DEFAULT 0,
    plan_changes BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (session_uuid, db_role, hour)
);
INSERT INTO retrod.window_marks (session_uuid, db_role, hour) VALUES ('', '', -1);

-- Each session's span [a, b] of times touched, its hours marked (`p`: plan calls among its rows),
-- in key order, so two commits never wait on each other's rows in opposite orders.
CREATE FUNCTION retrod.window_hour(ts TIMESTAMPTZ) RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN floor(extract(epoch FROM ts) / 3600)::bigint;

-- (PL/pgSQL: its statement's plan is kept by the connection, where an SQL function's is made at
-- each call: 0.3 ms, a third of a backfill's marking.)
CREATE FUNCTION retrod.mark_window_hours(s TEXT[], r TEXT[], a TIMESTAMPTZ[], b TIMESTAMPTZ[], p BOOLEAN[])
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.window_marks AS m (session_uuid, db_role, hour, changes, plan_changes)
    SELECT x.s, x.r, h, 1, x.p::int
    FROM unnest(s, r, a, b, p) AS x(s, r, a, b, p),
         generate_series(retrod.window_hour(x.a), retrod.window_hour(x.b)) h
    ORDER BY 1, 2, 3
    ON CONFLICT (session_uuid, db_role, hour)
    DO UPDATE SET changes = m.changes + 1, plan_changes = m.plan_changes + excluded.plan_changes;
END $$;

-- A statement of requests, events or tool_uses: per session, the span of its rows' times (an
-- event's from its gap's start), old rows and new (a statement's rows are one session's recent
-- lines, as a rule: a span rather than each row's hours costs one pass and marks what it must).
CREATE FUNCTION retrod.window_rows_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'events' THEN
        IF TG_OP = 'INSERT' THEN
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(coalesce(prev_ts, ts)) a, max(ts) b, false p
                  FROM new_rows WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        ELSIF TG_OP = 'UPDATE' THEN
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(coalesce(prev_ts, ts)) a, max(ts) b, false p
                  FROM (SELECT session_uuid, db_role, prev_ts, ts FROM new_rows
                        UNION ALL SELECT session_uuid, db_role, prev_ts, ts FROM old_rows) n
                  WHERE ts IS NOT NULL GROUP BY 1, 2) x;
        ELSE
            PERFORM retrod.mark_window_hours(array_agg(s), array_agg(r), array_agg(a), array_agg(b), array_agg(p))
            FROM (SELECT session_uuid s, db_role r, min(coalesce(prev_ts, ts)) a, max(ts) b, false p
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

-- An emptied table: every kept window dropped.
CREATE FUNCTION retrod.window_rows_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    UPDATE retrod.window_marks SET changes = changes + 1 WHERE session_uuid = '' AND db_role = '' AND hour = -1;
    RETURN NULL;
END $$;

DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['requests', 'events', 'tool_uses'] LOOP
        EXECUTE format('CREATE TRIGGER %1$s_window_inserted AFTER INSERT ON retrod.%1$s REFERENCING NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.window_rows_changed()', t);
        EXECUTE format('CREATE TRIGGER %1$s_window_updated AFTER UPDATE ON retrod.%1$s'
                       ' REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.window_rows_changed()', t);
        EXECUTE format('CREATE TRIGGER %1$s_window_deleted AFTER DELETE ON retrod.%1$s REFERENCING OLD TABLE AS old_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.window_rows_changed()', t);
        EXECUTE format('CREATE TRIGGER %1$s_window_truncated AFTER TRUNCATE ON retrod.%1$s'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.window_rows_truncated()', t);
        -- Fired in the bulk path's replica mode too, as every trigger of retrod's (0011).
        EXECUTE format('ALTER TABLE retrod.%1$s ENABLE ALWAYS TRIGGER %1$s_window_inserted', t);
        EXECUTE format('ALTER TABLE retrod.%1$s ENABLE ALWAYS TRIGGER %1$s_window_updated', t);
        EXECUTE format('ALTER TABLE retrod.%1$s ENABLE ALWAYS TRIGGER %1$s_window_deleted', t);
        EXECUTE format('ALTER TABLE retrod.%1$s ENABLE ALWAYS TRIGGER %1$s_window_truncated', t);
    END LOOP;
END $$;

-- What was stored before: each hour holding a row marked once, as its insert would have.
INSERT INTO retrod.window_marks (session_uuid, db_role, hour, changes, plan_changes)
SELECT session_uuid, db_role, hour, 1, max(plan::int)
FROM (
    SELECT session_uuid, db_role, retrod.window_hour(ts) AS hour, false AS plan FROM retrod.requests
    WHERE ts IS NOT NULL
    UNION ALL
    SELECT session_uuid, db_role, retrod.window_hour(ts), plan IS NOT NULL FROM retrod.tool_uses WHERE ts IS NOT NULL
    UNION ALL
    SELECT e.session_uuid, e.db_role, h, false
    FROM retrod.events e,
         generate_series(retrod.window_hour(coalesce(e.prev_ts, e.ts)), retrod.window_hour(e.ts)) h
    WHERE e.ts IS NOT NULL
) x
GROUP BY 1, 2, 3;
