"""The daemon's answer to `retrod statusline` (retrod run registers it on the fast path's server):
the status line's figures as JSON (figures.py), after the session's files are brought up to
date; what the status line reported is kept. Errors are one line, as the report's: the command
shows what its input alone gives, with a mark."""

from __future__ import annotations

import json
from pathlib import Path

import structlog
from psycopg_pool import ConnectionPool

from ..basics.errors import UserError
from ..fastpath.server import Answer, away_after_s_of, one_line
from ..ingest.ingester import Ingester
from ..report.prices import load as load_prices
from ..settings import Settings
from ..store.store import Store
from . import figures as statusline

log = structlog.get_logger(__name__)

KEPT_STATUS_MAX = 1000  # sessions whose last status is remembered: a few bytes each


class StatuslineAnswer:
    def __init__(self, pool: ConnectionPool, settings: Settings) -> None:
        self.pool = pool
        self.settings = settings
        # What each session's status line last reported, as kept: most renders bring nothing new
        # (a timed refresh, the same message's figures), and then cost no statement.
        self._kept_status: dict[str, dict] = {}

    def __call__(self, request: dict[str, str]) -> Answer:
        away_after_s = away_after_s_of(request)
        if away_after_s is None:
            return "2", "retrod: error: configuration: RETROD_AWAY_AFTER_S is not a positive number\n", ""
        session = statusline.session_id(request.get("session"))
        try:
            prices = load_prices(request.get("RETROD_PRICES"))
            if session is not None:
                # Its files: those stored, and new ones beside its transcript (Claude Code says where)
                near = [Path(request["transcript_path"]).parent] if request.get("transcript_path") else []
                roots = self.settings.projects_roots()
                Ingester(Store(self.pool, self.settings.host_id), roots, self.settings.batch_bytes).refresh(
                    session, near)
            with self.pool.connection() as conn:
                status = statusline.status_fields(request)
                if (session is not None and self._kept_status.get(session) != status
                        and statusline.save_status(conn, session, status)):
                    if len(self._kept_status) >= KEPT_STATUS_MAX:
                        self._kept_status.clear()
                    self._kept_status[session] = status
                figures = statusline.figures(conn, session, statusline.day_bounds(request), away_after_s, prices)
        except UserError as exc:  # the user's to fix (basics/errors.py), worded as the command words it
            return "2", f"retrod: error: {exc.prefix}{one_line(exc)}\n", ""
        except Exception as exc:  # noqa: BLE001 - one line for the command; the daemon goes on
            log.warning("status line request failed", error=f"{type(exc).__name__}: {exc}")
            return "1", f"retrod: error: {one_line(exc)}\n", ""
        return "0", "", json.dumps(figures)
