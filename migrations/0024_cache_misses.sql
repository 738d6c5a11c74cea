-- Prompt-cache misses (accounting.md §2.8, issue 29). A miss is worked out when a report is read, from
-- each stream's elements in order: the request parts stored already (tokens, the 5m/1h split,
-- model, fast mode, timestamp, key) give most of it, read through the index on (session, ts).
-- What they did not keep is kept here:
--
-- * Claude Code's own diagnosis of a miss (`message.diagnostics.cache_miss_reason` of the
--   chosen record, 2.1.217+), shown beside the cause;
-- * where a request without a key was written (its file's host-qualified path and byte offset):
--   such requests sort after the keyed ones of their timestamp, by file then line, and their
--   key does not order them (an offset is not ordered as text);
-- * every stream's compaction boundaries with their time: a miss right after one is expected.
--   The events table keeps only a main transcript's own boundaries, without a time.
--
-- Files read before this migration are read again from their start (fold.RULES 3), their
-- per-file rows forgotten first (fold.FORGET_BELOW_RULES): requests stay, and gain what they
-- bring now.
ALTER TABLE retrod.requests
    ADD COLUMN cache_miss_reason TEXT COLLATE "C",
    ADD COLUMN place_path TEXT COLLATE "C",
    ADD COLUMN place_offset BIGINT;

-- One row per compact_boundary line with a timestamp of a stream's own transcripts: the main
-- stream's (agent '') from a main transcript's lines but its isSidechain ones, an agent's from
-- every line of its own file. A copied project folder holds the same line twice: two rows, the
-- same time, which is all a miss asks of them (is there one between two requests?).
CREATE TABLE retrod.cache_boundaries (
    file_id BIGINT NOT NULL REFERENCES retrod.files ON DELETE CASCADE,
    "offset" BIGINT NOT NULL,
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    ts TIMESTAMPTZ NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    PRIMARY KEY (file_id, "offset")
);
CREATE INDEX cache_boundaries_stream ON retrod.cache_boundaries (session_uuid, agent, ts);
