-- DESIGN §2.1 unmarked fork copies (issue 28): a main-transcript line that is neither copied
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
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (file_id, "offset")
);
CREATE INDEX line_holders_uuid ON retrod.line_holders (line_uuid, session_uuid);
