-- The stored prompt-cache misses (DESIGN §2.8, migration 0029): the sessions marked for a walk,
-- and each walked session's misses written anew. report/cache_rollup.py does the walking.

-- Up to `limit` of this role's marked sessions, each locked until the transaction that writes its
-- misses ends; one whose change is still being committed (its mark locked) waits for a later walk.
-- name: cache_stale_take
SELECT session_uuid FROM retrod.cache_stale
WHERE db_role = current_user
ORDER BY session_uuid
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: cache_stale_clear
DELETE FROM retrod.cache_stale WHERE db_role = current_user AND session_uuid = ANY(%(sessions)s::text[]);

-- Whether any of the member's sessions waits for a walk (trends and the list walk it first).
-- name: cache_stale_any
SELECT EXISTS (SELECT FROM retrod.cache_stale WHERE db_role = %(member)s);

-- name: cache_misses_forget
DELETE FROM retrod.cache_misses WHERE db_role = current_user AND session_uuid = ANY(%(sessions)s::text[]);

-- name: cache_misses_insert
INSERT INTO retrod.cache_misses (session_uuid, agent, at, cause, model, fast, size, rewritten, rewritten_1h, machine)
SELECT * FROM jsonb_to_recordset(%(misses)s::jsonb)
    AS m(session_uuid TEXT, agent TEXT, at TIMESTAMPTZ, cause TEXT, model TEXT, fast BOOLEAN, size BIGINT,
         rewritten BIGINT, rewritten_1h BIGINT, machine TEXT);
