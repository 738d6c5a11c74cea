-- One price-group rollup, not two (issue 23). 0019 kept `session_prices`, a session's tokens by
-- model, day, fast mode and tier, for the web UI's session list, beside 0018's `session_requests`,
-- which holds the same sums by the same groups and by bucket as well. The list now sums
-- `session_requests`, and `session_figures` takes its tokens from it: session_prices, the
-- request_minutes triggers that kept it and its day_of function go. session_figures' token
-- figures stay as they are: both tables sum the same request parts.

DROP TRIGGER request_minutes_inserted ON retrod.request_minutes;
DROP TRIGGER request_minutes_updated ON retrod.request_minutes;
DROP TRIGGER request_minutes_deleted ON retrod.request_minutes;
DROP FUNCTION retrod.request_minutes_changed();
DROP FUNCTION retrod.add_session_prices(retrod.request_minutes[], INT);
DROP TRIGGER session_prices_inserted ON retrod.session_prices;
DROP TRIGGER session_prices_updated ON retrod.session_prices;
DROP TRIGGER session_prices_deleted ON retrod.session_prices;
DROP FUNCTION retrod.session_prices_changed();
DROP FUNCTION retrod.add_session_figures_tokens(retrod.session_prices[], INT);
DROP TABLE retrod.session_prices;
DROP FUNCTION retrod.day_of(TIMESTAMPTZ);

CREATE FUNCTION retrod.add_session_figures_tokens(changed retrod.session_requests[], direction INT)
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

CREATE FUNCTION retrod.session_requests_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM retrod.add_session_figures_tokens(ARRAY(SELECT n::retrod.session_requests FROM new_rows n), 1);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM retrod.add_session_figures_tokens(ARRAY(SELECT o::retrod.session_requests FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER session_requests_inserted AFTER INSERT ON retrod.session_requests
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.session_requests_changed();
CREATE TRIGGER session_requests_updated AFTER UPDATE ON retrod.session_requests
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.session_requests_changed();
CREATE TRIGGER session_requests_deleted AFTER DELETE ON retrod.session_requests
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.session_requests_changed();

-- Fired in the bulk path's replica mode too, as every trigger of retrod's (0011).
ALTER TABLE retrod.session_requests ENABLE ALWAYS TRIGGER session_requests_inserted;
ALTER TABLE retrod.session_requests ENABLE ALWAYS TRIGGER session_requests_updated;
ALTER TABLE retrod.session_requests ENABLE ALWAYS TRIGGER session_requests_deleted;
