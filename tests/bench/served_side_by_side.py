"""The commands a running daemon answers (issue 32), this checkout's code beside another's, on one
corpus, in one run: the two codes' daemons take turns (a block of every command under one, then
the other, for each round), so that a shared machine's load falls on both alike.

    python tests/bench/served_side_by_side.py --base /path/to/other/checkout/daemon
    python tests/bench/served_side_by_side.py --base … --smoke     # 200 sessions, one round

The corpus is trends_brief.py's (10,000 small real sessions over a year, three phases logged on
every fifth). Each command runs as a user runs it (the `retrod` command, bytecode written once:
harness.installed), beside a bare `python3 -c pass`; `brief --hook` as Claude Code runs it. Per
command: the median and p95 wall time, and the CPU of the command, of the daemon and of
PostgreSQL, which a busy machine moves less than the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import write_many
from harness import daemon, database, installed, postgres_cpu_s, retrod_env, wait_for_log
from retrod.claude_code import skills
from trends_brief import LOG_PHASES

PHASED = "SELECT u.session_uuid FROM cc_sessions u JOIN cc_session_phases p ON p.session_id = u.id LIMIT 1"
COMMANDS = {"trends": ("trends", "--by", "week", "--tz", "UTC", "--json"), "sessions": ("sessions",),
            "brief": ("brief", "--project=-many-0"), "lessons": ("lessons", "--project=-many-0")}


Sample = tuple[float, float, float, float]  # seconds: wall, the command's CPU, the daemon's, PostgreSQL's


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(argv: list[str], env: dict, daemon_pid: int, cluster: Path, stdin: bytes | None = None) -> Sample:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    daemon_cpu, pg_cpu, start = _cpu_s(daemon_pid), postgres_cpu_s(cluster), time.perf_counter()
    done = subprocess.run(argv, env=env, input=stdin, capture_output=True,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[-3:])} failed: {done.stderr[-300:]!r}")
    own = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, own, _cpu_s(daemon_pid) - daemon_cpu, postgres_cpu_s(cluster) - pg_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the other code's package folder (holds retrod/)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5, help="runs of each command per round and code")
    parser.add_argument("--smoke", action="store_true", help="200 sessions, one round of two runs")
    args = parser.parse_args()
    sessions, rounds, runs = (200, 1, 2) if args.smoke else (10_000, args.rounds, args.runs)
    codes = {"base": str(args.base.resolve()), "this": str(Path(__file__).resolve().parents[2] / "daemon")}
    with tempfile.TemporaryDirectory(prefix="retrod-sbs-", dir="/tmp") as tmp:
        scratch = Path(tmp)
        scratch.chmod(0o711)  # (as root, the private cluster runs as postgres and must reach it)
        results = measure(scratch, sessions, rounds, runs, codes)
    print(json.dumps({"sessions": sessions, "rounds": rounds, "runs": runs, "results": results}, indent=1))
    for line in table(results):
        print(line)


def measure(scratch: Path, sessions: int, rounds: int, runs: int, codes: dict[str, str]) -> dict:
    projects, data = scratch / "projects", scratch / "d"
    write_many(projects, sessions, spread_days=365)
    samples: dict[str, dict[str, list[Sample]]] = {code: {} for code in codes}
    cluster = scratch / "sbs-pg"
    with database(scratch, "sbs") as url:
        env = retrod_env(projects, data, url)
        subprocess.run([sys.executable, "-m", "retrod", "run", "--once"], env=env, check=True, capture_output=True)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(LOG_PHASES)
            conn.execute("VACUUM ANALYZE")
            phased = conn.execute(PHASED).fetchone()[0]
        commands = {**COMMANDS, "phases": ("phases", phased)}
        hook = json.dumps({"session_id": str(uuid.uuid4()), "cwd": "/many/0", "hook_event_name": "SessionStart",
                           "source": "startup", "transcript_path": "/nowhere.jsonl"}).encode()
        retrod = skills.command_argv()
        for _ in range(rounds):
            for code, path in codes.items():
                command_env = {**installed(env, scratch), "PYTHONPATH": path}
                with daemon(url, projects, data, PYTHONPATH=path) as process:
                    wait_for_log(data / "daemon.log", "caught up", process, 600)
                    for argv in commands.values():  # its bytecode written, the price data loaded
                        subprocess.run([*retrod, *argv], env=command_env, check=True, capture_output=True)
                    subprocess.run([*retrod, "brief", "--hook"], env=command_env, input=hook, capture_output=True)
                    got = samples[code]
                    for _ in range(runs):
                        got.setdefault("python3 -c pass", []).append(
                            _timed([sys.executable, "-c", "pass"], command_env, process.pid, cluster))
                        for name, argv in commands.items():
                            got.setdefault(name, []).append(_timed([*retrod, *argv], command_env, process.pid, cluster))
                        got.setdefault("brief --hook", []).append(
                            _timed([*retrod, "brief", "--hook"], command_env, process.pid, cluster, hook))
    return {code: {name: _summary(got) for name, got in by_name.items()} for code, by_name in samples.items()}


def _summary(got: list[Sample]) -> dict:
    walls = sorted(g[0] for g in got)
    return {"median_ms": round(1000 * statistics.median(walls), 1),
            "p95_ms": round(1000 * walls[max(0, round(0.95 * len(walls)) - 1)], 1),
            "command_cpu_ms": round(1000 * statistics.median(g[1] for g in got), 1),
            "daemon_cpu_ms": round(1000 * statistics.mean(g[2] for g in got), 1),
            "postgres_cpu_ms": round(1000 * statistics.mean(g[3] for g in got), 1), "n": len(got)}


def table(results: dict) -> list[str]:
    """A row per command: each code's median (× its bare start), p95, and CPU (the command's own
    + the daemon's + PostgreSQL's)."""
    codes = list(results)
    lines = ["| whole process, daemon running | " + " | ".join(f"{c}: median (× bare), p95" for c in codes)
             + " | " + " | ".join(f"{c}: CPU" for c in codes) + " |",
             "|---|" + "---:|" * 2 * len(codes)]
    for name in results[codes[0]]:
        cells = []
        for code in codes:
            r, bare = results[code][name], results[code]["python3 -c pass"]["median_ms"]
            cells.append(f"{r['median_ms']:.0f} ms ({r['median_ms'] / bare:.1f}×), {r['p95_ms']:.0f} ms")
        cells += [f"{results[c][name]['command_cpu_ms']:.0f} + {results[c][name]['daemon_cpu_ms']:.0f} + "
                  f"{results[c][name]['postgres_cpu_ms']:.0f} ms" for c in codes]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    main()
