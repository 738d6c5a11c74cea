"""Who asked for the command being run: its working folder, its environment, its process and
whether its output is a terminal. A command in its own process reads its own; a command the
daemon serves over its socket (fastpath/client.py) reads its client's, set for the thread that
serves it. Every place that needs one of these asks here, so that both ways give one answer.

The daemon runs each served command's `print`s into buffers of its own: `Routed` stands for
sys.stdout and sys.stderr in the daemon, writing to the served command's buffer on the thread
serving it and to the real stream everywhere else (the daemon's own log lines included).
Standard library only: the status line's and the socket client's start-up import nothing more."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO


@dataclass(frozen=True)
class Invocation:
    cwd: Path | None  # None: the folder was deleted under the command
    env: Mapping[str, str]
    pid: int  # the process whose ancestors may be Claude Code (resolve.py)
    stdout_tty: bool
    out: io.StringIO = field(default_factory=io.StringIO)
    err: io.StringIO = field(default_factory=io.StringIO)


_served: ContextVar[Invocation | None] = ContextVar("retrod_served_invocation", default=None)


def served() -> Invocation | None:
    """The client's invocation when the daemon serves this command, else None."""
    return _served.get()


def env() -> Mapping[str, str]:
    current = _served.get()
    return os.environ if current is None else current.env


def pid() -> int:
    current = _served.get()
    return os.getpid() if current is None else current.pid


def cwd() -> Path:
    """The working folder, absolute; OSError when it is gone."""
    current = _served.get()
    if current is None:
        return Path.cwd()
    if current.cwd is None:
        raise FileNotFoundError("the working directory is gone")
    return current.cwd


def absolute(path: Path) -> Path:
    """`path` made absolute against the command's working folder (not normalised)."""
    return path if path.is_absolute() else cwd() / path


@contextmanager
def serving(invocation: Invocation) -> Iterator[Invocation]:
    """Run a served command on this thread: what it prints goes to `invocation.out` / `.err`."""
    _route_standard_streams()
    token = _served.set(invocation)
    try:
        yield invocation
    finally:
        _served.reset(token)


class Routed(io.TextIOBase):
    """sys.stdout or sys.stderr in a daemon that serves commands (see the module's text)."""

    def __init__(self, real: TextIO, name: str) -> None:
        self.real = real
        self._name = name  # "out" or "err": the Invocation buffer it routes to

    def _target(self):
        current = _served.get()
        return self.real if current is None else getattr(current, self._name)

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        current = _served.get()
        if current is None:
            return self.real.isatty()
        return current.stdout_tty if self._name == "out" else False

    def fileno(self) -> int:
        if _served.get() is not None:
            raise io.UnsupportedOperation("a served command's output is a buffer")
        return self.real.fileno()

    @property
    def buffer(self):  # raw bytes (e.g. a hook's answer): the real stream's
        if _served.get() is not None:
            raise io.UnsupportedOperation("a served command's output is text")
        return self.real.buffer

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.real.encoding


def unrouted(stream):
    """The real stream behind a Routed one (the daemon's log lines stay the daemon's)."""
    return stream.real if isinstance(stream, Routed) else stream


def _route_standard_streams() -> None:
    if not isinstance(sys.stdout, Routed):
        sys.stdout = Routed(sys.stdout, "out")
    if not isinstance(sys.stderr, Routed):
        sys.stderr = Routed(sys.stderr, "err")
