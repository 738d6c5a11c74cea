"""The first ingest of the status line benchmark's history (issue 32's target), alone: ~600 MB of
copies of the fixture projects plus a 2 MB session written up to now (statusline.py's corpus),
caught up on by a running daemon against a fresh cluster, with the CPU seconds of the daemon
and of that cluster's PostgreSQL processes (a shared machine runs other jobs) and the daemon's
peak RSS. The status line benchmark measures the same catch-up before its own runs; this one
takes a minute, not ten, and can be run several times in turn with other code:

    python tests/bench/first_ingest.py                  # 600 MB, three rounds
    python tests/bench/first_ingest.py --mb 100 --rounds 1
    PYTHONPATH=<checkout>/daemon python tests/bench/first_ingest.py --tree <a projects folder>

(`--tree`: an existing history, e.g. one written by a run before, read as it is.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import write_tree
from harness import daemon, database, postgres_cpu_s, wait_for_log
from statusline import write_recent_session


def _process(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MB) of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    peak = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmHWM:"))
    return cpu, peak / 1024


def catch_up(scratch: Path, projects: Path) -> dict:
    """One daemon's catch-up of `projects` against a fresh cluster."""
    with database(scratch, "ingest") as url:
        cluster = scratch / "ingest-pg"
        before = postgres_cpu_s(cluster)
        with daemon(url, projects, scratch / "data") as process:
            caught_up = wait_for_log(scratch / "data" / "daemon.log", "caught up", process, 3600)
            retrod_cpu, peak_mb = _process(process.pid)
            postgres = postgres_cpu_s(cluster) - before
    shutil.rmtree(scratch / "ingest-pg")  # (stopped) the next round starts from a fresh cluster
    shutil.rmtree(scratch / "data")
    if caught_up.get("failed"):
        raise RuntimeError(f"{caught_up['failed']} files failed")
    return {"catch_up_s": caught_up["seconds"], "retrod_cpu_s": retrod_cpu, "postgres_cpu_s": postgres,
            "peak_rss_mb": peak_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", type=Path, help="an existing projects folder to read instead (--mb is ignored)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="retrod-ingest-", dir="/tmp") as folder:
        scratch = Path(folder)
        os.chmod(scratch, 0o711)  # as root, the cluster runs as postgres and must reach its folder
        projects = args.tree
        if projects is None:
            projects = scratch / "projects"
            write_tree(projects, int(args.mb * 1e6), seed=4)  # statusline.py's history
            write_recent_session(projects / "-home-me-code-app", 2_000_000)
        size = sum(p.stat().st_size for p in projects.rglob("*") if p.is_file())
        runs = [catch_up(scratch, projects) for _ in range(args.rounds)]
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(f"{size / 1e6:.0f} MB history, median of {args.rounds}")
    print("| catch-up | CPU: retrod + PostgreSQL | peak RSS |")
    print("|---:|---:|---:|")
    print(f"| {median['catch_up_s']:.2f} s | {median['retrod_cpu_s']:.2f} + {median['postgres_cpu_s']:.2f} s"
          f" | {median['peak_rss_mb']:.0f} MB |")


if __name__ == "__main__":
    main()
