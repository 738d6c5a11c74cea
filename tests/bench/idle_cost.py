"""Idle cost: CPU and memory of the daemon following many transcripts while nothing is written.

The daemon (`retrod run`, default settings) catches up on a tree of small real transcripts, then
is watched for a while: CPU from /proc/<pid>/stat (user + system time over wall time), RSS from
/proc/<pid>/status each second (Linux only). PostgreSQL's own processes are not counted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from corpus import write_many
from harness import daemon, database, rss_mb, wait_for_log

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def run(scratch: Path, files: int, seconds: float) -> dict:
    projects = scratch / "idle" / "projects"
    write_many(projects, files)
    with database(scratch, "idle") as url, daemon(url, projects, scratch / "idle" / "data") as process:
        caught_up = wait_for_log(scratch / "idle" / "data" / "daemon.log", "caught up", process, 600)
        time.sleep(2)  # let the watcher settle after the catch-up
        cpu_start, wall_start = _cpu_s(process.pid), time.monotonic()
        rss = []
        while time.monotonic() - wall_start < seconds:
            rss.append(rss_mb(process.pid))
            time.sleep(1)
        cpu = (_cpu_s(process.pid) - cpu_start) / (time.monotonic() - wall_start)
    return {"files": files, "catch_up_s": caught_up["seconds"], "seconds": seconds,
            "cpu_percent": 100 * cpu, "rss_mb_max": max(rss), "rss_mb_end": rss[-1]}


def table(r: dict) -> list[str]:
    return ["| transcript files | catch-up | watched for | CPU | RSS (max) |", "|---:|---:|---:|---:|---:|",
            (f"| {r['files']:,} | {r['catch_up_s']:.1f} s | {r['seconds']:.0f} s | {r['cpu_percent']:.2f} % "
             f"| {r['rss_mb_max']:.0f} MB |")]
