"""`retrod statusline` against a bare Python start and against `ccusage statusline`, same stdin.

On a history of ~600 MB (copies of the real fixture projects, corpus.py) plus one session written
up to now (so that today's cost has something to sum), caught up on by a running daemon, the
session tracked with a phase open; each command run as Claude Code runs it, a process started
with the status line's JSON on stdin (the documented shape, tests/fixtures/claude-code) and its
output read:

- python: `python -c pass`, the interpreter retrod runs on: the floor of any Python command;
- retrod: `<venv>/bin/retrod statusline`, the command `retrod statusline install` writes;
- retrod, no daemon: the same against a data folder with no daemon (what the JSON alone gives);
- ccusage: `ccusage statusline` 20.0.24, its default options (offline prices, its cache on).

Three cases: *unchanged* (a timed refresh: the transcript as it was); *after a message*, the one
Claude Code makes after each answer: a new assistant line appended to the session's transcript,
then the command started 300 ms later (Claude Code debounces the status line by 300 ms; ccusage's
cache sees the file changed; retrod's daemon has usually read the line by then, its watcher
waiting 50 ms); and *right after a message*, started at once (retrod's command then has the
daemon read the line while it waits). Rounds are interleaved (python, retrod, ccusage, one after
the other), so the machine's load falls on all alike. retrod's package is byte-compiled first, as
`pip install` does (the tests' environment sets PYTHONDONTWRITEBYTECODE, which would have every
run compile it again).
"""

from __future__ import annotations

import compileall
import json
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

import retrod
from corpus import fresh_lines, write_tree
from harness import daemon, database, retrod_env, wait_for_log
from peers import Ccusage
from retrod import tracking

SESSION = "99999999-5555-4555-8555-000000000009"
DEBOUNCE_S = 0.3  # Claude Code runs the status line this long after the update that asks for it
PAYLOAD = Path(__file__).resolve().parents[1] / "fixtures" / "claude-code" / "statusline-full.json"
_TS = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"')


def write_recent_session(folder: Path, target_bytes: int) -> Path:
    """A real session (fresh ids) of about `target_bytes`, its times moved so that it ends now."""
    lines, size = [], 0
    for line in fresh_lines(SESSION):
        lines.append(line)
        size += len(line.encode())
        if size >= target_bytes:
            break
    stamps = [datetime.fromisoformat(m.replace("Z", "+00:00")) for m in _TS.findall("".join(lines))]
    shift = datetime.now(UTC) - max(stamps)

    def moved(m: re.Match) -> str:
        ts = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")) + shift
        return '"' + ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + 'Z"'

    path = folder / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(_TS.sub(moved, line) for line in lines))
    return path


def a_message(path: Path, n: int) -> None:
    """What Claude Code writes after an answer: one assistant line, a new request, stamped now."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    line = {"type": "assistant", "sessionId": SESSION, "timestamp": now, "uuid": f"{SESSION[:8]}-bench-{n}",
            "message": {"id": f"msg_bench_{n}", "role": "assistant", "model": "claude-opus-4-6",
                        "content": [{"type": "text", "text": "done"}],
                        "usage": {"input_tokens": 4, "output_tokens": 120, "cache_read_input_tokens": 60_000,
                                  "cache_creation_input_tokens": 800}}}
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")


def timed(command: list[str], stdin: bytes, env: dict[str, str], prints: bool = True) -> float:
    """The wall time of one run; it must succeed, and print when `prints` (a status line never is blank)."""
    start = time.perf_counter()
    done = subprocess.run(command, input=stdin, env=env, capture_output=True, timeout=300)
    took = time.perf_counter() - start
    if done.returncode != 0 or (prints and not done.stdout.strip()):
        raise RuntimeError(f"{' '.join(command[-2:])} failed ({done.returncode}): {done.stderr[-500:]!r}")
    return took


def summary(seconds: list[float]) -> dict:
    ms = sorted(1000 * s for s in seconds)
    return {"runs": len(ms), "median_ms": round(statistics.median(ms), 1),
            "p95_ms": round(ms[round(0.95 * (len(ms) - 1))], 1), "max_ms": round(ms[-1], 1)}


def run(scratch: Path, smoke: bool, ccusage: Ccusage | None, history_mb: float | None = None) -> dict:
    history_bytes = int((history_mb or (2 if smoke else 600)) * 1e6)
    rounds, peer_rounds = (10, 2) if smoke else (200, 10)
    claude_dir = scratch / "statusline-corpus"
    projects = claude_dir / "projects"
    corpus_bytes = write_tree(projects, history_bytes, seed=4)
    transcript = write_recent_session(projects / "-home-me-code-app", 2_000_000)
    corpus_bytes += transcript.stat().st_size
    stdin = json.loads(PAYLOAD.read_text())
    now = time.time()
    stdin.update(session_id=SESSION, transcript_path=str(transcript), cwd="/home/me/code/app")
    stdin["rate_limits"]["five_hour"]["resets_at"] = int(now + 3 * 3600)
    stdin["rate_limits"]["seven_day"]["resets_at"] = int(now + 4 * 86400)
    payload = json.dumps(stdin).encode()
    package = Path(retrod.__file__).parent
    compileall.compile_dir(str(package), quiet=1)  # as pip does at install
    retrod_command = [str(Path(sys.executable).parent / "retrod"), "statusline"]
    python = [sys.executable, "-c", "pass"]
    data = scratch / "statusline-data"
    results: dict = {"corpus_mb": round(corpus_bytes / 1e6), "session_mb": round(transcript.stat().st_size / 1e6, 1)}
    samples: dict[str, list[float]] = {k: [] for k in (
        "python", "retrod_unchanged", "retrod_after_message", "retrod_right_after_message", "retrod_no_daemon",
        "ccusage_unchanged", "ccusage_after_message")}
    with database(scratch, "statusline") as url:
        env = retrod_env(projects, data, url)
        env["COLUMNS"] = "80"
        no_daemon = dict(env, RETROD_DATA_DIR=str(scratch / "statusline-no-daemon"))
        with daemon(url, projects, data) as process, psycopg.connect(url, autocommit=True) as conn:
            caught_up = wait_for_log(data / "daemon.log", "caught up", process, 3600)
            results["catch_up_s"] = caught_up.get("seconds")
            tracking.track_start(conn, SESSION, "statusline bench")
            tracking.phase_start(conn, SESSION, "bench", "measure")
            timed(retrod_command, payload, env)  # the daemon's first answer: its statements prepared
            results["sample"] = subprocess.run(retrod_command, input=payload, env=dict(env, NO_COLOR="1"),
                                               capture_output=True, check=True).stdout.decode()
            messages = iter(range(1, 1 << 30))
            peer = [*ccusage.command, "statusline"] if ccusage is not None else []
            for i in range(rounds):
                with_peer = i < peer_rounds and ccusage is not None
                samples["python"].append(timed(python, b"", env, prints=False))
                samples["retrod_unchanged"].append(timed(retrod_command, payload, env))
                if with_peer:
                    samples["ccusage_unchanged"].append(timed(peer, payload, ccusage.env(claude_dir)))
                a_message(transcript, next(messages))
                time.sleep(DEBOUNCE_S)
                samples["retrod_after_message"].append(timed(retrod_command, payload, env))
                if with_peer:
                    a_message(transcript, next(messages))
                    time.sleep(DEBOUNCE_S)
                    samples["ccusage_after_message"].append(timed(peer, payload, ccusage.env(claude_dir)))
                a_message(transcript, next(messages))
                samples["retrod_right_after_message"].append(timed(retrod_command, payload, env))
                if i % 4 == 0:
                    samples["retrod_no_daemon"].append(timed(retrod_command, payload, no_daemon))
            # The figures it showed are the report's: the last run's cost against `retrod report`.
            shown = subprocess.run(retrod_command, input=payload, env=dict(env, NO_COLOR="1"),
                                   capture_output=True, check=True).stdout.decode()
            report = subprocess.run([sys.executable, "-m", "retrod", "report", SESSION, "--format", "json",
                                     "--no-save"], env=env, capture_output=True, check=True, text=True)
            cost = json.loads(report.stdout)["summary"]["cost"]["usd"]
            results["cost_shown_is_the_reports"] = shown.startswith(f"${cost:,.2f}")
    results.update({k: summary(v) for k, v in samples.items() if v})
    python_p95 = results["python"]["p95_ms"]
    results["ratios"] = {f"p95_{case}_vs_python": results[f"retrod_{case}"]["p95_ms"] / python_p95
                         for case in ("after_message", "unchanged", "right_after_message")}
    if ccusage is not None:
        for case in ("unchanged", "after_message"):
            results["ratios"][f"ccusage_vs_retrod_{case}"] = (results[f"ccusage_{case}"]["median_ms"]
                                                             / results[f"retrod_{case}"]["median_ms"])
    return results


def table(results: dict) -> list[str]:
    out = [(f"History: {results['corpus_mb']} MB (the session: {results['session_mb']} MB), caught up on by the"
            f" daemon in {results.get('catch_up_s')} s; the session tracked, a phase open; COLUMNS=80."), "",
           "| command | case | runs | median | p95 | max |", "|---|---|---:|---:|---:|---:|"]
    names = {"python": ("`python -c pass`", "—"), "retrod_unchanged": ("`retrod statusline`", "unchanged"),
             "retrod_after_message": ("`retrod statusline`", "after a message"),
             "retrod_right_after_message": ("`retrod statusline`", "right after a message"),
             "retrod_no_daemon": ("`retrod statusline`, no daemon", "unchanged"),
             "ccusage_unchanged": ("`ccusage statusline`", "unchanged"),
             "ccusage_after_message": ("`ccusage statusline`", "after a message")}
    for key, (command, case) in names.items():
        if key in results:
            r = results[key]
            out.append(f"| {command} | {case} | {r['runs']} | {r['median_ms']:.1f} ms | {r['p95_ms']:.1f} ms "
                       f"| {r['max_ms']:.1f} ms |")
    ratios = results["ratios"]
    out += ["", (f"p95 ÷ `python -c pass` p95: {ratios['p95_after_message_vs_python']:.2f}× after a message, "
                 f"{ratios['p95_unchanged_vs_python']:.2f}× unchanged, "
                 f"{ratios['p95_right_after_message_vs_python']:.2f}× right after a message")]
    if "ccusage_vs_retrod_after_message" in ratios:
        out.append(f"ccusage ÷ retrod, medians: {ratios['ccusage_vs_retrod_after_message']:.1f}× after a message, "
                   f"{ratios['ccusage_vs_retrod_unchanged']:.1f}× unchanged")
    out += ["", "The line it printed (COLUMNS=80, NO_COLOR):", "", "```", results["sample"].rstrip("\n"), "```",
            f"(its cost is `retrod report`'s: {results['cost_shown_is_the_reports']})"]
    return out
