"""`retrod mcp`'s session_stats against session size: each call as Claude Code makes it, over
stdio from the SDK's client to a running `retrod mcp`, on a ~200 MB session with phases logged
and one open (its figures so far are part of the answer), and on a 1 MB one.

The session's files are caught up on first (`retrod run --once`), as a running daemon keeps them;
each call still brings them up to date (a stat per file) before it reads the figures.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import psycopg
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from corpus import write_session
from harness import database, retrod_env
from report_latency import log_phases
from retrod import tracking

SMALL = "cccccccc-3333-4333-8333-000000000003"
LARGE = "dddddddd-4444-4444-8444-000000000004"


async def _calls(env: dict[str, str], errlog: Path, sessions: dict[str, str], runs: int) -> dict[str, list[float]]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "retrod", "mcp"], env=env)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            for name, session in sessions.items():
                await client.call_tool("session_stats", {"session": session})  # the connection opened
                for _ in range(runs):
                    start = time.perf_counter()
                    result = await client.call_tool("session_stats", {"session": session})
                    times[name].append(time.perf_counter() - start)
                    if result.is_error or not (result.structured_content or {}).get("open_phase"):
                        raise RuntimeError(f"session_stats failed: {result.content}")
    return times


def run(scratch: Path, smoke: bool) -> dict:
    small_bytes, large_bytes, runs = (200_000, 2_000_000, 10) if smoke else (1_000_000, 200_000_000, 100)
    projects = scratch / "mcp-corpus" / "projects"
    files = {SMALL: write_session(projects, SMALL, small_bytes), LARGE: write_session(projects, LARGE, large_bytes)}
    data = scratch / "mcp-data"
    with database(scratch, "mcp") as url:
        env = retrod_env(projects, data, url)
        env["RETROD_LOG_LEVEL"] = "WARNING"
        subprocess.run([sys.executable, "-m", "retrod", "run", "--once"], env=env, check=True, capture_output=True)
        with psycopg.connect(url, autocommit=True) as conn:
            for session in files:
                log_phases(conn, session)
                tracking.phase_start(conn, session, "open task", "open phase")  # runs until now
        times = anyio.run(_calls, env, data / "mcp.log", {"small": SMALL, "large": LARGE}, runs)
    results: dict = {"runs": runs, "sessions": {}}
    for name, session in (("small", SMALL), ("large", LARGE)):
        ms = sorted(1000 * t for t in times[name])
        results["sessions"][name] = {
            "mb": round(files[session].stat().st_size / 1e6, 1),
            "median_ms": statistics.median(ms), "p95_ms": ms[int(0.95 * (len(ms) - 1))], "max_ms": ms[-1]}
    results["large_vs_small"] = results["sessions"]["large"]["median_ms"] / results["sessions"]["small"]["median_ms"]
    return results


def table(results: dict) -> list[str]:
    out = [f"{results['runs']} calls per session, each a whole round trip over stdio from the SDK's client.", "",
           "| session | size | session_stats median | p95 | max |", "|---|---:|---:|---:|---:|"]
    for name, s in results["sessions"].items():
        out.append(f"| {name} | {s['mb']} MB | {s['median_ms']:.1f} ms | {s['p95_ms']:.1f} ms | {s['max_ms']:.1f} ms |")
    return out
