-- DESIGN §2.6: the tool calls of every session and the first result of each, with the waste
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
    PRIMARY KEY (file_id, tool_use_id),
    FOREIGN KEY (file_id, db_role) REFERENCES retrod.files (id, db_role) ON DELETE CASCADE
);

-- Writes (DESIGN §2.6): successful calls of the four editing tools.
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
-- The occurrences of an id in a session's files (it counts once).
CREATE INDEX tool_uses_ids ON retrod.tool_uses (session_uuid, tool_use_id) WHERE agent IS NOT NULL;
-- The report: calls in a phase's edge minutes; the first examples of each signal.
CREATE INDEX tool_uses_times ON retrod.tool_uses (session_uuid, ts) WHERE counted;
CREATE INDEX tool_uses_signals ON retrod.tool_uses (session_uuid, signal, ts, file_path, "offset", block)
    WHERE counted AND signal IS NOT NULL;

-- Counted calls by (session, minute, agent, signal; '' = productive), kept by the trigger below
-- in the same transaction, so a report and `retrod sessions` never count calls one by one.
CREATE TABLE retrod.call_minutes (
    session_uuid TEXT COLLATE "C" NOT NULL,
    minute TIMESTAMPTZ NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    signal TEXT COLLATE "C" NOT NULL,
    calls BIGINT NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (session_uuid, minute, agent, signal)
);

CREATE FUNCTION retrod.add_call_minutes(changed retrod.tool_uses[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.call_minutes AS m (session_uuid, minute, agent, signal, calls)
    SELECT session_uuid, retrod.minute_of(ts), agent, coalesce(signal, ''), direction * count(*)
    FROM unnest(changed) WHERE counted GROUP BY 1, 2, 3, 4
    ON CONFLICT (session_uuid, minute, agent, signal) DO UPDATE SET calls = m.calls + excluded.calls;
    IF direction < 0 THEN
        DELETE FROM retrod.call_minutes m
        USING (SELECT DISTINCT session_uuid, retrod.minute_of(ts) AS minute, agent, coalesce(signal, '') AS signal
               FROM unnest(changed) WHERE counted) c
        WHERE m.calls = 0
          AND (m.session_uuid, m.minute, m.agent, m.signal) = (c.session_uuid, c.minute, c.agent, c.signal);
    END IF;
END $$;

-- Most updates only add a result (or its judgement leaves the signal as it was): only rows whose
-- counted call, signal, agent or time changed move the rollup.
CREATE FUNCTION retrod.tool_uses_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM retrod.add_call_minutes(ARRAY(SELECT n::retrod.tool_uses FROM new_rows n WHERE n.counted), 1);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM retrod.add_call_minutes(ARRAY(SELECT o::retrod.tool_uses FROM old_rows o WHERE o.counted), -1);
    ELSE
        PERFORM retrod.add_call_minutes(ARRAY(
            SELECT o::retrod.tool_uses FROM old_rows o JOIN new_rows n USING (file_id, tool_use_id)
            WHERE (o.counted OR n.counted)
              AND (o.counted, o.signal, o.agent, o.ts) IS DISTINCT FROM (n.counted, n.signal, n.agent, n.ts)), -1);
        PERFORM retrod.add_call_minutes(ARRAY(
            SELECT n::retrod.tool_uses FROM old_rows o JOIN new_rows n USING (file_id, tool_use_id)
            WHERE (o.counted OR n.counted)
              AND (o.counted, o.signal, o.agent, o.ts) IS DISTINCT FROM (n.counted, n.signal, n.agent, n.ts)), 1);
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
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tool_uses_truncated AFTER TRUNCATE ON retrod.tool_uses
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.rollups_truncated();
