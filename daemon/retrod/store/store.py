"""The only module that writes retrod's tables: one transaction per file batch."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from ..transcript.discovery import FileRef
from ..transcript.fold import FoldResult, FoldState
from .queries import q


@dataclass(slots=True)
class FileRow:
    id: int
    kind: str
    session_uuid: str | None
    device: int | None
    inode: int | None
    size: int
    offset: int
    state: FoldState
    missing: bool

    @classmethod
    def from_db(cls, row: dict) -> FileRow:
        return cls(row["id"], row["kind"], row["session_uuid"], row["device"], row["inode"],
                   row["size"], row["offset"], FoldState.from_json(row["state"]), row["missing"])


@dataclass(frozen=True, slots=True)
class Stat:
    device: int
    inode: int
    size: int


class Store:
    def __init__(self, pool: ConnectionPool, host_id: str) -> None:
        self.pool = pool
        self.host_id = host_id

    def file(self, ref: FileRef) -> FileRow:
        """The stored row of a file, created on first sight."""
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(q("get_file"), {"host_id": self.host_id, "path": str(ref.path)}).fetchone()
            if row is None or row["missing"]:
                row = cur.execute(q("insert_file"), {
                    "host_id": self.host_id, "path": str(ref.path), "kind": ref.kind, "slug": ref.slug,
                    "session_uuid": ref.session_uuid, "agent_id": ref.agent_id,
                }).fetchone()
            return FileRow.from_db(row)

    def known_files(self) -> dict[str, tuple[int | None, int | None, int, int, bool]]:
        """path -> (device, inode, size, offset, missing) for this host: lets a scan skip unchanged files."""
        with self.pool.connection() as conn:
            rows = conn.execute(q("all_files"), {"host_id": self.host_id}).fetchall()
        return {path: (dev, ino, size, off, missing) for path, dev, ino, size, off, missing in rows}

    def mark_missing(self, path: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(q("mark_missing"), {"host_id": self.host_id, "path": path})

    def reset(self, file: FileRow, stat: Stat) -> None:
        """Read the file again from its start (truncated or replaced)."""
        session = None if file.kind == "agent_root" else file.session_uuid  # named by its content
        with self.pool.connection() as conn, conn.transaction():
            for forget in ("forget_file_events", "forget_file_tool_calls", "forget_file_subagents",
                           "forget_file_links"):
                conn.execute(q(forget), {"id": file.id})
            self._save(conn, file, session, stat, 0, FoldState())

    def commit(self, file: FileRow, session: str | None, stat: Stat, new_offset: int,
               result: FoldResult | None) -> None:
        """The batch's rows and the file's new offset and state, in ONE transaction.

        `result` None records the file as seen up to `new_offset` without rows (a project-level
        agent file that names no session yet stays at offset 0 until one does).
        """
        state = result.state if result is not None else FoldState()
        with self.pool.connection() as conn, conn.transaction():
            stored = conn.execute(q("lock_file"), {"id": file.id}).fetchone()
            if stored is None or stored[0] != file.offset:
                raise ConcurrentUpdate(f"file {file.id} moved on under us")
            if result is not None:
                self._write_rows(conn, file.id, session, result)
            self._save(conn, file, session, stat, new_offset, state)

    def save_meta(self, file: FileRow, stat: Stat, agent_id: str, agent_type: str | None,
                  description: str | None) -> None:
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(q("upsert_meta"), {"session_uuid": file.session_uuid, "agent_id": agent_id,
                                            "agent_type": agent_type, "description": description})
            self._save(conn, file, file.session_uuid, stat, stat.size, FoldState())

    def save_seen(self, file: FileRow, stat: Stat) -> None:
        """A file whose content is not read (persisted tool output): record its size."""
        with self.pool.connection() as conn:
            self._save(conn, file, file.session_uuid, stat, stat.size, FoldState())

    @staticmethod
    def _save(conn: psycopg.Connection, file: FileRow, session: str | None, stat: Stat,
              offset: int, state: FoldState) -> None:
        """The file's row, in the database and in memory. Should the transaction then fail, the
        caller drops `file`: the next ingest reads the row again."""
        conn.execute(q("save_file"), {
            "id": file.id, "session_uuid": session, "device": stat.device, "inode": stat.inode,
            "size": stat.size, "offset": offset, "state": Jsonb(state.to_json()),
        })
        file.session_uuid, file.offset, file.state = session, offset, state
        file.device, file.inode, file.size = stat.device, stat.inode, stat.size

    @staticmethod
    def _write_rows(conn: psycopg.Connection, file_id: int, session: str, result: FoldResult) -> None:
        if result.requests:
            reqs = list(result.requests.values())
            conn.execute(q("upsert_requests"), {
                "key": [r.key for r in reqs],
                "session_uuid": [r.session_uuid for r in reqs],
                "agent": [r.agent for r in reqs],
                "ts_us": [r.ts_us for r in reqs],
                "sidechain": [r.attr_sidechain for r in reqs],
                "foreign": [r.attr_foreign for r in reqs],
                "attr_ts_us": [r.attr_ts_us for r in reqs],
                "usage_main": [r.usage_main for r in reqs],
                "input": [r.usage.input for r in reqs],
                "output": [r.usage.output for r in reqs],
                "cache_read": [r.usage.cache_read for r in reqs],
                "cache_create": [r.usage.cache_create for r in reqs],
                "cache_create_5m": [r.usage.cache_create_5m for r in reqs],
                "cache_create_1h": [r.usage.cache_create_1h for r in reqs],
                "has_tool_use": [r.has_tool_use for r in reqs],
            })
        if result.events:
            ev = result.events
            conn.execute(q("insert_events"), {
                "file_id": file_id, "session_uuid": session,
                "offset": [e.offset for e in ev], "ts_us": [e.ts_us for e in ev],
                "prev_us": [e.prev_us for e in ev], "kind": [e.kind for e in ev],
                "gap_us": [e.gap_us for e in ev], "bytes": [e.tool_result_bytes for e in ev],
            })
        if result.tool_calls:
            calls = list(result.tool_calls.values())
            conn.execute(q("upsert_tool_calls"), {
                "file_id": file_id, "session_uuid": session,
                "id": [c.id for c in calls], "name": [c.name for c in calls],
                "ts_us": [c.ts_us for c in calls], "description": [c.description for c in calls],
                "subagent_type": [c.subagent_type for c in calls],
            })
        if result.subagents:
            agents = sorted(result.subagents.items())
            conn.execute(q("upsert_subagents"), {
                "file_id": file_id, "session_uuid": session, "agent_id": [a for a, _ in agents],
                "first_us": [s.min_us for _, s in agents], "last_us": [s.max_us for _, s in agents],
            })
        if result.links:
            links = sorted(result.links)
            conn.execute(q("insert_links"), {
                "file_id": file_id, "session_uuid": session, "agent_id": [a for a, _ in links],
                "tool_use_id": [t for _, t in links],
            })


class ConcurrentUpdate(RuntimeError):
    """Another ingester committed this file first; re-read its row and try again."""
