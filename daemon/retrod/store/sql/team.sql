-- A team on one shared PostgreSQL: `retrod team` prints these (`--apply` runs them) for the role
-- that owns retrod's tables, the one that runs its migrations. Each member's daemon connects as
-- its own login role, granted retrod_member: row-level security lets it read and write only the
-- rows whose db_role (migration 0008) is its own. retrod_reader reads everyone's rows (the team
-- view) and writes none. Members never run migrations: see store/migrate.py.

-- name: team_roles
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'retrod_member') THEN
        CREATE ROLE retrod_member NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'retrod_reader') THEN
        CREATE ROLE retrod_reader NOLOGIN;
    END IF;
END $$;

-- name: team_policies
-- Grants and policies on every table with a db_role column. `current_user = session_user`: a
-- member that sets its role to retrod_member (which it may) must not get a shared set of rows. Run again by `migrate` after it
-- applies a migration to a team's database, so that a new table is never left open or shut.
-- The table owner is not subject to the policies (no FORCE): it migrates and sees everything.
DO $$
DECLARE
    t regclass;
    s regclass;
    idx regclass;
    con name;
BEGIN
    -- The user's own tables get the column here, for a team only (a default, last: other
    -- tools' statements work as before). Their rows so far belong to the role running this.
    FOREACH t IN ARRAY ARRAY['public.cc_sessions'::regclass, 'public.cc_session_phases'::regclass] LOOP
        EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS db_role TEXT NOT NULL DEFAULT current_user', t);
    END LOOP;
    -- A session id is unique per member, not across the team (accounting.md §3): a member tracking a
    -- session under a colleague's id takes nothing of the colleague's. The designed table's
    -- unique session_uuid (a constraint, or an index another tool made) gives way to one per
    -- member, unless a foreign key of the user's own rests on it: then it stays, and says so.
    FOR idx, con IN
        SELECT i.indexrelid::regclass,
               (SELECT conname FROM pg_constraint WHERE conindid = i.indexrelid AND contype IN ('u', 'p'))
        FROM pg_index i
        WHERE i.indrelid = 'public.cc_sessions'::regclass AND i.indisunique AND i.indnkeyatts = 1
          AND i.indkey[0] = (SELECT attnum FROM pg_attribute
                             WHERE attrelid = 'public.cc_sessions'::regclass AND attname = 'session_uuid')
    LOOP
        IF EXISTS (SELECT FROM pg_constraint WHERE contype = 'f' AND conindid = idx) THEN
            RAISE WARNING 'public.cc_sessions: a foreign key rests on % (session_uuid unique): kept, so a session id stays one member''s', idx;
        ELSIF con IS NOT NULL THEN
            EXECUTE format('ALTER TABLE public.cc_sessions DROP CONSTRAINT %I', con);
        ELSE
            EXECUTE format('DROP INDEX %s', idx);
        END IF;
    END LOOP;
    CREATE UNIQUE INDEX IF NOT EXISTS cc_sessions_session_member ON public.cc_sessions (session_uuid, db_role);
    GRANT USAGE ON SCHEMA retrod TO retrod_member, retrod_reader;
    GRANT SELECT ON retrod.migrations TO retrod_member, retrod_reader;
    FOR t IN
        SELECT a.attrelid::regclass FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE a.attname = 'db_role' AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
          AND (c.relnamespace = 'retrod'::regnamespace
               OR c.oid IN ('public.cc_sessions'::regclass, 'public.cc_session_phases'::regclass))
        ORDER BY 1
    LOOP
        EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('DROP POLICY IF EXISTS member_own_rows ON %s', t);
        EXECUTE format('CREATE POLICY member_own_rows ON %s TO retrod_member'
                       ' USING (db_role = current_user AND current_user = session_user)'
                       ' WITH CHECK (db_role = current_user AND current_user = session_user)', t);
        EXECUTE format('DROP POLICY IF EXISTS reader_all_rows ON %s', t);
        EXECUTE format('CREATE POLICY reader_all_rows ON %s FOR SELECT TO retrod_reader USING (true)', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO retrod_member', t);
        EXECUTE format('GRANT SELECT ON %s TO retrod_reader', t);
        FOR s IN SELECT d.objid::regclass FROM pg_depend d JOIN pg_class q ON q.oid = d.objid
                 WHERE d.refobjid = t AND q.relkind = 'S' AND d.deptype IN ('a', 'i') LOOP
            EXECUTE format('GRANT USAGE ON SEQUENCE %s TO retrod_member', s);
        END LOOP;
    END LOOP;
    -- A phase goes only onto one's own session.
    DROP POLICY member_own_rows ON public.cc_session_phases;
    CREATE POLICY member_own_rows ON public.cc_session_phases TO retrod_member
        USING (db_role = current_user AND current_user = session_user)
        WITH CHECK (db_role = current_user AND current_user = session_user AND EXISTS (
            SELECT FROM public.cc_sessions s WHERE s.id = session_id AND s.db_role = current_user));
END $$;

-- name: team_enabled
-- Whether `retrod team` ran on this database.
SELECT relrowsecurity FROM pg_class WHERE oid = 'retrod.files'::regclass;

-- name: team_secured_tables
SELECT count(*) FROM pg_class
WHERE relrowsecurity AND (relnamespace = 'retrod'::regnamespace
                          OR oid IN ('public.cc_sessions'::regclass, 'public.cc_session_phases'::regclass));

-- name: team_may_write_sessions
-- Whether this role may write the user's tables (a reader may not: its report writes nothing).
SELECT has_table_privilege('public.cc_sessions', 'UPDATE') AS may_write;
