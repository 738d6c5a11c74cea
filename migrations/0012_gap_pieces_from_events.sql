-- A gap's pieces at a phase window's edges are read from its event; gap_pieces goes (issue 13).
--
-- gap_pieces (0003) held the first and last minute's part of each classified event's gap
-- [prev_ts, ts], a row each: more rows than events, each with two indexes and a foreign key.
-- Writing them took about a fifth of the time of the statement that stores a batch's events.
-- A window's two edge minutes now find their gaps on the events (0006: gaps run from the
-- high-water mark, so one file's gaps never overlap): those that end in them through
-- events_session_ts, and those that start in them and end later through the partial index below,
-- which holds the gaps that cross a minute boundary (one classified event in ten in the
-- benchmark's tree). event_minutes still sums the same pieces (retrod.pieces_of), and gap_spans
-- still holds the whole minutes between a long gap's first and last.

-- minute_of(prev_ts) < minute_of(ts - 1 µs), in operators PostgreSQL itself calls immutable (as
-- timestamps in UTC), so that it is inlined into the index condition and the queries (0005).
CREATE FUNCTION retrod.crosses_minute(prev_ts TIMESTAMPTZ, ts TIMESTAMPTZ) RETURNS BOOLEAN
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT date_trunc('minute', prev_ts AT TIME ZONE 'UTC')
           < date_trunc('minute', (ts AT TIME ZONE 'UTC') - interval '1 microsecond')
$$;

CREATE INDEX events_crossing_gaps ON retrod.events (session_uuid, prev_ts)
    WHERE kind IS NOT NULL AND retrod.crosses_minute(prev_ts, ts);

CREATE OR REPLACE FUNCTION retrod.events_changed() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO retrod.gap_spans
        SELECT e.file_id, e."offset", e.session_uuid, e.kind, sp.span_start, sp.span_end
        FROM new_rows e, retrod.span_of(e.prev_ts, e.ts) sp
        WHERE e.kind IS NOT NULL;
        PERFORM retrod.add_event_minutes(ARRAY(SELECT n::retrod.events FROM new_rows n), 1);
    ELSE  -- DELETE: gap_spans follow by their foreign key
        PERFORM retrod.add_event_minutes(ARRAY(SELECT o::retrod.events FROM old_rows o), -1);
    END IF;
    RETURN NULL;
END $$;

DROP TABLE retrod.gap_pieces;
