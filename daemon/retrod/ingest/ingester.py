"""Reading files into the store: the edge where the pure transcript code meets I/O."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import stat as stat_module
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from ..store.store import OUTAGE, FileRow, Meta, Pending, Stat, Store
from ..transcript.discovery import FileRef, classify, session_paths, walk
from ..transcript.fold import FORGET_BELOW_RULES, FORGET_MAIN_BELOW_RULES, RULES, first_session_id, fold
from ..transcript.parser import parse_line, storable_text
from ..transcript.tailer import read_chunk
from .committer import Committer, log_not_ingested
from .progress import Progress

log = structlog.get_logger(__name__)

META_MAX_BYTES = 1 << 20
# The bulk path's connections committing at once: PostgreSQL does most of a backfill's work
# (docs/performance.md's step table: more CPU than the parse and fold), and a second connection puts it
# on a second core.
BULK_LANES = 2
# A scan with this much to read takes the bulk path (the daemon's catch-up over a long history);
# the periodic scans and the watcher's rounds, a few lines each, stay on the incremental one.
BULK_FROM_BYTES = 64 << 20
# The bulk path's batches: several small files per transaction, fewer transactions. Each costs
# a few milliseconds of its own in the database, more in replica mode (changing
# session_replication_role resets the plan cache: every statement is planned again), ~13% of
# PostgreSQL's time with 4 MB batches.
# A file is still read, and a large one committed, `batch_bytes` at a time.
BULK_BATCH_BYTES = 16 << 20
# The bulk path's cyclic garbage collection: the reading thread allocates millions of short-lived
# objects (each line decoded, its entry, its rows) and keeps a batch's rows until they commit.
# With Python's default first-generation threshold (700 allocations) the collector ran ~2,400
# times per 600 MB, its full collections walking every batch in flight: ~2.5 s of the process's
# ~10 s of CPU (docs/performance.md). Reading makes no reference cycles, so a bulk round collects
# after this many allocations instead (a few times per 600 MB; peak RSS unchanged).
BULK_GC_THRESHOLD = 50_000


@dataclass(slots=True)
class ScanStats:
    files: int = 0
    ingested: int = 0
    lines: int = 0
    bytes: int = 0
    missing: int = 0
    failed: int = 0
    raced: list[str] = field(default_factory=list)  # files another ingester committed first

    def add(self, other: ScanStats) -> None:
        for name in ("files", "ingested", "lines", "bytes", "missing", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


HEAD_BYTES = 4096


def _head(fd: int, upto: int) -> str:
    """The fingerprint of a file's first bytes, up to HEAD_BYTES and never past offset `upto`."""
    data = os.pread(fd, min(HEAD_BYTES, upto), 0)
    return f"{len(data)}:{hashlib.sha1(data, usedforsecurity=False).hexdigest()}"


def _head_len(head: str) -> int:
    return int(head.split(":", 1)[0]) if head else 0


def _older_rules(file: FileRow) -> bool:
    """A transcript read (some way) under older fold rules: read it again (below
    fold.FORGET_BELOW_RULES, or FORGET_MAIN_BELOW_RULES for a main transcript, its per-file rows
    forgotten first; its requests stay)."""
    return file.kind in ("main", "subagent", "agent_root") and file.offset > 0 and file.state.rules < RULES


def _never() -> bool:
    return False


class _Collections:
    """BULK_GC_THRESHOLD for as long as a bulk round (any of them, in this process) is under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rounds = 0
        self._threshold = gc.get_threshold()  # as it was before the first of them

    @contextmanager
    def fewer(self) -> Iterator[None]:
        with self._lock:
            if self._rounds == 0:
                self._threshold = gc.get_threshold()
                gc.set_threshold(max(BULK_GC_THRESHOLD, self._threshold[0]), *self._threshold[1:])
            self._rounds += 1
        try:
            yield
        finally:
            with self._lock:
                self._rounds -= 1
                if self._rounds == 0:
                    gc.set_threshold(*self._threshold)


_fewer_collections = _Collections().fewer


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None  # _ingest() records it as missing, or says what is wrong with it


def _newest_first(item: tuple[FileRef, os.stat_result | None]) -> int:
    st = item[1]
    return -st.st_mtime_ns if st is not None else 0


def _same_stat(ref: FileRef, file: FileRow | None, st: os.stat_result | None) -> bool:
    """Read up to its size as stored, by what a stat tells (Ingester._unchanged adds the fingerprint)."""
    return (file is not None and st is not None and not file.missing
            and (st.st_dev, st.st_ino) == (file.device, file.inode)
            and st.st_size == file.size and file.offset == file.size and not _older_rules(file))


def _to_read(ref: FileRef, file: FileRow | None, st: os.stat_result | None) -> int:
    """The bytes a scan expects to read of a file whose stat changed: what follows its stored
    offset, or all of it when it is another file or shorter. A meta file's are not counted: it is
    read whole, into one row of its subagent's (store.Pending.bytes)."""
    if st is None or ref.kind == "meta":
        return 0
    if file is None or file.missing or (st.st_dev, st.st_ino) != (file.device, file.inode) \
            or st.st_size < file.offset or _older_rules(file):
        return st.st_size
    return st.st_size - file.offset


def _project_folder(path: Path) -> Path | None:
    """A folder as the roots are written (resolved: links followed, no `..`), to compare with them."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None


def _new(ref: FileRef, known: dict[str, FileRow]) -> bool:
    """A file whose row a scan creates up front (with the others, in one statement). A name
    that is not UTF-8 cannot be stored: it is left to fail, and be logged, on its own."""
    file = known.get(str(ref.path))
    if file is not None and not file.missing:
        return False
    try:
        str(ref.path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Ingester:
    """Reads files into the store. Files are folded one by one but committed in batches of
    about `batch_bytes` (`BULK_BATCH_BYTES` on the bulk path), several files per transaction (a
    statement per file per table cost more than the rows themselves when most files are small),
    by a Committer's thread, so that folding the next batch overlaps the database's work on this
    one — by two, each with its own connection, on the bulk path. Each call (a scan, a
    watcher's round of paths) returns once all it read is committed."""

    def __init__(self, store: Store, roots: Iterable[Path], batch_bytes: int = 4 << 20,
                 interrupted: Callable[[], bool] = _never, progress: Progress | None = None,
                 bulk_from: int | None = None, on_commit: Callable[[set[str]], None] | None = None) -> None:
        """`interrupted` is asked between files and batches: True stops the work in hand, which
        is safe at any batch boundary (each batch commits with its offsets). `progress` hears
        where a scan stands, between files and chunks. `on_commit` hears the sessions whose
        lines each transaction committed, on the committing thread (Committer)."""
        self.store = store
        self.on_commit = on_commit
        self.progress = progress
        self._scanning = False  # the round in hand is a scan: its chunks tell `progress`
        self._files_done = 0
        self.roots = [Path(r) for r in roots]
        self.batch_bytes = batch_bytes
        self._batch_limit = batch_bytes  # the round's: larger on the bulk path
        self.bulk_from = bulk_from  # a scan with this many bytes to read takes the bulk path; None: never
        self.interrupted = interrupted
        self._batch: dict[str, Pending] = {}  # by path
        self._batch_bytes = 0
        self._read: set[str] = set()  # paths read in this round
        self._committer: Committer | None = None

    def scan(self) -> ScanStats:
        """Bring every file up to date: the catch-up at start and the periodic reconciliation."""
        known = self.store.known_files()
        # by path: a root inside another (or named twice) must not list a file twice
        refs = list({str(ref.path): ref for root in self.roots for ref in walk(root)}.values())
        # Newest first: the sessions a user is about to ask about are in within a second or two,
        # whatever the size of the history. Any order ends in the same tables (every row merges
        # order-independently), so a session's files need not stay together. These stats order
        # the work and size the progress; each file is stat-ed again when its turn comes (a long
        # scan's early stat is stale by then).
        stated = sorted(((ref, _stat(ref.path)) for ref in refs), key=_newest_first)
        known.update(self.store.files([ref for ref in refs if _new(ref, known)]))
        changed = [(ref, st) for ref, st in stated if not _same_stat(ref, known.get(str(ref.path)), st)]
        backlog = sum(_to_read(ref, known.get(str(ref.path)), st) for ref, st in changed)
        bulk = self.bulk_from is not None and backlog >= self.bulk_from
        if bulk:
            log.info("bulk path", bytes=backlog, files=len(changed))
        seen: set[str] = set()
        try:
            with _fewer_collections() if bulk else nullcontext(), self._round(bulk) as stats:
                if self.progress is not None:
                    self.progress.start(len(changed), backlog)
                    self._scanning, self._files_done = True, 0
                for ref, _st in stated:
                    if self.interrupted():
                        break
                    path = str(ref.path)
                    seen.add(path)
                    stats.files += 1
                    file = known.get(path)
                    if not self._unchanged(ref, file):
                        self._guarded(ref, stats, file if file is not None and not file.missing else None)
                        self._files_done += 1
                        self._tell_progress()
        finally:
            self._scanning = False
            if self.progress is not None:
                self.progress.end()
        self._after_races(stats)
        if self.interrupted():
            return stats
        for path, file in known.items():
            if not file.missing and path not in seen and any(Path(path).is_relative_to(r) for r in self.roots):
                self.store.mark_missing(path)
                stats.missing += 1
        return stats

    def ingest_paths(self, paths: Iterable[Path]) -> ScanStats:
        """Paths named by the watcher; paths retrod does not read are ignored. A new folder is
        read whole: files written into it before the watcher saw it would be missed otherwise. A
        folder gone (moved or deleted: the watcher names the folder, not its files) leaves its
        files' rows as deleted transcripts, their figures kept."""
        with self._round() as stats:
            for path in paths:
                if self.interrupted():
                    break
                if not path.exists() and any(path.is_relative_to(root) for root in self.roots):
                    stats.missing += self.store.mark_missing_under(str(path))
                for ref in self._refs(path):
                    self._guarded(ref, stats)
        return self._after_races(stats)

    def refresh(self, session: str, folders: Iterable[Path] | None = None) -> ScanStats:
        """Bring one session's files up to date now, whatever else is waiting: a report includes
        every complete line written before it was asked for, also during a long backfill.
        Its files: those stored for it, and any new ones at its paths (a new subagent file), in
        every project folder under the roots; or, given `folders` (the status line names its
        transcript's), in those and the folders of its stored main transcripts only, which spares
        a long history's hundreds of project folders a look each time. Like a scan, unchanged files
        cost a stat, not a statement; when none changed, nothing more."""
        known = self.store.session_files(session)
        paths = {Path(p) for p in known}
        if folders is None:
            for root in self.roots:
                paths.update(session_paths(root, session))
        else:
            look = {Path(p).parent for p, file in known.items() if file.kind == "main"}
            look.update(f for f in map(_project_folder, folders) if f is not None and f.parent in self.roots)
            for folder in look:
                paths.update(p for p in (folder / f"{session}.jsonl", folder / session) if p.exists())
        refs = list({str(ref.path): ref for path in sorted(paths) for ref in self._refs(path)}.values())
        known.update(self.store.files([ref for ref in refs if _new(ref, known)]))
        changed = [ref for ref in refs if not self._unchanged(ref, known.get(str(ref.path)))]
        if not changed:
            return ScanStats(files=len(refs))
        with self._round() as stats:
            stats.files = len(refs)
            for ref in changed:
                self._guarded(ref, stats, known.get(str(ref.path)))
        return self._after_races(stats)

    def _after_races(self, stats: ScanStats) -> ScanStats:
        """A file another ingester committed first (a report bringing its session up to date
        while the daemon reads it, another host) was left out of the round: read it again now,
        from what that one committed."""
        for _attempt in range(3):
            if not stats.raced or self.interrupted():
                break
            raced, stats.raced = stats.raced, []
            with self._round() as again:
                for path in raced:
                    for ref in self._refs(Path(path)):
                        self._guarded(ref, again)
            stats.add(again)
            stats.raced = again.raced
        return stats

    @contextmanager
    def _round(self, bulk: bool = False) -> Iterator[ScanStats]:
        stats = ScanStats()
        self._batch_limit = max(self.batch_bytes, BULK_BATCH_BYTES) if bulk else self.batch_bytes
        committer = self._committer = Committer(self.store, BULK_LANES if bulk else 1, bulk, self.on_commit)
        try:
            yield stats
            self._submit()
        except BaseException:
            committer.close(raise_error=False)  # what was queued still commits, or is dropped
            raise
        else:
            committer.close()
        finally:
            self._committer = None
            self._batch.clear()
            self._batch_bytes = 0
            self._read.clear()
            stats.lines += committer.committed.lines
            stats.bytes += committer.committed.bytes
            stats.failed += committer.committed.failed
            stats.raced += committer.committed.raced

    @property
    def _in_round(self) -> Committer:
        """The committer of the round under way: files are read only within one (_round)."""
        if self._committer is None:
            raise RuntimeError("a file is read outside a round")
        return self._committer

    def _submit(self) -> None:
        if self._batch:
            batch = list(self._batch.values())
            self._batch.clear()
            self._batch_bytes = 0
            self._in_round.submit(batch)

    def _add(self, pending: Pending) -> None:
        if pending.path in self._batch:  # a file's next chunk: a batch holds one per file
            self._submit()
        self._batch[pending.path] = pending
        self._batch_bytes += pending.bytes

    def _guarded(self, ref: FileRef, stats: ScanStats, stored: FileRow | None = None) -> None:
        """One file's failure (a line that breaks a bug) must not stop the others.

        A database that is away is not the file's fault: that propagates, for the daemon to retry."""
        path = str(ref.path)
        if path in self._read:  # read again in the same round: from what its first read committed
            self._submit()
            self._in_round.wait()
            self._in_round.forget(path)
            stored = None
        self._read.add(path)
        try:
            self._ingest(ref, stats, stored)
        except OUTAGE:
            raise
        except Exception as exc:  # noqa: BLE001 - logged with the file, retried at its next change
            log_not_ingested(path, exc)
            stats.failed += 1
        if self._batch_bytes >= self._batch_limit:
            self._submit()

    def _refs(self, path: Path) -> Iterable[FileRef]:
        for root in self.roots:
            if path.is_relative_to(root):
                if path.is_dir():
                    return walk(root, path)
                ref = classify(root, path)
                return [ref] if ref is not None else []
        return []

    def _tell_progress(self) -> None:
        """Files read, and bytes committed (what a report can already count), so far."""
        if self._scanning and self.progress is not None and self._committer is not None:
            self.progress.update(self._files_done, self._committer.committed.bytes)

    @staticmethod
    def _unchanged(ref: FileRef, file: FileRow | None) -> bool:
        if file is None:
            return False
        same = _same_stat(ref, file, _stat(ref.path))
        if not same or ref.kind == "tool_result":  # only a tool output's size counts
            return same
        if not file.head:  # read before fingerprints (0007), and not grown since: trust the stat
            return True
        # The same inode number and size can be another file: deleted and written again at once
        # (the inode comes back, and the size may match), or rewritten in place (a .meta.json).
        # Its fingerprint tells (accounting.md §2.1); the modification time would not, at the file
        # system clock's coarse granularity. It costs one 4 KiB read per file per scan.
        try:
            fd = os.open(ref.path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                return _head(fd, _head_len(file.head)) == file.head
            finally:
                os.close(fd)
        except OSError:
            return False  # _ingest() says what is wrong with it

    def _ingest(self, ref: FileRef, stats: ScanStats, stored: FileRow | None = None) -> None:
        """Read what is new in one file. A vanished file keeps everything it contributed.
        `stored`: its row as the scan read it (else it is read here)."""
        try:  # non-blocking: a FIFO named like a transcript must not stop all reading
            fd = os.open(ref.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            self.store.mark_missing(str(ref.path))
            stats.missing += 1
            return
        except OSError as exc:
            log.warning("file unreadable", path=str(ref.path), error=str(exc))
            return
        try:
            st = os.fstat(fd)
            if not stat_module.S_ISREG(st.st_mode):
                log.debug("not a regular file; skipped", path=str(ref.path))
                return
            stat = Stat(st.st_dev, st.st_ino, st.st_size)
            file = stored or self.store.file(ref)
            if ref.kind == "meta":
                self._read_meta(ref, file, stat, fd)
            elif ref.kind == "tool_result":
                self._add(Pending(str(ref.path), file, file.session_uuid, stat, file.offset, stat.size, None))
            else:
                self._tail(ref, file, stat, fd)
        finally:
            os.close(fd)
        stats.ingested += 1

    def _tail(self, ref: FileRef, file: FileRow, stat: Stat, fd: int) -> None:
        replaced = file.inode is not None and (file.device, file.inode) != (stat.device, stat.inode)
        truncated = stat.size < file.offset
        rewritten = (not (replaced or truncated) and file.head != ""
                     and _head(fd, _head_len(file.head)) != file.head)
        # Read under rules that counted lines as its own which may be fork copies (§2.1): its rows
        # go, as a replaced file's.
        forgotten = _older_rules(file) and file.state.rules < (
            FORGET_MAIN_BELOW_RULES if file.kind == "main" else FORGET_BELOW_RULES)
        reset = replaced or truncated or rewritten or forgotten
        if reset:
            log.info("file re-read from its start", path=str(ref.path),
                     reason="replaced" if replaced else "truncated" if truncated
                     else "content changed" if rewritten else "read under older rules")
            self.store.reset(file, stat)
        elif _older_rules(file):
            log.info("file re-read from its start", path=str(ref.path), reason="read under older rules")
            self.store.rewind(file, stat)
        session = ref.session_uuid or file.session_uuid
        if session is None:  # a project-level agent file: its first sessionId names its session
            session = self._find_session(fd)
            if session is None:
                self._add(Pending(str(ref.path), file, None, stat, file.offset, 0, None))
                return
        source = ref.source(self.store.host_id, session)
        path = str(ref.path)
        offset, state = file.offset, file.state  # then each chunk's: the previous may still be committing
        # Folded even with no complete line when new to it: a subagent file is listed as soon as
        # it exists, also again after a reset forgot it (truncated to nothing, or a partial line).
        news = reset or file.inode is None or file.size != stat.size or file.session_uuid != session
        covered = _head_len("" if reset else file.head)  # bytes the stored fingerprint covers
        while True:
            chunk = read_chunk(fd, offset, self.batch_bytes)
            seen = Stat(stat.device, stat.inode, max(stat.size, chunk.end))
            if chunk.lines or news:
                # Fingerprinted right after the read, before the fold's milliseconds; extended
                # until it covers HEAD_BYTES (also for a file read before fingerprints existed).
                head = _head(fd, chunk.end) if covered < min(HEAD_BYTES, chunk.end) else None
                covered = _head_len(head) if head is not None else covered
                result = fold(source, state, [(o, parse_line(raw)) for o, raw in chunk.lines])
                self._add(Pending(path, file, session, seen, offset, chunk.end, result, len(chunk.lines), head))
                offset, state, news = chunk.end, result.state, False
            self._tell_progress()  # a large file's chunks, not only whole files
            if not chunk.lines or chunk.end >= stat.size or self.interrupted():
                return  # what is appended from here on comes with the watcher's next event

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
            meta = json.loads(os.pread(fd, META_MAX_BYTES, 0))  # (json.loads skips a BOM itself)
        except (ValueError, RecursionError):
            log.debug("meta file not readable yet", path=str(ref.path))
            return
        if not isinstance(meta, dict):
            return

        def text(key: str) -> str | None:
            return storable_text(meta.get(key))

        # Committed with the batch: a transaction of its own per meta file made the reading
        # thread wait for each commit's flush (~300 of them per GB of transcripts).
        self._add(Pending(str(ref.path), file, file.session_uuid, stat, file.offset, stat.size, None,
                          head=_head(fd, stat.size), meta=Meta(ref.agent_id, text("agentType"), text("description"))))

