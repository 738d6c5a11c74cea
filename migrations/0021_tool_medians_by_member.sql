-- The report's median result size and time per tool (store/report.sql session_tools) read half
-- of a tool's calls in order from these indexes. Since every key holds the member (0015) the
-- query also asks for the member's rows, which 0010's indexes do not hold: each row was looked up
-- in the table (the ~200 MB benchmark session: 17 ms of a ~80 ms report). With the member in the
-- index, an index-only scan (1.8 ms there, once the table's pages are all-visible).
DROP INDEX retrod.tool_uses_result_bytes;
DROP INDEX retrod.tool_uses_result_us;
CREATE INDEX tool_uses_result_bytes ON retrod.tool_uses (session_uuid, db_role, name, result_bytes)
    WHERE counted AND has_result;
CREATE INDEX tool_uses_result_us ON retrod.tool_uses (session_uuid, db_role, name, result_us)
    WHERE counted AND result_us IS NOT NULL;
