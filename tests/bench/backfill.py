"""Backfill: `retrod run --once` on a fresh tree, against the bare decode floor and ccusage.

For each tree (corpus.write_tree, seeded):
- retrod: a fresh private cluster (created beforehand), `retrod run --once` as its own process;
  MB/s and lines/s from the catch-up time it logs (the whole process, start-up and cluster
  start/stop included, also kept); peak RSS of the retrod process (PostgreSQL's is not counted);
- floor: reading every file's lines and decoding each with msgspec (the JSON library retrod
  uses), into Python objects, no accounting and no database: what any reader must at least do;
- ccusage: `ccusage claude session --json --offline` on the same tree, the whole process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from corpus import write_tree
from harness import measure, retrod_env
from peers import Ccusage
from retrod.service.cluster import Cluster


def decode_lines(root: Path, decode: Callable[[bytes], object], clock: Callable[[], float] = time.perf_counter,
                 ) -> tuple[float, int]:
    """(seconds by `clock`, lines) of reading every transcript line under `root` and decoding it."""
    lines = 0
    start = clock()
    for path in root.rglob("*.jsonl"):
        with path.open("rb") as f:
            for line in f:
                try:
                    decode(line)
                except (msgspec.DecodeError, RecursionError):
                    pass  # (an odd line: retrod's parser decodes it again, leniently)
                lines += 1
    return clock() - start, lines


def floor(root: Path) -> tuple[float, int]:
    """(seconds, lines) of reading and decoding every transcript line under `root` into Python objects."""
    return decode_lines(root, msgspec.json.Decoder().decode)


def retrod_once(projects: Path, data: Path) -> dict:
    env = retrod_env(projects, data)
    subprocess.run([sys.executable, "-m", "retrod", "migrate"], env=env, check=True, capture_output=True)
    run = measure([sys.executable, "-m", "retrod", "run", "--once"], env)
    caught_up = next(json.loads(line) for line in run.stderr.splitlines()
                     if line.startswith("{") and '"caught up"' in line)
    if caught_up["failed"]:
        raise RuntimeError(f"retrod failed on {caught_up['failed']} files: {run.stderr[-1000:]}")
    return {"catch_up_s": caught_up["seconds"], "process_s": run.seconds, "peak_rss_mb": run.peak_rss_mb,
            "lines": caught_up["lines"]}


def run(scratch: Path, sizes_mb: list[float], ccusage: Ccusage | None) -> list[dict]:
    results = []
    for mb in sizes_mb:
        claude_dir = scratch / f"tree-{mb:g}"
        size = write_tree(claude_dir / "projects", int(mb * 1e6))
        floor_s, lines = floor(claude_dir / "projects")
        retrod = retrod_once(claude_dir / "projects", scratch / f"data-{mb:g}")
        Cluster(scratch / f"data-{mb:g}").stop()  # `run --once` stopped it; this makes sure
        row = {"mb": round(size / 1e6, 1), "lines": lines, "retrod_catch_up_s": round(retrod["catch_up_s"], 2),
               "retrod_process_s": round(retrod["process_s"], 2),
               "retrod_mb_s": round(size / 1e6 / retrod["catch_up_s"], 1),
               "retrod_lines_s": round(lines / retrod["catch_up_s"]),
               "retrod_peak_rss_mb": round(retrod["peak_rss_mb"]),
               "floor_s": round(floor_s, 2), "floor_mb_s": round(size / 1e6 / floor_s, 1)}
        if ccusage is not None:
            peer = ccusage.sessions(claude_dir)
            row.update(ccusage_s=round(peer.seconds, 2), ccusage_mb_s=round(size / 1e6 / peer.seconds, 1),
                       ccusage_peak_rss_mb=round(peer.peak_rss_mb))
        results.append(row)
    return results


def table(results: list[dict]) -> list[str]:
    out = [("| tree | lines | retrod catch-up (whole process) | retrod MB/s | retrod lines/s | retrod peak RSS "
            "| floor MB/s | ccusage session scan | ccusage MB/s | ccusage peak RSS |"),
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        peer = (f"{r['ccusage_s']} s | {r['ccusage_mb_s']} | {r['ccusage_peak_rss_mb']} MB" if "ccusage_s" in r
                else "— | — | —")
        out.append(f"| {r['mb']} MB | {r['lines']:,} | {r['retrod_catch_up_s']} s ({r['retrod_process_s']} s) "
                   f"| {r['retrod_mb_s']} | {r['retrod_lines_s']:,} | {r['retrod_peak_rss_mb']} MB "
                   f"| {r['floor_mb_s']} | {peer} |")
    return out
