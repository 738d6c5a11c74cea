-- The brief kept between asks (issue 32, history/kept_briefs.py): read again when the member's
-- trend marks (migration 0034) have moved. Of what a brief measures (accounting.md §2.10), one
-- thing 0034 does not mark: the patterns a stored brief gave a session ("Given": a side starts at
-- the first session given a pattern). A brief stored, changed or deleted now marks its session
-- as 0034 marks a session whose figures changed, counted on its day at commit; only a session
-- already stored has a row to mark, and a brief given to one not stored yet (the SessionStart
-- hook's new session) takes no part in any figure until its rows are stored, which marks it.
-- Trends sums that session's periods again, as after any other change of it.
CREATE FUNCTION retrod.briefs_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.mark_tracked_sessions(ARRAY(
            SELECT DISTINCT jsonb_build_object('s', n.session_uuid, 'r', n.db_role) FROM new_rows n));
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.mark_tracked_sessions(ARRAY(
            SELECT DISTINCT jsonb_build_object('s', o.session_uuid, 'r', o.db_role) FROM old_rows o));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER briefs_trend_inserted AFTER INSERT ON retrod.briefs REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.briefs_changed();
CREATE TRIGGER briefs_trend_updated AFTER UPDATE ON retrod.briefs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.briefs_changed();
CREATE TRIGGER briefs_trend_deleted AFTER DELETE ON retrod.briefs REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.briefs_changed();
CREATE TRIGGER briefs_trend_truncated AFTER TRUNCATE ON retrod.briefs
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.trend_rows_truncated();

-- Fired in the bulk path's replica mode too, as every trigger of retrod's (0011).
ALTER TABLE retrod.briefs ENABLE ALWAYS TRIGGER briefs_trend_inserted;
ALTER TABLE retrod.briefs ENABLE ALWAYS TRIGGER briefs_trend_updated;
ALTER TABLE retrod.briefs ENABLE ALWAYS TRIGGER briefs_trend_deleted;
ALTER TABLE retrod.briefs ENABLE ALWAYS TRIGGER briefs_trend_truncated;
