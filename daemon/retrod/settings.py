"""Configuration: `RETROD_*` environment variables (see the table in docs/reference.md)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .basics.paths import default_data_dir, default_reports_dir

# accounting.md §2.3's default. report/model.py has the same number as its own functions' default; it is
# written here too, not imported from there, so that settings sits below the report (which reads
# settings) and the rooms stay a layering (docs/architecture.md); tests/test_layers.py holds the
# two equal.
AWAY_AFTER_S = 1800.0


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RETROD_", extra="ignore")

    database_url: str | None = Field(
        None, description="libpq URL of the database; unset = a private cluster under data_dir")
    projects_dir: str | None = Field(
        None, description="transcript root(s), comma-separated; default per CLAUDE_CONFIG_DIR")
    data_dir: Path = Field(default_factory=lambda: Path(default_data_dir()),
                           description="where the private PostgreSQL cluster lives")
    reports_dir: Path = Field(default_factory=lambda: Path(default_reports_dir()),
                              description="where `retrod report` saves its Markdown")
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    host_id: str = Field(default_factory=socket.gethostname,
                         description="names this machine's files when several share a database")
    scan_interval_s: float = Field(300.0, gt=0, allow_inf_nan=False,
                                   description="seconds between reconciliation scans")
    watch_debounce_ms: int = Field(50, ge=0, description="watcher debounce; watchfiles' own is 1600")
    idle_close_s: float = Field(4 * 3600, gt=0, allow_inf_nan=False,
                                description="a tracked session quiet this long is closed")
    away_after_s: float = Field(AWAY_AFTER_S, gt=0, allow_inf_nan=False,
                                description="a human pause longer than this is `away` (accounting.md §2.3)")
    prices: Path | None = Field(None, description="a JSON price table whose models replace genai-prices'"
                                                  " prices of them (flat USD per million tokens)")
    watch_polling: bool = Field(False, description="poll instead of inotify/FSEvents (network file systems)")
    batch_bytes: int = Field(4 << 20, ge=4096, description="bytes of a file folded per transaction")
    pg_bindir: Path | None = Field(None, description="PostgreSQL server binaries for the private cluster")
    pg_os_user: str = Field("postgres", description="OS user that runs the private cluster when retrod runs as root")
    ui_port: int = Field(8377, ge=0, le=65535,
                         description="the daemon's web UI on 127.0.0.1 (`retrod ui`); 0 turns it off")

    @field_validator("prices", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value  # a variable set to nothing, as in a unit's env file

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ValueError("use DEBUG, INFO, WARNING or ERROR")
        return value.upper()

    def projects_roots(self) -> list[Path]:
        """accounting.md §2.1: RETROD_PROJECTS_DIR, else CLAUDE_CONFIG_DIR's, else ~/.claude (and ~/.config/claude)."""
        if self.projects_dir:
            return _unique(_absolute(p) for p in self.projects_dir.split(",") if p.strip())
        config_dirs = os.environ.get("CLAUDE_CONFIG_DIR", "")
        roots = _unique(_absolute(d) / "projects" for d in config_dirs.split(",") if d.strip())
        if roots:
            return roots
        roots = [_absolute("~/.claude/projects")]
        xdg = _absolute("~/.config/claude/projects")
        if xdg.is_dir():
            roots.append(xdg)
        return _unique(roots)  # ~/.config/claude may be a link to ~/.claude


def _unique(roots: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(roots))


def _absolute(path: str) -> Path:
    """Files are keyed by path: one spelling per file (no relative roots, no symlinked aliases)."""
    return Path(path.strip()).expanduser().resolve()
