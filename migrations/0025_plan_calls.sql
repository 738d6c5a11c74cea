-- accounting.md §2.9: tasks come from Claude's own plan, its TodoWrite / TaskCreate / TaskUpdate calls of
-- the main thread. They are the session's calls of §2.6, which retrod.tool_uses already keeps
-- one per (file, tool_use id), with the first result of the file and the id that counts: each
-- plan call keeps here, as it is read, what the tasks are derived from when a report is asked
-- for (report/plan.py) — so no chunking, order of reading or late result changes them.
--
-- plan: the call's input as transcript/plan.py keeps it (NULL: no plan call, or one that can
--   never count); filled with the call, and for a row stored before this migration when its
--   file is read again (fold.RULES 3: every transcript that still exists is read again, its
--   per-file rows made anew).
-- refused: the result line's toolUseResult said success: false (a TaskUpdate of a task that
--   does not exist); task_id: the task a TaskCreate made, as its result tells. Both go with the
--   result (has_result, failed): the file's first result for the call.
ALTER TABLE retrod.tool_uses
    ADD COLUMN plan JSONB,
    ADD COLUMN refused BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN task_id TEXT COLLATE "C";

-- A result read again is the one stored when it was stamped and sized the same: then what it
-- tells (refused, task_id) may be learned by a row stored before this migration.
CREATE FUNCTION retrod.same_result_read(stored retrod.tool_uses, again retrod.tool_uses) RETURNS BOOLEAN
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT stored.has_result AND stored.result_ts IS NOT DISTINCT FROM again.result_ts
           AND stored.result_bytes IS NOT DISTINCT FROM again.result_bytes
$$;

-- The report reads a session's plan calls in time order (session_plan_calls).
CREATE INDEX tool_uses_plan ON retrod.tool_uses (session_uuid, ts) WHERE counted AND plan IS NOT NULL;
