-- The bulk path (issue 13): a scan with a large backlog (a first backfill over a long history)
-- runs its transactions with session_replication_role = replica when the role may set it (a
-- superuser: the embedded cluster's own), which skips the foreign keys' row-by-row checks. Their rows are right by construction: each names a file that
-- its transaction has locked (store/store.py, Store._commit), and gap rows the events they come
-- from. retrod's own triggers keep the rollups and must fire there too: ENABLE ALWAYS. A later
-- migration that adds a trigger must do the same; until it does, the bulk path keeps the checks
-- and leaves replica mode alone (queries.sql, may_skip_row_checks; a test holds every trigger
-- to it). (Were retrod's rollup tables replicated logically, a subscriber would now run these
-- triggers too: replicate the raw tables only.)
DO $$
DECLARE
    t RECORD;
BEGIN
    FOR t IN
        SELECT tgrelid::regclass AS tbl, tgname FROM pg_trigger
        WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'retrod'::regnamespace)
        ORDER BY 1, 2
    LOOP
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', t.tbl, t.tgname);
    END LOOP;
END $$;
