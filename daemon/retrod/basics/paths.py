"""Default locations, standard library only: the report's fast path reads them too."""

from __future__ import annotations

import os
import sys


def default_data_dir() -> str:
    if os.geteuid() == 0 and sys.platform != "darwin":
        return "/var/lib/retrod"  # the server's OS user could not reach /root
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Application Support", "retrod")
    return os.path.join(os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"), "retrod")


def default_reports_dir() -> str:
    return os.path.join(os.path.expanduser("~"), "session-retrospective", "reports")
