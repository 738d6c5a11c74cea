-- Whole reports kept between asks (issue 32, report/kept_reports.py) are checked against their
-- own session's count of changes: trends' day counts (0034) move too at any commit changing
-- another session started that day, so a finished session's report would be built again at
-- every commit of a live session of the same day. The deferred trigger that settles a marked
-- session (0034) already updates its row at that commit; it now counts the commit there too.
-- Every change 0034 marks moves it (a session's rollups, events, files, cache misses; its phases
-- and tracked row, by any tool; fork copies decided by another session's commit, §2.1, and
-- undated rows, which the window marks of 0038 pass over), and it only goes up.
--
-- A table 0034 watches emptied (TRUNCATE: no row to mark) moves every day's count; it now moves
-- 0038's count of emptyings too, which every kept report (and every kept window) is checked
-- against, as its figures are read from those tables.
ALTER TABLE retrod.trend_sessions ADD COLUMN changes BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION retrod.settle_trend_sessions() RETURNS TRIGGER LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM retrod.trend_sessions t
                   WHERE t.changed AND t.session_uuid = NEW.session_uuid AND t.db_role = NEW.db_role) THEN
        RETURN NULL;  -- (settled by an earlier row's firing at this commit)
    END IF;
    WITH settled AS (
        UPDATE retrod.trend_sessions t
        SET changed = false, changes = t.changes + 1,
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

CREATE OR REPLACE FUNCTION retrod.trend_rows_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    UPDATE retrod.trend_days SET changes = changes + 1;
    UPDATE retrod.window_marks SET changes = changes + 1 WHERE session_uuid = '' AND db_role = '' AND hour = -1;
    RETURN NULL;
END $$;
