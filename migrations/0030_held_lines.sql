-- Issue 32 (ingest): a held record lives in its line's holder row (accounting.md §2.1, §2.2).
--
-- 0026 kept a main transcript's unmarked candidate lines with a uuid (line_holders) and, in a
-- table of its own, the records on those lines (held_records): every held record is on a holder's
-- line, under the same key (file_id, offset). Two rows, two primary keys and two statements per
-- batch for one line cost a backfill a tenth of its database time; one row holds both now: `key`
-- (NULL: no record on the line), `agent`, `sidechain` and `ts` are the record's.
--
-- A file read again from its start (store.reset) forgets its holders but keeps its records, as
-- requests already counted stay counted (accounting.md §2.1): its rows with a record stay, no longer
-- holding a uuid (line_uuid NULL, neither shared nor a copy), as its held records stayed.
ALTER TABLE retrod.line_holders
    ALTER COLUMN line_uuid DROP NOT NULL,
    ADD COLUMN key TEXT COLLATE "C", ADD COLUMN agent TEXT COLLATE "C", ADD COLUMN sidechain BOOLEAN,
    ADD COLUMN ts TIMESTAMPTZ;

UPDATE retrod.line_holders h SET key = d.key, agent = d.agent, sidechain = d.sidechain, ts = d.ts
FROM retrod.held_records d
WHERE (d.file_id, d."offset") = (h.file_id, h."offset");

-- (a held record whose line's holder a reset forgot)
INSERT INTO retrod.line_holders (file_id, "offset", session_uuid, line_uuid, bg, key, agent, sidechain, ts, db_role)
SELECT d.file_id, d."offset", d.session_uuid, NULL, false, d.key, d.agent, d.sidechain, d.ts, d.db_role
FROM retrod.held_records d
ON CONFLICT (file_id, "offset") DO NOTHING;

DROP TABLE retrod.held_records;
CREATE INDEX line_holders_key ON retrod.line_holders (key) WHERE key IS NOT NULL;

-- sessions_to_retime's "a line uuid met before" is told by insert_line_holders now (every main
-- event with a uuid is a holder's line, and the holders' index answers it in the lookup that
-- finds the shared uuids): the events' index of line uuids, one entry per event row written,
-- had no other reader.
DROP INDEX retrod.events_line_uuid;
