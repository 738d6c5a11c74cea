"""Default locations, standard library only: the command's fast path reads them without pydantic."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def default_data_dir() -> Path:
    if os.geteuid() == 0 and sys.platform != "darwin":
        return Path("/var/lib/retrod")  # the server's OS user could not reach /root
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "retrod"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "retrod"


def default_reports_dir() -> Path:
    return Path.home() / "session-retrospective" / "reports"
