"""Committing batches on a thread of their own, in order, while the ingester folds the next.

PostgreSQL works in its own process: while it runs a batch's statements and triggers, the
ingester can parse the next batch on the other core instead of waiting. At most one batch waits
behind the one being committed, so memory stays bounded.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

import structlog

from .store.store import OUTAGE, ConcurrentUpdate, Pending, Store

log = structlog.get_logger(__name__)


def log_not_ingested(path: str, exc: Exception) -> None:
    """One file failed, in reading or in committing; the others go on."""
    log.error("file not ingested; will retry when it changes or at the next scan",
              path=path, error=f"{type(exc).__name__}: {exc}")


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
    """Commits submitted batches in submission order. A batch the database refuses is retried
    file by file, so one file's bad row or a concurrent ingester does not hold back the others;
    a database that is away stops it, and `close` raises that error in the caller's thread."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.committed = Committed()
        self._queue: queue.Queue[list[Pending] | None] = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._failed: set[str] = set()  # paths whose earlier chunk failed: their next cannot follow
        self._thread = threading.Thread(target=self._run, name="committer", daemon=True)
        self._thread.start()

    def submit(self, batch: list[Pending]) -> None:
        """Queue a batch (waits while another one already waits); raises the database's error
        if an earlier batch met one."""
        self._raise()
        self._queue.put(batch)

    def wait(self) -> None:
        """Until every submitted batch is committed (or failed)."""
        self._queue.join()
        self._raise()

    def forget(self, path: str) -> None:
        """After `wait`: a file read again may commit, though an earlier chunk of it failed."""
        self._failed.discard(path)

    def close(self, raise_error: bool = True) -> None:
        """Commit what was submitted and stop the thread. Raises like `submit`, if asked."""
        self._queue.put(None)
        self._thread.join()
        if raise_error:
            self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            try:
                if batch is None:
                    return
                if self._error is None:  # after a database error, what is queued is dropped
                    self._commit(batch)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                self._error = exc
            finally:
                self._queue.task_done()

    def _commit(self, batch: list[Pending]) -> None:
        batch = [p for p in batch if p.path not in self._failed]
        if len(batch) > 1:
            try:
                self.store.commit(batch)
            except OUTAGE:
                raise  # the database is away or refuses writes: nothing was committed; the daemon retries
            except Exception:  # noqa: BLE001 - each file on its own says which one it was
                pass
            else:
                for pending in batch:
                    self.committed.add(pending)
                return
        for pending in batch:
            self._commit_alone(pending)

    def _commit_alone(self, pending: Pending) -> None:
        try:
            self.store.commit([pending])
        except OUTAGE:
            raise
        except ConcurrentUpdate:  # e.g. a report brought its session up to date meanwhile
            log.info("file committed by another ingester first; read again from there", path=pending.path)
            self.committed.raced.append(pending.path)
            self._failed.add(pending.path)
        except Exception as exc:  # noqa: BLE001 - logged with the file, retried at its next change
            log_not_ingested(pending.path, exc)
            self.committed.failed += 1
            self._failed.add(pending.path)
        else:
            self.committed.add(pending)
