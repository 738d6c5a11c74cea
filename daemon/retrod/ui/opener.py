"""`retrod ui`'s way into the browser: an owner-only local file that sends it on to the UI's
address, as Jupyter's redirect file does.

A browser started with the address itself carries the token on its command line, which every
local user can read (`ps`, /proc); started with this file's path, it carries only the path, and
the file is readable by its owner only, as the token's own file is (issue 28).
"""

from __future__ import annotations

import html
import os
import tempfile
from pathlib import Path

FILE_NAME = "ui-open.html"


def path(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


def write(data_dir: Path, address: str) -> Path:
    """The file, written whole, mode 0600 from the start: made under a new name (O_EXCL), then
    renamed over the last one, so that a link put in its place is replaced, never followed."""
    shown = html.escape(address, quote=True)
    page = (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="refresh" content="0; url={shown}">\n<link rel="icon" href="data:,">\n'
            f'<title>retrod</title></head>\n'
            f'<body><p>Opening retrod… If nothing happens, <a href="{shown}">open the web UI</a>.</p></body></html>\n')
    fd, made = tempfile.mkstemp(prefix=".ui-open-", suffix=".html", dir=data_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        os.replace(made, path(data_dir))
    except BaseException:
        Path(made).unlink(missing_ok=True)
        raise
    return path(data_dir)
