-- Per-session rollups (issue 22): `retrod trends` adds up the per-session figures of every
-- session in a period, and `retrod brief` those of a project's last sessions. Summing the
-- per-minute rollups for that reads every minute of every session (a heavy user's year: millions
-- of rows); these hold one session's figures in a few rows, kept by the same trigger functions as
-- the per-minute ones, in the same statements, so that they always equal them.
-- (tests/helpers.py ROLLUPS_FROM_RAW holds both to the raw rows after every kind of ingest.)
--
-- Keyed by the member (accounting.md §3), db_role defaulting to the role writing, as every rollup.
-- No new trigger: the functions the existing ones call (ENABLE ALWAYS, 0011) write these too.

-- A session's requests by what their price depends on (accounting.md §2.7: each part's model, its day,
-- fast mode and price tier) and by bucket (§2.2): its cost is the price of these groups, as a
-- report prices the same groups summed from request_minutes. day: the UTC day of the request
-- ('infinity': it had no timestamp, as request_minutes' minute 'infinity').
CREATE TABLE retrod.session_requests (
    session_uuid TEXT COLLATE "C" NOT NULL,
    bucket TEXT COLLATE "C" NOT NULL CHECK (bucket IN ('main', 'subagents', 'compaction')),
    model TEXT COLLATE "C" NOT NULL,
    day DATE NOT NULL,
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
    PRIMARY KEY (session_uuid, bucket, model, day, fast, tier_floor, db_role)
);

-- A session's classified time and tool output (accounting.md §2.3, §2.4), and its span: first_ts and
-- last_ts are the earliest and latest counted events, the report's session_times. `events`
-- counts the session's rows in retrod.events: the row goes with the last of them, as one pass
-- over the final files would not have it.
CREATE TABLE retrod.session_times (
    session_uuid TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    events BIGINT NOT NULL,
    first_ts TIMESTAMPTZ,
    last_ts TIMESTAMPTZ,
    claude_us BIGINT NOT NULL,
    tool_us BIGINT NOT NULL,
    human_us BIGINT NOT NULL,
    tool_result_bytes BIGINT NOT NULL,
    PRIMARY KEY (session_uuid, db_role)
);

-- A member's sessions and their project folders, read without the files' fold state (trends: an
-- index-only scan in session order instead of reading every file's row).
CREATE INDEX files_member_sessions ON retrod.files (db_role, session_uuid) INCLUDE (kind, slug)
    WHERE session_uuid IS NOT NULL AND kind IN ('main', 'subagent', 'agent_root');

CREATE FUNCTION retrod.bucket_of(agent TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN agent = '' THEN 'main' WHEN starts_with(agent, 'acompact') THEN 'compaction'
                ELSE 'subagents' END
$$;

-- 0013's function, with the session rollup summed from the same parts in the same statement.
CREATE OR REPLACE FUNCTION retrod.add_request_minutes(changed retrod.requests[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    thresholds BIGINT[] := retrod.price_thresholds();
BEGIN
    WITH parts AS (  -- the signed sums by minute, once: both rollups are summed from them
        SELECT r.session_uuid, retrod.minute_of(r.ts) AS minute, r.agent, p.model, r.fast,
               retrod.tier_floor(p.input + p.cache_read + p.cache_create, thresholds) AS tier_floor,
               direction * count(*) FILTER (WHERE p.first) AS requests, direction * count(*) AS parts,
               direction * count(*) FILTER (WHERE p.first AND r.parts IS NOT NULL) AS split_requests,
               direction * count(*) FILTER (WHERE p.first AND r.has_tool_use) AS tool_turns,
               direction * sum(p.input) AS i, direction * sum(p.output) AS o, direction * sum(p.cache_read) AS cr,
               direction * sum(p.cache_create) AS cc, direction * sum(p.cache_create_5m) AS c5,
               direction * sum(p.cache_create_1h) AS c1
        FROM unnest(changed) r, retrod.request_parts(r) p
        GROUP BY 1, 2, 3, 4, 5, 6
    ), minutes AS (
        INSERT INTO retrod.request_minutes AS m (
            session_uuid, minute, agent, model, fast, tier_floor, requests, parts, split_requests, tool_turns,
            input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
            cache_create_1h_tokens)
        SELECT * FROM parts
        ON CONFLICT (session_uuid, minute, agent, model, fast, tier_floor, db_role) DO UPDATE SET
            requests = m.requests + excluded.requests, parts = m.parts + excluded.parts,
            split_requests = m.split_requests + excluded.split_requests,
            tool_turns = m.tool_turns + excluded.tool_turns,
            input_tokens = m.input_tokens + excluded.input_tokens,
            output_tokens = m.output_tokens + excluded.output_tokens,
            cache_read_tokens = m.cache_read_tokens + excluded.cache_read_tokens,
            cache_create_tokens = m.cache_create_tokens + excluded.cache_create_tokens,
            cache_create_5m_tokens = m.cache_create_5m_tokens + excluded.cache_create_5m_tokens,
            cache_create_1h_tokens = m.cache_create_1h_tokens + excluded.cache_create_1h_tokens
    )
    INSERT INTO retrod.session_requests AS s (
        session_uuid, bucket, model, day, fast, tier_floor, requests, parts, split_requests, tool_turns,
        input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
        cache_create_1h_tokens)
    SELECT session_uuid, retrod.bucket_of(agent), model, (minute AT TIME ZONE 'UTC')::date, fast, tier_floor,
           sum(requests), sum(parts), sum(split_requests), sum(tool_turns), sum(i), sum(o), sum(cr), sum(cc),
           sum(c5), sum(c1)
    FROM parts GROUP BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (session_uuid, bucket, model, day, fast, tier_floor, db_role) DO UPDATE SET
        requests = s.requests + excluded.requests, parts = s.parts + excluded.parts,
        split_requests = s.split_requests + excluded.split_requests, tool_turns = s.tool_turns + excluded.tool_turns,
        input_tokens = s.input_tokens + excluded.input_tokens,
        output_tokens = s.output_tokens + excluded.output_tokens,
        cache_read_tokens = s.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = s.cache_create_tokens + excluded.cache_create_tokens,
        cache_create_5m_tokens = s.cache_create_5m_tokens + excluded.cache_create_5m_tokens,
        cache_create_1h_tokens = s.cache_create_1h_tokens + excluded.cache_create_1h_tokens;
    IF direction < 0 THEN  -- a rollup row that sums to nothing goes, as one pass would not have it
        DELETE FROM retrod.request_minutes m
        USING (SELECT DISTINCT r.session_uuid, retrod.minute_of(r.ts) AS minute, r.agent FROM unnest(changed) r) c
        WHERE m.parts = 0 AND (m.session_uuid, m.minute, m.agent) = (c.session_uuid, c.minute, c.agent)
          AND m.db_role = current_user;
        DELETE FROM retrod.session_requests s
        WHERE s.parts = 0 AND s.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed))
          AND s.db_role = current_user;
    END IF;
END $$;

-- A role's request rollups rebuilt from its requests (its price thresholds changed: store/tiers.py).
CREATE OR REPLACE FUNCTION retrod.rebuild_request_minutes() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM retrod.request_minutes WHERE db_role = current_user;
    DELETE FROM retrod.session_requests WHERE db_role = current_user;
    PERFORM retrod.add_request_minutes(ARRAY(
        SELECT r FROM retrod.requests r WHERE r.session_uuid = s.session_uuid AND r.db_role = current_user), 1)
    FROM (SELECT DISTINCT session_uuid FROM retrod.requests WHERE db_role = current_user) s;
END $$;

-- 0014's function, with the session rollup beside the minutes. A classified gap's pieces and whole
-- minutes add up to ts - prev_ts (retrod.pieces_of, retrod.span_of), which the session rollup sums
-- directly. first_ts and last_ts are a minimum and a maximum, which rows leaving cannot be
-- subtracted from: when rows leave (a rewind, the timeline worked out again), they are read again
-- from the session's events (events_session_ts: two index lookups per session); rows coming in
-- can only widen them. (An update runs this with its old rows first, when the table already holds
-- the new ones: what is read there is final.)
CREATE OR REPLACE FUNCTION retrod.add_event_minutes(changed retrod.events[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.event_minutes AS m (session_uuid, minute, claude_us, tool_us, human_us, tool_result_bytes)
    SELECT session_uuid, minute, direction * coalesce(sum(us) FILTER (WHERE kind = 'claude'), 0),
           direction * coalesce(sum(us) FILTER (WHERE kind = 'tool'), 0),
           direction * coalesce(sum(us) FILTER (WHERE kind = 'human'), 0), direction * sum(bytes)
    FROM (
        SELECT c.session_uuid, p.minute, c.kind, retrod.interval_us(p.piece_end - p.piece_start) AS us,
               0 AS bytes
        FROM unnest(changed) c, retrod.pieces_of(c.prev_ts, c.ts) p WHERE c.kind IS NOT NULL
        UNION ALL
        SELECT session_uuid, retrod.minute_of(ts), NULL, 0, tool_result_bytes
        FROM unnest(changed) c WHERE tool_result_bytes <> 0 AND counted
    ) d
    GROUP BY 1, 2
    ON CONFLICT (session_uuid, minute, db_role) DO UPDATE SET
        claude_us = m.claude_us + excluded.claude_us, tool_us = m.tool_us + excluded.tool_us,
        human_us = m.human_us + excluded.human_us,
        tool_result_bytes = m.tool_result_bytes + excluded.tool_result_bytes;

    INSERT INTO retrod.session_times AS s (session_uuid, events, first_ts, last_ts, claude_us, tool_us, human_us,
                                           tool_result_bytes)
    SELECT session_uuid, direction * count(*),
           CASE WHEN direction > 0 THEN min(ts) FILTER (WHERE counted) END,
           CASE WHEN direction > 0 THEN max(ts) FILTER (WHERE counted) END,
           direction * coalesce(sum(gap) FILTER (WHERE kind = 'claude'), 0),
           direction * coalesce(sum(gap) FILTER (WHERE kind = 'tool'), 0),
           direction * coalesce(sum(gap) FILTER (WHERE kind = 'human'), 0),
           direction * coalesce(sum(tool_result_bytes) FILTER (WHERE counted), 0)
    FROM (SELECT c.*, CASE WHEN c.ts > c.prev_ts THEN retrod.interval_us(c.ts - c.prev_ts) END AS gap
          FROM unnest(changed) c) c
    GROUP BY 1
    ON CONFLICT (session_uuid, db_role) DO UPDATE SET
        events = s.events + excluded.events,
        first_ts = least(s.first_ts, excluded.first_ts), last_ts = greatest(s.last_ts, excluded.last_ts),
        claude_us = s.claude_us + excluded.claude_us, tool_us = s.tool_us + excluded.tool_us,
        human_us = s.human_us + excluded.human_us, tool_result_bytes = s.tool_result_bytes + excluded.tool_result_bytes;

    IF direction < 0 THEN
        DELETE FROM retrod.event_minutes m
        WHERE m.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed)) AND m.db_role = current_user
          AND (m.claude_us, m.tool_us, m.human_us, m.tool_result_bytes) = (0, 0, 0, 0);
        DELETE FROM retrod.session_times s
        WHERE s.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed)) AND s.db_role = current_user
          AND s.events = 0;
        UPDATE retrod.session_times s SET
            first_ts = (SELECT min(ts) FROM retrod.events e
                        WHERE e.session_uuid = s.session_uuid AND e.db_role = s.db_role AND e.counted),
            last_ts = (SELECT max(ts) FROM retrod.events e
                       WHERE e.session_uuid = s.session_uuid AND e.db_role = s.db_role AND e.counted)
        WHERE s.session_uuid IN (SELECT DISTINCT session_uuid FROM unnest(changed)) AND s.db_role = current_user;
    END IF;
END $$;

-- Rebuilding retrod's tables by truncation empties these with the rest (0003, 0010).
CREATE OR REPLACE FUNCTION retrod.rollups_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    -- (gap_spans reference events: a TRUNCATE of events must cascade to them.)
    IF TG_TABLE_NAME = 'requests' THEN
        DELETE FROM retrod.request_minutes;
        DELETE FROM retrod.session_requests;
    ELSIF TG_TABLE_NAME = 'events' THEN
        DELETE FROM retrod.event_minutes;
        DELETE FROM retrod.session_times;
    ELSIF TG_TABLE_NAME = 'tool_calls' THEN
        DELETE FROM retrod.session_tool_calls;
    ELSIF TG_TABLE_NAME = 'tool_uses' THEN
        DELETE FROM retrod.call_minutes;
        DELETE FROM retrod.call_agents;
        DELETE FROM retrod.call_tools;
    END IF;
    RETURN NULL;
END $$;

-- The rows stored so far, every member's with its own role (0008's note: a rebuilt row keeps its
-- db_role). From the per-minute rollup for requests (already summed by each role's price tiers),
-- from the events for time.
INSERT INTO retrod.session_requests (session_uuid, bucket, model, day, fast, tier_floor, db_role, requests, parts,
                                     split_requests, tool_turns, input_tokens, output_tokens, cache_read_tokens,
                                     cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens)
SELECT session_uuid, retrod.bucket_of(agent), model, (minute AT TIME ZONE 'UTC')::date, fast, tier_floor, db_role,
       sum(requests), sum(parts), sum(split_requests), sum(tool_turns), sum(input_tokens), sum(output_tokens),
       sum(cache_read_tokens), sum(cache_create_tokens), sum(cache_create_5m_tokens), sum(cache_create_1h_tokens)
FROM retrod.request_minutes GROUP BY 1, 2, 3, 4, 5, 6, 7;

INSERT INTO retrod.session_times (session_uuid, db_role, events, first_ts, last_ts, claude_us, tool_us, human_us,
                                  tool_result_bytes)
SELECT session_uuid, db_role, count(*), min(ts) FILTER (WHERE counted), max(ts) FILTER (WHERE counted),
       coalesce(sum(retrod.interval_us(ts - prev_ts)) FILTER (WHERE kind = 'claude' AND ts > prev_ts), 0),
       coalesce(sum(retrod.interval_us(ts - prev_ts)) FILTER (WHERE kind = 'tool' AND ts > prev_ts), 0),
       coalesce(sum(retrod.interval_us(ts - prev_ts)) FILTER (WHERE kind = 'human' AND ts > prev_ts), 0),
       coalesce(sum(tool_result_bytes) FILTER (WHERE counted), 0)
FROM retrod.events GROUP BY 1, 2;
