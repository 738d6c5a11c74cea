-- A request's parts and fast mode (accounting.md §2.2, §2.7; issue 19), and a team member's requests as
-- its own (§3).
--
-- Claude Code 2.1.2xx writes `usage.iterations`: a refused attempt and the fallback that answered,
-- advisor calls, server-side compaction. When they cover the top-level usage they are the
-- request's tokens, each part with its own model. `parts` holds them as the JSON text the fold
-- writes (fold.parts_json), NULL for a request of one part (the top-level usage and model, as
-- before). The token columns keep the chosen record's TOP-LEVEL usage: they rank the records
-- (§2.2's tuple). What a request counts is read through retrod.request_parts().
ALTER TABLE retrod.requests
    ADD COLUMN parts TEXT COLLATE "C",
    ADD COLUMN fast BOOLEAN NOT NULL DEFAULT false;

-- Keys include the member's role (§3): the same request key under two members is two requests.
ALTER TABLE retrod.requests DROP CONSTRAINT requests_pkey, ADD PRIMARY KEY (key, db_role);

-- A request's parts: the one top-level part, or each iteration. `first` carries the request
-- itself (its count, its tool turn) so that sums over parts count each request once.
CREATE FUNCTION retrod.request_parts(r retrod.requests)
    RETURNS TABLE (first BOOLEAN, model TEXT, input BIGINT, output BIGINT, cache_read BIGINT,
                   cache_create BIGINT, cache_create_5m BIGINT, cache_create_1h BIGINT)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT true, r.model, r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_create_tokens,
           r.cache_create_5m_tokens, r.cache_create_1h_tokens
    WHERE r.parts IS NULL
    UNION ALL
    SELECT p.n = 1, p.model, p.input, p.output, p.cache_read, p.cache_create, p.cache_create_5m, p.cache_create_1h
    FROM ROWS FROM (jsonb_to_recordset(r.parts::jsonb)
                    AS (model TEXT, input BIGINT, output BIGINT, cache_read BIGINT, cache_create BIGINT,
                        cache_create_5m BIGINT, cache_create_1h BIGINT)) WITH ORDINALITY
         AS p (model, input, output, cache_read, cache_create, cache_create_5m, cache_create_1h, n)
    WHERE r.parts IS NOT NULL
$$;

-- Long-context prices apply per request part, by its own input (input + cache read + cache
-- write) above a threshold of the price data (report/prices.py). Cost is computed when a report
-- is read, from sums: so each part is summed with those of the same price tier. The tier is the
-- largest threshold its input is above (0: none), among the thresholds the writing role's
-- retrod last stored here (store/db.py keeps them equal to its price data's, rebuilding
-- request_minutes when they change).
CREATE TABLE retrod.price_tiers (
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user PRIMARY KEY,
    thresholds BIGINT[] NOT NULL,  -- ascending
    source_version TEXT NOT NULL  -- the price data's (genai-prices'): an older one does not undo a newer's
);

CREATE FUNCTION retrod.tier_floor(input_total BIGINT, thresholds BIGINT[]) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN coalesce(cardinality(thresholds), 0) = 0 THEN 0
                ELSE coalesce(thresholds[width_bucket(input_total - 1, thresholds)], 0) END
$$;

CREATE FUNCTION retrod.price_thresholds() RETURNS BIGINT[] LANGUAGE sql STABLE AS $$
    SELECT thresholds FROM retrod.price_tiers WHERE db_role = current_user
$$;

-- The per-minute rollup is kept per part: by model (each part's own), fast mode and price tier,
-- which is what a price depends on besides the day (the minute's). `requests` and `tool_turns`
-- count requests (on their first part), `parts` the parts, `split_requests` the requests of
-- several parts. Keyed by the member too (§3).
ALTER TABLE retrod.request_minutes
    ADD COLUMN fast BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN tier_floor BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN parts BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN split_requests BIGINT NOT NULL DEFAULT 0,
    DROP CONSTRAINT request_minutes_pkey,
    ADD PRIMARY KEY (session_uuid, minute, agent, model, fast, tier_floor, db_role);
UPDATE retrod.request_minutes SET parts = requests;

CREATE OR REPLACE FUNCTION retrod.add_request_minutes(changed retrod.requests[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    thresholds BIGINT[] := retrod.price_thresholds();
BEGIN
    INSERT INTO retrod.request_minutes AS m (
        session_uuid, minute, agent, model, fast, tier_floor, requests, parts, split_requests, tool_turns,
        input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
        cache_create_1h_tokens)
    SELECT r.session_uuid, retrod.minute_of(r.ts), r.agent, p.model, r.fast,
           retrod.tier_floor(p.input + p.cache_read + p.cache_create, thresholds),
           direction * count(*) FILTER (WHERE p.first), direction * count(*),
           direction * count(*) FILTER (WHERE p.first AND r.parts IS NOT NULL),
           direction * count(*) FILTER (WHERE p.first AND r.has_tool_use), direction * sum(p.input),
           direction * sum(p.output), direction * sum(p.cache_read), direction * sum(p.cache_create),
           direction * sum(p.cache_create_5m), direction * sum(p.cache_create_1h)
    FROM unnest(changed) r, retrod.request_parts(r) p
    GROUP BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (session_uuid, minute, agent, model, fast, tier_floor, db_role) DO UPDATE SET
        requests = m.requests + excluded.requests, parts = m.parts + excluded.parts,
        split_requests = m.split_requests + excluded.split_requests, tool_turns = m.tool_turns + excluded.tool_turns,
        input_tokens = m.input_tokens + excluded.input_tokens,
        output_tokens = m.output_tokens + excluded.output_tokens,
        cache_read_tokens = m.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = m.cache_create_tokens + excluded.cache_create_tokens,
        cache_create_5m_tokens = m.cache_create_5m_tokens + excluded.cache_create_5m_tokens,
        cache_create_1h_tokens = m.cache_create_1h_tokens + excluded.cache_create_1h_tokens;
    IF direction < 0 THEN  -- a rollup row that sums to nothing goes, as one pass would not have it
        DELETE FROM retrod.request_minutes m
        USING (SELECT DISTINCT r.session_uuid, retrod.minute_of(r.ts) AS minute, r.agent FROM unnest(changed) r) c
        WHERE m.parts = 0 AND (m.session_uuid, m.minute, m.agent) = (c.session_uuid, c.minute, c.agent)
          AND m.db_role = current_user;
    END IF;
END $$;

-- A role's request rollup rebuilt from its requests: after its price thresholds changed (the
-- price data was upgraded), as store/db.py does it.
CREATE FUNCTION retrod.rebuild_request_minutes() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM retrod.request_minutes WHERE db_role = current_user;
    PERFORM retrod.add_request_minutes(ARRAY(
        SELECT r FROM retrod.requests r WHERE r.session_uuid = s.session_uuid AND r.db_role = current_user), 1)
    FROM (SELECT DISTINCT session_uuid FROM retrod.requests WHERE db_role = current_user) s;
END $$;
