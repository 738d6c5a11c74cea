-- `retrod status`: what the daemon has done, from its own tables.

-- name: status_files
SELECT count(*) FILTER (WHERE NOT missing) AS tracked,
       count(*) FILTER (WHERE missing) AS deleted,
       max(updated_at) AS last_ingest,
       coalesce(sum((state ->> 'bad_lines')::bigint), 0)::bigint AS bad_lines
FROM retrod.files WHERE host_id = %(host_id)s;

-- name: status_offsets
SELECT path, "offset" FROM retrod.files
WHERE host_id = %(host_id)s AND NOT missing AND kind IN ('main', 'subagent', 'agent_root');

-- name: status_active_sessions
-- Sessions with transcript time in the last hour (not merely ingested then: a backfill is not activity).
SELECT count(DISTINCT session_uuid) FROM retrod.event_minutes
WHERE minute >= date_trunc('minute', now() - interval '1 hour') AND minute <> 'infinity';

-- name: status_server
SELECT current_setting('server_version') AS version, pg_database_size(current_database()) AS bytes;
