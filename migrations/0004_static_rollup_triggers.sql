-- The rollup triggers of 0003, reworked for ingest batches that hold several files:
-- - a tool_use id that two files of one session repeat, inserted by ONE statement, counted
--   once (0003 compared each row with the other files' rows, which that statement had just
--   inserted too, and so counted it zero times);
-- - static SQL instead of a query text built for EXECUTE, parsed and planned again on every
--   statement. (The profile put about a third of the database's ingest time in these
--   triggers; static SQL alone did not measurably change that, the batching did.)
-- Each rollup's arithmetic lives in one PL/pgSQL function taking the changed rows and their
-- sign (+1 added, -1 removed); the triggers hand it their transition tables. The rollups hold
-- the same content as before, so nothing is rebuilt.

CREATE FUNCTION retrod.add_request_minutes(changed retrod.requests[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.request_minutes AS m
    SELECT session_uuid, retrod.minute_of(ts), agent, direction * count(*),
           direction * count(*) FILTER (WHERE has_tool_use), direction * sum(input_tokens),
           direction * sum(output_tokens), direction * sum(cache_read_tokens),
           direction * sum(cache_create_tokens)
    FROM unnest(changed) GROUP BY 1, 2, 3
    ON CONFLICT (session_uuid, minute, agent) DO UPDATE SET
        requests = m.requests + excluded.requests, tool_turns = m.tool_turns + excluded.tool_turns,
        input_tokens = m.input_tokens + excluded.input_tokens,
        output_tokens = m.output_tokens + excluded.output_tokens,
        cache_read_tokens = m.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = m.cache_create_tokens + excluded.cache_create_tokens;
    IF direction < 0 THEN
        DELETE FROM retrod.request_minutes m
        USING (SELECT DISTINCT session_uuid, retrod.minute_of(ts) AS minute, agent FROM unnest(changed)) c
        WHERE m.requests = 0 AND (m.session_uuid, m.minute, m.agent) = (c.session_uuid, c.minute, c.agent);
    END IF;
END $$;

CREATE OR REPLACE FUNCTION retrod.requests_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_request_minutes(ARRAY(SELECT o::retrod.requests FROM old_rows o), -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.add_request_minutes(ARRAY(SELECT n::retrod.requests FROM new_rows n), 1);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION retrod.add_event_minutes(changed retrod.events[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.event_minutes AS m
    SELECT session_uuid, minute, direction * coalesce(sum(us) FILTER (WHERE kind = 'claude'), 0),
           direction * coalesce(sum(us) FILTER (WHERE kind = 'tool'), 0),
           direction * coalesce(sum(us) FILTER (WHERE kind = 'human'), 0), direction * sum(bytes)
    FROM (
        SELECT c.session_uuid, p.minute, c.kind, retrod.interval_us(p.piece_end - p.piece_start) AS us,
               0 AS bytes
        FROM unnest(changed) c, retrod.pieces_of(c.prev_ts, c.ts) p WHERE c.kind IS NOT NULL
        UNION ALL
        SELECT session_uuid, retrod.minute_of(ts), NULL, 0, tool_result_bytes
        FROM unnest(changed) c WHERE tool_result_bytes <> 0
    ) d
    GROUP BY 1, 2
    ON CONFLICT (session_uuid, minute) DO UPDATE SET
        claude_us = m.claude_us + excluded.claude_us, tool_us = m.tool_us + excluded.tool_us,
        human_us = m.human_us + excluded.human_us,
        tool_result_bytes = m.tool_result_bytes + excluded.tool_result_bytes;
    IF direction < 0 THEN
        DELETE FROM retrod.event_minutes m
        WHERE m.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed))
          AND (m.claude_us, m.tool_us, m.human_us, m.tool_result_bytes) = (0, 0, 0, 0);
    END IF;
END $$;

CREATE OR REPLACE FUNCTION retrod.events_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO retrod.gap_pieces
        SELECT e.file_id, e."offset", p.minute, e.session_uuid, e.kind, p.piece_start, p.piece_end
        FROM new_rows e, retrod.pieces_of(e.prev_ts, e.ts) p
        WHERE e.kind IS NOT NULL;
        INSERT INTO retrod.gap_spans
        SELECT e.file_id, e."offset", e.session_uuid, e.kind, sp.span_start, sp.span_end
        FROM new_rows e, retrod.span_of(e.prev_ts, e.ts) sp
        WHERE e.kind IS NOT NULL;
        PERFORM retrod.add_event_minutes(ARRAY(SELECT n::retrod.events FROM new_rows n), 1);
    ELSE  -- DELETE: gap_pieces and gap_spans follow by their foreign key
        PERFORM retrod.add_event_minutes(ARRAY(SELECT o::retrod.events FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION retrod.add_session_tool_calls(changed retrod.tool_calls[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- Ingesters of other files of the same session (other hosts) must not count concurrently:
    -- the check below only sees committed rows, and each statement here takes a new snapshot.
    PERFORM pg_advisory_xact_lock(hashtext('retrod.tool_calls'), hashtext(session_uuid))
    FROM (SELECT DISTINCT session_uuid FROM unnest(changed) ORDER BY 1) s;
    -- An id counts when its first row appears and stops counting when its last row goes. The
    -- table already shows this statement's rows, which may come from several files: an id is
    -- new when all its rows are this statement's, gone when none remain.
    INSERT INTO retrod.session_tool_calls AS s
    SELECT session_uuid, direction * count(*) FROM (
        SELECT c.session_uuid FROM unnest(changed) c
        GROUP BY c.session_uuid, c.tool_use_id
        HAVING (SELECT count(*) FROM retrod.tool_calls t
                WHERE t.session_uuid = c.session_uuid AND t.tool_use_id = c.tool_use_id)
               = CASE WHEN direction > 0 THEN count(*) ELSE 0 END
    ) d GROUP BY 1
    ON CONFLICT (session_uuid) DO UPDATE SET tool_calls = s.tool_calls + excluded.tool_calls;
    IF direction < 0 THEN
        DELETE FROM retrod.session_tool_calls s
        WHERE s.tool_calls = 0 AND s.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed));
    END IF;
END $$;

CREATE OR REPLACE FUNCTION retrod.tool_calls_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM retrod.add_session_tool_calls(ARRAY(SELECT n::retrod.tool_calls FROM new_rows n), 1);
    ELSE
        PERFORM retrod.add_session_tool_calls(ARRAY(SELECT o::retrod.tool_calls FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

DROP FUNCTION retrod.signed_rows(TEXT);
