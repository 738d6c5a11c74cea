"""Hiding passwords in what retrod prints: `status`, `doctor`, `service install --dry-run` and
`skills install` all show a database URL or settings that may hold one. Standard library only,
and nothing of retrod's: every room that prints settings may import it."""

from __future__ import annotations

import re


def mask_password(dsn: str) -> str:
    """A libpq URL or keyword string with its passwords hidden (`password`, `sslpassword`), in
    any form libpq reads: `user:secret@` or `?password=secret` in a URL; `password=secret`,
    quoted or with escaped spaces, in keyword form. Several lines (an environment file) are
    masked one by one."""
    if "\n" in dsn:
        return "\n".join(mask_password(line) for line in dsn.split("\n"))
    if "://" in dsn:
        dsn = re.sub(r"(://[^:/@?\s]*):[^@\s]*@", r"\1:***@", dsn)
        return re.sub(r"([?&](?:ssl)?password=)[^&\s\"]*", r"\1***", dsn, flags=re.IGNORECASE)
    return re.sub(r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:\\.|[^\s\\'\"])+)", r"\1***", dsn,
                  flags=re.IGNORECASE)
