-- Ingest back near the floor (issue 32): an index of the fork copies (DESIGN §2.1), which are
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
