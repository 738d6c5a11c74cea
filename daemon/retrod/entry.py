"""The `retrod` command's entry point: `retrod report` is first offered to the running daemon
(report/client.py, standard library only); everything else, and a report no daemon answers,
goes to the full command line in cli.py."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:
        from .report import client

        code = client.main(argv[1:])
        if code is not None:
            return code
    from .cli import main as full

    return full(argv)
