"""`retrod trends` and `retrod brief --hook` over a heavy user's year (issue 22).

On 10,000 small real sessions spread over a year (corpus.write_many, 100 to a project folder),
caught up on, with three phases logged on every fifth session:
- trends in-process (the function the command, the MCP tool and the dashboard call), median of N
  runs after a first (the periods kept, issue 32), and that first alone (every period summed): by
  week, by day, by month per project, by week per model, by week per machine (read from the
  stored rows: the rollups hold no machine, and nothing is kept); by day again with a phase
  logged on the newest session before each ask (its day summed again); beside it, the
  least a plain aggregation over the per-minute rollups costs (each session's tokens and times
  summed from request_minutes and event_minutes, no period, no price), which is what the
  per-session rollups of migration 0018 replace;
- the same trends on another year of another shape (corpus.write_year: 10,000 sessions, 25
  projects, 3 models, a session most hours), phases logged alike;
- `retrod trends --by week --json` as a whole process (no daemon);
- `retrod trends`, `sessions` and `brief` as whole processes with the daemon running (it answers
  them over its socket, issue 32), beside a bare `python3 -c pass`, median: as a user types them
  (the `retrod` command, its bytecode written once as an install has it: harness.installed), and
  as a checkout runs them (`python -m retrod`, no bytecode: how this benchmark timed them before);
- `retrod brief --hook` as Claude Code runs it (the command `retrod hooks install` writes, its
  SessionStart JSON on stdin, for a project with a hundred sessions of history), with the daemon
  running (it answers over its socket) and without: median and p95.

Every whole process but the checkout's runs as an installed retrod starts (harness.installed), a
bare `python3 -c pass` under the same settings.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg

from corpus import write_many, write_year
from harness import daemon, database, installed, median_seconds, retrod_env, wait_for_log
from retrod import tracking
from retrod.claude_code import skills
from retrod.history import trends

# Three phases on every fifth session, in its first hour: verdicts, lessons and notes to brief on.
LOG_PHASES = """
WITH s AS (
    SELECT t.session_uuid, t.first_ts, row_number() OVER (ORDER BY t.session_uuid) AS n
    FROM retrod.session_times t WHERE t.first_ts IS NOT NULL
), tracked AS (
    INSERT INTO public.cc_sessions (session_uuid, project_slug, started_at, description)
    SELECT session_uuid, '', first_ts, 'bench session ' || n FROM s WHERE n % 5 = 0
    RETURNING id, session_uuid, started_at
)
INSERT INTO public.cc_session_phases (session_id, task, phase, started_at, ended_at, verdict, actions_summary,
                                      lessons_learned, notes)
SELECT id, 'task', 'phase ' || k, started_at + k * interval '20 minutes', started_at + (k + 1) * interval '20 minutes',
       (ARRAY['high_impact', 'avoidable_waste', 'exploratory_waste', 'moderate_impact'])[1 + (k + id) % 4],
       'did step ' || k, 'lesson ' || (id % 7) || ': check the output before the next step', 'note ' || k
FROM tracked, generate_series(0, 2) k
"""


# Commands the daemon answers, as a person types them (whole processes; brief: the project of the
# hook's hundred sessions).
SERVED = {"trends": ("trends", "--by", "week", "--tz", "UTC", "--json"), "sessions": ("sessions",),
          "brief": ("brief", "--project=-many-0")}


def _served(env: dict, args: tuple[str, ...], command: list[str]) -> None:
    done = subprocess.run([*command, *args], env=env, capture_output=True)
    if done.returncode != 0 or not done.stdout:
        raise RuntimeError(f"retrod {args[0]} failed: {done.stderr[-300:]!r}")


SYNTHETIC_MISSES = """
INSERT INTO retrod.cache_misses (session_uuid, agent, ts, key, n, cause, model, fast, size, rewritten, rewritten_1h,
                                 pause_us, prefix_before)
SELECT r.session_uuid, 'bench', r.ts, r.key, 1, c.cause, r.model, r.fast, 100000, 50000, 0, 0, 100000
FROM (SELECT DISTINCT ON (session_uuid) session_uuid, ts, key, model, fast FROM retrod.requests
      WHERE ts IS NOT NULL ORDER BY session_uuid, ts) r,
     (VALUES ('expired'), ('invalidated')) c(cause)
"""


def _ms(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"median_ms": round(1000 * statistics.median(ordered), 1),
            "p95_ms": round(1000 * ordered[max(0, round(0.95 * len(ordered)) - 1)], 1),
            "max_ms": round(1000 * ordered[-1], 1)}


def _hook_times(env: dict, payload: bytes, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([*skills.command_argv(), "brief", "--hook"], env=env, input=payload,
                              capture_output=True, check=True)  # the command `retrod hooks install` writes
        times.append(time.perf_counter() - start)
        if not done.stdout.startswith(b'{"hookSpecificOutput"'):
            raise RuntimeError(f"brief --hook answered no brief: {done.stderr[-300:]!r}")
    return times


SHAPES = (("by_week", {"by": "week"}), ("by_day", {"by": "day"}),
          ("by_month_per_project", {"by": "month", "split": "project"}),
          ("by_week_per_model", {"by": "week", "split": "model"}),
          ("by_week_per_machine", {"by": "week", "split": "machine"}))


def _trends_times(conn: psycopg.Connection, runs: int) -> dict:
    """Each shape's first ask (its periods summed) and the median of `runs` more (kept), in ms;
    and by day with a phase logged on the newest session before each ask."""
    out: dict = {}
    for name, kwargs in SHAPES:
        started = time.perf_counter()
        trends.trends(conn, tz="UTC", **kwargs)
        out[f"{name}_first_ms"] = round(1000 * (time.perf_counter() - started), 1)
        out[f"{name}_ms"] = round(1000 * median_seconds(lambda kw=kwargs: trends.trends(conn, tz="UTC", **kw), runs), 1)
    session, first = conn.execute("SELECT session_uuid, first_ts FROM retrod.session_times"
                                  " ORDER BY first_ts DESC NULLS LAST LIMIT 1").fetchone()
    times = []
    for n in range(runs):  # (each phase its own millisecond of the session: phases may not overlap)
        at = first + timedelta(milliseconds=n)
        tracking.phase_log(conn, session, "bench", f"phase {n}", at, at + timedelta(microseconds=500),
                           "moderate_impact", tracking.PhaseNotes())
        started = time.perf_counter()
        trends.trends(conn, tz="UTC", by="day")
        times.append(time.perf_counter() - started)
    out["by_day_after_a_phase_ms"] = round(1000 * statistics.median(times), 1)
    return out


def _year(scratch: Path, files: int, runs: int) -> dict:
    """The trends figures on corpus.write_year's sessions, phases logged as on the first corpus."""
    projects, data = scratch / "trends-year" / "projects", scratch / "trends-year" / "d"
    write_year(projects, files)
    with database(scratch, "trends-year") as url:
        done = subprocess.run([sys.executable, "-m", "retrod", "run", "--once"], env=retrod_env(projects, data, url),
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"retrod run --once failed: {done.stderr[-500:]}")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(LOG_PHASES)
            conn.execute("VACUUM ANALYZE")
            trends.trends(conn, by="month", tz="UTC")  # (prices loaded, as on the first corpus)
            return {"sessions": files, **_trends_times(conn, runs),
                    "periods_by_day": len(trends.trends(conn, by="day", tz="UTC")["periods"])}


def run(scratch: Path, smoke: bool) -> dict:
    files, runs, hook_runs = (200, 3, 5) if smoke else (10_000, 15, 30)
    projects = scratch / "trends" / "projects"
    write_many(projects, files, spread_days=365)
    data = scratch / "trends" / "d"
    results: dict = {"sessions": files}
    with database(scratch, "trends") as url:
        checkout = retrod_env(projects, data, url)  # (the environment the tests run in)
        env = installed(checkout, scratch)
        retrod = skills.command_argv()  # the command `retrod hooks install` writes, as a user types it
        done = subprocess.run([sys.executable, "-m", "retrod", "run", "--once"], env=env, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise RuntimeError(f"retrod run --once failed: {done.stderr[-500:]}")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(LOG_PHASES)
            conn.execute("VACUUM ANALYZE")
            results["phases"] = conn.execute("SELECT count(*) FROM cc_session_phases").fetchone()[0]
            trends.trends(conn, by="month", tz="UTC")  # prices loaded, the rates looked up once
            results.update(_trends_times(conn, runs))
            results["periods_by_week"] = len(trends.trends(conn, by="week", tz="UTC")["periods"])
            # the same machine's speed, by a query whose code this round did not change (its history:
            # docs/performance.md, "retrod sessions over 10,000 sessions")
            results["sessions_query_ms"] = round(1000 * median_seconds(
                lambda: tracking.recent_sessions(conn, project=None, since=None, limit=20), runs), 1)
            results["minute_rollups_ms"] = round(1000 * median_seconds(lambda: (
                conn.execute("SELECT session_uuid, sum(input_tokens), sum(output_tokens), sum(cache_read_tokens),"
                             " sum(cache_create_tokens) FROM retrod.request_minutes GROUP BY 1").fetchall(),
                conn.execute("SELECT session_uuid, sum(claude_us), sum(tool_us), sum(human_us)"
                             " FROM retrod.event_minutes GROUP BY 1").fetchall()), runs), 1)
            results["rows"] = dict(zip(("request_minutes", "event_minutes", "session_requests", "session_times",
                                        "cache_misses"),
                                       conn.execute("SELECT (SELECT count(*) FROM retrod.request_minutes),"
                                                    " (SELECT count(*) FROM retrod.event_minutes),"
                                                    " (SELECT count(*) FROM retrod.session_requests),"
                                                    " (SELECT count(*) FROM retrod.session_times),"
                                                    " (SELECT count(*) FROM retrod.cache_misses)").fetchone(),
                                       strict=True))
            # These small sessions miss the cache nowhere: trends by week again with two misses a
            # session (an expired one and an invalidated one at each session's first request),
            # what a heavy user's year holds (the fixtures: 28 misses in 45 sessions)
            conn.execute(SYNTHETIC_MISSES)
            conn.execute("ANALYZE retrod.cache_misses")
            started = time.perf_counter()
            trends.trends(conn, by="week", tz="UTC")  # (every session's day changed: every week summed again)
            results["by_week_with_misses_first_ms"] = round(1000 * (time.perf_counter() - started), 1)
            results["by_week_with_misses_ms"] = round(1000 * median_seconds(
                lambda: trends.trends(conn, by="week", tz="UTC"), runs), 1)
            conn.execute("DELETE FROM retrod.cache_misses WHERE agent = 'bench'")
        trends_command = [*retrod, "trends", "--by", "week", "--tz", "UTC", "--json"]
        subprocess.run(trends_command, env=env, check=True, capture_output=True)  # (its bytecode written)
        results["command_ms"] = round(1000 * median_seconds(lambda: subprocess.run(
            trends_command, env=env, check=True, capture_output=True), max(3, runs // 3)), 1)

        # a hundred sessions of one project folder: -many-0 is the folder Claude Code names for /many/0
        payload = json.dumps({"session_id": str(uuid.uuid4()), "prompt_id": None, "transcript_path": "/nowhere.jsonl",
                              "cwd": "/many/0", "permission_mode": "default", "hook_event_name": "SessionStart",
                              "source": "startup", "model": "claude-opus-4-8"}).encode()
        _hook_times(env, payload, 1)  # (its bytecode written)
        results["hook_no_daemon"] = _ms(_hook_times(env, payload, max(3, hook_runs // 3)))
        with daemon(url, projects, data) as process:
            # Its start-up scan of the 10,000 transcripts runs beside the socket, which answers from
            # the start: timed after it, as a daemon that runs is (before, the first answers waited)
            wait_for_log(data / "daemon.log", "caught up", process, 600)
            _hook_times(env, payload, 1)  # the daemon's first answer loads the price data
            results["hook_daemon"] = _ms(_hook_times(env, payload, hook_runs))
            results["bare_python_ms"] = round(1000 * median_seconds(lambda: subprocess.run(
                [sys.executable, "-c", "pass"], env=env, check=True), hook_runs), 1)
            for name, args in SERVED.items():
                _served(env, args, retrod)  # (its bytecode written)
                results[f"{name}_daemon_ms"] = round(
                    1000 * median_seconds(lambda a=args: _served(env, a, retrod), hook_runs), 1)
                results[f"{name}_daemon_checkout_ms"] = round(1000 * median_seconds(
                    lambda a=args: _served(checkout, a, [sys.executable, "-m", "retrod"]), hook_runs), 1)
    results["year"] = _year(scratch, files, runs)
    return results


def _trends_rows(label: str, r: dict) -> list[str]:
    return [(f"| {label}, periods kept (median) | " + " | ".join(f"{r[f'{name}_ms']:.1f} ms" for name, _ in SHAPES)
             + f" | {r['by_day_after_a_phase_ms']:.1f} ms |"),
            (f"| {label}, first ask (every period summed) | "
             + " | ".join(f"{r[f'{name}_first_ms']:.1f} ms" for name, _ in SHAPES) + " | |")]


def table(r: dict) -> list[str]:
    year = r.get("year")
    return [
        (f"{r['sessions']:,} sessions, {r['phases']:,} phases logged; rows: "
         + ", ".join(f"{name} {n:,}" for name, n in r["rows"].items())
         + f". The machine's speed: `retrod sessions`' query took {r['sessions_query_ms']:.1f} ms here."
         + (f" The other year (corpus.write_year): {year['sessions']:,} sessions, {year['periods_by_day']} days."
            if year else "")),
        "",
        ("| trends in-process | by week | by day | by month, per project | by week, per model | by week, per machine "
         "| by day, a phase logged before each ask |"),
        "|---|---:|---:|---:|---:|---:|---:|",
        *_trends_rows(f"{r['sessions']:,} sessions ({r['periods_by_week']} weeks)", r),
        *(_trends_rows("the other year", year) if year else []),
        "",
        ("| plain per-minute sums per session | `retrod trends --by week`, whole command, no daemon |"
         " trends by week, two prompt-cache misses stored a session: kept, first |"),
        "|---:|---:|---:|",
        (f"| {r['minute_rollups_ms']:.1f} ms | {r['command_ms']:.0f} ms | {r['by_week_with_misses_ms']:.1f} ms,"
         f" {r['by_week_with_misses_first_ms']:.1f} ms |"),
        "",
        "| `retrod brief --hook`, whole process | median | p95 | max |",
        "|---|---:|---:|---:|",
        *(f"| {label} | {r[key]['median_ms']:.0f} ms | {r[key]['p95_ms']:.0f} ms | {r[key]['max_ms']:.0f} ms |"
          for label, key in (("daemon running", "hook_daemon"), ("no daemon", "hook_no_daemon"))),
        "",
        "| whole process, daemon running (median) | `python3 -c pass` | trends | sessions | brief |",
        "|---|---:|---:|---:|---:|",
        f"| `retrod …`, installed: ms (× a bare start) | {r['bare_python_ms']:.0f} | {_times(r, '_daemon_ms')} |",
        *([f"| `python -m retrod …` from the checkout, no bytecode | | {_times(r, '_daemon_checkout_ms')} |"]
          if "trends_daemon_checkout_ms" in r else []),
    ]


def _times(r: dict, suffix: str) -> str:
    return " | ".join(f"{r[n + suffix]:.0f} ({r[n + suffix] / r['bare_python_ms']:.1f}×)" for n in SERVED)
