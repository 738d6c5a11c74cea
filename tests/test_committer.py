"""The committer thread: order, the file-by-file retry of a refused batch, database errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from retrod.ingest.committer import Committer
from retrod.store.store import ConcurrentUpdate, FileRow, Pending, Stat
from retrod.transcript.fold import FoldState


class FakeStore:
    """Commits by recording paths; refuses any batch holding a path in `bad`."""

    def __init__(self, bad: set[str] = frozenset(), away: bool = False) -> None:
        self.bad, self.away, self.committed = bad, away, []

    @contextmanager
    def lane(self, bulk: bool) -> Iterator[None]:
        yield None

    def commit(self, batch: list[Pending], bulk: bool = False, lane: object = None) -> None:
        if self.away:
            raise psycopg.OperationalError("connection refused")
        if any(p.path in self.bad for p in batch):
            raise psycopg.errors.UntranslatableCharacter("a row PostgreSQL refuses")
        self.committed += [(p.path, p.offset) for p in batch]


def pending(path: str, start: int, end: int) -> Pending:
    file = FileRow(1, "main", "s", 1, 1, 0, start, FoldState(), False)
    return Pending(path, file, "s", Stat(1, 1, end), start, end, None, lines=end - start)


def test_a_refused_batch_is_retried_file_by_file_and_a_failed_file_stops_there() -> None:
    store = FakeStore(bad={"b"})
    committer = Committer(store)
    committer.submit([pending("a", 0, 10), pending("b", 0, 10), pending("c", 0, 10)])
    committer.submit([pending("b", 10, 20), pending("d", 0, 5)])  # b's next chunk cannot follow
    committer.close()
    assert store.committed == [("a", 10), ("c", 10), ("d", 5)]
    assert (committer.committed.lines, committer.committed.failed) == (25, 1)


def test_batches_commit_in_the_order_they_were_submitted() -> None:
    store = FakeStore()
    committer = Committer(store)
    for n in range(20):
        committer.submit([pending("a", n, n + 1)])
    committer.wait()
    assert store.committed == [("a", n + 1) for n in range(20)]
    committer.close()


def test_a_database_that_is_away_reaches_the_caller_and_drops_what_is_queued() -> None:
    store = FakeStore(away=True)
    committer = Committer(store)
    committer.submit([pending("a", 0, 10)])
    with pytest.raises(psycopg.OperationalError):
        committer.wait()
    store.away = False
    with pytest.raises(psycopg.OperationalError):
        committer.submit([pending("b", 0, 10)])
    committer.close(raise_error=False)
    assert store.committed == []


def test_a_file_read_again_after_its_failure_commits() -> None:
    """Found in review: a re-read in the same round (after `wait`) was dropped with the failed chunk."""
    store = FakeStore(bad={"b"})
    committer = Committer(store)
    committer.submit([pending("b", 0, 10)])
    committer.wait()
    store.bad = set()
    committer.forget("b")
    committer.submit([pending("b", 0, 12)])
    committer.close()
    assert store.committed == [("b", 12)]


def test_two_lanes_keep_each_files_chunks_in_order_and_a_sessions_batches_together() -> None:
    """The bulk path's two lanes: a file's next chunk follows its previous one on the same lane;
    another session's batch may commit on the other lane meanwhile."""

    class SlowStore(FakeStore):
        def __init__(self) -> None:
            super().__init__()
            self.lane_of: dict[str, set[int]] = {}

        def commit(self, batch: list[Pending], bulk: bool = False, lane: object = None) -> None:
            time.sleep(0.002 * len(batch[0].path))  # lanes finish out of submission order
            for p in batch:
                self.lane_of.setdefault(p.session or "", set()).add(threading.get_ident())
            super().commit(batch, bulk)

    def chunk(path: str, session: str, n: int) -> Pending:
        p = pending(path, n, n + 1)
        p.session = session
        return p

    store = SlowStore()
    committer = Committer(store, lanes=2, bulk=True)
    for n in range(10):  # two files of session s (a long one and its subagent's), and t alongside
        committer.submit([chunk("a", "s", n)])
        committer.submit([chunk("tt", "t", n)])
        committer.submit([chunk("b", "s", n)])
    committer.close()
    for path in ("a", "b", "tt"):
        assert [offset for p, offset in store.committed if p == path] == list(range(1, 11)), path
    assert len(store.lane_of["s"]) == 1 and len(store.lane_of["t"]) == 1  # one lane per session
    assert store.lane_of["s"] != store.lane_of["t"]  # and both lanes at work


def test_files_another_ingester_moved_on_leave_a_batch_and_the_rest_commit_together() -> None:
    """A report's refresh may commit a file the backfill holds in a batch: that file is read again
    at the round's end, and the batch's other files still go in one transaction, not one by one."""

    class MovingStore(FakeStore):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[list[str]] = []

        def commit(self, batch: list[Pending], bulk: bool = False, lane: object = None) -> None:
            self.calls.append([p.path for p in batch])
            if moved := [p.path for p in batch if p.path in ("b", "d")]:
                raise ConcurrentUpdate(moved)
            super().commit(batch, bulk)

    store = MovingStore()
    committer = Committer(store)
    committer.submit([pending(path, 0, 10) for path in "abcde"])
    committer.close()
    assert store.calls == [list("abcde"), list("ace")]
    assert committer.committed.raced == ["b", "d"] and committer.committed.lines == 30
