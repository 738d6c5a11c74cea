"""Reading files into the store: the edge where the pure transcript code meets I/O."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import structlog

from .store.store import ConcurrentUpdate, FileRow, Pending, Stat, Store
from .transcript.discovery import FileRef, classify, walk
from .transcript.fold import first_session_id, fold
from .transcript.parser import parse_line, storable_text
from .transcript.tailer import read_chunk

log = structlog.get_logger(__name__)

META_MAX_BYTES = 1 << 20


@dataclass(slots=True)
class ScanStats:
    files: int = 0
    ingested: int = 0
    lines: int = 0
    bytes: int = 0
    missing: int = 0
    failed: int = 0

    def committed(self, pending: Pending) -> None:
        self.lines += pending.lines
        self.bytes += pending.offset - pending.start


def _never() -> bool:
    return False


class Ingester:
    """Reads files into the store. Files are folded one by one but committed in batches of
    about `batch_bytes`, several files per transaction: a statement per file per table cost
    more than the rows themselves when most files are small."""

    def __init__(self, store: Store, roots: Iterable[Path], batch_bytes: int = 4 << 20,
                 interrupted: Callable[[], bool] = _never) -> None:
        """`interrupted` is asked between files and batches: True stops the work in hand, which
        is safe at any batch boundary (each batch commits with its offsets)."""
        self.store = store
        self.roots = [Path(r) for r in roots]
        self.batch_bytes = batch_bytes
        self.interrupted = interrupted
        self._batch: dict[str, Pending] = {}  # by path
        self._batch_bytes = 0

    def scan(self) -> ScanStats:
        """Bring every file up to date: the catch-up at start and the periodic reconciliation."""
        stats = ScanStats()
        known = self.store.known_files()
        seen: set[str] = set()
        for ref in (ref for root in self.roots for ref in walk(root)):
            if self.interrupted():
                break
            path = str(ref.path)
            seen.add(path)
            stats.files += 1
            file = known.get(path)
            if not self._unchanged(ref, file):
                self._guarded(ref, stats, file if file is not None and not file.missing else None)
        self.flush(stats)
        if self.interrupted():
            return stats
        for path, file in known.items():
            if not file.missing and path not in seen and any(Path(path).is_relative_to(r) for r in self.roots):
                self.store.mark_missing(path)
                stats.missing += 1
        return stats

    def ingest_paths(self, paths: Iterable[Path]) -> ScanStats:
        """Paths named by the watcher; paths retrod does not read are ignored. A new folder is
        read whole: files written into it before the watcher saw it would be missed otherwise."""
        stats = ScanStats()
        for path in paths:
            if self.interrupted():
                break
            for ref in self._refs(path):
                self._guarded(ref, stats)
        self.flush(stats)
        return stats

    def flush(self, stats: ScanStats) -> None:
        """Commit the batch in hand. When the database refuses it, each file is tried alone, so
        one file's bad row or a concurrent ingester does not hold back the others."""
        batch = list(self._batch.values())
        self._batch.clear()
        self._batch_bytes = 0
        if len(batch) <= 1:
            for pending in batch:
                self._commit_alone(pending, stats)
            return
        try:
            self.store.commit(batch)
        except psycopg.OperationalError:
            raise  # the database is away: the daemon retries; nothing was committed
        except Exception:  # noqa: BLE001 - each file on its own says which one it was
            for pending in batch:
                self._commit_alone(pending, stats)
            return
        for pending in batch:
            stats.committed(pending)

    def _commit_alone(self, pending: Pending, stats: ScanStats) -> None:
        path = pending.path
        try:
            self.store.commit([pending])
        except psycopg.OperationalError:
            raise
        except ConcurrentUpdate:
            log.warning("file updated by another ingester; read again at its next change or scan", path=path)
        except Exception as exc:  # noqa: BLE001 - logged with the file, retried at its next change
            log.error("file not ingested; will retry when it changes or at the next scan",
                      path=path, error=f"{type(exc).__name__}: {exc}")
            stats.failed += 1
        else:
            stats.committed(pending)

    def _add(self, pending: Pending) -> None:
        self._batch[pending.path] = pending
        self._batch_bytes += pending.offset - pending.start

    def _guarded(self, ref: FileRef, stats: ScanStats, stored: FileRow | None = None) -> None:
        """One file's failure (a line that breaks a bug) must not stop the others.

        A database that is away is not the file's fault: that propagates, for the daemon to retry."""
        if str(ref.path) in self._batch:  # read again in the same round: commit what it has first
            self.flush(stats)
            stored = None
        try:
            self._ingest(ref, stats, stored)
        except psycopg.OperationalError:
            raise
        except Exception as exc:  # noqa: BLE001 - logged with the file, retried at its next change
            log.error("file not ingested; will retry when it changes or at the next scan",
                      path=str(ref.path), error=f"{type(exc).__name__}: {exc}")
            stats.failed += 1
        if self._batch_bytes >= self.batch_bytes:
            self.flush(stats)

    def _refs(self, path: Path) -> Iterable[FileRef]:
        for root in self.roots:
            if path.is_relative_to(root):
                if path.is_dir():
                    return walk(root, path)
                ref = classify(root, path)
                return [ref] if ref is not None else []
        return []

    @staticmethod
    def _unchanged(ref: FileRef, file: FileRow | None) -> bool:
        if file is None:
            return False
        try:
            st = os.stat(ref.path)
        except OSError:
            return False  # _ingest() records it as missing
        return (not file.missing and (st.st_dev, st.st_ino) == (file.device, file.inode)
                and st.st_size == file.size and file.offset == file.size)

    def _ingest(self, ref: FileRef, stats: ScanStats, stored: FileRow | None = None) -> None:
        """Read what is new in one file. A vanished file keeps everything it contributed.
        `stored`: its row as the scan read it (else it is read here)."""
        try:
            fd = os.open(ref.path, os.O_RDONLY)
        except FileNotFoundError:
            self.store.mark_missing(str(ref.path))
            stats.missing += 1
            return
        except OSError as exc:
            log.warning("file unreadable", path=str(ref.path), error=str(exc))
            return
        try:
            st = os.fstat(fd)
            stat = Stat(st.st_dev, st.st_ino, st.st_size)
            file = stored or self.store.file(ref)
            if ref.kind == "meta":
                self._read_meta(ref, file, stat, fd)
            elif ref.kind == "tool_result":
                self._add(Pending(str(ref.path), file, file.session_uuid, stat, stat.size, None))
            else:
                self._tail(ref, file, stat, fd, stats)
        finally:
            os.close(fd)
        stats.ingested += 1

    def _tail(self, ref: FileRef, file: FileRow, stat: Stat, fd: int, stats: ScanStats) -> None:
        replaced = file.inode is not None and (file.device, file.inode) != (stat.device, stat.inode)
        if replaced or stat.size < file.offset:
            log.info("file re-read from its start", path=str(ref.path),
                     reason="replaced" if replaced else "truncated")
            self.store.reset(file, stat)
        session = ref.session_uuid or file.session_uuid
        if session is None:  # a project-level agent file: its first sessionId names its session
            session = self._find_session(fd)
            if session is None:
                self._add(Pending(str(ref.path), file, None, stat, 0, None))
                return
        source = ref.source(self.store.host_id, session)
        while True:
            chunk = read_chunk(fd, file.offset, self.batch_bytes)
            seen = Stat(stat.device, stat.inode, max(stat.size, chunk.end))
            if chunk.lines or file.inode is None or file.size != seen.size or file.session_uuid != session:
                entries = [(offset, parse_line(raw)) for offset, raw in chunk.lines]
                self._add(Pending(str(ref.path), file, session, seen, chunk.end,
                                  fold(source, file.state, entries), len(entries)))
            # A file longer than one chunk: its next chunk folds on this one's committed state.
            if not chunk.lines or chunk.end >= seen.size or self.interrupted():
                return
            self.flush(stats)
            if file.offset != chunk.end:
                return  # its commit failed (logged): the next scan retries it

    def _find_session(self, fd: int) -> str | None:
        offset = 0
        while True:
            chunk = read_chunk(fd, offset, self.batch_bytes)
            if not chunk.lines:
                return None
            session = first_session_id(parse_line(raw) for _, raw in chunk.lines)
            if session is not None:
                return session
            offset = chunk.end

    def _read_meta(self, ref: FileRef, file: FileRow, stat: Stat, fd: int) -> None:
        """A subagent's `.meta.json`; one that does not parse yet is retried when it changes."""
        try:
            meta = json.loads(os.pread(fd, META_MAX_BYTES, 0))
        except (ValueError, RecursionError):
            log.debug("meta file not readable yet", path=str(ref.path))
            return
        if not isinstance(meta, dict):
            return

        def text(key: str) -> str | None:
            return storable_text(meta.get(key))

        self.store.save_meta(file, stat, ref.agent_id, text("agentType"), text("description"))

