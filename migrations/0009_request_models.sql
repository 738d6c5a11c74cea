-- Tokens by model (issue 11): a request's model is the `message.model` of the record whose usage
-- counts (accounting.md §2.2); '' when that record names none, so that it can be part of a rollup key.
-- Cost is never stored: it is computed when a report is read, from these tokens and a price
-- table (prices change; token counts do not).
ALTER TABLE retrod.requests ADD COLUMN model TEXT COLLATE "C" NOT NULL DEFAULT '';

-- The per-minute rollup gains the model in its key, and the 5-minute / 1-hour cache-write split
-- that prices tell apart. db_role stays as 0008 made it: a column filled by its default, not
-- part of the key (a session's rows are one member's).
ALTER TABLE retrod.request_minutes
    ADD COLUMN model TEXT COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN cache_create_5m_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN cache_create_1h_tokens BIGINT NOT NULL DEFAULT 0,
    DROP CONSTRAINT request_minutes_pkey,
    ADD PRIMARY KEY (session_uuid, minute, agent, model);

-- The trigger's arithmetic of 0004, keyed by model too. An UPDATE (the upsert, when a record
-- with a larger usage, or the same usage and a model, arrives) takes its old row out of the old
-- model's minute and puts the new one into the new model's.
CREATE OR REPLACE FUNCTION retrod.add_request_minutes(changed retrod.requests[], direction INT)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrod.request_minutes AS m (
        session_uuid, minute, agent, model, requests, tool_turns, input_tokens, output_tokens,
        cache_read_tokens, cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens)
    SELECT session_uuid, retrod.minute_of(ts), agent, model, direction * count(*),
           direction * count(*) FILTER (WHERE has_tool_use), direction * sum(input_tokens),
           direction * sum(output_tokens), direction * sum(cache_read_tokens),
           direction * sum(cache_create_tokens), direction * sum(cache_create_5m_tokens),
           direction * sum(cache_create_1h_tokens)
    FROM unnest(changed) GROUP BY 1, 2, 3, 4
    ON CONFLICT (session_uuid, minute, agent, model) DO UPDATE SET
        requests = m.requests + excluded.requests, tool_turns = m.tool_turns + excluded.tool_turns,
        input_tokens = m.input_tokens + excluded.input_tokens,
        output_tokens = m.output_tokens + excluded.output_tokens,
        cache_read_tokens = m.cache_read_tokens + excluded.cache_read_tokens,
        cache_create_tokens = m.cache_create_tokens + excluded.cache_create_tokens,
        cache_create_5m_tokens = m.cache_create_5m_tokens + excluded.cache_create_5m_tokens,
        cache_create_1h_tokens = m.cache_create_1h_tokens + excluded.cache_create_1h_tokens;
    IF direction < 0 THEN
        DELETE FROM retrod.request_minutes m
        USING (SELECT DISTINCT session_uuid, retrod.minute_of(ts) AS minute, agent, model
               FROM unnest(changed)) c
        WHERE m.requests = 0
          AND (m.session_uuid, m.minute, m.agent, m.model) = (c.session_uuid, c.minute, c.agent, c.model);
    END IF;
END $$;

-- Rebuilt from the requests, whose model is '' for now; carrying db_role over (see 0008's end).
DELETE FROM retrod.request_minutes;
INSERT INTO retrod.request_minutes (
    session_uuid, minute, agent, model, requests, tool_turns, input_tokens, output_tokens,
    cache_read_tokens, cache_create_tokens, cache_create_5m_tokens, cache_create_1h_tokens, db_role)
SELECT session_uuid, retrod.minute_of(ts), agent, model, count(*), count(*) FILTER (WHERE has_tool_use),
       sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), sum(cache_create_tokens),
       sum(cache_create_5m_tokens), sum(cache_create_1h_tokens), db_role
FROM retrod.requests GROUP BY 1, 2, 3, 4, db_role;

-- The models of the requests stored so far: every transcript still on disk is read again from
-- its start, with a fresh fold state, WITHOUT deleting its rows (not a reset, which forgets a
-- file's events and tool calls): events and links are inserted ON CONFLICT DO NOTHING, tool
-- calls and subagents merge by min/max, and the request upsert is idempotent, except that at
-- the same usage a record naming a model beats the stored '' — so the re-read changes nothing
-- but the models. Transcripts Claude Code has deleted cannot be read again: their requests keep
-- model '' (shown as "unknown"), and their rows stay, as 0006 explains.
UPDATE retrod.files SET "offset" = 0, state = '{}'
WHERE kind IN ('main', 'subagent', 'agent_root') AND NOT missing;
