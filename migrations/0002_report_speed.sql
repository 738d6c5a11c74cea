-- The report's lookups by agent and by tool_use id, which otherwise scan every row of a
-- long session (measured: 98 ms for the subagent table of a 200 MB session).
CREATE INDEX requests_session_agent ON retrod.requests (session_uuid, agent);
CREATE INDEX tool_calls_session_id ON retrod.tool_calls (session_uuid, tool_use_id);

-- Exact conversion of an interval of clock time (no months or days in it) to microseconds.
CREATE FUNCTION retrod.interval_us(i INTERVAL) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (extract(epoch FROM i) * 1000000)::BIGINT
$$;
