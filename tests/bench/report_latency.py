"""Report latency against session size, against re-parsing, and against ccusage.

On one corpus (a 1 MB session, a ~200 MB session and a tree of other history, several hundred
MB in all), caught up on by a running daemon:
- report in-process: building the report model and rendering its Markdown, median of N runs;
- report as a whole process: `retrod report <uuid> --format json --no-save` (the installed
  command, its package byte-compiled), median of N runs, with the daemon running (it answers over
  its socket) and without (the command does the work);
- re-parse: reading the session's file with retrod's own parser and fold, no database — the
  least any tool that re-reads transcripts must do;
- ccusage: `ccusage claude session --id <uuid> --json --offline` on the same corpus, median.

With `plan` (`run.py --report-plan`, issue 30) both sessions repeat a real transcript that plans
its work with TodoWrite (12 tasks, 1 MB) instead of one without a plan: every repetition adds its
windows to the same tasks, so the 200 MB session's report adds up thousands of task windows; the
plan's derivation and the tasks' window figures are timed apart.
"""

from __future__ import annotations

import compileall
import os
import statistics
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

import retrod
from corpus import FIXTURES, SOURCE, write_session, write_tree
from harness import daemon, database, median_seconds, retrod_env, wait_for_log
from peers import Ccusage
from retrod import tracking
from retrod.report import markdown, model
from retrod.store.queries import generic_plans
from retrod.transcript.fold import FoldState, Source, fold
from retrod.transcript.parser import parse_line
from retrod.transcript.tailer import read_chunk

PLANNED_SOURCE = FIXTURES / "-src-deep-manifest" / "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"
SMALL = "aaaaaaaa-1111-4111-8111-000000000001"
LARGE = "bbbbbbbb-2222-4222-8222-000000000002"
PHASES = 12


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


def plan_figures(conn: psycopg.Connection, session: str) -> tuple[int, int, float, float, float]:
    """The session's tasks and windows, and the medians (ms) of deriving its plan, of its tasks'
    window figures summed afresh (a first ask), and of the plan and figures as a report asks
    them once kept (report/kept_windows.py): what the plan adds to the report."""
    member = conn.execute("SELECT current_user").fetchone()[0]
    args = {"session": session, "member": member, "away_us": int(model.AWAY_AFTER_S * 1_000_000)}
    with generic_plans(conn), conn.cursor(row_factory=dict_row) as cur:
        plan = model._plan(cur, args)
        derive_ms = 1000 * median_seconds(lambda: model._plan(cur, args), 5)
        windows_ms = 1000 * median_seconds(lambda: model._task_window_figures(cur, args, plan), 5)
        model._kept_windows(cur, args)
        kept_ms = 1000 * median_seconds(lambda: model._kept_windows(cur, args), 5)
    return len(plan.tasks), sum(len(t.windows) for t in plan.tasks), derive_ms, windows_ms, kept_ms


def run(scratch: Path, smoke: bool, ccusage: Ccusage | None, plan: bool = False) -> dict:
    small_bytes, large_bytes, history_bytes, runs = (
        (200_000, 2_000_000, 2_000_000, 3) if smoke else (1_000_000, 200_000_000, 300_000_000, 15))
    claude_dir = scratch / "report-corpus"
    projects = claude_dir / "projects"
    source = PLANNED_SOURCE if plan else SOURCE
    files = {SMALL: write_session(projects, SMALL, small_bytes, source),
             LARGE: write_session(projects, LARGE, large_bytes, source)}
    corpus_bytes = write_tree(projects, history_bytes, seed=2) + sum(p.stat().st_size for p in files.values())
    data = scratch / "report-data"
    results: dict = {"corpus_mb": round(corpus_bytes / 1e6), "source": source.stem, "sessions": {}}
    with database(scratch, "report") as url:
        env = retrod_env(projects, data, url)

        # As a user runs it (and as statusline.py does): the installed command, its package
        # byte-compiled as pip compiles it (the tests' environment sets PYTHONDONTWRITEBYTECODE,
        # which would have every run compile the client's modules again: ~6 ms of CPU each).
        compileall.compile_dir(str(Path(retrod.__file__).parent), quiet=1)
        command = [str(Path(sys.executable).parent / "retrod"), "report"]

        def whole_process(session: str) -> float:
            return 1000 * median_seconds(lambda: subprocess.run(
                [*command, session, "--format", "json", "--no-save"],
                env=env, check=True, capture_output=True), max(3, runs // 3))

        with daemon(url, projects, data) as process, psycopg.connect(url, autocommit=True) as conn:
            wait_for_log(data / "daemon.log", "caught up", process, 1800)
            for name, session in (("small", SMALL), ("large", LARGE)):
                path = files[session]
                log_phases(conn, session)
                results["sessions"][name] = {
                    "mb": round(path.stat().st_size / 1e6, 1), "lines": sum(1 for _ in path.open("rb")),
                    "report_in_process_ms": 1000 * median_seconds(
                        lambda s=session: markdown.render(model.build(conn, s)), runs),
                    "report_process_ms": whole_process(session),  # answered by the running daemon
                    "reparse_ms": 1000 * median_seconds(lambda p=path: reparse(p), 2 if smoke else 1),
                }
                if plan:
                    tasks, windows, derive_ms, windows_ms, kept_ms = plan_figures(conn, session)
                    results["sessions"][name].update(tasks=tasks, windows=windows, plan_derive_ms=derive_ms,
                                                     task_windows_ms=windows_ms, tasks_kept_ms=kept_ms)
        for name, session in (("small", SMALL), ("large", LARGE)):
            row = results["sessions"][name]
            row["report_process_no_daemon_ms"] = whole_process(session)
            if ccusage is not None:
                row["ccusage_ms"] = 1000 * statistics.median(
                    ccusage.session(claude_dir, session).seconds for _ in range(3))
    small, large = results["sessions"]["small"], results["sessions"]["large"]
    results["ratios"] = {
        "large_vs_small_in_process": large["report_in_process_ms"] / small["report_in_process_ms"],
        "large_vs_small_process": large["report_process_ms"] / small["report_process_ms"],
        "large_vs_small_process_no_daemon": large["report_process_no_daemon_ms"] / small["report_process_no_daemon_ms"],
        "reparse_vs_report_in_process": large["reparse_ms"] / large["report_in_process_ms"],
        "reparse_vs_report_process": large["reparse_ms"] / large["report_process_ms"],
    }
    if ccusage is not None:
        results["ratios"]["ccusage_vs_report_process"] = large["ccusage_ms"] / large["report_process_ms"]
        results["ratios"]["ccusage_vs_report_process_no_daemon"] = (
            large["ccusage_ms"] / large["report_process_no_daemon_ms"])
        results["ratios"]["ccusage_vs_report_in_process"] = large["ccusage_ms"] / large["report_in_process_ms"]
    return results


def table(results: dict) -> list[str]:
    out = [f"Corpus: {results['corpus_mb']} MB in all.", "",
           ("| session | size | lines | report in-process | report, whole process (daemon running) "
            "| report, whole process (no daemon) | re-parse its file | ccusage session --id |"),
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in results["sessions"].items():
        peer = f"{s['ccusage_ms']:.0f} ms" if "ccusage_ms" in s else "—"
        out.append(f"| {name} | {s['mb']} MB | {s['lines']:,} | {s['report_in_process_ms']:.1f} ms "
                   f"| {s['report_process_ms']:.0f} ms | {s['report_process_no_daemon_ms']:.0f} ms "
                   f"| {s['reparse_ms']:.0f} ms | {peer} |")
    if any("tasks" in s for s in results["sessions"].values()):
        out += ["", f"The plan (source {results['source']}):", "",
                ("| session | tasks | windows | deriving the plan | the tasks' window figures, afresh "
                 "| the plan and figures, kept |"),
                "|---|---:|---:|---:|---:|---:|"]
        out += [f"| {name} | {s['tasks']:,} | {s['windows']:,} | {s['plan_derive_ms']:.1f} ms "
                f"| {s['task_windows_ms']:.1f} ms | {s['tasks_kept_ms']:.1f} ms |"
                for name, s in results["sessions"].items()]
    return out
