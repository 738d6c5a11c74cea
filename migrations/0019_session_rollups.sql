-- A session's tokens by price group (issue 23): what `retrod ui`'s session list sorts and filters
-- by cost over every session, in one indexed scan of a small table.
--
-- A price depends on a part's model, its day, fast mode and its price tier (accounting.md §2.7; report/
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

-- One row per session (and member) with the figures the list shows and sorts by, so that a page
-- of the list reads one small row per session instead of grouping every file, price group and
-- agent of every session (over 10,000 sessions that grouping was most of an answer's time):
--   from its files (recomputed from the session's few rows when one changes): how many
--   transcripts, its project (the main transcript's folder, else the first), its main
--   transcripts' first event and high-water mark (the fold state's, as `retrod sessions` reads
--   them), whether it has a main transcript;
--   from session_prices (added up): its request parts, requests and tokens;
--   from call_agents (added up): its calls and the productive ones.
-- A row that holds nothing (no transcript, no part, no call) goes. tests/helpers.py holds it equal
-- to the raw files, requests and calls.
CREATE TABLE retrod.session_figures (
    session_uuid TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    transcripts BIGINT NOT NULL DEFAULT 0,
    project_slug TEXT COLLATE "C",
    first_us BIGINT,
    last_us BIGINT,
    has_main BOOLEAN NOT NULL DEFAULT false,
    parts BIGINT NOT NULL DEFAULT 0,
    requests BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens BIGINT NOT NULL DEFAULT 0,
    cache_create_tokens BIGINT NOT NULL DEFAULT 0,
    calls BIGINT NOT NULL DEFAULT 0,
    productive BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (session_uuid, db_role)
);

CREATE FUNCTION retrod.session_figures_gone(sessions TEXT[], roles TEXT[]) RETURNS void LANGUAGE sql AS $$
    DELETE FROM retrod.session_figures s
    USING (SELECT DISTINCT * FROM unnest(sessions, roles)) k(session_uuid, db_role)
    WHERE s.session_uuid = k.session_uuid AND s.db_role = k.db_role
      AND s.transcripts = 0 AND s.parts = 0 AND s.calls = 0
$$;

CREATE FUNCTION retrod.session_figures_from_files(sessions TEXT[], roles TEXT[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.session_figures AS s (session_uuid, db_role, transcripts, project_slug, first_us, last_us,
                                             has_main)
    SELECT k.session_uuid, k.db_role, count(f.id),
           coalesce(min(f.slug) FILTER (WHERE f.kind = 'main'), min(f.slug)),
           min((f.state ->> 'first_event_us')::bigint) FILTER (WHERE f.kind = 'main'),
           max((f.state ->> 'high_water_us')::bigint) FILTER (WHERE f.kind = 'main'),
           coalesce(bool_or(f.kind = 'main'), false)
    FROM (SELECT DISTINCT * FROM unnest(sessions, roles)) k(session_uuid, db_role)
    LEFT JOIN retrod.files f ON f.session_uuid = k.session_uuid AND f.db_role = k.db_role
                             AND f.kind IN ('main', 'subagent', 'agent_root')
    WHERE k.session_uuid IS NOT NULL
    GROUP BY 1, 2
    ON CONFLICT (session_uuid, db_role) DO UPDATE SET
        transcripts = excluded.transcripts, project_slug = excluded.project_slug, first_us = excluded.first_us,
        last_us = excluded.last_us, has_main = excluded.has_main;
    PERFORM retrod.session_figures_gone(sessions, roles);
END $$;

CREATE FUNCTION retrod.files_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.session_figures_from_files(ARRAY(SELECT n.session_uuid FROM new_rows n),
                                                  ARRAY(SELECT n.db_role FROM new_rows n));
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN  -- (a file may leave a session: an agent file named again)
        PERFORM retrod.session_figures_from_files(ARRAY(SELECT o.session_uuid FROM old_rows o),
                                                  ARRAY(SELECT o.db_role FROM old_rows o));
    END IF;
    RETURN NULL;
END $$;

-- Rebuilding retrod's tables by truncation (as 0003's rollups_truncated) leaves no file: no session
-- has transcripts then; what the other sources hold goes with their own rows.
CREATE FUNCTION retrod.files_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    UPDATE retrod.session_figures
    SET transcripts = 0, project_slug = NULL, first_us = NULL, last_us = NULL, has_main = false;
    DELETE FROM retrod.session_figures WHERE parts = 0 AND calls = 0;
    RETURN NULL;
END $$;
CREATE TRIGGER files_truncated AFTER TRUNCATE ON retrod.files
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.files_truncated();

CREATE TRIGGER files_inserted AFTER INSERT ON retrod.files
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.files_changed();
CREATE TRIGGER files_updated AFTER UPDATE ON retrod.files
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.files_changed();
CREATE TRIGGER files_deleted AFTER DELETE ON retrod.files
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.files_changed();

CREATE FUNCTION retrod.add_session_figures_tokens(changed retrod.session_prices[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.session_figures AS s (session_uuid, db_role, parts, requests, input_tokens, output_tokens,
                                             cache_read_tokens, cache_create_tokens)
    SELECT c.session_uuid, c.db_role, direction * sum(c.parts), direction * sum(c.requests),
           direction * sum(c.input_tokens), direction * sum(c.output_tokens), direction * sum(c.cache_read_tokens),
           direction * sum(c.cache_create_tokens)
    FROM unnest(changed) c GROUP BY 1, 2
    ON CONFLICT (session_uuid, db_role) DO UPDATE SET
        parts = s.parts + excluded.parts, requests = s.requests + excluded.requests,
        input_tokens = s.input_tokens + excluded.input_tokens, output_tokens = s.output_tokens + excluded.output_tokens,
        cache_read_tokens = s.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = s.cache_create_tokens + excluded.cache_create_tokens;
    IF direction < 0 THEN
        PERFORM retrod.session_figures_gone(ARRAY(SELECT c.session_uuid FROM unnest(changed) c),
                                            ARRAY(SELECT c.db_role FROM unnest(changed) c));
    END IF;
END $$;

CREATE FUNCTION retrod.session_prices_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.add_session_figures_tokens(ARRAY(SELECT n::retrod.session_prices FROM new_rows n), 1);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_session_figures_tokens(ARRAY(SELECT o::retrod.session_prices FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER session_prices_inserted AFTER INSERT ON retrod.session_prices
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.session_prices_changed();
CREATE TRIGGER session_prices_updated AFTER UPDATE ON retrod.session_prices
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.session_prices_changed();
CREATE TRIGGER session_prices_deleted AFTER DELETE ON retrod.session_prices
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.session_prices_changed();

CREATE FUNCTION retrod.add_session_figures_calls(changed retrod.call_agents[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.session_figures AS s (session_uuid, db_role, calls, productive)
    SELECT c.session_uuid, c.db_role,
           direction * sum(c.productive + c.sibling_error + c.error_retry + c.persisted_output_read
                           + c.post_write_read + c.duplicate + c.re_read),
           direction * sum(c.productive)
    FROM unnest(changed) c GROUP BY 1, 2
    ON CONFLICT (session_uuid, db_role) DO UPDATE SET
        calls = s.calls + excluded.calls, productive = s.productive + excluded.productive;
    IF direction < 0 THEN
        PERFORM retrod.session_figures_gone(ARRAY(SELECT c.session_uuid FROM unnest(changed) c),
                                            ARRAY(SELECT c.db_role FROM unnest(changed) c));
    END IF;
END $$;

CREATE FUNCTION retrod.call_agents_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.add_session_figures_calls(ARRAY(SELECT n::retrod.call_agents FROM new_rows n), 1);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_session_figures_calls(ARRAY(SELECT o::retrod.call_agents FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER call_agents_inserted AFTER INSERT ON retrod.call_agents
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.call_agents_changed();
CREATE TRIGGER call_agents_updated AFTER UPDATE ON retrod.call_agents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.call_agents_changed();
CREATE TRIGGER call_agents_deleted AFTER DELETE ON retrod.call_agents
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.call_agents_changed();

DO $$
DECLARE
    t RECORD;
BEGIN  -- fired in the bulk path's replica mode too (0011)
    FOR t IN SELECT tgrelid::regclass AS tbl, tgname FROM pg_trigger
             WHERE tgname IN ('files_inserted', 'files_updated', 'files_deleted', 'files_truncated',
                              'session_prices_inserted',
                              'session_prices_updated', 'session_prices_deleted', 'call_agents_inserted',
                              'call_agents_updated', 'call_agents_deleted')
               AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'retrod'::regnamespace)
    LOOP
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', t.tbl, t.tgname);
    END LOOP;
END $$;

-- What is stored already (session_prices got its rows above, before its own triggers existed).
INSERT INTO retrod.session_figures (session_uuid, db_role, transcripts, project_slug, first_us, last_us, has_main,
                                    parts, requests, input_tokens, output_tokens, cache_read_tokens,
                                    cache_create_tokens, calls, productive)
SELECT k.session_uuid, k.db_role, coalesce(f.transcripts, 0), f.project_slug, f.first_us, f.last_us,
       coalesce(f.has_main, false), coalesce(p.parts, 0), coalesce(p.requests, 0), coalesce(p.input, 0),
       coalesce(p.output, 0), coalesce(p.cache_read, 0), coalesce(p.cache_create, 0), coalesce(c.calls, 0),
       coalesce(c.productive, 0)
FROM (SELECT session_uuid, db_role FROM retrod.files
      WHERE kind IN ('main', 'subagent', 'agent_root') AND session_uuid IS NOT NULL
      UNION SELECT session_uuid, db_role FROM retrod.session_prices
      UNION SELECT session_uuid, db_role FROM retrod.call_agents) k
LEFT JOIN (
    SELECT session_uuid, db_role, count(*) AS transcripts,
           coalesce(min(slug) FILTER (WHERE kind = 'main'), min(slug)) AS project_slug,
           min((state ->> 'first_event_us')::bigint) FILTER (WHERE kind = 'main') AS first_us,
           max((state ->> 'high_water_us')::bigint) FILTER (WHERE kind = 'main') AS last_us,
           bool_or(kind = 'main') AS has_main
    FROM retrod.files WHERE kind IN ('main', 'subagent', 'agent_root') AND session_uuid IS NOT NULL
    GROUP BY 1, 2
) f USING (session_uuid, db_role)
LEFT JOIN (
    SELECT session_uuid, db_role, sum(parts) AS parts, sum(requests) AS requests, sum(input_tokens) AS input,
           sum(output_tokens) AS output, sum(cache_read_tokens) AS cache_read,
           sum(cache_create_tokens) AS cache_create
    FROM retrod.session_prices GROUP BY 1, 2
) p USING (session_uuid, db_role)
LEFT JOIN (
    SELECT session_uuid, db_role,
           sum(productive + sibling_error + error_retry + persisted_output_read + post_write_read + duplicate
               + re_read) AS calls, sum(productive) AS productive
    FROM retrod.call_agents GROUP BY 1, 2
) c USING (session_uuid, db_role)
WHERE coalesce(f.transcripts, 0) > 0 OR coalesce(p.parts, 0) > 0 OR coalesce(c.calls, 0) > 0;
