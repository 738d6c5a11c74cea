-- The user's own tables, exactly as the original design has them: other tools write them too,
-- so they may already exist, and retrod never changes their shape.
CREATE TABLE IF NOT EXISTS public.cc_sessions (
    id SERIAL PRIMARY KEY,
    session_uuid TEXT NOT NULL UNIQUE,
    project_slug TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ,
    description TEXT,
    total_output_tokens INT,
    total_input_tokens INT,
    total_cache_read_tokens INT,
    total_cache_create_tokens INT,
    claude_time_seconds REAL,
    tool_time_seconds REAL,
    human_time_seconds REAL
);

CREATE TABLE IF NOT EXISTS public.cc_session_phases (
    id SERIAL PRIMARY KEY,
    session_id INT REFERENCES cc_sessions,
    task TEXT NOT NULL,
    phase TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    ended_at TIMESTAMPTZ,
    actions_summary TEXT,
    verdict TEXT NOT NULL,
    subagents TEXT,
    useful_info TEXT,
    lessons_learned TEXT,
    notes TEXT
);

-- retrod's derived state: everything below can be dropped and rebuilt by re-ingesting.
-- Identifiers compare in code-point order (COLLATE "C"), as the accounting rules require.
CREATE SCHEMA IF NOT EXISTS retrod;

-- Exact conversions of integer microseconds since the epoch (whole seconds and the rest apart:
-- interval arithmetic goes through float8, exact only below 2**53).
CREATE FUNCTION retrod.us_to_ts(us BIGINT) RETURNS TIMESTAMPTZ
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT timestamptz '1970-01-01 00:00:00+00' + (us / 1000000) * interval '1 second'
           + (us % 1000000) * interval '1 microsecond'
$$;

CREATE FUNCTION retrod.ts_to_us(ts TIMESTAMPTZ) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (extract(epoch FROM ts) * 1000000)::BIGINT
$$;

-- One row per file read, keyed by host so that several machines can share one database.
-- `offset` is the end of the last complete line folded; `state` is the fold state at that point.
CREATE TABLE retrod.files (
    id BIGSERIAL PRIMARY KEY,
    host_id TEXT COLLATE "C" NOT NULL,
    path TEXT COLLATE "C" NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('main', 'subagent', 'agent_root', 'meta', 'tool_result')),
    slug TEXT COLLATE "C" NOT NULL,
    session_uuid TEXT COLLATE "C",
    agent_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    device BIGINT,
    inode BIGINT,
    size BIGINT NOT NULL DEFAULT 0,
    "offset" BIGINT NOT NULL DEFAULT 0,
    state JSONB NOT NULL DEFAULT '{}',
    missing BOOLEAN NOT NULL DEFAULT false,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (host_id, path)
);
CREATE INDEX files_session ON retrod.files (session_uuid);

-- One row per deduplicated API request (accounting.md §2.2); `key` is global across files and sessions.
CREATE TABLE retrod.requests (
    key TEXT COLLATE "C" PRIMARY KEY,
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    ts TIMESTAMPTZ,
    attr_sidechain BOOLEAN NOT NULL,
    attr_foreign BOOLEAN NOT NULL,
    attr_ts TIMESTAMPTZ,
    usage_main BOOLEAN NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cache_read_tokens BIGINT NOT NULL,
    cache_create_tokens BIGINT NOT NULL,
    cache_create_5m_tokens BIGINT NOT NULL,
    cache_create_1h_tokens BIGINT NOT NULL,
    has_tool_use BOOLEAN NOT NULL
);
CREATE INDEX requests_session_ts ON retrod.requests (session_uuid, ts);

-- The main transcripts' own user/assistant lines, each with the gap it closes (accounting.md §2.3).
CREATE TABLE retrod.events (
    file_id BIGINT NOT NULL REFERENCES retrod.files ON DELETE CASCADE,
    "offset" BIGINT NOT NULL,
    session_uuid TEXT COLLATE "C" NOT NULL,
    ts TIMESTAMPTZ,
    prev_ts TIMESTAMPTZ,
    kind TEXT CHECK (kind IN ('claude', 'tool', 'human')),
    gap_us BIGINT NOT NULL,
    tool_result_bytes BIGINT NOT NULL,
    PRIMARY KEY (file_id, "offset")
);
CREATE INDEX events_session_ts ON retrod.events (session_uuid, ts);

-- tool_use blocks of the main transcripts' own assistant lines.
CREATE TABLE retrod.tool_calls (
    file_id BIGINT NOT NULL REFERENCES retrod.files ON DELETE CASCADE,
    tool_use_id TEXT COLLATE "C" NOT NULL,
    session_uuid TEXT COLLATE "C" NOT NULL,
    name TEXT,
    ts TIMESTAMPTZ,
    description TEXT,
    subagent_type TEXT,
    PRIMARY KEY (file_id, tool_use_id)
);
CREATE INDEX tool_calls_session_ts ON retrod.tool_calls (session_uuid, ts);

-- Subagents listed for a session (accounting.md §2.4), with the span of their timestamps, as each file
-- shows them (its own subagent file, agent_progress copies elsewhere): per file, so that a file
-- read again from its start contributes only its new content.
CREATE TABLE retrod.subagents (
    file_id BIGINT NOT NULL REFERENCES retrod.files ON DELETE CASCADE,
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    first_ts TIMESTAMPTZ,
    last_ts TIMESTAMPTZ,
    PRIMARY KEY (file_id, agent_id)
);
CREATE INDEX subagents_session ON retrod.subagents (session_uuid, agent_id);

-- What a subagent answers: the Task/Agent tool_use that started it.
CREATE TABLE retrod.subagent_links (
    file_id BIGINT NOT NULL REFERENCES retrod.files ON DELETE CASCADE,
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    tool_use_id TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (file_id, agent_id, tool_use_id)
);
CREATE INDEX subagent_links_session ON retrod.subagent_links (session_uuid, agent_id);

-- The `.meta.json` sidecars, as last read.
CREATE TABLE retrod.subagent_meta (
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    agent_type TEXT,
    description TEXT,
    PRIMARY KEY (session_uuid, agent_id)
);
