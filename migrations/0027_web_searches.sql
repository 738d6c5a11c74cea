-- Web searches (accounting.md §2.2, §2.7; issue 29). A request part's web searches are
-- `server_tool_use.web_search_requests` of its own usage object, priced by genai-prices' own
-- web-search unit ($10 per 1,000 on Anthropic's list), per part like its tokens.
--
-- `requests.web_searches` holds the chosen record's top-level count (the one part of a request
-- of one part); a split request's parts keep theirs in `parts` (fold.parts_json writes
-- `web_searches` only for a part that has some: absent reads 0). The price-group rollups sum
-- them by the same groups as the tokens, so that every surface that prices a session, a phase,
-- a minute or a day from them (report, sessions, trends, the status line, the web UI) adds the
-- same web-search cost: within a group the price is linear in the count.
--
-- Rows stored before this migration count 0 everywhere, consistently. Files read before it are
-- read again from their start (fold.RULES 5), keeping their rows: a record read again ties with
-- its stored self on everything else and wins by its web searches (upsert_requests), so the
-- requests that have some are updated, and the rollups with them by the usual triggers.
-- (IF NOT EXISTS: a test stores rows as an older schema held them with today's ingest, which
-- writes this column, as 0022 does for events.sub)
ALTER TABLE retrod.requests ADD COLUMN IF NOT EXISTS web_searches BIGINT NOT NULL DEFAULT 0;
ALTER TABLE retrod.request_minutes ADD COLUMN web_searches BIGINT NOT NULL DEFAULT 0;
ALTER TABLE retrod.session_requests ADD COLUMN web_searches BIGINT NOT NULL DEFAULT 0;

-- 0013's function with each part's web searches (a new result column: dropped and made again;
-- the functions that call it are plpgsql or plain SQL text, which name columns, not positions).
DROP FUNCTION retrod.request_parts(retrod.requests);
CREATE FUNCTION retrod.request_parts(r retrod.requests)
    RETURNS TABLE (first BOOLEAN, model TEXT, input BIGINT, output BIGINT, cache_read BIGINT,
                   cache_create BIGINT, cache_create_5m BIGINT, cache_create_1h BIGINT, web_searches BIGINT)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT true, r.model, r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_create_tokens,
           r.cache_create_5m_tokens, r.cache_create_1h_tokens, r.web_searches
    WHERE r.parts IS NULL
    UNION ALL
    SELECT p.n = 1, p.model, p.input, p.output, p.cache_read, p.cache_create, p.cache_create_5m, p.cache_create_1h,
           coalesce(p.web_searches, 0)
    FROM ROWS FROM (jsonb_to_recordset(r.parts::jsonb)
                    AS (model TEXT, input BIGINT, output BIGINT, cache_read BIGINT, cache_create BIGINT,
                        cache_create_5m BIGINT, cache_create_1h BIGINT, web_searches BIGINT)) WITH ORDINALITY
         AS p (model, input, output, cache_read, cache_create, cache_create_5m, cache_create_1h, web_searches, n)
    WHERE r.parts IS NOT NULL
$$;

-- 0018's function, summing web searches into both rollups beside the tokens.
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
               direction * sum(p.cache_create_1h) AS c1, direction * sum(p.web_searches) AS ws
        FROM unnest(changed) r, retrod.request_parts(r) p
        GROUP BY 1, 2, 3, 4, 5, 6
    ), minutes AS (
        INSERT INTO retrod.request_minutes AS m (
            session_uuid, minute, agent, model, fast, tier_floor, requests, parts, split_requests, tool_turns,
            input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
            cache_create_1h_tokens, web_searches)
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
            cache_create_1h_tokens = m.cache_create_1h_tokens + excluded.cache_create_1h_tokens,
            web_searches = m.web_searches + excluded.web_searches
    )
    INSERT INTO retrod.session_requests AS s (
        session_uuid, bucket, model, day, fast, tier_floor, requests, parts, split_requests, tool_turns,
        input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
        cache_create_1h_tokens, web_searches)
    SELECT session_uuid, retrod.bucket_of(agent), model, (minute AT TIME ZONE 'UTC')::date, fast, tier_floor,
           sum(requests), sum(parts), sum(split_requests), sum(tool_turns), sum(i), sum(o), sum(cr), sum(cc),
           sum(c5), sum(c1), sum(ws)
    FROM parts GROUP BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (session_uuid, bucket, model, day, fast, tier_floor, db_role) DO UPDATE SET
        requests = s.requests + excluded.requests, parts = s.parts + excluded.parts,
        split_requests = s.split_requests + excluded.split_requests, tool_turns = s.tool_turns + excluded.tool_turns,
        input_tokens = s.input_tokens + excluded.input_tokens,
        output_tokens = s.output_tokens + excluded.output_tokens,
        cache_read_tokens = s.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = s.cache_create_tokens + excluded.cache_create_tokens,
        cache_create_5m_tokens = s.cache_create_5m_tokens + excluded.cache_create_5m_tokens,
        cache_create_1h_tokens = s.cache_create_1h_tokens + excluded.cache_create_1h_tokens,
        web_searches = s.web_searches + excluded.web_searches;
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
