-- accounting.md §2.1 unmarked fork copies (issue 28): a main-transcript line that is neither copied
-- history, nor sidechain, nor marked (forkedFrom) is a fork copy when its uuid is also on such a
-- line of another session's main transcript and that session wrote it: the one with the
-- smallest (stamped_bg, first_ts, last_ts, session_id) among the sessions holding the uuid.
-- A file read later can change the writer, so every holder is kept (deleted transcripts' too:
-- history is kept): one row per unmarked candidate line with a uuid, with whether the line is
-- stamped sessionKind "bg". Each file's candidate span (first_ts, last_ts) is in its fold state
-- (span_first_us, span_last_us). Transcripts read before this migration are read again from
-- their start under fold.RULES 4, keeping their rows, which fills this table.
CREATE TABLE retrod.line_holders (
    file_id BIGINT NOT NULL REFERENCES retrod.files ON DELETE CASCADE,
    "offset" BIGINT NOT NULL,
    session_uuid TEXT COLLATE "C" NOT NULL,
    line_uuid TEXT COLLATE "C" NOT NULL,
    bg BOOLEAN NOT NULL,
    -- another session holds the uuid too (only these are ranked: most uuids are one session's)
    shared BOOLEAN NOT NULL DEFAULT false,
    copy BOOLEAN NOT NULL DEFAULT false,  -- a fork copy: another session holding it wrote it
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (file_id, "offset")
);
CREATE INDEX line_holders_uuid ON retrod.line_holders (line_uuid, session_uuid);
CREATE INDEX line_holders_shared ON retrod.line_holders (session_uuid) WHERE shared;

-- Who wrote each of the given uuids: among its holders, the smallest (stamped_bg: every one
-- of the session's candidate lines with it stamped
-- "bg"; first_ts, last_ts: the session's candidate span over its main transcripts, deleted ones
-- included, a session with none last; the session id in code-point order).
CREATE FUNCTION retrod.uuid_writers(uuids TEXT[]) RETURNS TABLE (line_uuid TEXT, session_uuid TEXT)
LANGUAGE sql STABLE AS $$
    WITH held AS (
        SELECT h.line_uuid, h.session_uuid, bool_and(h.bg) AS stamped_bg
        FROM retrod.line_holders h
        WHERE h.db_role = current_user AND h.line_uuid = ANY(uuids)
        GROUP BY h.line_uuid, h.session_uuid
    ), spans AS (
        SELECT f.session_uuid, min((f.state->>'span_first_us')::bigint) AS first_us,
               max((f.state->>'span_last_us')::bigint) AS last_us
        FROM retrod.files f
        WHERE f.kind = 'main' AND f.db_role = current_user AND f.session_uuid IN (SELECT h.session_uuid FROM held h)
        GROUP BY f.session_uuid
    )
    SELECT DISTINCT ON (h.line_uuid) h.line_uuid, h.session_uuid
    FROM held h LEFT JOIN spans p ON p.session_uuid = h.session_uuid
    ORDER BY h.line_uuid, h.stamped_bg, p.first_us NULLS LAST, p.last_us NULLS LAST, h.session_uuid
$$;

-- A request's owner is its record with the smallest (sidechain, foreign, time, session, agent)
-- (§2.2), and a fork copy's record ranks as foreign: the records on candidate lines with a uuid
-- (held_records: the line's own, or the one an agent_progress line embeds) are kept, and each
-- request keeps its owner among its other records (base_*; NULL: none), so that a request is
-- owned again when a line turns out a fork copy, or stops being one.
CREATE TABLE retrod.held_records (
    file_id BIGINT NOT NULL REFERENCES retrod.files ON DELETE CASCADE,
    "offset" BIGINT NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    sidechain BOOLEAN NOT NULL,
    ts TIMESTAMPTZ,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (file_id, "offset")
);
CREATE INDEX held_records_key ON retrod.held_records (key);
ALTER TABLE retrod.requests
    ADD COLUMN base_session TEXT COLLATE "C", ADD COLUMN base_agent TEXT COLLATE "C",
    ADD COLUMN base_sidechain BOOLEAN, ADD COLUMN base_foreign BOOLEAN, ADD COLUMN base_ts TIMESTAMPTZ,
    ADD COLUMN base_machine TEXT;

-- A session's `tool_calls` are the ids of its own lines' tool_use blocks (§2.4): each row keeps
-- its line, and a row whose line is a fork copy is set aside (parked_tool_calls, the same
-- columns) while it is one, so that the rollup's triggers count it out and back in.
ALTER TABLE retrod.tool_calls ADD COLUMN "offset" BIGINT;
CREATE TABLE retrod.parked_tool_calls (LIKE retrod.tool_calls INCLUDING DEFAULTS);
ALTER TABLE retrod.parked_tool_calls ADD PRIMARY KEY (file_id, tool_use_id),
    ADD FOREIGN KEY (file_id) REFERENCES retrod.files ON DELETE CASCADE;
