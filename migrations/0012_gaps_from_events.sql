-- A gap's pieces and spans (0003) are read from its event; their two tables go (issue 13).
--
-- Each classified event closes the gap [prev_ts, ts] (0006: from the high-water mark, so one
-- file's gaps never overlap). gap_pieces held its first and last minute's parts, a row each
-- (more rows than events, each with two indexes and a foreign key that needed a third unique
-- key on events), gap_spans the whole minutes between. Writing them took a fifth of the time of
-- the statement that stores a batch's events; what they told is in the event already:
-- - the pieces of a phase window's edge minutes: the gaps that end in them (events_session_ts),
--   and those that start in them and end later, through the partial index below (a gap that
--   crosses a minute boundary: one classified event in ten in the benchmark's tree);
-- - the spans: the gaps with a whole minute between their first and last, a partial index of
--   their own (one in forty).
-- event_minutes is unchanged: the triggers still sum the same pieces (retrod.pieces_of).

CREATE FUNCTION retrod.crosses_minute(prev_ts TIMESTAMPTZ, ts TIMESTAMPTZ) RETURNS BOOLEAN
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$  -- (UTC minutes: no time zone in it)
    SELECT retrod.minute_of(prev_ts) < retrod.minute_of(ts - interval '1 microsecond')
$$;

CREATE FUNCTION retrod.spans_minutes(prev_ts TIMESTAMPTZ, ts TIMESTAMPTZ) RETURNS BOOLEAN
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$  -- a whole minute between the first and last: retrod.span_of
    SELECT retrod.minute_of(ts - interval '1 microsecond') > retrod.minute_of(prev_ts) + interval '1 minute'
$$;

CREATE INDEX events_crossing_gaps ON retrod.events (session_uuid, prev_ts)
    WHERE kind IS NOT NULL AND retrod.crosses_minute(prev_ts, ts);
CREATE INDEX events_spanning_gaps ON retrod.events (session_uuid, prev_ts)
    WHERE kind IS NOT NULL AND retrod.spans_minutes(prev_ts, ts);

CREATE OR REPLACE FUNCTION retrod.events_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM retrod.add_event_minutes(ARRAY(SELECT n::retrod.events FROM new_rows n), 1);
    ELSE
        PERFORM retrod.add_event_minutes(ARRAY(SELECT o::retrod.events FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

DROP TABLE retrod.gap_pieces, retrod.gap_spans;
ALTER TABLE retrod.events DROP CONSTRAINT events_file_offset_role_key;  -- their foreign keys' target

CREATE OR REPLACE FUNCTION retrod.rollups_truncated() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'requests' THEN
        DELETE FROM retrod.request_minutes;
    ELSIF TG_TABLE_NAME = 'events' THEN
        DELETE FROM retrod.event_minutes;
    ELSIF TG_TABLE_NAME = 'tool_calls' THEN
        DELETE FROM retrod.session_tool_calls;
    ELSIF TG_TABLE_NAME = 'tool_uses' THEN
        DELETE FROM retrod.call_minutes;
        DELETE FROM retrod.call_agents;
        DELETE FROM retrod.call_tools;
    END IF;
    RETURN NULL;
END $$;
