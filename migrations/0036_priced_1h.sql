-- accounting.md §2.7: "When a part's 5m and 1h writes do not add up to its cache writes, all of its
-- cache writes count as 5m". A rule per part, which a sum cannot apply: the price-group rollups
-- summed the 1h writes as given, and a reader priced least(1h, cache writes) of the group at the
-- 1h rate — 900 of a part's 1,000 writes whose split says 5m 200 and 1h 900, and a malformed
-- part's 1h writes inside a group's well-formed ones. Each rollup by price group now also sums
-- the writes priced at the 1h rate (`priced_1h_tokens`: a part's 1h writes when its split adds
-- up, else none), which every surface prices instead; the writes of the group beyond them are
-- priced at the 5m rate. The 5m and 1h figures shown stay the split as given.

-- The rule, stated once (the raw rows' readers apply it to each part they read).
CREATE FUNCTION retrod.priced_1h(cache_create BIGINT, c5 BIGINT, c1 BIGINT) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN c5 + c1 = cache_create THEN c1 ELSE 0 END
$$;

ALTER TABLE retrod.request_minutes ADD COLUMN priced_1h_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE retrod.session_requests ADD COLUMN priced_1h_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE retrod.request_hours ADD COLUMN priced_1h_tokens BIGINT NOT NULL DEFAULT 0;

-- 0027's function, summing each part's priced 1h writes into both rollups beside its tokens.
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
               direction * sum(p.cache_create_1h) AS c1, direction * sum(p.web_searches) AS ws,
               direction * sum(retrod.priced_1h(p.cache_create, p.cache_create_5m, p.cache_create_1h)) AS p1
        FROM unnest(changed) r, retrod.request_parts(r) p
        GROUP BY 1, 2, 3, 4, 5, 6
    ), minutes AS (
        INSERT INTO retrod.request_minutes AS m (
            session_uuid, minute, agent, model, fast, tier_floor, requests, parts, split_requests, tool_turns,
            input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
            cache_create_1h_tokens, web_searches, priced_1h_tokens)
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
            web_searches = m.web_searches + excluded.web_searches,
            priced_1h_tokens = m.priced_1h_tokens + excluded.priced_1h_tokens
    )
    INSERT INTO retrod.session_requests AS s (
        session_uuid, bucket, model, day, fast, tier_floor, requests, parts, split_requests, tool_turns,
        input_tokens, output_tokens, cache_read_tokens, cache_create_tokens, cache_create_5m_tokens,
        cache_create_1h_tokens, web_searches, priced_1h_tokens)
    SELECT session_uuid, retrod.bucket_of(agent), model, (minute AT TIME ZONE 'UTC')::date, fast, tier_floor,
           sum(requests), sum(parts), sum(split_requests), sum(tool_turns), sum(i), sum(o), sum(cr), sum(cc),
           sum(c5), sum(c1), sum(ws), sum(p1)
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
        web_searches = s.web_searches + excluded.web_searches,
        priced_1h_tokens = s.priced_1h_tokens + excluded.priced_1h_tokens;
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

-- 0031's function, with the hour's priced 1h writes the sum of its minutes'.
CREATE OR REPLACE FUNCTION retrod.add_request_hours(changed retrod.request_minutes[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.request_hours AS h (session_uuid, hour, agent, model, fast, tier_floor, db_role, requests, parts,
                                           split_requests, tool_turns, input_tokens, output_tokens, cache_read_tokens,
                                           cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens,
                                           web_searches, priced_1h_tokens)
    SELECT c.session_uuid, retrod.hour_of(c.minute), c.agent, c.model, c.fast, c.tier_floor, c.db_role,
           direction * sum(c.requests), direction * sum(c.parts), direction * sum(c.split_requests),
           direction * sum(c.tool_turns), direction * sum(c.input_tokens), direction * sum(c.output_tokens),
           direction * sum(c.cache_read_tokens), direction * sum(c.cache_create_tokens),
           direction * sum(c.cache_create_5m_tokens), direction * sum(c.cache_create_1h_tokens),
           direction * sum(c.web_searches), direction * sum(c.priced_1h_tokens)
    FROM unnest(changed) c GROUP BY 1, 2, 3, 4, 5, 6, 7
    ON CONFLICT (session_uuid, hour, agent, model, fast, tier_floor, db_role) DO UPDATE SET
        requests = h.requests + excluded.requests, parts = h.parts + excluded.parts,
        split_requests = h.split_requests + excluded.split_requests, tool_turns = h.tool_turns + excluded.tool_turns,
        input_tokens = h.input_tokens + excluded.input_tokens, output_tokens = h.output_tokens + excluded.output_tokens,
        cache_read_tokens = h.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = h.cache_create_tokens + excluded.cache_create_tokens,
        cache_create_5m_tokens = h.cache_create_5m_tokens + excluded.cache_create_5m_tokens,
        cache_create_1h_tokens = h.cache_create_1h_tokens + excluded.cache_create_1h_tokens,
        web_searches = h.web_searches + excluded.web_searches,
        priced_1h_tokens = h.priced_1h_tokens + excluded.priced_1h_tokens;
    IF direction < 0 THEN
        DELETE FROM retrod.request_hours h
        USING (SELECT DISTINCT c.session_uuid, retrod.hour_of(c.minute) AS hour, c.db_role FROM unnest(changed) c) c
        WHERE h.parts = 0 AND (h.session_uuid, h.hour, h.db_role) = (c.session_uuid, c.hour, c.db_role);
    END IF;
END $$;

-- What was read before: each price group's priced 1h writes summed from its requests' parts (by
-- the tiers of each member's stored thresholds, as the rollups were), every member's. The
-- minutes' update takes their hours along (their statement triggers, with the function above);
-- the sessions' marks their trends' days changed (0034), so kept periods are priced again.
CREATE TEMPORARY TABLE priced_1h_minutes ON COMMIT DROP AS
SELECT r.session_uuid, retrod.minute_of(r.ts) AS minute, r.agent, p.model, r.fast,
       retrod.tier_floor(p.input + p.cache_read + p.cache_create, t.thresholds) AS tier_floor, r.db_role,
       sum(retrod.priced_1h(p.cache_create, p.cache_create_5m, p.cache_create_1h)) AS p1
FROM retrod.requests r
LEFT JOIN retrod.price_tiers t ON t.db_role = r.db_role
CROSS JOIN LATERAL retrod.request_parts(r) p
WHERE p.cache_create_1h <> 0
GROUP BY 1, 2, 3, 4, 5, 6, 7;

UPDATE retrod.request_minutes m SET priced_1h_tokens = x.p1
FROM priced_1h_minutes x
WHERE x.p1 <> 0 AND (m.session_uuid, m.minute, m.agent, m.model, m.fast, m.tier_floor, m.db_role)
                  = (x.session_uuid, x.minute, x.agent, x.model, x.fast, x.tier_floor, x.db_role);

UPDATE retrod.session_requests s SET priced_1h_tokens = x.p1
FROM (SELECT session_uuid, retrod.bucket_of(agent) AS bucket, model, (minute AT TIME ZONE 'UTC')::date AS day, fast,
             tier_floor, db_role, sum(p1) AS p1
      FROM priced_1h_minutes GROUP BY 1, 2, 3, 4, 5, 6, 7) x
WHERE x.p1 <> 0 AND (s.session_uuid, s.bucket, s.model, s.day, s.fast, s.tier_floor, s.db_role)
                  = (x.session_uuid, x.bucket, x.model, x.day, x.fast, x.tier_floor, x.db_role);

-- accounting.md §2.1, §2.4, §4: an unmarked fork copy (a line whose uuid another session wrote) gives
-- the fork no listed subagent, no subagent link and no working folder. Which lines are such copies
-- is decided by the store, across sessions, and may change as files are read (line_holders.copy),
-- so what such a line (a holder: an unmarked candidate line with a uuid) says is kept on its row
-- and counts while it is no copy: its record's agent (kept already: listed when it is an
-- agent_progress copy's named agent), its subagent link, and its working folder when it differs
-- from the holder's before it in the file (cwd_changed; a holder's folder is that of the last one
-- at or before it). A file's working folder (files.cwd) is worked out by the store from its
-- holders and its first own line without a uuid (fold state cwd, cwd_offset) when they change.
-- Files read before are read again from their start forgetting their per-file rows (fold.RULES
-- 8), which fills these; until then a file's folder is the one its fold state named.
-- (IF NOT EXISTS: a test stores rows as an older schema held them with today's ingest, which
-- writes these columns, as 0027 and 0035 do)
ALTER TABLE retrod.line_holders ADD COLUMN IF NOT EXISTS link_agent TEXT COLLATE "C",
                                ADD COLUMN IF NOT EXISTS link_tool_use TEXT COLLATE "C",
                                ADD COLUMN IF NOT EXISTS cwd_changed BOOLEAN NOT NULL DEFAULT false,
                                ADD COLUMN IF NOT EXISTS cwd TEXT COLLATE "C";
-- (a session's listed agents and links among its holders: few of its lines)
CREATE INDEX line_holders_subagents ON retrod.line_holders (session_uuid) WHERE sidechain OR link_agent IS NOT NULL;
ALTER TABLE retrod.files ADD COLUMN IF NOT EXISTS cwd TEXT COLLATE "C";
UPDATE retrod.files SET cwd = state ->> 'cwd' WHERE kind = 'main' AND cwd IS NULL AND state ->> 'cwd' IS NOT NULL;

-- 0034's function, with a file's working folder its column.
CREATE OR REPLACE FUNCTION retrod.trend_files_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
        SELECT DISTINCT x.session_uuid, x.db_role FROM (
            SELECT n.session_uuid, n.db_role, o.session_uuid AS old_session, o.db_role AS old_role
            FROM new_rows n JOIN old_rows o ON o.id = n.id
            WHERE (n.session_uuid, n.db_role, n.kind, n.slug, n.path, n.cwd)
                  IS DISTINCT FROM (o.session_uuid, o.db_role, o.kind, o.slug, o.path, o.cwd)
        ) c, LATERAL (VALUES (c.session_uuid, c.db_role), (c.old_session, c.old_role)) x(session_uuid, db_role)
        WHERE x.session_uuid IS NOT NULL ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
        SELECT DISTINCT n.session_uuid, n.db_role FROM new_rows n WHERE n.session_uuid IS NOT NULL ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed;
    ELSE
        INSERT INTO retrod.trend_sessions AS t (session_uuid, db_role)
        SELECT DISTINCT o.session_uuid, o.db_role FROM old_rows o WHERE o.session_uuid IS NOT NULL ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET changed = true WHERE NOT t.changed;
    END IF;
    RETURN NULL;
END $$;
