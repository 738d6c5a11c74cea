"""Committing batches on threads of their own while the ingester folds the next.

PostgreSQL works in its own processes: while they run a batch's statements and triggers, the
ingester parses the next batch instead of waiting.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from ..store.store import OUTAGE, ConcurrentUpdate, Lane, Pending, Store

log = structlog.get_logger(__name__)


# The files that failed, with the kind of failure logged for each: a file that fails at every
# scan in the same way is logged once, not every few minutes (it is still counted each time).
_failing: dict[str, str] = {}
_failing_lock = threading.Lock()


def log_not_ingested(path: str, exc: BaseException) -> None:
    """One file failed, in reading or in committing; the others go on."""
    kind = type(exc.__cause__ or exc).__name__
    with _failing_lock:
        if _failing.get(path) == kind:
            return
        _failing[path] = kind
    log.error("file not ingested; will retry when it changes or at the next scan",
              path=path, error=" ".join(f"{type(exc).__name__}: {exc}".split()))


def ingested(path: str) -> None:
    """The file went in: a later failure of it is news again."""
    if _failing:
        with _failing_lock:
            _failing.pop(path, None)


@dataclass(slots=True)
class Committed:
    lines: int = 0
    bytes: int = 0
    failed: int = 0
    raced: list[str] = field(default_factory=list)  # files another ingester committed first

    def add(self, pending: Pending) -> None:
        self.lines += pending.lines
        self.bytes += pending.bytes


class Committer:
    """Commits submitted batches on `lanes` threads, each with its own connection: PostgreSQL
    does most of a backfill's work, and two connections put it on two cores. With
    several lanes a batch is split by session, each part a transaction of its own. A batch the
    database refuses is retried file by file, so one file's bad row or a concurrent ingester
    does not hold back the others; a database that is away stops every lane, and `close` raises
    that error in the caller's thread."""

    def __init__(self, store: Store, lanes: int = 1, bulk: bool = False,
                 on_commit: Callable[[set[str]], None] | None = None) -> None:
        self.store = store
        self.bulk = bulk  # Store.commit's
        # Told the sessions whose files each transaction committed, right after it commits (the
        # web UI's live page: the daemon sees every line first, so no one polls the database).
        self.on_commit = on_commit
        self.committed = Committed()
        self._lock = threading.Lock()  # committed, _failed and _error, shared by the lanes
        self._error: BaseException | None = None
        self._failed: set[str] = set()  # paths whose earlier chunk failed: their next cannot follow
        self._lanes = [_Lane(self._run, f"committer-{n}") for n in range(lanes)]
        # A session's files commit on one lane, in submission order: the lanes never wait on
        # each other's session locks (Store._commit), and a file's chunks (one session's, in a
        # round) follow each other.
        self._lane_of_session: dict[str | None, _Lane] = {}

    def submit(self, batch: list[Pending]) -> None:
        """Queue a batch (waits while a lane it goes to has one waiting already); raises the
        database's error if an earlier batch met one."""
        self._raise()
        parts: dict[_Lane, list[Pending]] = {}
        for pending in batch:
            lane = self._lane_of_session.get(pending.session)
            if lane is None:  # a new session: the lane with the least to do
                lane = min(self._lanes, key=lambda one: (one.queue.unfinished_tasks, len(parts.get(one, ()))))
                self._lane_of_session[pending.session] = lane
            parts.setdefault(lane, []).append(pending)
        for lane in sorted(parts, key=lambda one: one.queue.full()):  # an idle lane need not wait
            lane.queue.put(parts[lane])

    def wait(self) -> None:
        """Until every submitted batch is committed (or failed)."""
        for lane in self._lanes:
            lane.queue.join()
        self._raise()

    def forget(self, path: str) -> None:
        """After `wait`: a file read again may commit, though an earlier chunk of it failed."""
        with self._lock:
            self._failed.discard(path)

    def close(self, raise_error: bool = True) -> None:
        """Commit what was submitted and stop the threads. Raises like `submit`, if asked."""
        for lane in self._lanes:
            lane.queue.put(None)
        for lane in self._lanes:
            lane.thread.join()
        if raise_error:
            self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self, lane: _Lane) -> None:
        served = False
        try:
            with self.store.lane(self.bulk) as held:
                self._serve(lane, held)
                served = True
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            with self._lock:
                self._error = self._error or exc
        if not served:  # (no connection to commit on: what is queued is dropped, to the round's end)
            self._serve(lane, None)

    def _serve(self, lane: _Lane, held: Lane | None) -> None:
        """Commit the lane's batches on `held` (Store.lane) until the round ends."""
        while True:
            batch = lane.queue.get()
            try:
                if batch is None:
                    return
                if self._error is None:  # after a database error, what is queued is dropped
                    self._commit(batch, held)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                with self._lock:
                    self._error = self._error or exc
            finally:
                lane.queue.task_done()

    def _commit(self, batch: list[Pending], held: Lane | None) -> None:
        with self._lock:
            batch = [p for p in batch if p.path not in self._failed]
        while len(batch) > 1:
            try:
                self.store.commit(batch, self.bulk, held)
            except OUTAGE:
                raise  # the database is away or refuses writes: nothing was committed; the daemon retries
            except ConcurrentUpdate as exc:  # the others still commit together (a bulk batch is large)
                moved = set(exc.paths)
                for pending in batch:
                    if pending.path in moved:
                        self._raced(pending)
                if not moved:
                    break
                batch = [p for p in batch if p.path not in moved]
            except Exception:  # noqa: BLE001 - each file on its own says which one it was
                break
            else:
                with self._lock:
                    for pending in batch:
                        self.committed.add(pending)
                        ingested(pending.path)
                self._told(batch)
                return
        for pending in batch:
            self._commit_alone(pending, held)

    def _commit_alone(self, pending: Pending, held: Lane | None) -> None:
        try:
            self.store.commit([pending], self.bulk, held)
        except OUTAGE:
            raise
        except ConcurrentUpdate:
            self._raced(pending)
        except Exception as exc:  # noqa: BLE001 - logged with the file, retried at its next change
            log_not_ingested(pending.path, exc)
            with self._lock:
                self.committed.failed += 1
                self._failed.add(pending.path)
        else:
            with self._lock:
                self.committed.add(pending)
            ingested(pending.path)
            self._told([pending])

    def _told(self, committed: list[Pending]) -> None:
        sessions = {p.session for p in committed if p.session is not None and (p.lines or p.meta is not None)}
        if sessions and self.on_commit is not None:
            try:
                self.on_commit(sessions)
            except Exception as exc:  # noqa: BLE001 - a listener's fault never stops the ingest
                log.warning("commit listener failed", error=f"{type(exc).__name__}: {exc}")

    def _raced(self, pending: Pending) -> None:
        """Another ingester committed the file first (a report brought its session up to date
        meanwhile): the round reads it again from there, at its end."""
        log.info("file committed by another ingester first; read again from there", path=pending.path)
        with self._lock:
            self.committed.raced.append(pending.path)
            self._failed.add(pending.path)


class _Lane:
    """One committing thread and the batches queued for it: one committing, at most one waiting,
    so memory stays bounded."""

    def __init__(self, run: Callable[[_Lane], None], name: str) -> None:
        self.queue: queue.Queue[list[Pending] | None] = queue.Queue(maxsize=1)
        self.thread = threading.Thread(target=run, args=(self,), name=name, daemon=True)
        self.thread.start()
