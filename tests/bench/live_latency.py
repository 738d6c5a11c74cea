"""Live latency: from a line appended to a transcript to the change being visible in the database.

The daemon runs (`retrod run`, default settings); this process is the writer: it appends real
lines (fresh ids) one at a time, as Claude Code does, and polls the file's stored offset every
millisecond until it covers the new line. Appends are spaced by a seeded random pause.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

import psycopg

from corpus import fresh_lines
from harness import daemon, database, wait_for_log

SESSION = "cccccccc-3333-4333-8333-000000000003"


def run(scratch: Path, appends: int) -> dict:
    projects = scratch / "live" / "projects"
    path = projects / "-live-project" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    lines = fresh_lines(SESSION)
    path.write_text(next(lines))
    rng = random.Random(3)
    latencies, timeouts = [], 0
    with database(scratch, "live") as url, daemon(url, projects, scratch / "live" / "data") as process:
        wait_for_log(scratch / "live" / "data" / "daemon.log", "caught up", process, 120)
        with psycopg.connect(url, autocommit=True) as conn:
            offset = conn.cursor().execute('SELECT "offset" FROM retrod.files WHERE path = %s', (str(path),))
            for _ in range(appends):
                time.sleep(rng.uniform(0.02, 0.2))
                line = next(lines).encode()
                start = time.perf_counter()
                with path.open("ab") as f:
                    f.write(line)
                    end = f.tell()
                while time.perf_counter() - start < 10:
                    offset.execute('SELECT "offset" FROM retrod.files WHERE path = %s', (str(path),))
                    if offset.fetchone()[0] >= end:
                        latencies.append(time.perf_counter() - start)
                        break
                    time.sleep(0.001)
                else:
                    timeouts += 1
    latencies.sort()
    return {"appends": appends, "timeouts": timeouts,
            "p50_ms": 1000 * statistics.median(latencies),
            "p95_ms": 1000 * latencies[max(0, round(0.95 * len(latencies)) - 1)],
            "max_ms": 1000 * latencies[-1]}


def table(r: dict) -> list[str]:
    return ["| appends | p50 | p95 | max | not seen within 10 s |", "|---:|---:|---:|---:|---:|",
            (f"| {r['appends']} | {r['p50_ms']:.0f} ms | {r['p95_ms']:.0f} ms | {r['max_ms']:.0f} ms "
             f"| {r['timeouts']} |")]
