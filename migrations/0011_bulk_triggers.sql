-- The bulk path (issue 13): a first backfill's transactions run with session_replication_role =
-- replica when the role may set it (a superuser: the embedded cluster's own), which skips the
-- foreign keys' row-by-row checks. Their rows are right by construction: each names a file that
-- its transaction has locked (store/store.py, Store._commit), and gap rows the events they come
-- from. retrod's own triggers keep the rollups and must fire there too: ENABLE ALWAYS. A later
-- migration that adds a trigger must do the same (the bulk-path test compares the rollups).
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
