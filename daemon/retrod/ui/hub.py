"""The live page's fan-out: the ingest tells which sessions' lines it committed; each open live
page hears their new figures.

The daemon sees every line first, so nothing polls the database: the committer calls `publish`
(on its own thread) with the sessions a transaction committed; one task on the web server's
event loop gathers what arrives within DEBOUNCE_S, works the sessions' figures out once (on a
worker thread: the database is synchronous) and hands the same answer to every subscriber. A
page open or a hundred cost the database the same.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)

# Lines come in bursts (one per content block of a response): a tenth of a second gathers a burst
# into one answer, well inside the 2 s a live figure may take.
DEBOUNCE_S = 0.1
QUEUE_MAX = 64  # a page that stops reading loses old answers, never holds the others back
# Each open live page holds a stream (a connection and a queue) for as long as it is open; past
# this many, a new one is refused (503) rather than let streams fill the UI's connections.
SUBSCRIBERS_MAX = 32


class Full(RuntimeError):
    """SUBSCRIBERS_MAX streams are open already."""


class Hub:
    def __init__(self, figures: Callable[[set[str]], str]) -> None:
        # The sessions' figures as the text every page is sent (blocking: run on a worker thread).
        self._figures = figures
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._subscribers: set[asyncio.Queue[str | None]] = set()
        self._task: asyncio.Task | None = None

    def publish(self, sessions: set[str]) -> None:
        """From any thread: these sessions' figures changed."""
        with self._lock:
            self._pending |= sessions
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:
                pass  # the loop closed: the web server is stopping

    async def start(self) -> None:
        """On the web server's loop, at its start."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(self._wake), name="live hub")

    def close_streams(self) -> None:
        """On the loop: every subscriber's stream ends (a None), so the server need not wait for them."""
        for queue in list(self._subscribers):
            _offer(queue, None)

    def close_streams_soon(self) -> None:
        """From any thread: close_streams on the loop."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self.close_streams)
            except RuntimeError:
                pass  # the loop closed already

    async def stop(self) -> None:
        """At the server's end: the streams, then the task."""
        self.close_streams()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._loop = None

    def subscribe(self) -> asyncio.Queue[str | None]:
        if len(self._subscribers) >= SUBSCRIBERS_MAX:
            raise Full(f"{SUBSCRIBERS_MAX} live pages are open already: close one and reload this one")
        queue: asyncio.Queue[str | None] = asyncio.Queue(QUEUE_MAX)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str | None]) -> None:
        self._subscribers.discard(queue)

    async def _run(self, wake: asyncio.Event) -> None:
        while True:
            await wake.wait()
            await asyncio.sleep(DEBOUNCE_S)
            wake.clear()
            with self._lock:
                sessions, self._pending = self._pending, set()
            if not sessions or not self._subscribers:
                continue
            try:
                text = await asyncio.to_thread(self._figures, sessions)
            except Exception as exc:  # noqa: BLE001 - a failed look (database away) skips one update
                log.warning("live figures failed", error=f"{type(exc).__name__}: {exc}")
                continue
            for queue in list(self._subscribers):
                _offer(queue, text)


def _offer(queue: asyncio.Queue[str | None], item: str | None) -> None:
    if queue.full():
        try:
            queue.get_nowait()  # the oldest answer goes: the newest figures matter
        except asyncio.QueueEmpty:
            pass
    queue.put_nowait(item)
