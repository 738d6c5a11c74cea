"""Backfill throughput and memory of `retrod run --once`, against the bare read-and-decode floor.

    python tests/bench/ingest_throughput.py                 # 10 MB, 100 MB, 1 GB trees
    python tests/bench/ingest_throughput.py --sizes 10,100   # MB
    python tests/bench/ingest_throughput.py --smoke          # 2 MB, seconds

Each tree is made by corpus.write_tree (copies of the real fixture folders, seeded). For each:
- retrod: a fresh private cluster (initialised beforehand), `retrod run --once` as its own
  process; MB/s and lines/s from the catch-up time it logs (the whole process, start-up and
  cluster start/stop included, in brackets); peak RSS of the retrod process (not PostgreSQL's);
- floor: reading every file's lines and decoding each with msgspec (the same JSON library), no
  accounting, no database — what any reader of these files must at least do.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import write_tree  # noqa: E402

_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:]).returncode
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)
"""


def floor(root: Path) -> tuple[float, int]:
    decode = msgspec.json.Decoder().decode
    lines = 0
    start = time.perf_counter()
    for path in root.rglob("*.jsonl"):
        with path.open("rb") as f:
            for line in f:
                try:
                    decode(line)
                except (msgspec.DecodeError, RecursionError):
                    pass
                lines += 1
    return time.perf_counter() - start, lines


def retrod_once(root: Path, data: Path) -> tuple[float, float, int]:
    """(seconds of the catch-up as the daemon logs it, seconds of the whole process, peak RSS KB)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_PROJECTS_DIR=str(root), RETROD_DATA_DIR=str(data), RETROD_LOG_LEVEL="INFO")
    subprocess.run([sys.executable, "-m", "retrod.cli", "migrate"], env=env, check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m", "retrod.cli", "run", "--once"],
                         env=env, check=True, capture_output=True, text=True)
    seconds, rss_kb, code = out.stdout.split()
    if code != "0":
        raise SystemExit(f"retrod run --once failed ({code}): {out.stderr[-500:]}")
    caught_up = next(json.loads(line) for line in out.stderr.splitlines()
                     if line.startswith("{") and '"caught up"' in line)
    return caught_up["seconds"], float(seconds), int(rss_kb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000", help="tree sizes in MB, comma-separated")
    parser.add_argument("--smoke", action="store_true", help="one 2 MB tree, a few seconds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    sizes = [2.0] if args.smoke else [float(s) for s in args.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="retrod-ingest-", dir="/tmp") as tmp:
        os.chmod(tmp, 0o711)
        for mb in sizes:
            root = Path(tmp) / f"tree-{mb:g}" / "projects"
            size = write_tree(root, int(mb * 1e6))
            floor_s, lines = floor(root)
            retrod_s, process_s, rss_kb = retrod_once(root, Path(tmp) / f"data-{mb:g}")
            results.append({"mb": round(size / 1e6, 1), "lines": lines, "process_s": round(process_s, 2),
                            "retrod_s": round(retrod_s, 2), "retrod_mb_s": round(size / 1e6 / retrod_s, 1),
                            "retrod_lines_s": round(lines / retrod_s), "retrod_peak_rss_mb": round(rss_kb / 1024),
                            "floor_s": round(floor_s, 2), "floor_mb_s": round(size / 1e6 / floor_s, 1),
                            "retrod_vs_floor": round(floor_s / retrod_s, 3)})
            subprocess.run([sys.executable, "-c", "from retrod.service.cluster import Cluster; import sys;"
                            " Cluster(sys.argv[1]).stop()", str(Path(tmp) / f"data-{mb:g}")], check=False)
    print("| tree | lines | catch-up (whole process) | retrod MB/s | lines/s | peak RSS | floor MB/s | retrod / floor |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['mb']} MB | {r['lines']:,} | {r['retrod_s']} s ({r['process_s']} s) | {r['retrod_mb_s']} "
              f"| {r['retrod_lines_s']:,} "
              f"| {r['retrod_peak_rss_mb']} MB | {r['floor_mb_s']} | {r['retrod_vs_floor']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
