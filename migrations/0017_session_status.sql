-- What only Claude Code's status line sees (issue 21): its own cost estimate of the session and
-- the subscription's rate-limit use, which no transcript holds. `retrod statusline` hands them
-- to the daemon at each render; the daemon keeps one row per session and member, updated in
-- place (a render that brings nothing new writes nothing: store/statusline.sql).
--
-- Unlike retrod's other tables this one is not derived from the transcripts, so it cannot be
-- rebuilt by reading them again: nothing here ever empties it.
CREATE TABLE retrod.session_status (
    session_uuid TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    first_seen TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- as Claude Code last reported them (its `version` and `cost` objects)
    cc_version TEXT,
    cc_cost_usd DOUBLE PRECISION,
    cc_duration_ms BIGINT,
    cc_api_duration_ms BIGINT,
    -- each rate-limit window: its latest use and when it resets, and the most of it used while
    -- this session ran, with the reset of the window it was reached in (which window that was)
    five_hour_pct DOUBLE PRECISION,
    five_hour_resets_at TIMESTAMPTZ,
    five_hour_max_pct DOUBLE PRECISION,
    five_hour_max_resets_at TIMESTAMPTZ,
    seven_day_pct DOUBLE PRECISION,
    seven_day_resets_at TIMESTAMPTZ,
    seven_day_max_pct DOUBLE PRECISION,
    seven_day_max_resets_at TIMESTAMPTZ,
    PRIMARY KEY (session_uuid, db_role)
);

-- Today's cost across all sessions (the status line's): a member's request parts by minute.
-- The rollup's key starts with the session; without this a day's rows are a scan of all history.
CREATE INDEX request_minutes_member_minute ON retrod.request_minutes (db_role, minute);
