"""Short commands on the embedded default, without a daemon: what a user of the skills meets.

- start and stop: the private cluster started and stopped once (the floor of a command that
  finds it stopped), median;
- report: `retrod report <uuid> --format json --no-save` as a whole process, the cluster stopped
  before it (so it starts it, brings the session up to date, answers, and stops it), median;
- twenty mixed commands at once (reports, phase logs, phases, status, sessions): wall time, and
  how many succeeded;
- `retrod sessions` over many sessions: the query in-process (newest first, and the slower of
  `--sort tokens` and `--sort efficiency`), and the whole command.
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg

from corpus import write_many
from harness import median_seconds, retrod_env
from retrod import tracking
from retrod.service.cluster import Cluster


def run(scratch: Path, smoke: bool) -> dict:
    files, runs = (200, 3) if smoke else (10_000, 7)
    projects = scratch / "cmd" / "projects"
    write_many(projects, files)
    data = scratch / "cmd" / "d"
    env = retrod_env(projects, data)
    cluster = Cluster(data)

    def retrod(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True)

    done = retrod("run", "--once")
    if done.returncode != 0:
        raise RuntimeError(f"retrod run --once failed: {done.stderr[-500:]}")
    session = next(projects.glob("*/*.jsonl")).stem

    def start_stop() -> None:
        cluster.ensure_running()
        cluster.stop()

    def report() -> None:
        subprocess.run([sys.executable, "-m", "retrod", "report", session, "--format", "json", "--no-save"],
                       env=env, check=True, capture_output=True)

    results: dict = {"sessions": files, "start_stop_s": median_seconds(start_stop, runs),
                     "report_no_daemon_s": median_seconds(report, runs)}
    mixed = [("report", session, "--format", "json", "--no-save")] * 6 + [
        ("phase", "log", "--session", session, "--task", "bench", "--phase", f"p{n}",
         "--start", f"2020-01-01T00:{n:02d}:00Z", "--end", f"2020-01-01T00:{n:02d}:30Z", "--verdict", "small_impact")
        for n in range(6)] + [("phases", session)] * 3 + [("status",)] * 3 + [("sessions",)] * 2
    start = time.perf_counter()
    with ThreadPoolExecutor(len(mixed)) as pool:
        codes = [d.returncode for d in pool.map(lambda args: retrod(*args), mixed)]
    results.update(concurrent_commands=len(mixed), concurrent_ok=codes.count(0),
                   concurrent_s=time.perf_counter() - start)
    results["sessions_process_s"] = median_seconds(lambda: retrod("sessions", "--limit", "20"), runs)
    with cluster.in_use(), psycopg.connect(cluster.url()) as conn:
        results["sessions_query_ms"] = 1000 * median_seconds(
            lambda: tracking.recent_sessions(conn, project=None, since=None, limit=20), runs)
        # the other orders add up every session's rollups before the limit
        results["sessions_sorted_query_ms"] = 1000 * max(median_seconds(
            lambda s=sort: tracking.recent_sessions(conn, project=None, since=None, limit=20, sort=s), runs)
            for sort in ("tokens", "efficiency"))
    results["report_vs_start_stop"] = results["report_no_daemon_s"] / results["start_stop_s"]
    return results


def table(r: dict) -> list[str]:
    return [("| sessions | start + stop the cluster | report, no daemon, cluster stopped | ratio "
             "| 20 mixed commands at once | `retrod sessions`: query / whole command "
             "| query, `--sort tokens\\|efficiency` |"),
            "|---:|---:|---:|---:|---:|---:|---:|",
            (f"| {r['sessions']:,} | {r['start_stop_s'] * 1000:.0f} ms | {r['report_no_daemon_s'] * 1000:.0f} ms "
             f"| {r['report_vs_start_stop']:.2f}× | {r['concurrent_ok']}/{r['concurrent_commands']} ok in "
             f"{r['concurrent_s']:.1f} s | {r['sessions_query_ms']:.1f} ms "
             f"/ {r['sessions_process_s'] * 1000:.0f} ms | {r['sessions_sorted_query_ms']:.1f} ms |")]
