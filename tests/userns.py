"""Run a command in a user namespace of its own, with one of that namespace's inotify limits set.

    python userns.py SETTING VALUE COMMAND...    # SETTING: max_inotify_watches, …, or - for none

The kernel counts inotify watches and instances per user namespace, against the limits in
/proc/sys/user/ of each namespace up the chain: a limit set here binds the command alone and
leaves the machine's own as they are. Run as root: every user is mapped into the namespace
(identity), so the command reaches the PostgreSQL server's socket as root would, except `nobody`
(65534): what it owns is unreadable in there, even to root — a folder of another user.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

CLONE_NEWUSER = 0x10000000
NOBODY = 65534
# inside outside count: everyone but NOBODY
MAP = f"0 0 {NOBODY}\n{NOBODY + 1} {NOBODY + 1} 1000000\n"


def main() -> None:
    setting, value, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    ready_r, ready_w = os.pipe()
    me = os.getpid()
    helper = os.fork()
    if helper == 0:  # stays outside, where it may write any mapping for the namespace
        os.close(ready_w)
        os.read(ready_r, 1)
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{me}/{name}").write_text(MAP)
        os._exit(0)
    os.close(ready_r)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
    os.write(ready_w, b".")
    os.close(ready_w)
    if os.waitpid(helper, 0)[1] != 0:
        sys.exit("userns.py: could not map the users")
    if setting != "-":
        Path(f"/proc/sys/user/{setting}").write_text(value)
    os.execvp(command[0], command)  # the same pid: signals reach the command


if __name__ == "__main__":
    main()
