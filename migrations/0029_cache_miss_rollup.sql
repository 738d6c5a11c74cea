-- Prompt-cache misses kept per session (accounting.md §2.8, issue 29), so that `retrod trends` and the
-- web UI's session list sum a year of sessions' cache waste from stored rows, as they sum tokens
-- and cost, instead of walking every session's streams on each ask.
--
-- A miss depends on the whole order of its stream (a request read later can land between two
-- others), so it is not a sum a trigger can keep: report/cache_rollup.py walks a session again
-- (report/cache.py, as its report does) and writes its misses here. What asks for that is
-- `retrod.cache_stale`: every statement that changes a session's requests or its compaction
-- boundaries marks the session (the triggers below), and the walk clears the mark in the
-- transaction that writes the new misses. The daemon walks the marked sessions after each round
-- of ingest; trends and the list walk whatever is still marked before they read (the owner's
-- rows only: a team's reader reads what its members' daemons wrote).
--
-- A mark is bumped, not only inserted, so that a transaction that changed a session holds the
-- mark's row until it commits: a walk takes marks with SKIP LOCKED, and never clears one whose
-- change it cannot see yet.
--
-- Misses are kept unpriced, as the price groups are (migration 0018): each one's model, fast mode,
-- size (its part's input + cache read + cache create) and the price tier that puts it in (by the
-- stored thresholds, as session_requests' groups; store/tiers.py sets it again when they
-- change), its time and UTC day, and its rewritten tokens with their 1h share, so a statement
-- prices them at the rates given (§2.8's extra cost: r5 × (5m write − read) + r1 × (1h write −
-- read)) without a function call a row.
CREATE TABLE retrod.cache_miss_rollup (
    session_uuid TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    at TIMESTAMPTZ NOT NULL,  -- its element's request's timestamp
    cause TEXT COLLATE "C" NOT NULL,  -- compaction, model, expired, invalidated
    model TEXT COLLATE "C" NOT NULL,
    fast BOOLEAN NOT NULL,
    size BIGINT NOT NULL,
    tier_floor BIGINT NOT NULL,
    day DATE NOT NULL,  -- `at`'s, in UTC (the price's day)
    rewritten BIGINT NOT NULL,
    rewritten_1h BIGINT NOT NULL,
    machine TEXT COLLATE "C",  -- its request's (requests.machine; NULL: not known)
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user
);
CREATE INDEX cache_miss_rollup_session ON retrod.cache_miss_rollup (session_uuid, db_role);

CREATE TABLE retrod.cache_stale (
    session_uuid TEXT COLLATE "C" NOT NULL,
    db_role TEXT COLLATE "C" NOT NULL DEFAULT current_user,
    marks BIGINT NOT NULL DEFAULT 1,
    PRIMARY KEY (session_uuid, db_role)
);

CREATE FUNCTION retrod.mark_cache_stale() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO retrod.cache_stale AS c (session_uuid, db_role)
        SELECT DISTINCT session_uuid, db_role FROM new_rows ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET marks = c.marks + 1;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO retrod.cache_stale AS c (session_uuid, db_role)
        SELECT DISTINCT session_uuid, db_role FROM old_rows ORDER BY 1, 2
        ON CONFLICT (session_uuid, db_role) DO UPDATE SET marks = c.marks + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER requests_stale_inserted AFTER INSERT ON retrod.requests
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.mark_cache_stale();
CREATE TRIGGER requests_stale_updated AFTER UPDATE ON retrod.requests
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrod.mark_cache_stale();
CREATE TRIGGER requests_stale_deleted AFTER DELETE ON retrod.requests
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.mark_cache_stale();
CREATE TRIGGER boundaries_stale_inserted AFTER INSERT ON retrod.cache_boundaries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.mark_cache_stale();
CREATE TRIGGER boundaries_stale_deleted AFTER DELETE ON retrod.cache_boundaries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION retrod.mark_cache_stale();

-- Fired in the bulk path's replica mode too, as every trigger of retrod's (0011).
ALTER TABLE retrod.requests ENABLE ALWAYS TRIGGER requests_stale_inserted;
ALTER TABLE retrod.requests ENABLE ALWAYS TRIGGER requests_stale_updated;
ALTER TABLE retrod.requests ENABLE ALWAYS TRIGGER requests_stale_deleted;
ALTER TABLE retrod.cache_boundaries ENABLE ALWAYS TRIGGER boundaries_stale_inserted;
ALTER TABLE retrod.cache_boundaries ENABLE ALWAYS TRIGGER boundaries_stale_deleted;

-- Every session stored so far is walked once.
INSERT INTO retrod.cache_stale (session_uuid, db_role)
SELECT DISTINCT session_uuid, db_role FROM retrod.requests;
