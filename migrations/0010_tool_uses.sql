-- accounting.md §2.6: the tool calls of every session and the first result of each, with the waste
-- signal each call gets, kept as the files are read (store/queries.sql, "Tool uses").
--
-- One row per (file, tool_use id): the call, when the file holds a block that counts (an own
-- assistant line of a main transcript, a line of a subagent file that is not copied history),
-- and the result, when a user line of the file holds the first tool_result for it. Either can
-- come first: a result written before its call, or a chunk that ends between them.
-- A call's signal depends on the agent's other calls (the next one, earlier ones with the same
-- input or path), so it is judged again whenever what it depends on changes; the rows are in
-- the agent's order (file path, offset, block) in the indexes each judgement looks up.
-- The table starts empty: migration 0009 has every transcript that still exists read again.
CREATE TABLE retrod.tool_uses (
    file_id BIGINT NOT NULL,
    tool_use_id TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    session_uuid TEXT COLLATE "C" NOT NULL,
    -- the call (NULL agent: not read yet)
    agent TEXT COLLATE "C",
    file_path TEXT COLLATE "C",  -- an agent may have several files: its order goes by their paths
    "offset" BIGINT,
    block INT,
    name TEXT COLLATE "C",
    input_hash UUID,  -- of the name and the canonical input: "the same name and input"
    path TEXT COLLATE "C",  -- input.file_path or input.notebook_path
    detail TEXT,  -- a short form of an input without a path, for the report's examples
    ts TIMESTAMPTZ,
    counted BOOLEAN NOT NULL DEFAULT false,  -- the occurrence of its id that counts for the session
    signal TEXT CHECK (signal IN ('sibling_error', 'error_retry', 'persisted_output_read',
                                  'post_write_read', 'duplicate', 're_read')),  -- NULL: productive
    -- the result
    has_result BOOLEAN NOT NULL DEFAULT false,
    failed BOOLEAN NOT NULL DEFAULT false,
    sibling BOOLEAN NOT NULL DEFAULT false,  -- failed, saying "Sibling tool call errored"
    result_bytes BIGINT,
    result_ts TIMESTAMPTZ,
    -- time from call to result; a result stamped before its call took no time
    result_us BIGINT GENERATED ALWAYS AS (
        CASE WHEN has_result AND ts IS NOT NULL AND result_ts IS NOT NULL
             THEN greatest(retrod.interval_us(result_ts - ts), 0) END) STORED,
    -- By session first: the key also finds an id's occurrences in the session's files (it counts
    -- once), and a file's rows by its session. (No index by file alone: retrod deletes no file.)
    PRIMARY KEY (session_uuid, tool_use_id, file_id),
    FOREIGN KEY (file_id, db_role) REFERENCES retrod.files (id, db_role) ON DELETE CASCADE
);

-- Writes (accounting.md §2.6): successful calls of the four editing tools.
CREATE FUNCTION retrod.is_write(name TEXT, failed BOOLEAN) RETURNS BOOLEAN
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT name IN ('Write', 'Edit', 'MultiEdit', 'NotebookEdit') AND NOT failed
$$;

-- What a judgement looks up, each in the agent's order: the next call; the latest earlier
-- call with the same input that did not fail; the writes; the calls naming a path.
CREATE INDEX tool_uses_order ON retrod.tool_uses (session_uuid, agent, file_path, "offset", block)
    WHERE counted;
CREATE INDEX tool_uses_inputs ON retrod.tool_uses (session_uuid, agent, input_hash, file_path, "offset", block)
    WHERE counted AND NOT failed;
CREATE INDEX tool_uses_writes ON retrod.tool_uses (session_uuid, agent, file_path, "offset", block)
    WHERE counted AND retrod.is_write(name, failed);
CREATE INDEX tool_uses_paths ON retrod.tool_uses (session_uuid, agent, path, file_path, "offset", block)
    WHERE counted AND path IS NOT NULL;
-- The report: calls in a phase's edge minutes, and in the first minutes holding a signal (its
-- examples). No index holds the signal, so judging a call again can update its row in place.
CREATE INDEX tool_uses_times ON retrod.tool_uses (session_uuid, ts) WHERE counted;

-- Rollups of the counted calls, kept by the trigger below in the same transaction, so that a
-- report and `retrod sessions` never count calls one by one: by minute (phase windows), by
-- agent (the session and its subagents) and by tool.
CREATE TABLE retrod.call_minutes (
    session_uuid TEXT COLLATE "C" NOT NULL,
    minute TIMESTAMPTZ NOT NULL,
    productive BIGINT NOT NULL,
    sibling_error BIGINT NOT NULL,
    error_retry BIGINT NOT NULL,
    persisted_output_read BIGINT NOT NULL,
    post_write_read BIGINT NOT NULL,
    duplicate BIGINT NOT NULL,
    re_read BIGINT NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (session_uuid, minute)
);

CREATE TABLE retrod.call_agents (
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    productive BIGINT NOT NULL,
    sibling_error BIGINT NOT NULL,
    error_retry BIGINT NOT NULL,
    persisted_output_read BIGINT NOT NULL,
    post_write_read BIGINT NOT NULL,
    duplicate BIGINT NOT NULL,
    re_read BIGINT NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (session_uuid, agent)
);

-- Per tool: calls, failed, calls with a result and their bytes, calls with a time to result and
-- its sum. (Medians are read from the indexes below, half a tool's calls at most.)
CREATE TABLE retrod.call_tools (
    session_uuid TEXT COLLATE "C" NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    calls BIGINT NOT NULL,
    failed BIGINT NOT NULL,
    results BIGINT NOT NULL,
    result_bytes BIGINT NOT NULL,
    timed BIGINT NOT NULL,
    result_us BIGINT NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (session_uuid, name)
);
CREATE INDEX tool_uses_result_bytes ON retrod.tool_uses (session_uuid, name, result_bytes)
    WHERE counted AND has_result;
CREATE INDEX tool_uses_result_us ON retrod.tool_uses (session_uuid, name, result_us)
    WHERE counted AND result_us IS NOT NULL;

CREATE FUNCTION retrod.add_tool_uses(changed retrod.tool_uses[], direction INT)
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
    ON CONFLICT (session_uuid, minute) DO UPDATE SET
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
    ON CONFLICT (session_uuid, agent) DO UPDATE SET
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
    ON CONFLICT (session_uuid, name) DO UPDATE SET
        calls = t.calls + excluded.calls, failed = t.failed + excluded.failed, results = t.results + excluded.results,
        result_bytes = t.result_bytes + excluded.result_bytes, timed = t.timed + excluded.timed,
        result_us = t.result_us + excluded.result_us;
    IF direction < 0 THEN  -- a rollup row that sums to nothing goes, as one pass would not have it
        DELETE FROM retrod.call_minutes m
        USING (SELECT DISTINCT session_uuid, retrod.minute_of(ts) AS minute FROM unnest(changed) WHERE counted) c
        WHERE (m.session_uuid, m.minute) = (c.session_uuid, c.minute)
          AND m.productive + m.sibling_error + m.error_retry + m.persisted_output_read + m.post_write_read
              + m.duplicate + m.re_read = 0;
        DELETE FROM retrod.call_agents a
        USING (SELECT DISTINCT session_uuid, agent FROM unnest(changed) WHERE counted) c
        WHERE (a.session_uuid, a.agent) = (c.session_uuid, c.agent)
          AND a.productive + a.sibling_error + a.error_retry + a.persisted_output_read + a.post_write_read
              + a.duplicate + a.re_read = 0;
        DELETE FROM retrod.call_tools t
        USING (SELECT DISTINCT session_uuid, name FROM unnest(changed) WHERE counted) c
        WHERE (t.session_uuid, t.name) = (c.session_uuid, c.name) AND t.calls = 0;
    END IF;
END $$;

-- An update moves the rollups only for the rows whose counted call changed in what they sum.
CREATE FUNCTION retrod.tool_uses_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM retrod.add_tool_uses(ARRAY(SELECT n::retrod.tool_uses FROM new_rows n WHERE n.counted), 1);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM retrod.add_tool_uses(ARRAY(SELECT o::retrod.tool_uses FROM old_rows o WHERE o.counted), -1);
    ELSIF EXISTS (SELECT FROM new_rows) THEN  -- (an upsert that updated nothing fires it too)
        PERFORM retrod.add_tool_uses(ARRAY(
            SELECT o::retrod.tool_uses FROM old_rows o JOIN new_rows n USING (session_uuid, tool_use_id, file_id)
            WHERE o.counted AND (o.counted, o.signal, o.agent, o.ts, o.name, o.failed, o.has_result,
                                 o.result_bytes, o.result_us)
                  IS DISTINCT FROM (n.counted, n.signal, n.agent, n.ts, n.name, n.failed, n.has_result,
                                    n.result_bytes, n.result_us)), -1);
        PERFORM retrod.add_tool_uses(ARRAY(
            SELECT n::retrod.tool_uses FROM old_rows o JOIN new_rows n USING (session_uuid, tool_use_id, file_id)
            WHERE n.counted AND (o.counted, o.signal, o.agent, o.ts, o.name, o.failed, o.has_result,
                                 o.result_bytes, o.result_us)
                  IS DISTINCT FROM (n.counted, n.signal, n.agent, n.ts, n.name, n.failed, n.has_result,
                                    n.result_bytes, n.result_us)), 1);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tool_uses_inserted AFTER INSERT ON retrod.tool_uses
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.tool_uses_changed();
CREATE TRIGGER tool_uses_updated AFTER UPDATE ON retrod.tool_uses
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.tool_uses_changed();
CREATE TRIGGER tool_uses_deleted AFTER DELETE ON retrod.tool_uses
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.tool_uses_changed();

-- Rebuilding retrod's tables by truncation empties this rollup too (see 0003).
CREATE OR REPLACE FUNCTION retrod.rollups_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    -- (gap_pieces and gap_spans reference events: a TRUNCATE of events must cascade to them.)
    IF TG_TABLE_NAME = 'requests' THEN
        DELETE FROM retrod.request_minutes;
    ELSIF TG_TABLE_NAME = 'events' THEN
        DELETE FROM retrod.event_minutes;
    ELSIF TG_TABLE_NAME = 'tool_calls' THEN
        DELETE FROM retrod.session_tool_calls;
    ELSIF TG_TABLE_NAME = 'tool_uses' THEN
        DELETE FROM retrod.call_minutes;
        DELETE FROM retrod.call_agents;
        DELETE FROM retrod.call_tools;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tool_uses_truncated AFTER TRUNCATE ON retrod.tool_uses
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.rollups_truncated();
