-- Ingest back near the floor (issue 32): an index of the fork copies (accounting.md §2.1), which are
-- few, so that a batch finds the copies among its own lines through a few index entries per
-- file (reown_requests) instead of a lookup for every line it holds.
CREATE INDEX line_holders_copies ON retrod.line_holders (file_id, "offset") WHERE copy;

-- The rollup triggers do nothing for a statement that changed no row. An upsert fires its
-- statement's insert trigger and its update trigger whatever it did, and most of the ingest's
-- upserts insert only (or update only): the empty one still ran each rollup's statements (and
-- planned them again in each bulk transaction, whose replica mode resets the plan cache), a few
-- milliseconds a batch for each of these. The bodies are the latest ones (0014, 0004, 0019, 0020,
-- 0031), with the check first.
CREATE OR REPLACE FUNCTION retrod.events_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    ELSIF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_event_minutes(ARRAY(SELECT o::retrod.events FROM old_rows o), -1);
    END IF;
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM retrod.gap_spans g USING old_rows o
        WHERE (g.file_id, g."offset", g.db_role) = (o.file_id, o."offset", o.db_role);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO retrod.gap_spans
        SELECT e.file_id, e."offset", e.session_uuid, e.kind, sp.span_start, sp.span_end
        FROM new_rows e, retrod.span_of(e.prev_ts, e.ts) sp
        WHERE e.kind IS NOT NULL;
        PERFORM retrod.add_event_minutes(ARRAY(SELECT n::retrod.events FROM new_rows n), 1);
    END IF;
    RETURN NULL;  -- DELETE: gap_spans follow by their foreign key
END $$;

CREATE OR REPLACE FUNCTION retrod.requests_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    ELSIF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_request_minutes(ARRAY(SELECT o::retrod.requests FROM old_rows o), -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.add_request_minutes(ARRAY(SELECT n::retrod.requests FROM new_rows n), 1);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION retrod.call_agents_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    ELSIF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.add_session_figures_calls(ARRAY(SELECT n::retrod.call_agents FROM new_rows n), 1);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_session_figures_calls(ARRAY(SELECT o::retrod.call_agents FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION retrod.session_requests_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    ELSIF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.add_session_figures_tokens(ARRAY(SELECT n::retrod.session_requests FROM new_rows n), 1);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_session_figures_tokens(ARRAY(SELECT o::retrod.session_requests FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION retrod.minutes_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT FROM old_rows) THEN RETURN NULL; END IF;
    ELSIF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
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

-- An event's line had two unique indexes: the primary key (file_id, offset) and, since 0008, the
-- same with db_role, which gap_spans' foreign key carries so that a member cannot take the key
-- of another's gap span. A file's id names its role (files (id, db_role), which the events'
-- own foreign key carries), so the second is unique exactly when the first is: the first goes,
-- a third of an event's index work (a 16 MB batch of the 600 MB benchmark tree: 48,327 -> 35,912
-- buffers touched by its events' statement).
ALTER TABLE retrod.events DROP CONSTRAINT events_pkey;

-- The subagent timeline's rows that count (placed, or once placed), few: subtime_sessions turns
-- them off in a session with a main event without reading all its sub rows at each batch.
CREATE INDEX events_sub_counting ON retrod.events (session_uuid) WHERE sub AND (counted OR prev_ts IS NOT NULL);

-- A stream walked again at commit (0031's recache_stream), in fewer statements: its elements
-- since the time read once (they were read three times: for the misses, the last element and
-- the lifetime in force after it), and no delete of misses when the stream only grew past its
-- last element (none is stored from then on). It ran once per stream each batch touched, ~2,600
-- times per 600 MB, a few statements each. The walk itself is 0031's.
CREATE OR REPLACE FUNCTION retrod.recache_stream(s TEXT, a TEXT, role TEXT) RETURNS void LANGUAGE plpgsql AS $$
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
        -- (a stream that only grew past its last element has no miss from `since` on)
        DELETE FROM retrod.cache_misses m
        WHERE m.session_uuid = s AND m.agent = a AND m.db_role = role AND m.ts >= since;
    END IF;
    p_ttl := coalesce(p_ttl, 300);  -- (also when no element wrote yet)
    -- each element since then, in order, with the element before it (the first: p) and the
    -- lifetime in force after that one (the latest element up to it that wrote sets it); a miss:
    -- it wrote at least 2,000 of the tokens p left cached and read less than 95 % of them. Then
    -- the stream's last element now, and the lifetime in force after it (an element's `c1` as
    -- the walk takes it gives cache_ttl_s the same answer as its own).
    WITH e AS MATERIALIZED (
        SELECT x.ts, x.key, x.place_path, x.place_offset, x.n, x.model, x.fast, x.input, x.cache_read,
               x.cache_create, x.c5, CASE WHEN x.c5 + x.c1 = x.cache_create THEN x.c1 ELSE 0 END AS c1, x.reason,
               row_number() OVER (ORDER BY x.ts, x.place_path IS NOT NULL, CASE WHEN x.place_path IS NULL THEN x.key END,
                                  x.place_path, x.place_offset, x.n) AS o
        FROM retrod.cache_elements(s, a, role, since, 'infinity') x
    ), missed AS (
        INSERT INTO retrod.cache_misses (session_uuid, agent, db_role, ts, key, place_path, place_offset, n, cause,
                                         reason, model, fast, size, rewritten, rewritten_1h, pause_us, prefix_before)
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
                    SELECT e.*, CASE WHEN e.wrote = 0 THEN p_ttl ELSE max(e.ttl) OVER (PARTITION BY e.wrote) END
                               AS ttl_after
                    FROM (
                        SELECT e.*, e.input + e.cache_read + e.cache_create AS size,
                               e.cache_read + e.cache_create AS prefix,
                               CASE WHEN e.cache_create > 0 THEN retrod.cache_ttl_s(e.cache_create, e.c5, e.c1) END
                                   AS ttl,
                               count(*) FILTER (WHERE e.cache_create > 0) OVER (ORDER BY e.o) AS wrote
                        FROM e
                    ) e
                ) e
                WINDOW w AS (ORDER BY e.o)
            ) e
            WHERE e.p_ts IS NOT NULL AND e.p_prefix - e.cache_read > 0
        ) w
        WHERE w.rewritten >= 2000 AND 20 * w.cache_read < 19 * w.p_prefix
    )
    SELECT l.ts, l.model, l.fast, l.cache_read + l.cache_create, t.ttl INTO l_ts, l_model, l_fast, l_prefix, l_ttl
    FROM (SELECT * FROM e ORDER BY e.o DESC LIMIT 1) l
    LEFT JOIN LATERAL (SELECT retrod.cache_ttl_s(w.cache_create, w.c5, w.c1) AS ttl FROM e w
                       WHERE w.cache_create > 0 ORDER BY w.o DESC LIMIT 1) t ON true;
    IF l_ts IS NULL THEN
        l_ts := p_ts; l_model := p_model; l_fast := p_fast; l_prefix := p_prefix;
        l_ttl := CASE WHEN p_ts IS NOT NULL THEN p_ttl END;
    ELSE
        l_ttl := coalesce(l_ttl, p_ttl);
    END IF;
    UPDATE retrod.cache_streams c
    SET dirty_from = NULL, last_ts = l_ts, last_model = l_model, last_fast = l_fast, last_prefix = l_prefix,
        last_ttl_s = l_ttl
    WHERE c.session_uuid = s AND c.agent = a AND c.db_role = role;
END $$;

-- The holders' lookups by uuid and by record key are equalities only (= and = ANY): hash
-- indexes, whose entries are a 4-byte hash where the btrees held the whole text (the uuid's
-- with its session's), so that a line's insert touches and dirties fewer pages. 600 MB tree,
-- in-process bulk scans, three interleaved rounds: PostgreSQL's CPU 12.2 -> 10.7 s (uuid) ->
-- 10.3 s (key too).
DROP INDEX retrod.line_holders_uuid;
CREATE INDEX line_holders_uuid ON retrod.line_holders USING hash (line_uuid);
DROP INDEX retrod.line_holders_key;
CREATE INDEX line_holders_key ON retrod.line_holders USING hash (key) WHERE key IS NOT NULL;
