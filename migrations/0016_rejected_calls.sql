-- A call the person declined at its permission prompt is a refusal, not a tool error (issue 20):
-- Claude Code answers it with a failed tool_result saying "The user doesn't want to proceed with
-- this tool use" (parser.REJECTED_TEXT). It stays failed in accounting.md §2.6's sense (it wrote
-- nothing: no write, and no earlier call "that did not fail" for duplicate and re_read), but it
-- is never an error_retry (queries.sql, judge_tool_uses), and the per-tool figures count it
-- apart: call_tools.failed is the tool errors, call_tools.rejected the refusals.
-- Rows from before learn it when their file is read again (fold.RULES 2, the same release); a
-- deleted transcript's refusals stay counted as failures.
ALTER TABLE retrod.tool_uses ADD COLUMN rejected BOOLEAN NOT NULL DEFAULT false;

-- A stored result and one read again are the same result (the file's first for the call): only
-- then does the one read again say whether the stored one was a refusal.
CREATE FUNCTION retrod.same_result(stored retrod.tool_uses, again retrod.tool_uses) RETURNS BOOLEAN
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT stored.failed AND again.failed AND stored.result_ts IS NOT DISTINCT FROM again.result_ts
           AND stored.result_bytes IS NOT DISTINCT FROM again.result_bytes
$$;
ALTER TABLE retrod.call_tools ADD COLUMN rejected BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION retrod.add_tool_uses(changed retrod.tool_uses[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.call_minutes AS m (session_uuid, minute, productive, sibling_error, error_retry,
                                          persisted_output_read, post_write_read, duplicate, re_read)
    SELECT session_uuid, retrod.minute_of(ts), direction * count(*) FILTER (WHERE signal IS NULL),
           direction * count(*) FILTER (WHERE signal = 'sibling_error'),
           direction * count(*) FILTER (WHERE signal = 'error_retry'),
           direction * count(*) FILTER (WHERE signal = 'persisted_output_read'),
           direction * count(*) FILTER (WHERE signal = 'post_write_read'),
           direction * count(*) FILTER (WHERE signal = 'duplicate'),
           direction * count(*) FILTER (WHERE signal = 're_read')
    FROM unnest(changed) WHERE counted GROUP BY 1, 2
    ON CONFLICT (session_uuid, minute, db_role) DO UPDATE SET
        productive = m.productive + excluded.productive, sibling_error = m.sibling_error + excluded.sibling_error,
        error_retry = m.error_retry + excluded.error_retry,
        persisted_output_read = m.persisted_output_read + excluded.persisted_output_read,
        post_write_read = m.post_write_read + excluded.post_write_read,
        duplicate = m.duplicate + excluded.duplicate, re_read = m.re_read + excluded.re_read;
    INSERT INTO retrod.call_agents AS a (session_uuid, agent, productive, sibling_error, error_retry,
                                         persisted_output_read, post_write_read, duplicate, re_read)
    SELECT session_uuid, agent, direction * count(*) FILTER (WHERE signal IS NULL),
           direction * count(*) FILTER (WHERE signal = 'sibling_error'),
           direction * count(*) FILTER (WHERE signal = 'error_retry'),
           direction * count(*) FILTER (WHERE signal = 'persisted_output_read'),
           direction * count(*) FILTER (WHERE signal = 'post_write_read'),
           direction * count(*) FILTER (WHERE signal = 'duplicate'),
           direction * count(*) FILTER (WHERE signal = 're_read')
    FROM unnest(changed) WHERE counted GROUP BY 1, 2
    ON CONFLICT (session_uuid, agent, db_role) DO UPDATE SET
        productive = a.productive + excluded.productive, sibling_error = a.sibling_error + excluded.sibling_error,
        error_retry = a.error_retry + excluded.error_retry,
        persisted_output_read = a.persisted_output_read + excluded.persisted_output_read,
        post_write_read = a.post_write_read + excluded.post_write_read,
        duplicate = a.duplicate + excluded.duplicate, re_read = a.re_read + excluded.re_read;
    INSERT INTO retrod.call_tools AS t (session_uuid, name, calls, failed, rejected, results, result_bytes, timed,
                                       result_us)
    SELECT session_uuid, name, direction * count(*), direction * count(*) FILTER (WHERE failed AND NOT rejected),
           direction * count(*) FILTER (WHERE rejected),
           direction * count(*) FILTER (WHERE has_result), direction * coalesce(sum(result_bytes), 0),
           direction * count(result_us), direction * coalesce(sum(result_us), 0)
    FROM unnest(changed) WHERE counted GROUP BY 1, 2
    ON CONFLICT (session_uuid, name, db_role) DO UPDATE SET
        calls = t.calls + excluded.calls, failed = t.failed + excluded.failed,
        rejected = t.rejected + excluded.rejected, results = t.results + excluded.results,
        result_bytes = t.result_bytes + excluded.result_bytes, timed = t.timed + excluded.timed,
        result_us = t.result_us + excluded.result_us;
    IF direction < 0 THEN  -- a rollup row that sums to nothing goes, as one pass would not have it
        DELETE FROM retrod.call_minutes m
        USING (SELECT DISTINCT session_uuid, retrod.minute_of(ts) AS minute FROM unnest(changed) WHERE counted) c
        WHERE (m.session_uuid, m.minute, m.db_role) = (c.session_uuid, c.minute, current_user)
          AND m.productive + m.sibling_error + m.error_retry + m.persisted_output_read + m.post_write_read
              + m.duplicate + m.re_read = 0;
        DELETE FROM retrod.call_agents a
        USING (SELECT DISTINCT session_uuid, agent FROM unnest(changed) WHERE counted) c
        WHERE (a.session_uuid, a.agent, a.db_role) = (c.session_uuid, c.agent, current_user)
          AND a.productive + a.sibling_error + a.error_retry + a.persisted_output_read + a.post_write_read
              + a.duplicate + a.re_read = 0;
        DELETE FROM retrod.call_tools t
        USING (SELECT DISTINCT session_uuid, name FROM unnest(changed) WHERE counted) c
        WHERE (t.session_uuid, t.name, t.db_role) = (c.session_uuid, c.name, current_user) AND t.calls = 0;
    END IF;
END $$;

-- An update moves the rollups only for the rows whose counted call changed in what they sum
-- (now: whether it was a refusal, too).
CREATE OR REPLACE FUNCTION retrod.tool_uses_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM retrod.add_tool_uses(ARRAY(SELECT n::retrod.tool_uses FROM new_rows n WHERE n.counted), 1);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM retrod.add_tool_uses(ARRAY(SELECT o::retrod.tool_uses FROM old_rows o WHERE o.counted), -1);
    ELSIF EXISTS (SELECT FROM new_rows) THEN  -- (an upsert that updated nothing fires it too)
        PERFORM retrod.add_tool_uses(ARRAY(
            SELECT o::retrod.tool_uses FROM old_rows o JOIN new_rows n USING (session_uuid, tool_use_id, file_id)
            WHERE o.counted AND (o.counted, o.signal, o.agent, o.ts, o.name, o.failed, o.rejected, o.has_result,
                                 o.result_bytes, o.result_us)
                  IS DISTINCT FROM (n.counted, n.signal, n.agent, n.ts, n.name, n.failed, n.rejected, n.has_result,
                                    n.result_bytes, n.result_us)), -1);
        PERFORM retrod.add_tool_uses(ARRAY(
            SELECT n::retrod.tool_uses FROM old_rows o JOIN new_rows n USING (session_uuid, tool_use_id, file_id)
            WHERE n.counted AND (o.counted, o.signal, o.agent, o.ts, o.name, o.failed, o.rejected, o.has_result,
                                 o.result_bytes, o.result_us)
                  IS DISTINCT FROM (n.counted, n.signal, n.agent, n.ts, n.name, n.failed, n.rejected, n.has_result,
                                    n.result_bytes, n.result_us)), 1);
    END IF;
    RETURN NULL;
END $$;
