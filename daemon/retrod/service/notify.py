"""sd_notify: telling systemd (Type=notify) that retrod is ready, alive, or stopping.

A dozen lines over the datagram socket named by NOTIFY_SOCKET; a no-op outside systemd.
"""

from __future__ import annotations

import os
import socket


def notify(*fields: str) -> bool:
    """Send `READY=1`, `WATCHDOG=1`, `STOPPING=1`, `STATUS=…`, `EXTEND_TIMEOUT_USEC=…`.

    Returns whether a notification socket was there to send to. Never raises: systemd being
    away must not stop the daemon.
    """
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall("\n".join(fields).encode())
        return True
    except OSError:
        return False


def watchdog_interval_s() -> float | None:
    """Half the WatchdogSec systemd asked for (WATCHDOG_USEC), when it is meant for this process."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return int(usec) / 2_000_000
    except ValueError:
        return None
