-- Trends from kept periods (issue 32): `retrod trends`, its MCP tool and the web UI's trends
-- keep each period's figures between asks (trend_periods.py) and sum again only the periods
-- whose sessions changed since. What tells them is kept here, by the triggers below, whatever
-- code path wrote (every ingest path, a phase logged, a price tier rebuild, another tool).
--
-- A period is cut in any time zone, so no stored period can be marked: a day is. `trend_days`
-- holds, per member and UTC day, a count that goes up whenever a session starting that day
-- changes in any figure trends reads, or starts or stops starting that day; a kept period is
-- summed again when the count of a UTC day it overlaps has moved. ('infinity': the sessions
-- with no start, trends' undated period.) Counts only go up and rows are never deleted, so a
-- count read before a period's figures were summed differs from any read after a later change.
--
-- Which day a session's change counts for is settled at commit, as a session's start can move
-- in the same transaction (an earlier line read): each statement that changes what a session's
-- figures are read from marks its `trend_sessions` row (`changed`), and a deferred trigger
-- settles the transaction's marked rows when it commits, in one statement: each one's day from
-- its start then, the count of that day up, and of the day it had before when it moved. The
-- marked row stays locked until the commit, so a session's day cannot move between the change
-- and its count; the days are counted in one ordered statement, so two commits never wait on
-- each other's days in opposite orders.
CREATE TABLE retrod.trend_sessions (
    session_uuid TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    day DATE,  -- the UTC day of its start as of its last commit ('infinity': none; NULL: not settled yet)
    changed BOOLEAN NOT NULL DEFAULT true,  -- (true only inside the transaction that marked it)
    PRIMARY KEY (session_uuid, db_role)
);
CREATE INDEX trend_sessions_changed ON retrod.trend_sessions (session_uuid) WHERE changed;

CREATE TABLE retrod.trend_days (
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    day DATE NOT NULL,
    changes BIGINT NOT NULL,
    PRIMARY KEY (db_role, day)
);

-- The sessions started in a span of time: what a period summed again reads (store/trends.sql).
CREATE INDEX session_times_member_start ON retrod.session_times (db_role, first_ts);

-- At commit: the transaction's marked sessions settled (their rows are the only marked ones it
-- sees: every committed row is settled). Security definer: another tool's role writing a phase
-- (below) may not write retrod's tables.
CREATE FUNCTION retrod.settle_trend_sessions() RETURNS TRIGGER LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM retrod.trend_sessions t
                   WHERE t.changed AND t.session_uuid = NEW.session_uuid AND t.db_role = NEW.db_role) THEN
        RETURN NULL;  -- (settled by an earlier row's firing at this commit)
    END IF;
    WITH settled AS (
        UPDATE retrod.trend_sessions t
        SET changed = false,
            day = coalesce((SELECT (s.first_ts AT TIME ZONE 'UTC')::date FROM retrod.session_times s
                            WHERE s.session_uuid = t.session_uuid AND s.db_role = t.db_role), 'infinity')
        FROM retrod.trend_sessions o
        WHERE t.changed AND o.session_uuid = t.session_uuid AND o.db_role = t.db_role
        RETURNING t.db_role, o.day AS before, t.day AS after
    )
    INSERT INTO retrod.trend_days AS d (db_role, day, changes)
    SELECT x.db_role, x.day, count(*) FROM (
        SELECT s.db_role, s.after AS day FROM settled s
        UNION ALL
        SELECT s.db_role, s.before FROM settled s WHERE s.before IS DISTINCT FROM s.after AND s.before IS NOT NULL
    ) x
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (db_role, day) DO UPDATE SET changes = d.changes + excluded.changes;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER trend_sessions_settled AFTER INSERT OR UPDATE ON retrod.trend_sessions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.changed) EXECUTE FUNCTION retrod.settle_trend_sessions();

-- A statement of retrod's tables that trends reads a session's figures from (each row's
-- session_uuid and db_role): its sessions marked, in key order.
CREATE FUNCTION retrod.trend_rows_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
        SELECT DISTINCT n.session_uuid, n.db_role FROM new_rows n WHERE n.session_uuid IS NOT NULL ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
        SELECT DISTINCT o.session_uuid, o.db_role FROM old_rows o WHERE o.session_uuid IS NOT NULL ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed;
    END IF;
    RETURN NULL;
END $$;

-- A file's row is rewritten at every batch (its offset, size, fold state): only a change of
-- what trends reads of it (which session and kind it is, its folder and path, its working
-- folder) marks its sessions.
CREATE FUNCTION retrod.trend_files_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
        SELECT DISTINCT x.session_uuid, x.db_role FROM (
            SELECT n.session_uuid, n.db_role, o.session_uuid AS old_session, o.db_role AS old_role
            FROM new_rows n JOIN old_rows o ON o.id = n.id
            WHERE (n.session_uuid, n.db_role, n.kind, n.slug, n.path, n.state ->> 'cwd')
                  IS DISTINCT FROM (o.session_uuid, o.db_role, o.kind, o.slug, o.path, o.state ->> 'cwd')
        ) c, LATERAL (VALUES (c.session_uuid, c.db_role), (c.old_session, c.old_role)) x(session_uuid, db_role)
        WHERE x.session_uuid IS NOT NULL ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
        SELECT DISTINCT n.session_uuid, n.db_role FROM new_rows n WHERE n.session_uuid IS NOT NULL ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed;
    ELSE
        INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
        SELECT DISTINCT o.session_uuid, o.db_role FROM old_rows o WHERE o.session_uuid IS NOT NULL ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed;
    END IF;
    RETURN NULL;
END $$;

-- An emptied table: every day counted again (its sessions' figures are gone).
CREATE FUNCTION retrod.trend_rows_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    UPDATE retrod.trend_days SET changes = changes + 1;
    RETURN NULL;
END $$;

-- What trends sums (store/trends.sql, trend_figures): the per-session rollups (time, tool
-- output, requests by price group, calls by agent), the prompt-cache misses, the files (which
-- sessions there are, their projects), and the events (an away gap's length: inserting or
-- deleting one changes session_times too, an update may not).
DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['session_times', 'session_requests', 'call_agents', 'cache_misses'] LOOP
        EXECUTE format('CREATE TRIGGER %1$s_trend_inserted AFTER INSERT ON retrod.%1$s REFERENCING NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_rows_changed()', t);
        EXECUTE format('CREATE TRIGGER %1$s_trend_updated AFTER UPDATE ON retrod.%1$s'
                       ' REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_rows_changed()', t);
        EXECUTE format('CREATE TRIGGER %1$s_trend_deleted AFTER DELETE ON retrod.%1$s REFERENCING OLD TABLE AS old_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_rows_changed()', t);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['session_times', 'session_requests', 'call_agents', 'cache_misses', 'events', 'files'] LOOP
        EXECUTE format('CREATE TRIGGER %1$s_trend_truncated AFTER TRUNCATE ON retrod.%1$s'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_rows_truncated()', t);
    END LOOP;
END $$;
CREATE TRIGGER events_trend_updated AFTER UPDATE ON retrod.events
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_rows_changed();
CREATE TRIGGER files_trend_inserted AFTER INSERT ON retrod.files REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_files_changed();
CREATE TRIGGER files_trend_updated AFTER UPDATE ON retrod.files REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_files_changed();
CREATE TRIGGER files_trend_deleted AFTER DELETE ON retrod.files REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_files_changed();

-- Fired in the bulk path's replica mode too, as every trigger of retrod's (0011).
DO $$
DECLARE
    r RECORD;
BEGIN
    FOR r IN SELECT c.relname, g.tgname FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
             JOIN pg_namespace s ON s.oid = c.relnamespace
             WHERE s.nspname = 'retrod' AND (g.tgname LIKE '%\_trend\_%' OR g.tgname = 'trend_sessions_settled')
    LOOP
        EXECUTE format('ALTER TABLE retrod.%I ENABLE ALWAYS TRIGGER %I', r.relname, r.tgname);
    END LOOP;
END $$;

-- A phase logged, changed or deleted (its verdict counts in its session's period), and a tracked
-- session re-keyed or deleted: the user's tables, which other tools write too (so the function
-- writes retrod's rows as their owner). Its session's rows are marked (every member's holding
-- it, when the table keeps no member: as trend_figures reads the phases). Created only where the
-- role migrating may add a trigger to the user's tables; trend_periods.py keeps no period where
-- these triggers are missing or disabled.
CREATE FUNCTION retrod.trend_phases_changed() RETURNS TRIGGER LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ids INT[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        ids := ARRAY(SELECT n.session_id FROM new_rows n);
    ELSIF TG_OP = 'UPDATE' THEN
        ids := ARRAY(SELECT n.session_id FROM new_rows n UNION SELECT o.session_id FROM old_rows o);
    ELSE
        ids := ARRAY(SELECT o.session_id FROM old_rows o);
    END IF;
    PERFORM retrod.mark_tracked_sessions(ARRAY(
        SELECT jsonb_build_object('s', u.session_uuid, 'r', to_jsonb(u) ->> 'db_role')
        FROM public.cc_sessions u WHERE u.id = ANY(ids)));
    RETURN NULL;
END $$;

CREATE FUNCTION retrod.trend_tracked_changed() RETURNS TRIGGER LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        PERFORM retrod.mark_tracked_sessions(ARRAY(
            SELECT jsonb_build_object('s', x.session_uuid, 'r', x.db_role)
            FROM (SELECT n.id, n.session_uuid, to_jsonb(n) ->> 'db_role' AS db_role FROM new_rows n
                  UNION ALL SELECT o.id, o.session_uuid, to_jsonb(o) ->> 'db_role' FROM old_rows o) x
            WHERE x.id IN (SELECT n.id FROM new_rows n JOIN old_rows o USING (id)
                           WHERE (n.session_uuid, to_jsonb(n) ->> 'db_role')
                                 IS DISTINCT FROM (o.session_uuid, to_jsonb(o) ->> 'db_role'))));
    ELSE
        PERFORM retrod.mark_tracked_sessions(ARRAY(
            SELECT jsonb_build_object('s', o.session_uuid, 'r', to_jsonb(o) ->> 'db_role') FROM old_rows o));
    END IF;
    RETURN NULL;
END $$;

-- These tracked sessions' rows marked (`r` null: every member's).
CREATE FUNCTION retrod.mark_tracked_sessions(sessions JSONB[]) RETURNS void LANGUAGE sql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    UPDATE retrod.trend_sessions t SET changed = true
    FROM (SELECT DISTINCT x ->> 's' AS session_uuid, x ->> 'r' AS db_role FROM unnest(sessions) x) s
    WHERE t.session_uuid = s.session_uuid AND (s.db_role IS NULL OR t.db_role = s.db_role) AND NOT t.changed
$$;

DO $$
BEGIN
    IF has_table_privilege('public.cc_session_phases', 'TRIGGER')
       AND has_table_privilege('public.cc_sessions', 'TRIGGER') THEN
        CREATE TRIGGER cc_session_phases_trend_inserted AFTER INSERT ON public.cc_session_phases
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_phases_changed();
        CREATE TRIGGER cc_session_phases_trend_updated AFTER UPDATE ON public.cc_session_phases
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_phases_changed();
        CREATE TRIGGER cc_session_phases_trend_deleted AFTER DELETE ON public.cc_session_phases
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_phases_changed();
        CREATE TRIGGER cc_sessions_trend_updated AFTER UPDATE ON public.cc_sessions
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_tracked_changed();
        CREATE TRIGGER cc_sessions_trend_deleted AFTER DELETE ON public.cc_sessions
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_tracked_changed();
    ELSE
        RAISE WARNING 'retrod: no trigger may be added to public.cc_sessions and public.cc_session_phases:'
                      ' trends sums every period on each ask';
    END IF;
END $$;

-- What was stored before: every session settled on its day.
INSERT INTO retrod.trend_sessions (session_uuid, db_role, day, changed)
SELECT k.session_uuid, k.db_role, coalesce((t.first_ts AT TIME ZONE 'UTC')::date, 'infinity'), false
FROM (SELECT session_uuid, db_role FROM retrod.files WHERE session_uuid IS NOT NULL
      UNION SELECT session_uuid, db_role FROM retrod.session_times
      UNION SELECT session_uuid, db_role FROM retrod.session_requests
      UNION SELECT session_uuid, db_role FROM retrod.call_agents
      UNION SELECT session_uuid, db_role FROM retrod.cache_misses) k
LEFT JOIN retrod.session_times t ON t.session_uuid = k.session_uuid AND t.db_role = k.db_role;
INSERT INTO retrod.trend_days (db_role, day, changes)
SELECT db_role, day, 1 FROM retrod.trend_sessions GROUP BY 1, 2;
