"""What the benchmarks share: a throwaway PostgreSQL cluster, a running daemon, timing a process."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from retrod.service.cluster import Cluster
from retrod.store.migrate import migrate

# Runs a command and writes its wall time, the peak RSS of its largest process (the command's
# own children included, e.g. ccusage's native binary under its Node launcher) and its stderr.
_MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - start
with open(sys.argv[1], "w") as out:
    json.dump({"seconds": seconds, "rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
               "code": done.returncode, "stderr": done.stderr.decode("utf-8", "replace")}, out)
"""


@dataclass(frozen=True)
class Measured:
    seconds: float
    peak_rss_mb: float
    stderr: str


def measure(command: list[str], env: dict[str, str] | None = None) -> Measured:
    """Wall time and peak RSS of `command` (its stdout discarded); raises when it fails."""
    with tempfile.NamedTemporaryFile(suffix=".json") as result:
        subprocess.run([sys.executable, "-c", _MEASURE, result.name, *command], env=env, check=True)
        got = json.loads(Path(result.name).read_text())
    if got["code"] != 0:
        raise RuntimeError(f"{' '.join(command[:4])} … exited {got['code']}: {got['stderr'][-500:]}")
    return Measured(got["seconds"], got["rss_kb"] / 1024, got["stderr"])


def rss_mb(pid: int) -> float:
    """The resident memory of a running process (Linux: /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def median_seconds(fn, runs: int) -> float:
    """The median wall time of `runs` calls of `fn`."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@contextmanager
def database(scratch: Path, name: str) -> Iterator[str]:
    """A migrated database in a private cluster of its own; yields its URL."""
    cluster = Cluster(scratch / f"{name}-pg")
    cluster.ensure_running()
    try:
        cluster.create_database()
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            migrate(conn)
        yield cluster.url()
    finally:
        cluster.stop()


def retrod_env(projects: Path, data: Path, database_url: str | None = None) -> dict[str, str]:
    """The environment of a retrod command here: this one's, without the user's retrod and Claude
    Code settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RETROD_", "CLAUDE_CODE_")) and k != "CLAUDE_CONFIG_DIR"}
    # No web UI (its default port is one per machine) unless a benchmark asks for it (web_ui.py).
    env.update(RETROD_PROJECTS_DIR=str(projects), RETROD_DATA_DIR=str(data),
               RETROD_REPORTS_DIR=str(data / "reports"), RETROD_LOG_LEVEL="INFO", RETROD_UI_PORT="0")
    if database_url:
        env["RETROD_DATABASE_URL"] = database_url
    return env


def installed(env: dict[str, str], scratch: Path) -> dict[str, str]:
    """`env` for a retrod command timed as an installed one starts: with its modules' bytecode,
    written by its first run into a folder of the benchmark's (PYTHONPYCACHEPREFIX), where pip
    writes it at install. From a checkout with PYTHONDONTWRITEBYTECODE set (as the tests run), every
    start compiles retrod's modules again: ~5 ms of a command the daemon answers, ~0.1 s of one
    that works alone. Time a command once before timing it."""
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(scratch / "bytecode")
    return out


@contextmanager
def daemon(url: str, projects: Path, data: Path, **settings: str) -> Iterator[subprocess.Popen]:
    """`retrod run` on `projects`, against the database at `url`, with these RETROD_* `settings`
    besides; stopped (SIGTERM) on exit. Its log (JSON lines) goes to `data/daemon.log`."""
    data.mkdir(parents=True, exist_ok=True)
    env = {**retrod_env(projects, data, url), **settings}
    with (data / "daemon.log").open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env, stderr=log,
                                   stdout=subprocess.DEVNULL)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for_log(path: Path, event: str, process: subprocess.Popen, timeout_s: float) -> dict:
    """The first JSON log line of `event` the daemon writes; fails if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines():
            if line.startswith("{") and f'"event": "{event}"' in line:
                return json.loads(line)
        if process.poll() is not None:
            raise RuntimeError(f"the daemon exited ({process.returncode}): {path.read_text()[-1000:]}")
        time.sleep(0.1)
    raise RuntimeError(f"no {event!r} from the daemon within {timeout_s:.0f} s")


def postgres_cpu_s(cluster_dir: Path | None = None) -> float:
    """User and system CPU seconds of the running `postgres` processes (the backends this run
    holds open included); given the folder `database()` made the cluster in, only that
    cluster's (its postmaster and its children): other jobs' clusters on a shared machine are
    not counted."""
    postmaster = None
    if cluster_dir is not None:
        pids = list(cluster_dir.glob("**/postmaster.pid"))
        postmaster = int(pids[0].read_text().split()[0]) if pids else None
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if stat.with_name("comm").read_text().strip() == "postgres":
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if postmaster is not None and postmaster not in (int(stat.parent.name), int(fields[1])):
                    continue
                ticks += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return ticks / os.sysconf("SC_CLK_TCK")
