-- accounting.md §2.10 (issue 31): whether what retrod tells the next session works.
--
-- retrod.briefs: every answer `retrod brief --hook` printed to a SessionStart hook whose
-- session_id is a uuid — the session, the member, when it answered, the hook's `source`, the
-- project it briefed, the text, and the patterns it named in order, each with its mode
-- (`[{"pattern": …, "mode": …}, …]`). It is a record, not derived state: no transcript holds it,
-- so dropping and re-reading the derived tables must keep it, as they keep cc_session_phases.
-- Hence no foreign key to any derived table (a TRUNCATE … CASCADE of retrod.files must not reach
-- it), and nothing in retrod empties it. Keyed by member like every table of retrod's (accounting.md §3;
-- `retrod team` gives it row-level security as it does every table with a db_role).
CREATE TABLE retrod.briefs (
    id BIGINT GENERATED ALWAYS AS IDENTITY,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    session_uuid TEXT COLLATE "C" NOT NULL,
    answered_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    source TEXT COLLATE "C",
    project TEXT COLLATE "C",
    text TEXT NOT NULL,
    patterns JSONB NOT NULL DEFAULT '[]',
    PRIMARY KEY (db_role, id)
);
-- "given": the briefs of a member's sessions; "last mention": a project's latest brief naming x.
CREATE INDEX briefs_sessions ON retrod.briefs (db_role, session_uuid);
CREATE INDEX briefs_projects ON retrod.briefs (db_role, project, answered_at);

-- An example of a waste signal (§2.10) of a call without a path: its tool name, one space and the
-- first 60 code points of its canonical input (transcript/tool_input.example_head). Calls read
-- before this migration learn it when their file is read again (fold.RULES 6).
ALTER TABLE retrod.tool_uses ADD COLUMN example TEXT;
