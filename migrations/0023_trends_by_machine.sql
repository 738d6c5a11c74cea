-- Each request's machine (DESIGN §4 "Machines"; issue 28): `retrod trends --by-machine` and the
-- web UI's `machine=` give a request to the machine (host id, RETROD_HOST_ID) of the file that
-- holds its attributed record (§2.2). A request row is global across files, so it keeps that
-- host id beside the rest of its owner: store/queries.sql upsert_requests writes the ingesting
-- host's, and a record that wins the attribution brings its machine with it; the same record on
-- two machines (a project folder synced to both) ties on every other key and goes to the smaller
-- host id (code-point). Time and calls need nothing new: their rows are per file, and a file row
-- has its host.
--
-- Requests stored before this migration do not say which machine read their record: they go to
-- the smallest host id among their session's transcripts (exact wherever one machine writes to
-- the database; docs/decisions.md).
ALTER TABLE retrod.requests ADD COLUMN machine TEXT COLLATE "C";

-- (No figure changes: the rollups' trigger would subtract and add back every request.)
ALTER TABLE retrod.requests DISABLE TRIGGER requests_updated;
UPDATE retrod.requests r SET machine = coalesce(
    (SELECT min(f.host_id) FROM retrod.files f
     WHERE f.session_uuid = r.session_uuid AND f.db_role = r.db_role AND f.kind IN ('main', 'subagent', 'agent_root')),
    (SELECT min(f.host_id) FROM retrod.files f WHERE f.db_role = r.db_role), '');

ALTER TABLE retrod.requests ENABLE ALWAYS TRIGGER requests_updated;  -- as every trigger of retrod's (0011)

ALTER TABLE retrod.requests ALTER COLUMN machine SET NOT NULL;
