"""The only module that writes retrod's tables: one transaction per file batch."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, Protocol

import msgspec
import psycopg
from psycopg.rows import dict_row

from ..transcript.discovery import FileRef
from ..transcript.fold import Call, FoldResult, FoldState, Request
from ..transcript.keys import PATH_INDEX_BYTES, indexable
from ..transcript.parser import ToolResult
from .queries import one, q


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
    head: str = ""  # fingerprint of the bytes read first (see migration 0007); "" = none yet

    @classmethod
    def from_db(cls, row: dict) -> FileRow:
        return cls(row["id"], row["kind"], row["session_uuid"], row["device"], row["inode"],
                   row["size"], row["offset"], FoldState.from_json(row["state"]), row["missing"], row["head"])


@dataclass(frozen=True, slots=True)
class Stat:
    device: int
    inode: int
    size: int


@dataclass(frozen=True, slots=True)
class Meta:
    """A subagent's `.meta.json`, as `retrod.subagent_meta` keeps it."""

    agent_id: str
    agent_type: str | None
    description: str | None


@dataclass(slots=True)
class Pending:
    """What one file brings to a batch: its rows (None: none, only the file is seen), or a
    subagent's meta file, and the offset and session they take it to."""

    path: str
    file: FileRow
    session: str | None
    stat: Stat
    start: int  # the stored offset these rows follow on from
    offset: int
    result: FoldResult | None
    lines: int = 0
    head: str | None = None  # a new fingerprint of the file's first bytes; None: as stored
    meta: Meta | None = None

    @property
    def state(self) -> FoldState:
        return self.result.state if self.result is not None else FoldState()

    @property
    def bytes(self) -> int:
        """Transcript and tool-output bytes read; a meta file's are not counted (see ingest._to_read)."""
        return 0 if self.meta is not None else self.offset - self.start


DEADLOCK_RETRIES = 2

# The database away or refusing writes (a failover's read-only standby, a full disk): an outage
# to wait out and catch up on, not one file's fault.
OUTAGE = (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction)
# What a file's own rows can make PostgreSQL refuse: a value out of range (data exceptions,
# class 22), a constraint (23), a limit such as an index row's size (54, an OperationalError).
_FILE_FAULTS = (psycopg.errors.DataError, psycopg.errors.IntegrityError, psycopg.errors.ProgramLimitExceeded)


class RowsRefused(Exception):
    """The database refused rows for what they hold: the fault of the files in the batch (retried
    one by one, then later), never an outage."""


@contextmanager
def _refused_rows() -> Iterator[None]:
    try:
        yield
    except _FILE_FAULTS as exc:
        raise RowsRefused(f"{type(exc).__name__}: {' '.join(str(exc).split())}") from exc


@dataclass(frozen=True, slots=True)
class Lane:
    """A committing thread's connection for a bulk round (Store.lane); `replica`: its session
    skips the foreign keys' row-by-row checks."""

    conn: psycopg.Connection
    replica: bool


class Connections(Protocol):
    """Where the store gets a connection: a pool (the daemon, the commands) or the MCP server's one."""

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...


class Store:
    def __init__(self, pool: Connections, host_id: str) -> None:
        self.pool = pool
        self.host_id = host_id

    def file(self, ref: FileRef) -> FileRow:
        """The stored row of a file, created on first sight."""
        return self.files([ref])[str(ref.path)]

    def files(self, refs: Sequence[FileRef]) -> dict[str, FileRow]:
        """The stored rows of files by path, created on first sight: one statement for all."""
        if not refs:
            return {}
        rows = [{"path": str(r.path), "kind": r.kind, "slug": r.slug, "session_uuid": r.session_uuid,
                 "agent_id": r.agent_id} for r in refs]
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            found = cur.execute(q("ingest_files"), {"host_id": self.host_id, "files": _json(rows)}).fetchall()
        return {row["path"]: FileRow.from_db(row) for row in found}

    def known_files(self) -> dict[str, FileRow]:
        """Every stored file of this host by path, read at once: a scan skips the unchanged ones
        and reads no row file by file."""
        return self._rows_by_path(q("ingest_all_files"), {"host_id": self.host_id})

    def session_files(self, session: str) -> dict[str, FileRow]:
        """The stored rows of a session's files on this host, by path (see `Ingester.refresh`)."""
        return self._rows_by_path(q("ingest_session_files_of_host"), {"host_id": self.host_id, "session": session})

    def _rows_by_path(self, statement: str, args: dict) -> dict[str, FileRow]:
        with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(statement, args).fetchall()
        return {row["path"]: FileRow.from_db(row) for row in rows}

    def mark_missing(self, path: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(q("ingest_mark_missing"), {"host_id": self.host_id, "path": path})

    def mark_missing_under(self, folder: str) -> int:
        """The files of a folder that is gone; how many."""
        with self.pool.connection() as conn:
            return conn.execute(q("ingest_mark_missing_under"), {"host_id": self.host_id, "folder": folder}).rowcount

    def reset(self, file: FileRow, stat: Stat) -> None:
        """Read the file again from its start (truncated or replaced)."""
        session = None if file.kind == "agent_root" else file.session_uuid  # named by its content
        start_over = Pending("", file, session, stat, file.offset, 0, None, head="")
        with _refused_rows(), self.pool.connection() as conn, conn.transaction():
            # In _commit's order, the file's row, then its session: no deadlock with a commit of it
            conn.execute(q("ingest_lock_files"), {"ids": [file.id]})
            if file.session_uuid is not None:
                conn.execute(q("ingest_lock_sessions"), {"sessions": [file.session_uuid]})
            for forget in (q("ingest_forget_file_events"), q("ingest_forget_file_tool_calls"),
                           q("ingest_forget_file_parked_tool_calls"), q("ingest_forget_file_subagents"),
                           q("ingest_forget_file_links"), q("ingest_forget_file_cache_boundaries")):
                conn.execute(forget, {"id": file.id})
            self._save(conn, [start_over])  # (first: its candidate span is gone too, §2.1)
            conn.execute(q("ingest_lock_fork_copies"))
            # (the other holders of its shared uuids are ranked again, and its session's: its span moved)
            held = [row[0] for row in conn.execute(q("ingest_forget_file_line_holders"), {"id": file.id})]
            mine = [file.session_uuid] if file.session_uuid is not None else []
            copies, lines = _decide_fork_copies(conn, mine if file.kind == "main" else [], held)
            _settle_cwds(conn, [file.id], [file.id], lines if copies else "[]")
            if copies:
                conn.execute(q("ingest_reown_requests"), {"changed": lines, "batch": "[]"})
                conn.execute(q("ingest_park_tool_calls"), {"changed": lines, "sessions": []})
                conn.execute(q("ingest_unpark_tool_calls"), {"changed": lines})
            gone = conn.execute(q("ingest_forget_file_tool_uses"),
                                {"id": file.id, "session": file.session_uuid}).fetchall()
            if copies:
                gone += conn.execute(q("ingest_calls_at_lines"), {"lines": lines}).fetchall()
            _settle_tool_uses(conn, gone, gone)
            if mine or copies:  # its lines may have hidden copies elsewhere (§2.3)
                conn.execute(q("ingest_retime_sessions"), {"sessions": sorted(set(mine + copies))})
                conn.execute(q("ingest_subtime_sessions"), {"sessions": sorted(set(mine + copies))})  # (after retime)
        _advance(start_over)

    def rewind(self, file: FileRow, stat: Stat) -> None:
        """Read the file again from its start, keeping its rows: it was read under older fold
        rules (fold.RULES), and what it stores now merges into them (the upserts are idempotent)."""
        start_over = Pending("", file, file.session_uuid, stat, file.offset, 0, None)
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(q("ingest_forget_file_legacy_compactions"), {"id": file.id})
            self._save(conn, [start_over])
        _advance(start_over)

    @contextmanager
    def lane(self, bulk: bool) -> Iterator[Lane | None]:
        """What a committing thread commits its round's batches on (`commit`'s `lane`): on the
        bulk path, a connection held to the round's end, which skips the foreign keys' row-by-row
        checks for the whole session where the role may (migration 0011); else none (each commit
        takes a connection from the pool). Set once, not in each transaction: changing
        session_replication_role resets the session's plan cache, so every statement, and every
        statement of every trigger, was planned again in each transaction, with the fork-copies
        lock held for part of it. The connection goes back to the pool checking them again."""
        if not bulk:
            yield None
            return
        with self.pool.connection() as conn:
            with conn.transaction():
                replica = self._skips_row_checks(conn)
                if replica:
                    conn.execute(q("ingest_skip_row_checks_in_session"))
            try:
                yield Lane(conn, replica)
            finally:
                if replica:
                    try:
                        with conn.transaction():
                            conn.execute(q("ingest_check_rows_in_session"))
                    except psycopg.Error:
                        conn.close()  # (the pool drops it: none goes back skipping the checks)

    def commit(self, batch: Sequence[Pending], bulk: bool = False, lane: Lane | None = None) -> None:
        """Every file's rows and new offset and state, in ONE transaction; a file appears once.
        `bulk` (a large backlog): without the foreign keys' row-by-row checks, where the role may
        skip them; the rows and rollups are the same. `lane`: the connection to commit on (else
        one from the pool).

        Then the in-memory rows follow. Should it fail, they are as before: the caller may retry
        the files one by one."""
        for attempt in range(DEADLOCK_RETRIES + 1):
            try:
                self._commit(batch, bulk, lane)
                break
            except psycopg.errors.DeadlockDetected:
                # The session locks prevent the deadlocks retrod's own statements could meet; one
                # that a request's earlier owner (another session, unlocked) causes is retried.
                if attempt == DEADLOCK_RETRIES:
                    raise
        for pending in batch:
            _advance(pending)

    def _commit(self, batch: Sequence[Pending], bulk: bool, lane: Lane | None) -> None:
        held = nullcontext(lane.conn) if lane is not None else self.pool.connection()
        with _refused_rows(), held as conn, conn.transaction():
            skipping = bulk and self._skips_row_checks(conn)
            replica = lane is not None and lane.replica
            if skipping and not replica:
                # Each row below names a file locked here, or an event written here: the checks,
                # a tenth of a backfill's database time, could not fail (migration 0011).
                conn.execute(q("ingest_skip_row_checks"))
            elif replica and not skipping:  # (a trigger was enabled the usual way since the lane began)
                conn.execute(q("ingest_check_rows"))
            ids = sorted(p.file.id for p in batch)
            stored: dict[int, int] = dict(conn.execute(q("ingest_lock_files"), {"ids": ids}).fetchall())
            moved = [p.path for p in batch if stored.get(p.file.id) != p.start]
            if moved:
                raise ConcurrentUpdate(moved)
            conn.execute(q("ingest_lock_sessions"), {"sessions": sorted(
                {r.session_uuid for p in batch if p.result for r in p.result.requests.values()}
                | {p.session for p in batch if p.session})})
            self._save(conn, batch)  # (first: the fork copies are ranked by the files' candidate spans, §2.1)
            self._write_rows(conn, [p for p in batch if p.result is not None], self.host_id)
            self._write_metas(conn, [p for p in batch if p.meta is not None])
            # A trigger enabled the usual way between the first check and this transaction's
            # writes would not have fired. From its first write to a table on, this transaction
            # holds a lock that such a change waits for: asked again now, the answer covers it.
            if skipping and not self._skips_row_checks(conn):
                raise RuntimeError("a trigger of retrod's was enabled during a bulk transaction; committing again")

    def _skips_row_checks(self, conn: psycopg.Connection) -> bool:
        """Asked in each bulk transaction (a catalog lookup): a trigger may be enabled the usual
        way while the daemon runs."""
        return bool(one(conn.execute(q("ingest_may_skip_row_checks")))[0])

    @staticmethod
    def _write_metas(conn: psycopg.Connection, batch: Sequence[Pending]) -> None:
        metas = {(p.session, p.meta.agent_id): {"session_uuid": p.session, "agent_id": p.meta.agent_id,
                                                "agent_type": p.meta.agent_type, "description": p.meta.description}
                 for p in batch if p.meta is not None}  # one row per key (ON CONFLICT); the later wins
        if metas:
            conn.execute(q("ingest_upsert_metas"), {"metas": _json(list(metas.values()))})

    @staticmethod
    def _save(conn: psycopg.Connection, batch: Sequence[Pending]) -> None:
        conn.execute(q("ingest_save_files"), {"files": _json([
            {"id": p.file.id, "session_uuid": p.session, "device": p.stat.device, "inode": p.stat.inode,
             "size": p.stat.size, "offset": p.offset, "state": p.state,
             "head": p.file.head if p.head is None else p.head} for p in batch])})

    @staticmethod
    def _write_rows(conn: psycopg.Connection, batch: Sequence[Pending], host_id: str) -> None:
        # one row per key: ON CONFLICT cannot update a row twice
        requests = merged_requests(r for p in batch if p.result is not None for r in p.result.requests.values())
        if requests:  # in key order, as every ingester writes them: no two wait on each other
            ordered = [requests[key] for key in sorted(requests)]
            conn.execute(q("ingest_upsert_requests"), {"requests": _json(ordered), "host_id": host_id})
        documents: dict[str, str] = {}
        for query, rows_of in (
            (q("ingest_insert_events"), lambda r: r.events),
            (q("ingest_upsert_tool_calls"), lambda r: list(r.tool_calls.values())),
            (q("ingest_upsert_subagents"), lambda r: [{"agent_id": a, "min_us": s.min_us, "max_us": s.max_us}
                                               for a, s in r.subagents.items()]),
            (q("ingest_insert_links"), lambda r: sorted(r.links)),
            (q("ingest_insert_cache_boundaries"), lambda r: r.boundaries),
        ):
            files = [{"file_id": p.file.id, "session_uuid": p.session, "rows": rows}
                     for p in batch if (rows := rows_of(p.result))]
            if files:
                documents[query] = _json(files)
                conn.execute(query, {"files": documents[query]})
        # §2.1: the batch's main transcripts may change who wrote a uuid they share (new holders,
        # or a span that moved), and with it which lines are fork copies, in any session
        mains = sorted({p.session for p in batch if p.session and p.file.kind == "main"})
        if mains:
            # The prompt-cache streams the batch's requests changed are walked now, not at commit:
            # the lock below is held to the end, and the other lane waits for it (what re-owning
            # a request changes after this is walked with the statement that changes it).
            conn.execute(q("ingest_walk_cache_streams"))
            conn.execute(q("ingest_lock_fork_copies"))
        held = [{"file_id": p.file.id, "session_uuid": p.session, "rows": p.result.holders}
                for p in batch if p.result is not None and p.result.holders]
        holders = _json(held) if held else None
        met: list[str] = []  # sessions holding one of the batch's uuids at another line
        if holders is not None:  # (under the lock: whether another session holds a uuid too)
            met = [row[0] for row in conn.execute(q("ingest_insert_line_holders"), {"files": holders})]
        copies, lines = _decide_fork_copies(conn, mains, []) if mains else ([], "[]")
        # (the stretch each file read: the records its lines hold that are fork copies are owned again)
        read = [{"file_id": p.file.id, "start": p.start, "end": p.offset} for p in batch
                if p.result is not None and any(h.key is not None for h in p.result.holders)]
        if copies or read:
            conn.execute(q("ingest_reown_requests"), {"changed": lines, "batch": _json(read)})
        called = sorted({p.session for p in batch if p.session and p.result is not None and p.result.tool_calls})
        if copies or called:
            conn.execute(q("ingest_park_tool_calls"), {"changed": lines, "sessions": called})
        if copies:
            conn.execute(q("ingest_unpark_tool_calls"), {"changed": lines})
        _settle_cwds(conn, [p.file.id for p in batch if p.file.kind == "main" and p.result is not None],
                     [p.file.id for p in batch if p.start == 0], lines if copies else "[]")
        timed = [(p.session, p.file.id) for p in batch
                 if p.session and p.result is not None and any(not e.sub for e in p.result.events)]
        _retime(conn, timed, copies + met,
                [p.session for p in batch if p.session and p.result and p.result.events])
        _write_tool_uses(conn, batch, lines if copies else None)


def merged_requests(requests: Iterable[Request]) -> dict[str, Request]:
    """One request per key, merged as the upsert merges them (fold.Request.merge); the ones given
    stay as they were. A key met once is the request given (copying each cost a commit more
    time than the rest of its Python); it is copied only to merge another into it."""
    merged: dict[str, Request] = {}
    copied: set[str] = set()
    for request in requests:
        held = merged.get(request.key)
        if held is None:
            merged[request.key] = request
            continue
        if request.key not in copied:
            held = merged[request.key] = replace(held)
            copied.add(request.key)
        held.merge(request)
    return merged


def _decide_fork_copies(conn: psycopg.Connection, sessions: list[str], uuids: list[str]) -> tuple[list[str], str]:
    """accounting.md §2.1 unmarked fork copies: the shared uuids of `sessions`, and `uuids`, ranked
    again; the sessions whose lines became, or stopped being, fork copies, and those lines
    (a JSON list of {session_uuid, file_id, offset})."""
    rows = conn.execute(q("ingest_decide_fork_copies"), {"sessions": sessions, "uuids": uuids}).fetchall()
    return (sorted({session for session, _, _ in rows}),
            _json([{"session_uuid": session, "file_id": file_id, "offset": offset}
                   for session, file_id, offset in rows]))


def _settle_cwds(conn: psycopg.Connection, files: list[int], again: list[int], lines: str) -> None:
    """accounting.md §4 with §2.1: the working folder of the main transcripts among `files` whose is not
    found yet, of those read `again` from their start, and of those holding the `lines` that
    became or stopped being fork copies (a JSON list of {session_uuid, file_id, offset})."""
    changed = sorted({line["file_id"] for line in json.loads(lines)})
    if files or changed:
        conn.execute(q("ingest_settle_file_cwds"), {"ids": sorted(set(files) | set(changed)),
                                                    "again": sorted(set(again) | set(changed))})


def _retime(conn: psycopg.Connection, timed: list[tuple[str, int]], copies: list[str],
            batch_sessions: list[str]) -> None:
    """accounting.md §2.3: each file's events are folded on their own, which is the session's timeline
    unless it has several main transcripts, a line uuid repeats or a line is a fork copy (§2.1);
    those sessions' timelines are worked out again across their files, and those of `copies`
    (whose fork copies changed, or which hold a uuid of the batch at another line: a line uuid
    met before, found by insert_line_holders). Then the subagent timelines of those sessions:
    placed when a session has no main event, turned off when it has one. `timed`: the batch's
    files with main-timeline events, as (session, file id)."""
    sessions = set(copies)
    if timed:
        sessions.update(row[0] for row in conn.execute(q("ingest_sessions_to_retime"), {
            "sessions": [session for session, _ in timed], "file_ids": [file_id for _, file_id in timed]}))
    if sessions:
        conn.execute(q("ingest_retime_sessions"), {"sessions": sorted(sessions)})
    if batch_sessions or copies:
        conn.execute(q("ingest_subtime_sessions"), {"sessions": sorted(set(batch_sessions) | set(copies))})


def _write_tool_uses(conn: psycopg.Connection, batch: Sequence[Pending], copied: str | None = None) -> None:
    """accounting.md §2.6's calls and results of a batch, then the judgements they change; and the
    calls on the `copied` lines (that became, or stopped being, fork copies: §2.1)."""
    placed: list[tuple] = []  # (session, tool_use_id or None, agent, file path, offset, block)
    if copied is not None:
        placed += conn.execute(q("ingest_calls_at_lines"), {"lines": copied}).fetchall()
    calls, results = [], []
    for p in batch:
        if p.result is None:
            continue
        found = p.result.results
        if p.result.calls:  # (the path orders an agent's files: whole, when an index can hold it)
            calls.append({"file_id": p.file.id, "session_uuid": p.session,
                          "file_path": indexable(p.path, PATH_INDEX_BYTES),
                          "rows": [_call_row(call, found.get(call.id)) for call in p.result.calls.values()]})
        if alone := [result for result in found.values() if result.tool_use_id not in p.result.calls]:
            results.append({"file_id": p.file.id, "session_uuid": p.session, "rows": alone})
    if calls:
        placed += conn.execute(q("ingest_upsert_tool_use_calls"), {"files": _json(calls)}).fetchall()
    if results:
        failed = conn.execute(q("ingest_upsert_tool_use_results"), {"files": _json(results)}).fetchall()
        placed += [(session, None, *where) for session, *where in failed]
    _settle_tool_uses(conn, [row for row in placed if row[1] is not None], placed)


def _call_row(call: Call, result: ToolResult | None) -> dict:
    """A call as upsert_tool_use_calls reads it, with its result when the batch holds that."""
    row = {"id": call.id, "agent": call.agent, "offset": call.offset, "block": call.block, "name": call.name,
           "input_hash": call.input_hash, "path": call.path, "detail": call.detail, "ts_us": call.ts_us,
           "plan": call.plan, "example": call.example, "has_result": result is not None, "failed": False,
           "sibling": False, "rejected": False, "refused": False}
    if result is not None:
        row.update(failed=result.failed, sibling=result.sibling, rejected=result.rejected, result_bytes=result.bytes,
                   result_ts_us=result.ts_us, refused=result.refused, task_id=result.task_id)
    return row


def _settle_tool_uses(conn: psycopg.Connection, ids: Sequence[tuple], placed: Sequence[tuple]) -> None:
    """`ids`: calls added or removed, whose id may now count elsewhere; `placed`: where each change
    sits in its agent's order. Rows as (session, tool_use_id, agent, file path, offset, block)."""
    if not placed:
        return
    changed = list(placed)
    if ids:
        recount = _json([{"session_uuid": row[0], "tool_use_id": row[1]} for row in ids])
        changed += [(session, None, *where) for session, *where in
                    conn.execute(q("ingest_recount_tool_uses"), {"ids": recount}).fetchall()]
    dirty = [{"session_uuid": s, "agent": a, "file_path": f, "offset": o, "block": b} for s, _, a, f, o, b in changed]
    conn.execute(q("ingest_judge_tool_uses"), {"dirty": _json(dirty)})


def _advance(pending: Pending) -> None:
    """The file's row in memory, once its transaction has committed."""
    file, stat = pending.file, pending.stat
    file.session_uuid, file.offset, file.state = pending.session, pending.offset, pending.state
    file.device, file.inode, file.size = stat.device, stat.inode, stat.size
    if pending.head is not None:
        file.head = pending.head


_encode = msgspec.json.Encoder().encode


def _json(value: object) -> str:
    return _encode(value).decode()


class ConcurrentUpdate(RuntimeError):
    """Another ingester committed these files first; re-read their rows and try again."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(f"files {paths} moved on under us")
        self.paths = paths
