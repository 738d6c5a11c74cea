-- Flat reports (issue 32): the report of a long session costs about what a short one's does.
-- Two parts: prompt-cache misses stored at commit (below), and hour rollups beside the
-- per-minute ones for the windows of phases and tasks (after them).
--
-- Prompt-cache misses stored as they are found (accounting.md §2.8). A report
-- used to read every element of the session's streams and walk them in Python: its cost grew
-- with the session (60 of 125 ms on the ~200 MB benchmark session). Misses are few, so each
-- stream's are kept here with what pricing them needs (model, fast mode, the part's size, the
-- rewritten tokens and how many of them were 1h writes), and a report reads those rows and its
-- main stream's last element; the dollars are worked out when read, as every cost is, so an
-- upgraded price table applies at once.
--
-- Exact under any order of reading: a miss depends only on its element, the element before it in
-- its stream, the lifetime in force after that one and the stream's compaction boundaries
-- between the two. So whatever changes a stream's requests (insert, update, delete: a new batch,
-- a copy, a re-owned fork line, a rewind) or its boundaries marks the stream `dirty_from` the
-- earliest time it touched, and at commit the stream is walked again from that time only: the
-- elements before it, their misses and the lifetime in force after the last of them are as they
-- were. New requests nearly always come after the stream's last element, whose state the stream
-- row keeps, so a batch walks only its own requests.

CREATE TABLE retrod.cache_streams (
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    dirty_from TIMESTAMPTZ,  -- its misses from this time on are to be worked out again (NULL: none)
    -- its last element and the lifetime in force after it (the live state; NULL: no element)
    last_ts TIMESTAMPTZ,
    last_model TEXT COLLATE "C",
    last_fast BOOLEAN,
    last_prefix BIGINT,
    last_ttl_s INT,
    PRIMARY KEY (session_uuid, agent, db_role)
);

CREATE TABLE retrod.cache_misses (
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    ts TIMESTAMPTZ NOT NULL,  -- its element's request's
    -- (its element's place in §2.8's order after the time: misses at one time come in that order)
    key TEXT COLLATE "C" NOT NULL,
    place_path TEXT COLLATE "C",
    place_offset BIGINT,
    n BIGINT NOT NULL,
    cause TEXT NOT NULL CHECK (cause IN ('compaction', 'model', 'expired', 'invalidated')),
    reason TEXT COLLATE "C",
    model TEXT COLLATE "C",
    fast BOOLEAN NOT NULL,
    size BIGINT NOT NULL,  -- input + cache_read + cache_create: its price tier
    rewritten BIGINT NOT NULL,
    rewritten_1h BIGINT NOT NULL,  -- of them, taken from its 1h writes
    pause_us BIGINT NOT NULL,
    prefix_before BIGINT NOT NULL
);
CREATE INDEX cache_misses_stream ON retrod.cache_misses (session_uuid, agent, db_role, ts);

-- A stream's requests from a time on, through one index: a batch walks its own, not the stream's.
DROP INDEX retrod.requests_session_agent;
CREATE INDEX requests_session_agent ON retrod.requests (session_uuid, agent, ts);

-- The elements of a stream (accounting.md §2.8) whose request's time is in [since, until): its parts of
-- its last part's model that read or wrote the cache. Unordered; `ord` orders.
CREATE FUNCTION retrod.cache_elements(s TEXT, a TEXT, role TEXT, since TIMESTAMPTZ, until TIMESTAMPTZ)
    RETURNS TABLE (ts TIMESTAMPTZ, key TEXT, place_path TEXT, place_offset BIGINT, n BIGINT, model TEXT,
                   fast BOOLEAN, input BIGINT, cache_read BIGINT, cache_create BIGINT, c5 BIGINT, c1 BIGINT,
                   reason TEXT)
    LANGUAGE sql STABLE AS $$
    SELECT r.ts, r.key, r.place_path, r.place_offset, 1::bigint, r.model, r.fast, r.input_tokens,
           r.cache_read_tokens, r.cache_create_tokens, r.cache_create_5m_tokens, r.cache_create_1h_tokens,
           r.cache_miss_reason
    FROM retrod.requests r
    WHERE r.session_uuid = s AND r.agent = a AND r.db_role = role AND r.ts >= since AND r.ts < until
      AND r.parts IS NULL AND r.cache_read_tokens + r.cache_create_tokens > 0
    UNION ALL
    SELECT r.ts, r.key, r.place_path, r.place_offset, j.n, j.model, r.fast, j.input, j.cache_read, j.cache_create,
           j.cache_create_5m, j.cache_create_1h, r.cache_miss_reason
    FROM retrod.requests r,
         ROWS FROM (jsonb_to_recordset(r.parts::jsonb)
                    AS (model TEXT, input BIGINT, cache_read BIGINT, cache_create BIGINT,
                        cache_create_5m BIGINT, cache_create_1h BIGINT)) WITH ORDINALITY
         AS j (model, input, cache_read, cache_create, cache_create_5m, cache_create_1h, n)
    WHERE r.session_uuid = s AND r.agent = a AND r.db_role = role AND r.ts >= since AND r.ts < until
      AND r.parts IS NOT NULL AND j.cache_read + j.cache_create > 0
      AND j.model = (r.parts::jsonb -> -1 ->> 'model')
$$;

-- The lifetime an element that wrote sets: 1h when it wrote 1h tokens and no 5m ones (a split
-- that does not add up to its cache_create is all 5m), else 5 minutes.
CREATE FUNCTION retrod.cache_ttl_s(cache_create BIGINT, c5 BIGINT, c1 BIGINT) RETURNS INT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN c5 + c1 = cache_create AND c1 > 0 AND c5 = 0 THEN 3600 ELSE 300 END
$$;

-- A stream walked again from its dirty_from: its misses from then on replaced, its last element
-- kept. The element before that time (p) and the lifetime in force after it come from the stream
-- row when the stream only grew past its last element, else from the elements before the time.
CREATE FUNCTION retrod.recache_stream(s TEXT, a TEXT, role TEXT) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    st retrod.cache_streams;
    since TIMESTAMPTZ;
    p_ts TIMESTAMPTZ;
    p_model TEXT;
    p_fast BOOLEAN;
    p_prefix BIGINT;
    p_ttl INT;
    l_ts TIMESTAMPTZ;
    l_model TEXT;
    l_fast BOOLEAN;
    l_prefix BIGINT;
    l_ttl INT;
BEGIN
    SELECT * INTO st FROM retrod.cache_streams c WHERE c.session_uuid = s AND c.agent = a AND c.db_role = role;
    IF NOT FOUND OR st.dirty_from IS NULL THEN
        RETURN;  -- (walked already by an earlier event of this transaction)
    END IF;
    since := st.dirty_from;
    IF st.last_ts < since THEN
        p_ts := st.last_ts; p_model := st.last_model; p_fast := st.last_fast; p_prefix := st.last_prefix;
        p_ttl := st.last_ttl_s;
    ELSE
        SELECT e.ts, e.model, e.fast, e.cache_read + e.cache_create INTO p_ts, p_model, p_fast, p_prefix
        FROM retrod.cache_elements(s, a, role, '-infinity', since) e
        ORDER BY e.ts DESC, e.place_path IS NOT NULL DESC, CASE WHEN e.place_path IS NULL THEN e.key END DESC,
                 e.place_path DESC, e.place_offset DESC, e.n DESC
        LIMIT 1;
        SELECT retrod.cache_ttl_s(e.cache_create, e.c5, e.c1) INTO p_ttl
        FROM retrod.cache_elements(s, a, role, '-infinity', since) e WHERE e.cache_create > 0
        ORDER BY e.ts DESC, e.place_path IS NOT NULL DESC, CASE WHEN e.place_path IS NULL THEN e.key END DESC,
                 e.place_path DESC, e.place_offset DESC, e.n DESC
        LIMIT 1;
    END IF;
    p_ttl := coalesce(p_ttl, 300);  -- (also when no element wrote yet)
    DELETE FROM retrod.cache_misses m
    WHERE m.session_uuid = s AND m.agent = a AND m.db_role = role AND m.ts >= since;
    -- each element since then, in order, with the element before it (the first: p) and the
    -- lifetime in force after that one (the latest element up to it that wrote sets it); a miss:
    -- it wrote at least 2,000 of the tokens p left cached and read less than 95 % of them
    INSERT INTO retrod.cache_misses (session_uuid, agent, db_role, ts, key, place_path, place_offset, n, cause, reason,
                                     model, fast, size, rewritten, rewritten_1h, pause_us, prefix_before)
    SELECT s, a, role, w.ts, w.key, w.place_path, w.place_offset, w.n,
           CASE WHEN EXISTS (SELECT FROM retrod.cache_boundaries b
                             WHERE b.session_uuid = s AND b.agent = a AND b.db_role = role
                               AND b.ts > w.p_ts AND b.ts <= w.ts) THEN 'compaction'
                WHEN w.model IS DISTINCT FROM w.p_model THEN 'model'
                WHEN retrod.ts_to_us(w.ts) - retrod.ts_to_us(w.p_ts) > w.p_ttl * 1000000::bigint THEN 'expired'
                ELSE 'invalidated' END,
           w.reason, w.model, w.fast, w.size, w.rewritten, least(w.rewritten, w.c1),
           retrod.ts_to_us(w.ts) - retrod.ts_to_us(w.p_ts), w.p_prefix
    FROM (
        SELECT e.*, least(e.cache_create, e.p_prefix - e.cache_read) AS rewritten
        FROM (
            SELECT e.*, lag(e.ts, 1, p_ts) OVER w AS p_ts, lag(e.model, 1, p_model) OVER w AS p_model,
                   lag(e.prefix, 1, p_prefix) OVER w AS p_prefix, lag(e.ttl_after, 1, p_ttl) OVER w AS p_ttl
            FROM (
                SELECT e.*, CASE WHEN e.wrote = 0 THEN p_ttl ELSE max(e.ttl) OVER (PARTITION BY e.wrote) END AS ttl_after
                FROM (
                    SELECT e.*, e.input + e.cache_read + e.cache_create AS size, e.cache_read + e.cache_create AS prefix,
                           CASE WHEN e.cache_create > 0 THEN retrod.cache_ttl_s(e.cache_create, e.c5, e.c1) END AS ttl,
                           count(*) FILTER (WHERE e.cache_create > 0) OVER (ORDER BY e.o) AS wrote
                    FROM (
                        SELECT x.ts, x.key, x.place_path, x.place_offset, x.n, x.model, x.fast, x.input, x.cache_read,
                               x.cache_create, x.c5, CASE WHEN x.c5 + x.c1 = x.cache_create THEN x.c1 ELSE 0 END AS c1,
                               x.reason,
                               row_number() OVER (ORDER BY x.ts, x.place_path IS NOT NULL,
                                                  CASE WHEN x.place_path IS NULL THEN x.key END, x.place_path,
                                                  x.place_offset, x.n) AS o
                        FROM retrod.cache_elements(s, a, role, since, 'infinity') x
                    ) e
                ) e
            ) e
            WINDOW w AS (ORDER BY e.o)
        ) e
        WHERE e.p_ts IS NOT NULL AND e.p_prefix - e.cache_read > 0
    ) w
    WHERE w.rewritten >= 2000 AND 20 * w.cache_read < 19 * w.p_prefix;
    -- the stream's last element now, and the lifetime in force after it
    SELECT e.ts, e.model, e.fast, e.cache_read + e.cache_create INTO l_ts, l_model, l_fast, l_prefix
    FROM retrod.cache_elements(s, a, role, since, 'infinity') e
    ORDER BY e.ts DESC, e.place_path IS NOT NULL DESC, CASE WHEN e.place_path IS NULL THEN e.key END DESC,
             e.place_path DESC, e.place_offset DESC, e.n DESC
    LIMIT 1;
    IF l_ts IS NULL THEN
        l_ts := p_ts; l_model := p_model; l_fast := p_fast; l_prefix := p_prefix;
        l_ttl := CASE WHEN p_ts IS NOT NULL THEN p_ttl END;
    ELSE
        SELECT retrod.cache_ttl_s(e.cache_create, e.c5, e.c1) INTO l_ttl
        FROM retrod.cache_elements(s, a, role, since, 'infinity') e WHERE e.cache_create > 0
        ORDER BY e.ts DESC, e.place_path IS NOT NULL DESC, CASE WHEN e.place_path IS NULL THEN e.key END DESC,
                 e.place_path DESC, e.place_offset DESC, e.n DESC
        LIMIT 1;
        l_ttl := coalesce(l_ttl, p_ttl);
    END IF;
    UPDATE retrod.cache_streams c
    SET dirty_from = NULL, last_ts = l_ts, last_model = l_model, last_fast = l_fast, last_prefix = l_prefix,
        last_ttl_s = l_ttl
    WHERE c.session_uuid = s AND c.agent = a AND c.db_role = role;
END $$;

-- At commit, once per stream touched (its later events find it walked): whatever wrote the
-- requests or boundaries, a report then reads misses as exact as a walk of the whole stream.
CREATE FUNCTION retrod.cache_stream_marked() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    PERFORM retrod.recache_stream(NEW.session_uuid, NEW.agent, NEW.db_role);
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER cache_stream_marked AFTER INSERT OR UPDATE ON retrod.cache_streams
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.dirty_from IS NOT NULL)
    EXECUTE FUNCTION retrod.cache_stream_marked();

-- Streams marked from the earliest time a change touched (`changed`: [{s: session, a: agent,
-- r: role, t: time}], NULL: none).
-- Inline and unnamed threads form no stream; a request without a time is no element.
CREATE FUNCTION retrod.mark_cache_streams(changed JSONB) RETURNS void LANGUAGE sql AS $$
    INSERT INTO retrod.cache_streams AS c (session_uuid, agent, db_role, dirty_from)
    SELECT x.s, x.a, x.r, min(x.t)
    FROM jsonb_to_recordset(changed) AS x(s TEXT, a TEXT, r TEXT, t TIMESTAMPTZ)
    WHERE x.t IS NOT NULL AND x.a NOT IN ('<inline>', '<unnamed>')
    GROUP BY 1, 2, 3  -- (the callers' rows come grouped by stream but the migration's)
    ON CONFLICT (session_uuid, agent, db_role) DO UPDATE SET dirty_from = least(c.dirty_from, excluded.dirty_from)
$$;

-- A request's row as far as its stream's elements go: an update that changes none of these (a
-- copy read again, a base owner recorded) marks nothing.
CREATE FUNCTION retrod.cache_request_part(r retrod.requests) RETURNS JSONB LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_array(r.session_uuid, r.agent, r.db_role, r.ts, r.parts, r.model, r.fast, r.input_tokens,
                             r.cache_read_tokens, r.cache_create_tokens, r.cache_create_5m_tokens,
                             r.cache_create_1h_tokens, r.cache_miss_reason, r.place_path, r.place_offset)
$$;

CREATE FUNCTION retrod.requests_cache_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM retrod.mark_cache_streams((SELECT jsonb_agg(jsonb_build_object('s', g.s, 'a', g.a, 'r', g.r, 't', g.t)) FROM (
            SELECT n.session_uuid AS s, n.agent AS a, n.db_role AS r, min(n.ts) AS t
            FROM new_rows n WHERE n.ts IS NOT NULL GROUP BY 1, 2, 3) g));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM retrod.mark_cache_streams((SELECT jsonb_agg(jsonb_build_object('s', g.s, 'a', g.a, 'r', g.r, 't', g.t)) FROM (
            SELECT o.session_uuid AS s, o.agent AS a, o.db_role AS r, min(o.ts) AS t
            FROM old_rows o WHERE o.ts IS NOT NULL GROUP BY 1, 2, 3) g));
    ELSE
        PERFORM retrod.mark_cache_streams((SELECT jsonb_agg(jsonb_build_object('s', g.s, 'a', g.a, 'r', g.r, 't', g.t)) FROM (
            SELECT c.session_uuid AS s, c.agent AS a, c.db_role AS r, min(c.ts) AS t FROM (
                SELECT o.session_uuid, o.agent, o.db_role, o.ts FROM old_rows o
                LEFT JOIN new_rows n ON n.key = o.key AND n.db_role = o.db_role
                WHERE o.ts IS NOT NULL AND (n.key IS NULL OR retrod.cache_request_part(n) <> retrod.cache_request_part(o))
                UNION ALL
                SELECT n.session_uuid, n.agent, n.db_role, n.ts FROM new_rows n
                LEFT JOIN old_rows o ON o.key = n.key AND o.db_role = n.db_role
                WHERE n.ts IS NOT NULL AND (o.key IS NULL OR retrod.cache_request_part(n) <> retrod.cache_request_part(o))
            ) c GROUP BY 1, 2, 3) g));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER requests_cache_inserted AFTER INSERT ON retrod.requests
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.requests_cache_changed();
CREATE TRIGGER requests_cache_updated AFTER UPDATE ON retrod.requests
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.requests_cache_changed();
CREATE TRIGGER requests_cache_deleted AFTER DELETE ON retrod.requests
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.requests_cache_changed();

-- A boundary found or forgotten: the misses after it may change cause.
CREATE FUNCTION retrod.cache_boundaries_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.mark_cache_streams((SELECT jsonb_agg(jsonb_build_object('s', g.s, 'a', g.a, 'r', g.r, 't', g.t)) FROM (
            SELECT n.session_uuid AS s, n.agent AS a, n.db_role AS r, min(n.ts) AS t
            FROM new_rows n GROUP BY 1, 2, 3) g));
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        PERFORM retrod.mark_cache_streams((SELECT jsonb_agg(jsonb_build_object('s', g.s, 'a', g.a, 'r', g.r, 't', g.t)) FROM (
            SELECT o.session_uuid AS s, o.agent AS a, o.db_role AS r, min(o.ts) AS t
            FROM old_rows o GROUP BY 1, 2, 3) g));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER cache_boundaries_inserted AFTER INSERT ON retrod.cache_boundaries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.cache_boundaries_changed();
CREATE TRIGGER cache_boundaries_updated AFTER UPDATE ON retrod.cache_boundaries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.cache_boundaries_changed();
CREATE TRIGGER cache_boundaries_deleted AFTER DELETE ON retrod.cache_boundaries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.cache_boundaries_changed();

-- Emptied tables: no request, no miss; no boundary, every stream walked again.
CREATE FUNCTION retrod.cache_inputs_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'requests' THEN
        DELETE FROM retrod.cache_misses;
        DELETE FROM retrod.cache_streams;
    ELSE
        UPDATE retrod.cache_streams SET dirty_from = '-infinity';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER requests_cache_truncated AFTER TRUNCATE ON retrod.requests
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.cache_inputs_truncated();
CREATE TRIGGER cache_boundaries_truncated AFTER TRUNCATE ON retrod.cache_boundaries
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.cache_inputs_truncated();

-- Fired in the bulk path's replica mode too, as every trigger of retrod's (0011).
ALTER TABLE retrod.cache_streams ENABLE ALWAYS TRIGGER cache_stream_marked;
ALTER TABLE retrod.requests ENABLE ALWAYS TRIGGER requests_cache_inserted;
ALTER TABLE retrod.requests ENABLE ALWAYS TRIGGER requests_cache_updated;
ALTER TABLE retrod.requests ENABLE ALWAYS TRIGGER requests_cache_deleted;
ALTER TABLE retrod.requests ENABLE ALWAYS TRIGGER requests_cache_truncated;
ALTER TABLE retrod.cache_boundaries ENABLE ALWAYS TRIGGER cache_boundaries_inserted;
ALTER TABLE retrod.cache_boundaries ENABLE ALWAYS TRIGGER cache_boundaries_updated;
ALTER TABLE retrod.cache_boundaries ENABLE ALWAYS TRIGGER cache_boundaries_deleted;
ALTER TABLE retrod.cache_boundaries ENABLE ALWAYS TRIGGER cache_boundaries_truncated;

-- What was read before: every stream walked once, when this migration commits.
SELECT retrod.mark_cache_streams(coalesce(jsonb_agg(jsonb_build_object(
    's', session_uuid, 'a', agent, 'r', db_role, 't', '-infinity'::timestamptz)), '[]'))
FROM (SELECT DISTINCT session_uuid, agent, db_role FROM retrod.requests WHERE ts IS NOT NULL) r;

-- Hour rollups beside the per-minute ones (issue 32: flat windows). A phase's or task's figures
-- (report.sql, window_figures) sum the whole minutes of its window; on a long session a phase
-- holds hundreds. They now take the window's whole hours from these tables and only the minutes
-- before its first whole hour and after its last from the per-minute ones, so a window costs by
-- its edges, not its length. Hours are UTC hours (a minute belongs to one in every time zone,
-- and a UTC hour to one UTC day: a price group's day is the same for all its minutes). Each is
-- the sum of its minutes, kept by statement triggers on the minute tables: whatever writes the
-- minutes (every ingest path, a rebuild after new price tiers) keeps the hours. A row that sums
-- to nothing goes, as one pass would not have it.
CREATE FUNCTION retrod.hour_of(minute TIMESTAMPTZ) RETURNS TIMESTAMPTZ
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT date_trunc('hour', minute, 'UTC')
$$;

CREATE TABLE retrod.request_hours (
    session_uuid TEXT COLLATE "C" NOT NULL,
    hour TIMESTAMPTZ NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    model TEXT COLLATE "C" NOT NULL,
    fast BOOLEAN NOT NULL,
    tier_floor BIGINT NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    requests BIGINT NOT NULL,
    parts BIGINT NOT NULL,
    split_requests BIGINT NOT NULL,
    tool_turns BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_create_tokens BIGINT NOT NULL,
    cache_create_5m_tokens BIGINT NOT NULL,
    cache_create_1h_tokens BIGINT NOT NULL,
    web_searches BIGINT NOT NULL DEFAULT 0,  -- (0027)
    PRIMARY KEY (session_uuid, hour, agent, model, fast, tier_floor, db_role)
);

CREATE TABLE retrod.event_hours (
    session_uuid TEXT COLLATE "C" NOT NULL,
    hour TIMESTAMPTZ NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    claude_us BIGINT NOT NULL,
    tool_us BIGINT NOT NULL,
    human_us BIGINT NOT NULL,
    tool_result_bytes BIGINT NOT NULL,
    PRIMARY KEY (session_uuid, hour, db_role)
);

CREATE TABLE retrod.call_hours (
    session_uuid TEXT COLLATE "C" NOT NULL,
    hour TIMESTAMPTZ NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    productive BIGINT NOT NULL,
    sibling_error BIGINT NOT NULL,
    error_retry BIGINT NOT NULL,
    persisted_output_read BIGINT NOT NULL,
    post_write_read BIGINT NOT NULL,
    duplicate BIGINT NOT NULL,
    re_read BIGINT NOT NULL,
    PRIMARY KEY (session_uuid, hour, db_role)
);

CREATE FUNCTION retrod.add_request_hours(changed retrod.request_minutes[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.request_hours AS h (session_uuid, hour, agent, model, fast, tier_floor, db_role, requests, parts,
                                           split_requests, tool_turns, input_tokens, output_tokens, cache_read_tokens,
                                           cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens,
                                           web_searches)
    SELECT c.session_uuid, retrod.hour_of(c.minute), c.agent, c.model, c.fast, c.tier_floor, c.db_role,
           direction * sum(c.requests), direction * sum(c.parts), direction * sum(c.split_requests),
           direction * sum(c.tool_turns), direction * sum(c.input_tokens), direction * sum(c.output_tokens),
           direction * sum(c.cache_read_tokens), direction * sum(c.cache_create_tokens),
           direction * sum(c.cache_create_5m_tokens), direction * sum(c.cache_create_1h_tokens),
           direction * sum(c.web_searches)
    FROM unnest(changed) c GROUP BY 1, 2, 3, 4, 5, 6, 7
    ON CONFLICT (session_uuid, hour, agent, model, fast, tier_floor, db_role) DO UPDATE SET
        requests = h.requests + excluded.requests, parts = h.parts + excluded.parts,
        split_requests = h.split_requests + excluded.split_requests, tool_turns = h.tool_turns + excluded.tool_turns,
        input_tokens = h.input_tokens + excluded.input_tokens, output_tokens = h.output_tokens + excluded.output_tokens,
        cache_read_tokens = h.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = h.cache_create_tokens + excluded.cache_create_tokens,
        cache_create_5m_tokens = h.cache_create_5m_tokens + excluded.cache_create_5m_tokens,
        cache_create_1h_tokens = h.cache_create_1h_tokens + excluded.cache_create_1h_tokens,
        web_searches = h.web_searches + excluded.web_searches;
    IF direction < 0 THEN
        DELETE FROM retrod.request_hours h
        USING (SELECT DISTINCT c.session_uuid, retrod.hour_of(c.minute) AS hour, c.db_role FROM unnest(changed) c) c
        WHERE h.parts = 0 AND (h.session_uuid, h.hour, h.db_role) = (c.session_uuid, c.hour, c.db_role);
    END IF;
END $$;

CREATE FUNCTION retrod.add_event_hours(changed retrod.event_minutes[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.event_hours AS h (session_uuid, hour, db_role, claude_us, tool_us, human_us, tool_result_bytes)
    SELECT c.session_uuid, retrod.hour_of(c.minute), c.db_role, direction * sum(c.claude_us),
           direction * sum(c.tool_us), direction * sum(c.human_us), direction * sum(c.tool_result_bytes)
    FROM unnest(changed) c GROUP BY 1, 2, 3
    ON CONFLICT (session_uuid, hour, db_role) DO UPDATE SET
        claude_us = h.claude_us + excluded.claude_us, tool_us = h.tool_us + excluded.tool_us,
        human_us = h.human_us + excluded.human_us, tool_result_bytes = h.tool_result_bytes + excluded.tool_result_bytes;
    IF direction < 0 THEN
        DELETE FROM retrod.event_hours h
        USING (SELECT DISTINCT c.session_uuid, retrod.hour_of(c.minute) AS hour, c.db_role FROM unnest(changed) c) c
        WHERE (h.claude_us, h.tool_us, h.human_us, h.tool_result_bytes) = (0, 0, 0, 0)
          AND (h.session_uuid, h.hour, h.db_role) = (c.session_uuid, c.hour, c.db_role);
    END IF;
END $$;

CREATE FUNCTION retrod.add_call_hours(changed retrod.call_minutes[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.call_hours AS h (session_uuid, hour, db_role, productive, sibling_error, error_retry,
                                        persisted_output_read, post_write_read, duplicate, re_read)
    SELECT c.session_uuid, retrod.hour_of(c.minute), c.db_role, direction * sum(c.productive),
           direction * sum(c.sibling_error), direction * sum(c.error_retry), direction * sum(c.persisted_output_read),
           direction * sum(c.post_write_read), direction * sum(c.duplicate), direction * sum(c.re_read)
    FROM unnest(changed) c GROUP BY 1, 2, 3
    ON CONFLICT (session_uuid, hour, db_role) DO UPDATE SET
        productive = h.productive + excluded.productive, sibling_error = h.sibling_error + excluded.sibling_error,
        error_retry = h.error_retry + excluded.error_retry,
        persisted_output_read = h.persisted_output_read + excluded.persisted_output_read,
        post_write_read = h.post_write_read + excluded.post_write_read, duplicate = h.duplicate + excluded.duplicate,
        re_read = h.re_read + excluded.re_read;
    IF direction < 0 THEN
        DELETE FROM retrod.call_hours h
        USING (SELECT DISTINCT c.session_uuid, retrod.hour_of(c.minute) AS hour, c.db_role FROM unnest(changed) c) c
        WHERE (h.productive, h.sibling_error, h.error_retry, h.persisted_output_read, h.post_write_read, h.duplicate,
               h.re_read) = (0, 0, 0, 0, 0, 0, 0)
          AND (h.session_uuid, h.hour, h.db_role) = (c.session_uuid, c.hour, c.db_role);
    END IF;
END $$;

CREATE FUNCTION retrod.minutes_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'request_minutes' THEN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            PERFORM retrod.add_request_hours(ARRAY(SELECT o::retrod.request_minutes FROM old_rows o), -1);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            PERFORM retrod.add_request_hours(ARRAY(SELECT n::retrod.request_minutes FROM new_rows n), 1);
        END IF;
    ELSIF TG_TABLE_NAME = 'event_minutes' THEN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            PERFORM retrod.add_event_hours(ARRAY(SELECT o::retrod.event_minutes FROM old_rows o), -1);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            PERFORM retrod.add_event_hours(ARRAY(SELECT n::retrod.event_minutes FROM new_rows n), 1);
        END IF;
    ELSE
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            PERFORM retrod.add_call_hours(ARRAY(SELECT o::retrod.call_minutes FROM old_rows o), -1);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            PERFORM retrod.add_call_hours(ARRAY(SELECT n::retrod.call_minutes FROM new_rows n), 1);
        END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION retrod.minutes_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'request_minutes' THEN
        DELETE FROM retrod.request_hours;
    ELSIF TG_TABLE_NAME = 'event_minutes' THEN
        DELETE FROM retrod.event_hours;
    ELSE
        DELETE FROM retrod.call_hours;
    END IF;
    RETURN NULL;
END $$;

DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['request_minutes', 'event_minutes', 'call_minutes'] LOOP
        EXECUTE format('CREATE TRIGGER %1$s_inserted_hours AFTER INSERT ON retrod.%1$s REFERENCING NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.minutes_changed()', t);
        EXECUTE format('CREATE TRIGGER %1$s_updated_hours AFTER UPDATE ON retrod.%1$s'
                       ' REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.minutes_changed()', t);
        EXECUTE format('CREATE TRIGGER %1$s_deleted_hours AFTER DELETE ON retrod.%1$s REFERENCING OLD TABLE AS old_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.minutes_changed()', t);
        EXECUTE format('CREATE TRIGGER %1$s_truncated_hours AFTER TRUNCATE ON retrod.%1$s'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION retrod.minutes_truncated()', t);
        -- fired in the bulk path's replica mode too, as every trigger of retrod's (0011)
        EXECUTE format('ALTER TABLE retrod.%1$s ENABLE ALWAYS TRIGGER %1$s_inserted_hours', t);
        EXECUTE format('ALTER TABLE retrod.%1$s ENABLE ALWAYS TRIGGER %1$s_updated_hours', t);
        EXECUTE format('ALTER TABLE retrod.%1$s ENABLE ALWAYS TRIGGER %1$s_deleted_hours', t);
        EXECUTE format('ALTER TABLE retrod.%1$s ENABLE ALWAYS TRIGGER %1$s_truncated_hours', t);
    END LOOP;
END $$;

-- The hours of what was read before.
INSERT INTO retrod.request_hours (session_uuid, hour, agent, model, fast, tier_floor, db_role, requests, parts,
                                  split_requests, tool_turns, input_tokens, output_tokens, cache_read_tokens,
                                  cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens, web_searches)
SELECT session_uuid, retrod.hour_of(minute), agent, model, fast, tier_floor, db_role, sum(requests), sum(parts),
       sum(split_requests), sum(tool_turns), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens),
       sum(cache_create_tokens), sum(cache_create_5m_tokens), sum(cache_create_1h_tokens), sum(web_searches)
FROM retrod.request_minutes GROUP BY 1, 2, 3, 4, 5, 6, 7;
INSERT INTO retrod.event_hours (session_uuid, hour, db_role, claude_us, tool_us, human_us, tool_result_bytes)
SELECT session_uuid, retrod.hour_of(minute), db_role, sum(claude_us), sum(tool_us), sum(human_us),
       sum(tool_result_bytes)
FROM retrod.event_minutes GROUP BY 1, 2, 3;
INSERT INTO retrod.call_hours (session_uuid, hour, db_role, productive, sibling_error, error_retry,
                               persisted_output_read, post_write_read, duplicate, re_read)
SELECT session_uuid, retrod.hour_of(minute), db_role, sum(productive), sum(sibling_error), sum(error_retry),
       sum(persisted_output_read), sum(post_write_read), sum(duplicate), sum(re_read)
FROM retrod.call_minutes GROUP BY 1, 2, 3;
