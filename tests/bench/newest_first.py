"""The newest session's report during the first backfill: a big older history not yet ingested
and one small session written last (the one a user is about to ask about); `retrod run` is
started, and `retrod report <uuid> --format json --no-save` asked 0.5 s later, then again every
0.1 s until it answers. Measured: from the first ask to the first answer equal to the report
once everything is in (compared after the catch-up), and how much of the history was in by then.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psycopg

from corpus import write_session, write_tree
from harness import daemon, database, retrod_env, wait_for_log

NEWEST = "dddddddd-4444-4444-8444-000000000004"
ASK_AFTER_S = 0.5


def run(scratch: Path, smoke: bool) -> dict:
    history_bytes, session_bytes = (2_000_000, 100_000) if smoke else (500_000_000, 500_000)
    projects = scratch / "newest" / "projects"
    history = write_tree(projects, history_bytes, seed=4)
    write_session(projects, NEWEST, session_bytes)  # written last: the newest file
    data = scratch / "newest" / "data"
    answers: list[tuple[float, str]] = []  # (seconds since the first ask, stdout) of each answer
    with database(scratch, "newest") as url:
        env = retrod_env(projects, data, url)

        def report() -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "retrod", "report", NEWEST, "--format", "json", "--no-save"],
                                  env=env, capture_output=True, text=True, timeout=120)

        with daemon(url, projects, data) as process, psycopg.connect(url, autocommit=True) as conn:
            time.sleep(ASK_AFTER_S)
            first_ask = time.perf_counter()
            in_at_answer = None
            while True:
                done = report()
                if done.returncode == 0:
                    answers.append((time.perf_counter() - first_ask, done.stdout))
                    if in_at_answer is None:
                        in_at_answer = conn.execute('SELECT coalesce(sum("offset"), 0) FROM retrod.files').fetchone()[0]
                if answers and '"event": "caught up"' in (data / "daemon.log").read_text():
                    break
                # then at a slower pace: each ask is a process, taking CPU from the backfill
                time.sleep(1.0 if answers else 0.1)
            caught_up = wait_for_log(data / "daemon.log", "caught up", process, 1)
            final = report()
            assert final.returncode == 0, final.stderr
    correct = next((seconds for seconds, out in answers if out == final.stdout), None)
    return {"history_mb": round(history / 1e6, 1), "session_kb": round(session_bytes / 1e3),
            "first_answer_s": round(answers[0][0], 2),
            "correct_s": round(correct, 2) if correct is not None else None,
            "history_in_at_first_answer_mb": round(int(in_at_answer or 0) / 1e6, 1),
            "catch_up_s": caught_up["seconds"]}


def table(r: dict) -> list[str]:
    correct = "never" if r["correct_s"] is None else f"{r['correct_s']} s"
    return [("| older history, not yet ingested | newest session | its report asked 0.5 s after `retrod run`: "
             "correct after | first answer after | history in by then | whole catch-up |"),
            "|---:|---:|---:|---:|---:|---:|",
            (f"| {r['history_mb']} MB | {r['session_kb']} kB | {correct} | {r['first_answer_s']} s "
             f"| {r['history_in_at_first_answer_mb']} MB | {r['catch_up_s']} s |")]
