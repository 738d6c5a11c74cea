"""structlog: JSON lines on stderr when not a TTY (journald/launchd keep them), pretty on a TTY."""

from __future__ import annotations

import logging
import sys

import structlog

from .invocation import unrouted


class _StderrLogger(structlog.PrintLogger):
    """A log line that cannot be written (a full disk under launchd's log file, a closed pipe)
    is dropped: logging must never stop the daemon."""

    def msg(self, message: str) -> None:
        try:
            super().msg(message)
        except (OSError, ValueError):
            pass

    log = debug = info = warn = warning = err = error = critical = exception = fatal = failure = msg


def configure(level: str = "INFO") -> None:
    numeric = logging.getLevelName(level.upper())
    renderer = (structlog.dev.ConsoleRenderer() if sys.stderr.isatty()
                else structlog.processors.JSONRenderer())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # The daemon's own lines, not a served command's stderr (invocation.py routes that one)
        logger_factory=lambda *_args: _StderrLogger(unrouted(sys.stderr)),
        cache_logger_on_first_use=False,
    )
