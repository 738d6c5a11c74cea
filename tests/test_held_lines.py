"""Migration 0030: the records held on unmarked candidate lines (accounting.md §2.1, §2.2) move into their
lines' holder rows; a record whose line holds no uuid any more (its file read again from its
start) stays, as a row that holds none."""

from __future__ import annotations

from pathlib import Path

import psycopg

from conftest import fresh_database
from helpers import older_migrations
from retrod.store.migrate import migrate


def test_held_records_move_into_their_lines_rows(pg_cluster, tmp_path: Path) -> None:
    before = older_migrations(tmp_path / "before", lambda version: version < 30)
    with fresh_database(pg_cluster) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA retrod CASCADE")
        conn.execute("DROP TABLE cc_session_phases, cc_sessions")
        migrate(conn, before)
        file_id = conn.execute("INSERT INTO retrod.files (host_id, path, kind, slug, session_uuid)"
                               " VALUES ('h', '/p/s/a.jsonl', 'main', 's', 'a') RETURNING id").fetchone()[0]
        conn.execute("INSERT INTO retrod.line_holders (file_id, \"offset\", session_uuid, line_uuid, bg, shared, copy)"
                     " VALUES (%(f)s, 0, 'a', 'u0', false, true, true), (%(f)s, 10, 'a', 'u1', true, false, false)",
                     {"f": file_id})
        conn.execute("INSERT INTO retrod.held_records (file_id, \"offset\", key, session_uuid, agent, sidechain, ts)"
                     " VALUES (%(f)s, 0, 'k0', 'a', '', false, '2026-01-01T00:00:00Z'),"
                     " (%(f)s, 20, 'k2', 'a', '<unnamed>', true, NULL)", {"f": file_id})
        assert migrate(conn)[0] == 30  # (and those after it)
        rows = conn.execute("SELECT \"offset\", line_uuid, bg, shared, copy, key, agent, sidechain,"
                            " ts = '2026-01-01T00:00:00Z' FROM retrod.line_holders ORDER BY 1").fetchall()
        assert rows == [
            (0, "u0", False, True, True, "k0", "", False, True),  # a holder and its record: one row
            (10, "u1", True, False, False, None, None, None, None),  # a holder without a record
            (20, None, False, False, False, "k2", "<unnamed>", True, None),  # a record whose line holds none
        ]
        assert conn.execute("SELECT to_regclass('retrod.held_records')").fetchone()[0] is None
