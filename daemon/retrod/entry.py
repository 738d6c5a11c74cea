"""The `retrod` command's entry point: `retrod report` is first offered to the running daemon
(report/client.py, standard library only); everything else, and a report no daemon answers,
goes to the full command line in cli.py."""

from __future__ import annotations

import os
import sys

# Commands that open the database. On the embedded default, one that finds the private cluster
# stopped starts it on a thread while the command line loads its libraries (as long, ~0.3 s).
DATABASE_COMMANDS = frozenset({"report", "track", "phase", "phases", "sessions", "status", "migrate"})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:
        from .report import client

        code = client.main(argv[1:])
        if code is not None:
            return code
    env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith("RETROD_")}  # as Settings reads it
    if argv[:1] and argv[0] in DATABASE_COMMANDS and "RETROD_DATABASE_URL" not in env \
            and not {"-h", "--help"} & set(argv):
        _start_cluster_ahead(argv, env)
    from .cli import main as full

    return full(argv)


def _start_cluster_ahead(argv: list[str], env: dict[str, str]) -> None:
    from pathlib import Path

    from . import log
    from .paths import default_data_dir
    from .service.cluster import Cluster

    log.configure("DEBUG" if "--debug" in argv else "WARNING")  # as cli.py will: short commands are quiet

    bindir = env.get("RETROD_PG_BINDIR")
    data_dir = env["RETROD_DATA_DIR"] if "RETROD_DATA_DIR" in env else default_data_dir()
    Cluster(Path(data_dir), Path(bindir) if bindir else None, env.get("RETROD_PG_OS_USER", "postgres")).start_ahead()
