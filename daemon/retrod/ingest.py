"""Reading files into the store: the edge where the pure transcript code meets I/O."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import structlog

from .store.store import ConcurrentUpdate, FileRow, Stat, Store
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

    def add(self, other: ScanStats) -> None:
        self.ingested += other.ingested
        self.lines += other.lines
        self.bytes += other.bytes
        self.missing += other.missing
        self.failed += other.failed


def _never() -> bool:
    return False


class Ingester:
    def __init__(self, store: Store, roots: Iterable[Path], batch_bytes: int = 4 << 20,
                 interrupted: Callable[[], bool] = _never) -> None:
        """`interrupted` is asked between files and batches: True stops the work in hand, which
        is safe at any batch boundary (each batch commits with its offset)."""
        self.store = store
        self.roots = [Path(r) for r in roots]
        self.batch_bytes = batch_bytes
        self.interrupted = interrupted

    def _guarded(self, ref: FileRef) -> ScanStats:
        """One file's failure (a line the database refuses, a bug) must not stop the others.

        A database that is away is not the file's fault: that propagates, for the daemon to retry."""
        try:
            return self.ingest(ref)
        except psycopg.OperationalError:
            raise
        except Exception as exc:  # noqa: BLE001 - logged with the file, retried at its next change
            log.error("file not ingested; will retry when it changes or at the next scan",
                      path=str(ref.path), error=f"{type(exc).__name__}: {exc}")
            return ScanStats(failed=1)

    def scan(self) -> ScanStats:
        """Bring every file up to date: the catch-up at start and the periodic reconciliation."""
        stats = ScanStats()
        known = self.store.known_files()
        seen: set[str] = set()
        for root in self.roots:
            for ref in walk(root):
                if self.interrupted():
                    return stats
                path = str(ref.path)
                seen.add(path)
                stats.files += 1
                if self._unchanged(ref, known.get(path)):
                    continue
                stats.add(self._guarded(ref))
        for path, (*_, missing) in known.items():
            if not missing and path not in seen and any(Path(path).is_relative_to(r) for r in self.roots):
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
                stats.add(self._guarded(ref))
        return stats

    def _refs(self, path: Path) -> Iterable[FileRef]:
        for root in self.roots:
            if path.is_relative_to(root):
                if path.is_dir():
                    return walk(root, path)
                ref = classify(root, path)
                return [ref] if ref is not None else []
        return []

    @staticmethod
    def _unchanged(ref: FileRef, known: tuple | None) -> bool:
        if known is None:
            return False
        device, inode, size, offset, missing = known
        try:
            st = os.stat(ref.path)
        except OSError:
            return False  # ingest() records it as missing
        return (not missing and (st.st_dev, st.st_ino) == (device, inode)
                and st.st_size == size and offset == size)

    def ingest(self, ref: FileRef) -> ScanStats:
        """Read what is new in one file. A vanished file keeps everything it contributed."""
        stats = ScanStats()
        try:
            fd = os.open(ref.path, os.O_RDONLY)
        except FileNotFoundError:
            self.store.mark_missing(str(ref.path))
            stats.missing += 1
            return stats
        except OSError as exc:
            log.warning("file unreadable", path=str(ref.path), error=str(exc))
            return stats
        try:
            st = os.fstat(fd)
            stat = Stat(st.st_dev, st.st_ino, st.st_size)
            file = self.store.file(ref)
            if ref.kind == "meta":
                self._read_meta(ref, file, stat, fd)
            elif ref.kind == "tool_result":
                self.store.save_seen(file, stat)
            else:
                self._tail(ref, file, stat, fd, stats)
        except ConcurrentUpdate:
            log.warning("file updated by another ingester; read again at its next change or scan",
                        path=str(ref.path))
        finally:
            os.close(fd)
        stats.ingested += 1
        return stats

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
                self.store.commit(file, None, stat, 0, None)
                return
        source = ref.source(self.store.host_id, session)
        while True:
            chunk = read_chunk(fd, file.offset, self.batch_bytes)
            seen = Stat(stat.device, stat.inode, max(stat.size, chunk.end))
            if chunk.lines or file.inode is None or file.size != seen.size or file.session_uuid != session:
                start = file.offset
                entries = [(offset, parse_line(raw)) for offset, raw in chunk.lines]
                self.store.commit(file, session, seen, chunk.end, fold(source, file.state, entries))
                stats.lines += len(entries)
                stats.bytes += chunk.end - start
            if not chunk.lines or self.interrupted():
                return

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

