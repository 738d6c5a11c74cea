"""The `retrod` command's entry point: `retrod report`, `brief`, `sessions`, `trends`, `lessons`
and `phases` are first offered to the running daemon (fastpath/client.py, standard library only),
and `retrod statusline` only ever asks it (statusline/client.py, the same); everything else, and
what no daemon answers, is parsed (arguments.py, standard library only) and goes to the full
command line in cli/commands.py."""

from __future__ import annotations

import os
import sys

# Commands that open the database. On the embedded default, one that finds the private cluster
# stopped starts it on a thread while the command line loads its libraries (as long, ~0.25 s).
DATABASE_COMMANDS = frozenset({"report", "track", "phase", "phases", "sessions", "trends", "brief", "lessons", "status",
                               "migrate"})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["statusline"]:  # after every message of Claude's: nothing more is loaded
        from ..statusline import client as statusline

        return statusline.main()
    from ..fastpath import (
        client,  # standard library only: the daemon is asked first when it serves the command
    )

    if argv and (argv[0] == "report" or argv[0] in client.SERVED_COMMANDS):
        if argv[0] == "report":
            code = client.main(argv[1:])
        else:  # the hook's brief, else the command as the daemon serves it (served.py)
            code = client.brief_main(argv[1:]) if argv[0] == "brief" else None
            code = client.command_main(argv) if code is None else code
        if code is not None:
            return code
    from .arguments import parser

    args = parser().parse_args(argv)  # a mistyped command exits 2 here, before anything starts
    if args.command == "statusline" and args.action is None:  # `retrod --debug statusline`: still exit 0
        from ..statusline import client as statusline

        return statusline.main()
    env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith("RETROD_")}  # as Settings reads it
    if args.command in DATABASE_COMMANDS and "RETROD_DATABASE_URL" not in env:
        _start_cluster_ahead(args.debug, env)
    from .commands import execute

    return execute(args)


def _start_cluster_ahead(debug: bool, env: dict[str, str]) -> None:
    """Only a cluster that exists: creating one is left to the command, once it has checked
    the rest of what it was given."""
    from pathlib import Path

    from ..basics import log
    from ..basics.paths import default_data_dir
    from ..service.cluster import Cluster

    bindir = Path(env["RETROD_PG_BINDIR"]) if "RETROD_PG_BINDIR" in env else None
    data_dir = env["RETROD_DATA_DIR"] if "RETROD_DATA_DIR" in env else default_data_dir()
    cluster = Cluster(Path(data_dir), bindir, env.get("RETROD_PG_OS_USER", "postgres"))
    if (cluster.pgdata / "PG_VERSION").exists():
        log.configure("DEBUG" if debug else "WARNING")  # as cli/commands.py will: short commands are quiet
        cluster.start_ahead()
