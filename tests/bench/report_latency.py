"""Report latency against session size: is `retrod report` flat, and how much faster than re-parsing?

    python tests/bench/report_latency.py            # the full run: 1 MB and ~200 MB sessions
    python tests/bench/report_latency.py --smoke    # seconds: tiny sizes, for CI

Measures, in one run on one machine (so the ratios hold even when the machine is noisy):
- report in-process: building the report model and rendering its Markdown, median of N runs;
- report as a whole process: `retrod report <uuid> --format json --no-save`, median of N runs;
- re-parse: reading the session's file with retrod's own parser and fold, no database — the
  least any tool that re-reads transcripts must do.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg_pool import ConnectionPool

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import write_session  # noqa: E402

from retrod import tracking  # noqa: E402
from retrod.ingest import Ingester  # noqa: E402
from retrod.report import markdown, model  # noqa: E402
from retrod.service.cluster import Cluster  # noqa: E402
from retrod.store.migrate import migrate  # noqa: E402
from retrod.store.store import Store  # noqa: E402
from retrod.transcript.fold import FoldState, Source, fold  # noqa: E402
from retrod.transcript.parser import parse_line  # noqa: E402
from retrod.transcript.tailer import read_chunk  # noqa: E402

SMALL = "aaaaaaaa-1111-4111-8111-000000000001"
LARGE = "bbbbbbbb-2222-4222-8222-000000000002"
PHASES = 12


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def reparse(path: Path) -> None:
    source = Source("main", path.parent.name, path.stem, "", str(path))
    state, offset = FoldState(), 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while (chunk := read_chunk(fd, offset, 4 << 20)).lines:
            state = fold(source, state, [(o, parse_line(raw)) for o, raw in chunk.lines]).state
            offset = chunk.end
    finally:
        os.close(fd)


def log_phases(conn: psycopg.Connection, session: str) -> None:
    first, last = conn.execute("SELECT min(ts), max(ts) FROM retrod.events WHERE session_uuid = %s",
                               (session,)).fetchone()
    step = (last - first) / PHASES
    for i in range(PHASES):
        tracking.phase_log(conn, session, f"task {i % 3}", f"phase {i}", first + step * i,
                           first + step * (i + 1), "high_impact" if i % 2 else "exploratory_waste",
                           tracking.PhaseNotes(lessons=f"lesson {i}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    small_bytes, large_bytes, runs = (200_000, 2_000_000, 3) if args.smoke else (1_000_000, 200_000_000, 15)

    with tempfile.TemporaryDirectory(prefix="retrod-bench-", dir="/tmp") as tmp:
        root = Path(tmp)
        os.chmod(root, 0o711)
        projects = root / "projects"
        files = {SMALL: write_session(projects, SMALL, small_bytes), LARGE: write_session(projects, LARGE, large_bytes)}
        cluster = Cluster(root / "pg")
        cluster.ensure_running()
        try:
            cluster.create_database()
            url = cluster.url()
            with psycopg.connect(url, autocommit=True) as conn:
                migrate(conn)
            started = time.perf_counter()
            with ConnectionPool(url, min_size=1, max_size=2, open=True) as pool:
                Ingester(Store(pool, "bench"), [projects]).scan()
            ingest_s = time.perf_counter() - started
            results = {"ingest_s": round(ingest_s, 2), "sessions": {}}
            env = dict(os.environ, RETROD_DATABASE_URL=url, RETROD_PROJECTS_DIR=str(projects),
                       RETROD_DATA_DIR=str(root / "data"))
            with psycopg.connect(url, autocommit=True) as conn:
                for session, path in files.items():
                    log_phases(conn, session)
                    in_process = median_seconds(lambda: markdown.render(model.build(conn, session)), runs)
                    whole = median_seconds(lambda: subprocess.run(
                        [sys.executable, "-m", "retrod.cli", "report", session, "--format", "json", "--no-save"],
                        env=env, check=True, capture_output=True), max(3, runs // 3))
                    reparse_s = median_seconds(lambda: reparse(path), 1 if not args.smoke else 2)
                    results["sessions"][session] = {
                        "bytes": path.stat().st_size, "lines": sum(1 for _ in path.open("rb")),
                        "report_in_process_ms": round(in_process * 1000, 2),
                        "report_process_ms": round(whole * 1000, 1),
                        "reparse_ms": round(reparse_s * 1000, 1),
                    }
        finally:
            cluster.stop()

    small, large = results["sessions"][SMALL], results["sessions"][LARGE]
    results["ratios"] = {
        "large_vs_small_in_process": round(large["report_in_process_ms"] / small["report_in_process_ms"], 2),
        "large_vs_small_process": round(large["report_process_ms"] / small["report_process_ms"], 2),
        "reparse_vs_report_in_process_large": round(large["reparse_ms"] / large["report_in_process_ms"], 1),
        "reparse_vs_report_process_large": round(large["reparse_ms"] / large["report_process_ms"], 1),
    }
    print("| session | size | lines | report in-process | report (whole process) | re-parse its file |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, s in (("small", small), ("large", large)):
        print(f"| {name} | {s['bytes'] / 1e6:.1f} MB | {s['lines']:,} | {s['report_in_process_ms']:.1f} ms "
              f"| {s['report_process_ms']:.0f} ms | {s['reparse_ms']:.0f} ms |")
    print()
    for key, value in results["ratios"].items():
        print(f"- {key}: {value}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
