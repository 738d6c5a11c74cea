-- The stored prompt-cache misses (DESIGN §2.8, migration 0029): the sessions marked for a walk,
-- and each walked session's misses written anew. report/cache_rollup.py does the walking.

-- Up to `limit` of this role's marked sessions after `after` (code-point order; `sessions`: of
-- these only), each with its mark's count: what a walk clears, when the count is still the same.
-- name: cache_stale_marks
SELECT session_uuid, marks FROM retrod.cache_stale
WHERE db_role = current_user AND session_uuid > %(after)s
  AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[]))
ORDER BY session_uuid
LIMIT %(limit)s;

-- The marks of these sessions (`sessions`, `marks`: their counts as read before the walk) that no
-- one changed since: deleted, and their sessions returned, the ones whose misses the walk writes.
-- A mark changed since (a commit that came after the read) stays for the next walk; one locked (a
-- commit under way, another walk) is skipped, never waited for: a committer may wait for this
-- transaction, so this one waits for nothing.
-- name: cache_stale_clear
DELETE FROM retrod.cache_stale WHERE ctid IN (
    SELECT s.ctid FROM retrod.cache_stale s
    JOIN unnest(%(sessions)s::text[], %(marks)s::bigint[]) AS k(session_uuid, marks)
      ON k.session_uuid = s.session_uuid AND k.marks = s.marks
    WHERE s.db_role = current_user
    FOR UPDATE OF s SKIP LOCKED)
RETURNING session_uuid;

-- Whether any of the member's sessions (`sessions`: of these) waits for a walk (trends and the
-- list walk it first).
-- name: cache_stale_any
SELECT EXISTS (SELECT FROM retrod.cache_stale
               WHERE db_role = %(member)s
                 AND (%(sessions)s::text[] IS NULL OR session_uuid = ANY(%(sessions)s::text[])));

-- name: cache_misses_forget
DELETE FROM retrod.cache_miss_rollup WHERE db_role = current_user AND session_uuid = ANY(%(sessions)s::text[]);

-- name: cache_misses_insert
INSERT INTO retrod.cache_miss_rollup (session_uuid, agent, at, cause, model, fast, size, tier_floor, day, rewritten,
                                 rewritten_1h, machine)
SELECT m.session_uuid, m.agent, m.at, m.cause, m.model, m.fast, m.size,
       retrod.tier_floor(m.size, retrod.price_thresholds()), (m.at AT TIME ZONE 'UTC')::date, m.rewritten,
       m.rewritten_1h, m.machine
FROM jsonb_to_recordset(%(misses)s::jsonb)
    AS m(session_uuid TEXT, agent TEXT, at TIMESTAMPTZ, cause TEXT, model TEXT, fast BOOLEAN, size BIGINT,
         rewritten BIGINT, rewritten_1h BIGINT, machine TEXT);

-- The role's stored misses in the tiers of new thresholds (store/tiers.py, as session_requests').
-- name: retier_cache_misses
UPDATE retrod.cache_miss_rollup SET tier_floor = retrod.tier_floor(size, retrod.price_thresholds())
WHERE db_role = current_user AND tier_floor IS DISTINCT FROM retrod.tier_floor(size, retrod.price_thresholds());
