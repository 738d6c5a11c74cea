-- A team on one shared PostgreSQL (README, "A team on one database"): every row names the
-- database role that wrote it. No statement of retrod's names the column: its default fills it
-- in (the rollup triggers' rows too, as they run as the role writing), and row-level security,
-- turned on by `retrod team` (store/team.sql), compares it with the role asking. Keys stay as
-- accounting.md §2.2 has them: a request is stored once, by the first member to store it.
-- Rows written before this migration belong to the role that runs it. The user's own tables
-- keep their designed columns: `retrod team` adds db_role to them, for a team only.
ALTER TABLE retrod.files ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.requests ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.events ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.tool_calls ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.subagents ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.subagent_links ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.subagent_meta ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.request_minutes ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.gap_pieces ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.gap_spans ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.event_minutes ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;
ALTER TABLE retrod.session_tool_calls ADD COLUMN db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user;

-- A row's file is its own role's file: the foreign keys carry db_role, since a foreign key check
-- ignores row-level security (a member could otherwise hang rows on another's file id and, by
-- taking their keys first, hide the owner's). A file's key names its role too, so two roles'
-- daemons never contend for one row.
ALTER TABLE retrod.files DROP CONSTRAINT files_host_id_path_key,
    ADD CONSTRAINT files_host_id_path_role_key UNIQUE (host_id, path, db_role),
    ADD CONSTRAINT files_id_role_key UNIQUE (id, db_role);
ALTER TABLE retrod.events ADD CONSTRAINT events_file_offset_role_key UNIQUE (file_id, "offset", db_role);
ALTER TABLE retrod.gap_pieces DROP CONSTRAINT gap_pieces_file_id_offset_fkey,
    ADD FOREIGN KEY (file_id, "offset", db_role) REFERENCES retrod.events (file_id, "offset", db_role)
        ON DELETE CASCADE;
ALTER TABLE retrod.gap_spans DROP CONSTRAINT gap_spans_file_id_offset_fkey,
    ADD FOREIGN KEY (file_id, "offset", db_role) REFERENCES retrod.events (file_id, "offset", db_role)
        ON DELETE CASCADE;
ALTER TABLE retrod.events DROP CONSTRAINT events_file_id_fkey,
    ADD FOREIGN KEY (file_id, db_role) REFERENCES retrod.files (id, db_role) ON DELETE CASCADE;
ALTER TABLE retrod.tool_calls DROP CONSTRAINT tool_calls_file_id_fkey,
    ADD FOREIGN KEY (file_id, db_role) REFERENCES retrod.files (id, db_role) ON DELETE CASCADE;
ALTER TABLE retrod.subagents DROP CONSTRAINT subagents_file_id_fkey,
    ADD FOREIGN KEY (file_id, db_role) REFERENCES retrod.files (id, db_role) ON DELETE CASCADE;
ALTER TABLE retrod.subagent_links DROP CONSTRAINT subagent_links_file_id_fkey,
    ADD FOREIGN KEY (file_id, db_role) REFERENCES retrod.files (id, db_role) ON DELETE CASCADE;

-- For later migrations: a statement that rebuilds rows (as 0006 did) must carry db_role over,
-- or the rebuilt rows become the owner's and vanish from their member's view.
