"""The UI port's bounds, so that whatever it receives the daemon keeps its descriptors for its
own work (the watcher, the committer, the report socket; issue 28).

uvicorn bounds requests, not connections: a connection that never sends a request holds a
descriptor for ever, and 1,100 of them (no token needed to open one) left the daemon none. So
each connection here has `HEAD_TIMEOUT_S` to send a whole request head (after it opens, and
after each answer), and as long to take an answer the socket could not take at once: a client
that pipelines requests and never reads the answers fills the socket's buffers, and the server's
next answer would wait for room for ever, in a request (the head timer long stopped). Past
`bound()` open connections, the oldest waiting for a request, or for its client to read, is
closed (the new one when every one is in a request); and an accept that fails for want of
descriptors is logged once per `ACCEPT_LOG_EVERY_S`, not once a second with its traceback.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

log = structlog.get_logger(__name__)

MAX_CONNECTIONS = 128  # a browser opens 6 per host; each live page holds one more
DESCRIPTOR_SHARE = 4  # and never more than a quarter of the process's descriptor limit
HEAD_TIMEOUT_S = 10.0  # to send a whole request head, or take an answer's rest: a browser does at once
KEEP_ALIVE_S = 5  # an answered connection waiting for its next request (uvicorn's default)
HEAD_MAX_BYTES = 16 * 1024  # a request head larger than this is refused (400; h11's default)
ACCEPT_LOG_EVERY_S = 60.0


def bound(descriptor_limit: int) -> int:
    return max(8, min(MAX_CONNECTIONS, descriptor_limit // DESCRIPTOR_SHARE))


def protocol(limit: int) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with the bounds above, `limit` open connections at most."""

    class Bounded(H11Protocol):
        opened = 0.0
        _head_timer: asyncio.TimerHandle | None = None
        _send_timer: asyncio.TimerHandle | None = None  # set while an answer waits for the client to read

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            # Writing pauses as soon as a byte waits in the process (the kernel's buffer is full),
            # not at 64 KiB: else a close() with less waiting would hold the descriptor for ever.
            transport.set_write_buffer_limits(high=0)
            self.opened = time.monotonic()
            self._await_head()
            open_ = [c for c in self.connections if isinstance(c, Bounded) and not c.transport.is_closing()]
            if len(open_) > limit:
                waiting = [c for c in open_ if c is not self and c.waiting()]
                min(waiting, key=lambda c: c.opened, default=self).close()

        def waiting(self) -> bool:
            """Waiting for a request (or for the rest of its head), or for its client to read an
            answer: nothing the client wants lost by closing it."""
            return self.cycle is None or self.cycle.response_complete or self._send_timer is not None

        def close(self) -> None:
            """Closed now: an answer waiting for the client to read is dropped (close() would wait for it)."""
            if self._send_timer is not None:
                self.transport.abort()
            else:
                self.transport.close()

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._send_timer is None:  # also after a close(): it waits for the same bytes to go
                self._send_timer = self.loop.call_later(HEAD_TIMEOUT_S, self.transport.abort)

        def resume_writing(self) -> None:
            self._sent()
            super().resume_writing()

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:  # a whole request head came: the app has it now
                self._head_came()

        def on_response_complete(self) -> None:
            self._await_head()  # the next request's head (a pipelined one, come already, cancels it)
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_came()
            self._sent()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._head_came()
            self._head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self.transport.close)

        def _head_came(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _sent(self) -> None:
            if self._send_timer is not None:
                self._send_timer.cancel()
                self._send_timer = None

    return Bounded


class AcceptFailures:
    """The event loop's exception handler: an accept that failed for want of descriptors (or
    memory) logged once per `every_s`, with how many failed since; anything else as asyncio
    logs it."""

    MESSAGE = "socket.accept() out of system resource"  # asyncio's words for it

    def __init__(self, every_s: float = ACCEPT_LOG_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self.clock = clock
        self.last: float | None = None
        self.unsaid = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != self.MESSAGE:
            loop.default_exception_handler(context)
            return
        self.unsaid += 1
        now = self.clock()
        if self.last is not None and now - self.last < self.every_s:
            return
        exc = context.get("exception")
        log.warning("web UI cannot accept a connection; retrying", failures=self.unsaid,
                    error=getattr(exc, "strerror", None) or str(exc), next_said_after_s=self.every_s)
        self.last, self.unsaid = now, 0
