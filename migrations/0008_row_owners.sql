-- A team on one shared PostgreSQL (README, "A team on one database"): every row names the
-- database role that wrote it. No statement of retrod's names the column: its default fills it
-- in (the rollup triggers' rows too, as they run as the role writing), and row-level security,
-- turned on by `retrod team` (store/team.sql), compares it with the role asking. Keys stay as
-- DESIGN §2.2 has them: a request is stored once, by the first member to store it.
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
