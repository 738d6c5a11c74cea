-- Every key names the member (accounting.md §3; issue 19), and no index refuses a long string (§2.1).
--
-- On a team's database, a member who named a transcript of their own after a colleague's
-- session id (or copied request ids) took the colleague's keys: the colleague's upserts then met
-- rows row-level security hides, and failed for good. Every unique key and every rollup key now
-- includes db_role, so the same session id, request key or path under two members is two
-- things. (requests and request_minutes: 0013; event_minutes: 0014. Keys that start with a file
-- id are a member's already: files are keyed by role, 0008.) A solo database has one role:
-- nothing changes there but the key's width.
ALTER TABLE retrod.subagent_meta DROP CONSTRAINT subagent_meta_pkey, ADD PRIMARY KEY (session_uuid, agent_id, db_role);
ALTER TABLE retrod.session_tool_calls DROP CONSTRAINT session_tool_calls_pkey, ADD PRIMARY KEY (session_uuid, db_role);
ALTER TABLE retrod.call_minutes DROP CONSTRAINT call_minutes_pkey, ADD PRIMARY KEY (session_uuid, minute, db_role);
ALTER TABLE retrod.call_agents DROP CONSTRAINT call_agents_pkey, ADD PRIMARY KEY (session_uuid, agent, db_role);
ALTER TABLE retrod.call_tools DROP CONSTRAINT call_tools_pkey, ADD PRIMARY KEY (session_uuid, name, db_role);

-- A transcript's path is kept whole; its unique index holds it whole up to 1,000 bytes, else its
-- start and a SHA-256 of it (a path may be 4,096 bytes; a btree row holds ~2,700). Ids and names
-- read from transcripts are made indexable before they are stored (parser.indexable).
-- (Declared immutable for the index: convert_to is stable only because of the database's
-- encoding, which never changes.)
CREATE FUNCTION retrod.index_text(t TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN octet_length(t) <= 1000 THEN t
                ELSE left(t, 200) || '…#' || encode(sha256(convert_to(t, 'UTF8')), 'hex') END
$$;
ALTER TABLE retrod.files DROP CONSTRAINT files_host_id_path_role_key;
CREATE UNIQUE INDEX files_host_path_role ON retrod.files (host_id, retrod.index_text(path), db_role);

-- The rollup functions with the member in their keys; each counts the writing role's rows only
-- (a superuser sees every role's).
CREATE OR REPLACE FUNCTION retrod.add_session_tool_calls(changed retrod.tool_calls[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- Ingesters of other files of the same session (other hosts) must not count concurrently:
    -- the check below only sees committed rows, and each statement here takes a new snapshot.
    PERFORM pg_advisory_xact_lock(hashtext('retrod.tool_calls'), hashtext(session_uuid))
    FROM (SELECT DISTINCT session_uuid FROM unnest(changed) ORDER BY 1) s;
    -- An id counts when its first row appears and stops counting when its last row goes. The
    -- table already shows this statement's rows, which may come from several files: an id is
    -- new when all its rows are this statement's, gone when none remain.
    INSERT INTO retrod.session_tool_calls AS s (session_uuid, tool_calls)
    SELECT session_uuid, direction * count(*) FROM (
        SELECT c.session_uuid FROM unnest(changed) c
        GROUP BY c.session_uuid, c.tool_use_id
        HAVING (SELECT count(*) FROM retrod.tool_calls t
                WHERE t.session_uuid = c.session_uuid AND t.tool_use_id = c.tool_use_id
                  AND t.db_role = current_user)
               = CASE WHEN direction > 0 THEN count(*) ELSE 0 END
    ) d GROUP BY 1
    ON CONFLICT (session_uuid, db_role) DO UPDATE SET tool_calls = s.tool_calls + excluded.tool_calls;
    IF direction < 0 THEN
        DELETE FROM retrod.session_tool_calls s
        WHERE s.tool_calls = 0 AND s.db_role = current_user
          AND s.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed));
    END IF;
END $$;

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
    INSERT INTO retrod.call_tools AS t (session_uuid, name, calls, failed, results, result_bytes, timed, result_us)
    SELECT session_uuid, name, direction * count(*), direction * count(*) FILTER (WHERE failed),
           direction * count(*) FILTER (WHERE has_result), direction * coalesce(sum(result_bytes), 0),
           direction * count(result_us), direction * coalesce(sum(result_us), 0)
    FROM unnest(changed) WHERE counted GROUP BY 1, 2
    ON CONFLICT (session_uuid, name, db_role) DO UPDATE SET
        calls = t.calls + excluded.calls, failed = t.failed + excluded.failed, results = t.results + excluded.results,
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

-- Request keys stored before this release longer than a key is now kept whole (parser.indexable):
-- in their new form, so that their transcripts, read again now (fold.RULES 2), count them once.
-- (A record's own place, for a record with no id, is kept whole up to 2,000 bytes: keys.py.)
-- Other ids of 201 to ~2,700 bytes stored before (tool, agent, model, session ids read from lines)
-- are left as they are: no real Claude Code id is that long (docs/decisions.md).
UPDATE retrod.requests SET key = '\h' || encode(sha256(convert_to(key, 'UTF8')), 'hex')
WHERE octet_length(key) > CASE WHEN key ~ '^@.*@[0-9]+$' THEN 2000 ELSE 200 END;
