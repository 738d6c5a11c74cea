-- Rollups that keep `retrod report` flat in session size: per-minute sums of requests and of
-- classified time, kept by statement-level triggers in the same transaction as the rows they
-- sum (so they are exactly as crash-safe). A phase window then reads the whole minutes it
-- covers from the rollups, and only its two partial edge minutes from the raw rows.
-- Minutes are cut in UTC; requests or lines without a timestamp go to minute 'infinity'.
-- No backfill: this migration ships with 0001 in the first release, so no database holds rows
-- that the triggers did not see.
-- Each trigger applies its rows signed: +1 for rows inserted or updated to, -1 for rows
-- updated from or deleted; a rollup row that sums to nothing is removed, so an incremental
-- ingest leaves exactly the rollups of one pass.

CREATE FUNCTION retrod.minute_of(ts TIMESTAMPTZ) RETURNS TIMESTAMPTZ
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(date_trunc('minute', ts, 'UTC'), 'infinity')
$$;

-- The rows a statement trigger saw, signed, as a query text for EXECUTE.
CREATE FUNCTION retrod.signed_rows(op TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE op
        WHEN 'INSERT' THEN 'SELECT *, 1 AS sign FROM new_rows'
        WHEN 'UPDATE' THEN 'SELECT *, 1 AS sign FROM new_rows UNION ALL SELECT *, -1 FROM old_rows'
        ELSE 'SELECT *, -1 AS sign FROM old_rows' END
$$;

-- Requests by (session, minute, agent).
CREATE TABLE retrod.request_minutes (
    session_uuid TEXT COLLATE "C" NOT NULL,
    minute TIMESTAMPTZ NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    requests BIGINT NOT NULL,
    tool_turns BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_create_tokens BIGINT NOT NULL,
    PRIMARY KEY (session_uuid, minute, agent)
);
CREATE INDEX request_minutes_agent ON retrod.request_minutes (session_uuid, agent);

CREATE FUNCTION retrod.requests_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format($sql$
        INSERT INTO retrod.request_minutes AS m
        SELECT session_uuid, retrod.minute_of(ts), agent, sum(sign), sum(sign * has_tool_use::int),
               sum(sign * input_tokens), sum(sign * output_tokens), sum(sign * cache_read_tokens),
               sum(sign * cache_create_tokens)
        FROM (%s) c GROUP BY 1, 2, 3
        ON CONFLICT (session_uuid, minute, agent) DO UPDATE SET
            requests = m.requests + excluded.requests, tool_turns = m.tool_turns + excluded.tool_turns,
            input_tokens = m.input_tokens + excluded.input_tokens,
            output_tokens = m.output_tokens + excluded.output_tokens,
            cache_read_tokens = m.cache_read_tokens + excluded.cache_read_tokens,
            cache_create_tokens = m.cache_create_tokens + excluded.cache_create_tokens
    $sql$, retrod.signed_rows(TG_OP));
    IF TG_OP <> 'INSERT' THEN
        EXECUTE format($sql$
            DELETE FROM retrod.request_minutes m
            USING (SELECT DISTINCT session_uuid, retrod.minute_of(ts) AS minute, agent FROM (%s) c) c
            WHERE m.requests = 0 AND (m.session_uuid, m.minute, m.agent) = (c.session_uuid, c.minute, c.agent)
        $sql$, retrod.signed_rows(TG_OP));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER requests_inserted AFTER INSERT ON retrod.requests
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.requests_changed();
CREATE TRIGGER requests_updated AFTER UPDATE ON retrod.requests
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.requests_changed();

-- Each classified gap [prev_ts, ts] is kept as at most three parts: the pieces in its first and
-- last minutes (gap_pieces, found by minute for a phase window's partial edge minutes, and
-- summed into event_minutes) and the whole minutes between them as one span (gap_spans) — so a
-- long gap, a night or a bogus timestamp, costs one row, not one per minute.
CREATE TABLE retrod.gap_pieces (
    file_id BIGINT NOT NULL,
    "offset" BIGINT NOT NULL,
    minute TIMESTAMPTZ NOT NULL,
    session_uuid TEXT COLLATE "C" NOT NULL,
    kind TEXT NOT NULL,
    piece_start TIMESTAMPTZ NOT NULL,
    piece_end TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (file_id, "offset", minute),
    FOREIGN KEY (file_id, "offset") REFERENCES retrod.events ON DELETE CASCADE
);
CREATE INDEX gap_pieces_session_minute ON retrod.gap_pieces (session_uuid, minute);

CREATE TABLE retrod.gap_spans (
    file_id BIGINT NOT NULL,
    "offset" BIGINT NOT NULL,
    session_uuid TEXT COLLATE "C" NOT NULL,
    kind TEXT NOT NULL,
    span_start TIMESTAMPTZ NOT NULL,
    span_end TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (file_id, "offset"),
    FOREIGN KEY (file_id, "offset") REFERENCES retrod.events ON DELETE CASCADE
);
CREATE INDEX gap_spans_session_start ON retrod.gap_spans (session_uuid, span_start);

-- The first and last minute's pieces of a gap (one piece when it lies within one minute).
CREATE FUNCTION retrod.pieces_of(prev_ts TIMESTAMPTZ, ts TIMESTAMPTZ)
    RETURNS TABLE (minute TIMESTAMPTZ, piece_start TIMESTAMPTZ, piece_end TIMESTAMPTZ)
    LANGUAGE sql IMMUTABLE AS $$
    SELECT m, greatest(prev_ts, m), least(ts, m + interval '1 minute')
    FROM (SELECT retrod.minute_of(prev_ts) AS first_m, retrod.minute_of(ts - interval '1 microsecond') AS last_m) b,
         LATERAL (SELECT first_m AS m UNION SELECT last_m) ms
    WHERE ts > prev_ts
$$;

-- The whole minutes between a gap's first and last minute, if any.
CREATE FUNCTION retrod.span_of(prev_ts TIMESTAMPTZ, ts TIMESTAMPTZ)
    RETURNS TABLE (span_start TIMESTAMPTZ, span_end TIMESTAMPTZ)
    LANGUAGE sql IMMUTABLE AS $$
    SELECT retrod.minute_of(prev_ts) + interval '1 minute', retrod.minute_of(ts - interval '1 microsecond')
    WHERE ts > prev_ts
      AND retrod.minute_of(ts - interval '1 microsecond') > retrod.minute_of(prev_ts) + interval '1 minute'
$$;

-- Classified time and tool output by (session, minute).
CREATE TABLE retrod.event_minutes (
    session_uuid TEXT COLLATE "C" NOT NULL,
    minute TIMESTAMPTZ NOT NULL,
    claude_us BIGINT NOT NULL,
    tool_us BIGINT NOT NULL,
    human_us BIGINT NOT NULL,
    tool_result_bytes BIGINT NOT NULL,
    PRIMARY KEY (session_uuid, minute)
);

CREATE FUNCTION retrod.events_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
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
    END IF;
    EXECUTE format($sql$
        INSERT INTO retrod.event_minutes AS m
        SELECT session_uuid, minute, coalesce(sum(us) FILTER (WHERE kind = 'claude'), 0),
               coalesce(sum(us) FILTER (WHERE kind = 'tool'), 0),
               coalesce(sum(us) FILTER (WHERE kind = 'human'), 0), sum(bytes)
        FROM (
            SELECT c.session_uuid, p.minute, c.kind,
                   c.sign * retrod.interval_us(p.piece_end - p.piece_start) AS us, 0 AS bytes
            FROM (%1$s) c, retrod.pieces_of(c.prev_ts, c.ts) p WHERE c.kind IS NOT NULL
            UNION ALL
            SELECT session_uuid, retrod.minute_of(ts), NULL, 0, sign * tool_result_bytes
            FROM (%1$s) c WHERE tool_result_bytes <> 0
        ) d
        GROUP BY 1, 2
        ON CONFLICT (session_uuid, minute) DO UPDATE SET
            claude_us = m.claude_us + excluded.claude_us, tool_us = m.tool_us + excluded.tool_us,
            human_us = m.human_us + excluded.human_us,
            tool_result_bytes = m.tool_result_bytes + excluded.tool_result_bytes
    $sql$, retrod.signed_rows(TG_OP));
    IF TG_OP = 'DELETE' THEN
        DELETE FROM retrod.event_minutes m
        WHERE m.session_uuid IN (SELECT DISTINCT session_uuid FROM old_rows)
          AND (m.claude_us, m.tool_us, m.human_us, m.tool_result_bytes) = (0, 0, 0, 0);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER events_inserted AFTER INSERT ON retrod.events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.events_changed();
CREATE TRIGGER events_deleted AFTER DELETE ON retrod.events
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.events_changed();

-- Distinct tool_use ids per session (a session's main transcripts may repeat one).
CREATE TABLE retrod.session_tool_calls (
    session_uuid TEXT COLLATE "C" PRIMARY KEY,
    tool_calls BIGINT NOT NULL
);

CREATE FUNCTION retrod.tool_calls_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    -- Ingesters of other files of the same session (other hosts) must not count concurrently:
    -- the check below only sees committed rows.
    EXECUTE format($sql$
        SELECT pg_advisory_xact_lock(hashtext('retrod.tool_calls'), hashtext(session_uuid))
        FROM (SELECT DISTINCT session_uuid FROM (%s) c ORDER BY 1) s
    $sql$, retrod.signed_rows(TG_OP));
    -- An id counts when its first row appears and stops counting when its last row goes: the
    -- table already shows this statement's rows, so compare against the other files' rows.
    EXECUTE format($sql$
        INSERT INTO retrod.session_tool_calls AS s
        SELECT session_uuid, sum(sign) FROM (
            SELECT DISTINCT c.session_uuid, c.tool_use_id, c.sign FROM (%s) c
            WHERE NOT EXISTS (SELECT 1 FROM retrod.tool_calls t WHERE t.session_uuid = c.session_uuid
                              AND t.tool_use_id = c.tool_use_id AND t.file_id <> c.file_id)
        ) d GROUP BY 1
        ON CONFLICT (session_uuid) DO UPDATE SET tool_calls = s.tool_calls + excluded.tool_calls
    $sql$, retrod.signed_rows(TG_OP));
    IF TG_OP = 'DELETE' THEN
        DELETE FROM retrod.session_tool_calls s
        WHERE s.tool_calls = 0 AND s.session_uuid IN (SELECT DISTINCT session_uuid FROM old_rows);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER tool_calls_inserted AFTER INSERT ON retrod.tool_calls
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.tool_calls_changed();
CREATE TRIGGER tool_calls_deleted AFTER DELETE ON retrod.tool_calls
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.tool_calls_changed();

-- TRUNCATE fires no row or statement trigger that sees rows: rebuilding retrod's derived tables
-- by truncation (TRUNCATE retrod.files CASCADE, …) must empty the rollups with them.
CREATE FUNCTION retrod.rollups_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    -- (gap_pieces and gap_spans reference events: a TRUNCATE of events must cascade to them.)
    IF TG_TABLE_NAME = 'requests' THEN
        DELETE FROM retrod.request_minutes;
    ELSIF TG_TABLE_NAME = 'events' THEN
        DELETE FROM retrod.event_minutes;
    ELSIF TG_TABLE_NAME = 'tool_calls' THEN
        DELETE FROM retrod.session_tool_calls;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER requests_truncated AFTER TRUNCATE ON retrod.requests
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.rollups_truncated();
CREATE TRIGGER events_truncated AFTER TRUNCATE ON retrod.events
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.rollups_truncated();
CREATE TRIGGER tool_calls_truncated AFTER TRUNCATE ON retrod.tool_calls
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.rollups_truncated();

-- Requests are never deleted by retrod; if someone does, the rollups follow.
CREATE TRIGGER requests_deleted AFTER DELETE ON retrod.requests
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.requests_changed();
