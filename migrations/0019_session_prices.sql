-- A session's tokens by price group (issue 23): what `retrod ui`'s session list sorts and filters
-- by cost over every session, in one indexed scan of a small table.
--
-- A price depends on a part's model, its day, fast mode and its price tier (DESIGN §2.7; report/
-- prices.py), and within such a group it is linear: a group's summed tokens cost exactly what its
-- parts cost one by one. request_minutes (0013) is kept by those and by minute and agent; the list
-- needs no minute and no agent, and summing request_minutes for 10,000 sessions on every page
-- (about 100,000 rows over a long history) took most of the list's time. This is the same sums,
-- by day, one row per session, model, day, fast and tier: a few rows per session.
--
-- Kept by statement-level triggers on request_minutes, in the transaction that changes it: an
-- insert adds, a delete subtracts, an update (request_minutes' ON CONFLICT DO UPDATE) subtracts
-- the old row and adds the new; a group that sums to no part goes. Keyed by the member (§3).
-- tests/helpers.py holds it equal to the raw requests, beside every other rollup.
CREATE TABLE retrod.session_prices (
    session_uuid TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    model TEXT COLLATE "C" NOT NULL,
    day DATE NOT NULL,  -- the parts' UTC day; 'infinity' for requests without a timestamp
    fast BOOLEAN NOT NULL,
    tier_floor BIGINT NOT NULL,
    requests BIGINT NOT NULL,
    parts BIGINT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_create_tokens BIGINT NOT NULL,
    cache_create_5m_tokens BIGINT NOT NULL,
    cache_create_1h_tokens BIGINT NOT NULL,
    PRIMARY KEY (session_uuid, db_role, model, day, fast, tier_floor)
);
-- The list's filter by model.
CREATE INDEX session_prices_model ON retrod.session_prices (model, db_role);

CREATE FUNCTION retrod.day_of(minute TIMESTAMPTZ) RETURNS DATE LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN minute = 'infinity' THEN 'infinity'::date ELSE (minute AT TIME ZONE 'UTC')::date END
$$;

CREATE FUNCTION retrod.add_session_prices(changed retrod.request_minutes[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.session_prices AS s (
        session_uuid, db_role, model, day, fast, tier_floor, requests, parts, input_tokens, output_tokens,
        cache_read_tokens, cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens)
    SELECT c.session_uuid, c.db_role, c.model, retrod.day_of(c.minute), c.fast, c.tier_floor,
           direction * sum(c.requests), direction * sum(c.parts), direction * sum(c.input_tokens),
           direction * sum(c.output_tokens), direction * sum(c.cache_read_tokens),
           direction * sum(c.cache_create_tokens), direction * sum(c.cache_create_5m_tokens),
           direction * sum(c.cache_create_1h_tokens)
    FROM unnest(changed) c
    GROUP BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (session_uuid, db_role, model, day, fast, tier_floor) DO UPDATE SET
        requests = s.requests + excluded.requests, parts = s.parts + excluded.parts,
        input_tokens = s.input_tokens + excluded.input_tokens,
        output_tokens = s.output_tokens + excluded.output_tokens,
        cache_read_tokens = s.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = s.cache_create_tokens + excluded.cache_create_tokens,
        cache_create_5m_tokens = s.cache_create_5m_tokens + excluded.cache_create_5m_tokens,
        cache_create_1h_tokens = s.cache_create_1h_tokens + excluded.cache_create_1h_tokens;
    IF direction < 0 THEN  -- a group that sums to nothing goes, as one pass would not have it
        DELETE FROM retrod.session_prices s
        USING (SELECT DISTINCT session_uuid, db_role FROM unnest(changed)) c
        WHERE s.parts = 0 AND s.session_uuid = c.session_uuid AND s.db_role = c.db_role;
    END IF;
END $$;

CREATE FUNCTION retrod.request_minutes_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN  -- the new rows first: an update's group never empties midway
        PERFORM retrod.add_session_prices(ARRAY(SELECT n::retrod.request_minutes FROM new_rows n), 1);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_session_prices(ARRAY(SELECT o::retrod.request_minutes FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

-- (Transition tables take one event per trigger.)
CREATE TRIGGER request_minutes_inserted AFTER INSERT ON retrod.request_minutes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.request_minutes_changed();
CREATE TRIGGER request_minutes_updated AFTER UPDATE ON retrod.request_minutes
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.request_minutes_changed();
CREATE TRIGGER request_minutes_deleted AFTER DELETE ON retrod.request_minutes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.request_minutes_changed();
-- Fired in the bulk path's replica mode too, as every trigger of retrod's (0011).
ALTER TABLE retrod.request_minutes ENABLE ALWAYS TRIGGER request_minutes_inserted;
ALTER TABLE retrod.request_minutes ENABLE ALWAYS TRIGGER request_minutes_updated;
ALTER TABLE retrod.request_minutes ENABLE ALWAYS TRIGGER request_minutes_deleted;

INSERT INTO retrod.session_prices (
    session_uuid, db_role, model, day, fast, tier_floor, requests, parts, input_tokens, output_tokens,
    cache_read_tokens, cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens)
SELECT session_uuid, db_role, model, retrod.day_of(minute), fast, tier_floor, sum(requests), sum(parts),
       sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_create_tokens),
       sum(cache_create_5m_tokens), sum(cache_create_1h_tokens)
FROM retrod.request_minutes
GROUP BY 1, 2, 3, 4, 5, 6;
