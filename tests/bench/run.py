"""Every retrod benchmark in one run, side by side with ccusage, against the targets.

    python tests/bench/run.py            # the full run: about 6 minutes, a few GB of /tmp
    python tests/bench/run.py --smoke    # ~2 minutes, for CI: checks that it all still works
    python tests/bench/run.py --only soak --soak   # the nightly soak alone: an hour
    python tests/bench/run.py --only statusline    # the status line against python and ccusage: ~10 minutes

Prints Markdown tables and writes them as JSON (--json, default bench-results.json). Ratios are
measured in one run on one machine, so they hold on a noisy machine where absolute times do not.
ccusage is taken from PATH at the pinned version or installed with npm into a temporary prefix;
when that fails (no npm, registry unreachable) the run says so and measures the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backfill
import commands
import idle_cost
import live_latency
import mcp_stats
import newest_first
import report_latency
import soak
import statusline
import trends_brief
import web_ui
from peers import find_ccusage


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    mem_kb = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), 0) if Path("/proc/meminfo").exists() else 0
    from retrod.service.cluster import candidate_bindirs

    postgres = next((b / "postgres" for b in candidate_bindirs(None) if (b / "postgres").exists()), None)
    pg = (subprocess.run([str(postgres), "--version"], capture_output=True, text=True).stdout.strip()
          if postgres else "?")
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_kb / 2**20), "os": platform.platform(),
            "python": platform.python_version(), "postgresql": pg}


# (what, how it is computed, comparison, target). A value of None: not measured in this run.
Target = tuple[str, Callable[[dict], float | None], str, float]
TARGETS: list[Target] = [
    ("backfill, ccusage session scan time ÷ retrod run --once time, whole processes (worst tree)",
     lambda r: min((b["ccusage_s"] / b["retrod_process_s"] for b in r["backfill"] if "ccusage_s" in b),
                   default=None), ">=", 1),
    ("backfill MB/s ÷ decode floor MB/s (worst tree)",
     lambda r: min(b["retrod_mb_s"] / b["floor_mb_s"] for b in r["backfill"]), ">=", 0.5),
    ("backfill seconds per MB, largest tree ÷ smallest (linear growth)",
     lambda r: (r["backfill"][-1]["retrod_catch_up_s"] / r["backfill"][-1]["mb"])
     / (r["backfill"][0]["retrod_catch_up_s"] / r["backfill"][0]["mb"]), "<=", 1.25),
    ("backfill peak RSS of retrod, largest tree (MB)", lambda r: r["backfill"][-1]["retrod_peak_rss_mb"], "<", 150),
    ("report, large session ÷ 1 MB session, in-process",
     lambda r: r["report"]["ratios"]["large_vs_small_in_process"], "<=", 2),
    ("report, large session ÷ 1 MB session, whole process, daemon running",  # (issue 19: with cost by part)
     lambda r: r["report"]["ratios"]["large_vs_small_process"], "<=", 1.5),
    ("report, large session ÷ 1 MB session, whole process, no daemon",
     lambda r: r["report"]["ratios"]["large_vs_small_process_no_daemon"], "<=", 2),
    ("ccusage session --id ÷ retrod report, whole process, daemon running",
     lambda r: r["report"]["ratios"].get("ccusage_vs_report_process"), ">=", 20),
    ("ccusage session --id ÷ retrod report, whole process, no daemon",
     lambda r: r["report"]["ratios"].get("ccusage_vs_report_process_no_daemon"), ">=", 20),
    ("re-parse ÷ retrod report, whole process, daemon running",
     lambda r: r["report"]["ratios"]["reparse_vs_report_process"], ">=", 20),
    ("re-parse ÷ retrod report, in-process", lambda r: r["report"]["ratios"]["reparse_vs_report_in_process"], ">=", 20),
    ("report without a daemon, cluster stopped ÷ starting and stopping the cluster once",
     lambda r: r["commands"]["report_vs_start_stop"], "<=", 2),
    ("20 mixed commands at once without a daemon: failures",
     lambda r: r["commands"]["concurrent_commands"] - r["commands"]["concurrent_ok"], "<=", 0),
    ("retrod sessions query over all sessions, in-process (ms)", lambda r: r["commands"]["sessions_query_ms"], "<", 50),
    ("retrod sessions --sort tokens|efficiency query, in-process (ms)",
     lambda r: r["commands"]["sessions_sorted_query_ms"], "<", 100),
    ("MCP session_stats, ~200 MB session, per call over stdio, median (ms)",
     lambda r: r["mcp"]["sessions"]["large"]["median_ms"], "<", 20),
    ("MCP session_stats, ~200 MB session, per call over stdio, p95 (ms)",
     lambda r: r["mcp"]["sessions"]["large"]["p95_ms"], "<", 20),
    ("MCP session_stats, large session ÷ 1 MB session", lambda r: r["mcp"]["large_vs_small"], "<=", 2),
    (("newest session's report, asked 0.5 s after `retrod run` on ~500 MB of older history not yet "
      "ingested: correct after (s)"),  # never correct: missed, not "not measured"
     lambda r: r["newest"]["correct_s"] if r["newest"]["correct_s"] is not None else float("inf"), "<", 2),
    ("statusline p95 ÷ `python -c pass` p95, after a message, daemon on a ~600 MB history",
     lambda r: r["statusline"]["ratios"]["p95_after_message_vs_python"], "<=", 3),
    ("ccusage statusline ÷ retrod statusline, medians, the same stdin, after a message",
     lambda r: r["statusline"]["ratios"].get("ccusage_vs_retrod_after_message"), ">=", 10),
    ("first ingest of the status line benchmark's ~600 MB history, a daemon's catch-up (s)",  # (issue 32)
     lambda r: r["statusline"]["catch_up_s"], "<=", 11),
    ("retrod trends over 10,000 sessions, by week, in-process (ms)", lambda r: r["trends"]["by_week_ms"], "<=", 100),
    ("retrod trends over 10,000 sessions, slowest of by day, by month per project, by week per model, in-process (ms)",
     lambda r: max(r["trends"][f"{k}_ms"] for k in ("by_day", "by_month_per_project", "by_week_per_model")), "<=", 100),
    (("retrod trends over the other year (25 projects, 3 models), slowest of by week, by day, by month per project,"
     " by week per model, in-process (ms)"),
     lambda r: max(r["trends"]["year"][f"{k}_ms"] for k in ("by_week", "by_day", "by_month_per_project",
                                                              "by_week_per_model")), "<=", 100),
    ("retrod brief --hook with the daemon running, whole process, p95 (ms)",
     lambda r: r["trends"]["hook_daemon"]["p95_ms"], "<=", 300),
    *((f"retrod {name} through the daemon ÷ a bare python3 start, whole processes",
       lambda r, n=name: r["trends"][f"{n}_daemon_ms"] / r["trends"]["bare_python_ms"], "<=", 3)
      for name in ("trends", "sessions", "brief")),
    ("live latency p95 (ms)", lambda r: r["live"]["p95_ms"], "<", 250),
    ("idle CPU (% of a core)", lambda r: r["idle"]["cpu_percent"], "<", 1),
    ("idle RSS, max (MB)", lambda r: r["idle"]["rss_mb_max"], "<", 150),
    ("soak: RSS growth after the warm-up (MB)", lambda r: r["soak"]["rss_mb_growth"], "<", 15),
    ("soak: open files, end − after the warm-up", lambda r: r["soak"]["fds_end"] - r["soak"]["fds_warm"], "<=", 2),
    ("soak: bytes written but not ingested", lambda r: r["soak"]["bytes_not_ingested"], "<=", 0),
    ("soak: errors logged", lambda r: r["soak"]["errors_logged"], "<=", 0),
    ("web UI: slowest API answer over 10,000 sessions and ~1 GB, and over the other year, server time p95 (ms)",
     lambda r: r["ui"]["api_p95_ms_max"], "<=", 100),
    ("web UI: slowest page's first render in Chromium (ms)", lambda r: r["ui"].get("render_ms_max"), "<=", 1000),
    ("web UI: live page, a line written to its figures moving, p95 (ms)",
     lambda r: r["ui"]["live"]["p95_ms"] if "live" in r["ui"] else None, "<=", 2000),
]
BENCHMARKS = ("backfill", "newest", "report", "commands", "mcp", "statusline", "trends", "live", "idle", "soak",
              "ui")
NIGHTLY_SOAK_S = 3600


def verdicts(results: dict) -> list[dict]:
    out = []
    for what, compute, op, target in TARGETS:
        try:
            value = compute(results)
        except KeyError:  # that benchmark did not run (--only)
            value = None
        if value is None:
            out.append({"target": f"{what} {op} {target:g}", "value": None, "met": None})
            continue
        met = {">=": value >= target, "<=": value <= target, "<": value < target}[op]
        # how far off: the factor by which the value falls short of, or exceeds, the target
        off = None if met or not target else round(target / value if op == ">=" else value / target, 1)
        out.append({"target": f"{what} {op} {target:g}", "value": round(value, 3), "met": met, "off_by": off})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes and short waits: seconds, for CI")
    parser.add_argument("--sizes", help="backfill tree sizes in MB, comma-separated (default 10,100,1000)")
    parser.add_argument("--json", type=Path, default=Path("bench-results.json"), help="where to write the results")
    parser.add_argument("--no-ccusage", action="store_true", help="do not look for or install ccusage")
    parser.add_argument("--only", help=f"benchmarks to run, comma-separated, of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--report-plan", action="store_true",
                        help="the report benchmark's sessions repeat a transcript with a plan (issue 30's tasks)")
    parser.add_argument("--soak", action="store_true", help=f"the nightly soak: {NIGHTLY_SOAK_S} s")
    parser.add_argument("--soak-seconds", type=float, help="how long the soak writes (default 5 with --smoke, else 60)")
    parser.add_argument("--statusline-mb", type=float,
                        help="the status line benchmark's history in MB (default 2 with --smoke, else 600)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else set(BENCHMARKS)
    if only - set(BENCHMARKS):
        parser.error(f"unknown benchmark(s): {', '.join(sorted(only - set(BENCHMARKS)))}")
    soak_s = args.soak_seconds or (NIGHTLY_SOAK_S if args.soak else 5 if args.smoke else 60)
    sizes = [float(s) for s in (args.sizes or ("1,2" if args.smoke else "10,100,1000")).split(",")]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="retrod-bench-", dir="/tmp") as tmp:
        scratch = Path(tmp)
        os.chmod(scratch, 0o711)  # as root, the private clusters run as postgres and must reach their folders
        if args.no_ccusage or not only & {"backfill", "report", "statusline"}:
            ccusage, why = None, "skipped (--no-ccusage)" if args.no_ccusage else "not needed"
        else:
            ccusage, why = find_ccusage(scratch)
        print(f"ccusage: {why}", flush=True)
        results: dict = {"machine": machine(), "ccusage": why, "smoke": args.smoke}
        steps = [
            ("backfill", lambda: backfill.run(scratch, sizes, ccusage)),
            ("newest", lambda: newest_first.run(scratch, args.smoke)),
            ("report", lambda: report_latency.run(scratch, args.smoke, ccusage, args.report_plan)),
            ("commands", lambda: commands.run(scratch, args.smoke)),
            ("mcp", lambda: mcp_stats.run(scratch, args.smoke)),
            ("statusline", lambda: statusline.run(scratch, args.smoke, ccusage, args.statusline_mb)),
            ("trends", lambda: trends_brief.run(scratch, args.smoke)),
            ("live", lambda: live_latency.run(scratch, 20 if args.smoke else 300)),
            ("idle", lambda: idle_cost.run(scratch, 200 if args.smoke else 10_000, 5 if args.smoke else 60)),
            ("soak", lambda: soak.run(scratch, soak_s)),
            ("ui", lambda: web_ui.run(scratch, args.smoke)),
        ]
        for name, step in steps:
            if name in only:
                print(f"{name} …", flush=True)
                results[name] = step()
    results["targets"] = verdicts(results)
    results["seconds"] = round(time.monotonic() - started)

    m = results["machine"]
    lines = [(f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; {m['os']}; Python {m['python']}; "
             f"{m['postgresql']}. ccusage: {results['ccusage']}.")]
    for name, title, table in (
            ("backfill", "Backfill:", backfill.table),
            ("newest", "The newest session during the first backfill:", newest_first.table),
            ("report", "Report latency:", report_latency.table),
            ("commands", "Commands without a daemon (embedded default):", commands.table),
            ("mcp", "MCP session_stats:", mcp_stats.table),
            ("statusline", "Status line:", statusline.table),
            ("trends", "Trends and the brief's hook:", trends_brief.table),
            ("live", "Live latency:", live_latency.table), ("idle", "Idle cost:", idle_cost.table),
            ("soak", "Soak:", soak.table), ("ui", "Web UI:", web_ui.table)):
        if name in results:
            lines += ["", title, "", *table(results[name])]
    lines += ["", "Targets:", "", "| target | measured | |", "|---|---:|---|"]
    for v in results["targets"]:
        verdict = ("not measured" if v["met"] is None else "met" if v["met"]
                   else f"**missed**, {v['off_by']}× {'short' if '>=' in v['target'] else 'over'}")
        lines.append(f"| {v['target']} | {'—' if v['value'] is None else v['value']} | {verdict} |")
    print("\n".join(lines))
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\n{results['seconds']} s; results written to {args.json}")


if __name__ == "__main__":
    main()
