"""The web UI in the daemon: uvicorn on a thread of its own, with its own event loop, on
127.0.0.1:RETROD_UI_PORT; stopped with the daemon.

The socket is bound here, before the thread starts, so that a port in use is one clear warning
at the daemon's start (the daemon goes on without its UI), not an exit inside uvicorn's thread.
"""

from __future__ import annotations

import socket
import threading
import time

import structlog
import uvicorn
from psycopg_pool import ConnectionPool

from ..settings import Settings
from . import app, secret
from .hub import Hub

log = structlog.get_logger(__name__)

HOST = "127.0.0.1"
STOP_WAIT_S = 5.0


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
            # IPPROTO_TCP said outright: asyncio sets TCP_NODELAY only on sockets that say it, and
            # without it every kept-alive answer waited ~40 ms (Nagle against delayed ACKs).
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart while old connections linger
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock.bind((HOST, self.port))
                sock.listen(64)
            except OSError:
                sock.close()
                raise
        except OSError as exc:
            log.warning("web UI off: cannot listen; set RETROD_UI_PORT to a free port (0: off)",
                        address=f"{HOST}:{self.port}", error=exc.strerror or str(exc))
            return self
        self.port = sock.getsockname()[1]
        hub = Hub(app.live_figures(self.pool, self.settings))
        config = uvicorn.Config(app.guarded(self.pool, self.settings, token, self.port, hub),
                                log_config=None, log_level="warning", access_log=False, lifespan="on",
                                loop="asyncio", http="h11", ws="none", timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name="web ui",
                                        daemon=True)
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
