"""The web UI in the daemon: uvicorn on a thread of its own, with its own event loop, on
127.0.0.1:RETROD_UI_PORT; stopped with the daemon.

The socket is bound here, before the thread starts, so that a port in use is one clear warning
at the daemon's start (the daemon goes on without its UI), not an exit inside uvicorn's thread.
What the port may take is bounded (connections.py): it must never cost the daemon its descriptors.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import threading
import time

import structlog
import uvicorn
from psycopg_pool import ConnectionPool

from ..settings import Settings
from . import app, connections, secret
from .hub import Hub

log = structlog.get_logger(__name__)

HOST = "127.0.0.1"
STOP_WAIT_S = 5.0
# Connections the kernel holds for the server before it accepts them: asyncio accepts them all
# at once, before any can be closed, so this many descriptors may come on top of the bound.
BACKLOG = 64


class UiServer:
    """`with UiServer(pool, settings) as ui:` serves the UI; `ui.publish` is the committer's listener."""

    def __init__(self, pool: ConnectionPool, settings: Settings) -> None:
        self.pool = pool
        self.settings = settings
        self.port = settings.ui_port
        self.hub: Hub | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def publish(self, sessions: set[str]) -> None:
        if self.hub is not None:
            self.hub.publish(sessions)

    def __enter__(self) -> UiServer:
        try:
            token = secret.load_or_create(self.settings.data_dir)
        except (secret.TokenFileError, OSError) as exc:
            log.warning("web UI off: its token file cannot be used", error=str(exc))
            return self
        try:
            # IPPROTO_TCP said outright: asyncio sets TCP_NODELAY only on sockets that say it, and
            # without it every kept-alive answer waited ~40 ms (Nagle against delayed ACKs).
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart while old connections linger
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock.bind((HOST, self.port))
                sock.listen(BACKLOG)
            except OSError:
                sock.close()
                raise
        except OSError as exc:
            log.warning("web UI off: cannot listen; set RETROD_UI_PORT to a free port (0: off)",
                        address=f"{HOST}:{self.port}", error=exc.strerror or str(exc))
            return self
        self.port = sock.getsockname()[1]
        hub = Hub(app.live_figures(self.pool, self.settings))
        limit = connections.bound(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        config = uvicorn.Config(app.guarded(self.pool, self.settings, token, self.port, hub),
                                # error: uvicorn warns of each malformed request, which anyone
                                # may send as fast as they like (the answer, 400, says it)
                                log_config=None, log_level="error", access_log=False, lifespan="on",
                                loop="asyncio", http=connections.protocol(limit), ws="none",
                                timeout_graceful_shutdown=2, backlog=BACKLOG,
                                timeout_keep_alive=connections.KEEP_ALIVE_S,
                                h11_max_incomplete_event_size=connections.HEAD_MAX_BYTES)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, args=(self._server, sock), name="web ui", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            log.warning("web UI off: the server did not start", address=f"{HOST}:{self.port}")
            self._stop()
            return self
        self.hub = hub
        # The address without the token: `retrod ui` prints the whole one; logs never hold a secret.
        log.info("web UI", url=f"http://{HOST}:{self.port}/", open_with="retrod ui")
        return self

    @staticmethod
    def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
        async def serving() -> None:
            asyncio.get_running_loop().set_exception_handler(connections.AcceptFailures())
            await server.serve(sockets=[sock])

        asyncio.run(serving())

    def __exit__(self, *_exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.hub is not None:
            self.hub.close_streams_soon()  # open live pages: their streams end now, not at the timeout
            self.hub = None
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)
            if self._thread.is_alive():
                log.warning("web UI did not stop in time; leaving it to the process's end")
        self._server = self._thread = None
