"""The report against the reference (tests/reference.py), figure by figure, as lists of
mismatches: shared by the fixtures' tests (test_cache, test_plan) and the real-transcript check
(test_real_corpus), which reports every mismatch of a corpus at once rather than the first."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool

import reference
import reference_tools
from helpers import HOST
from retrod.ingest.ingester import Ingester
from retrod.report import prices
from retrod.store.store import Store

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CACHE_FIGURES = ("read", "create", "misses", "waste_usd")
TASK_FIGURES = ("requests", "tool_turns", "text_turns", "claude_s", "tool_s", "human_s", "away_s", "tokens")


@contextmanager
def reference_reads_once() -> Iterator[None]:
    """The reference reads the whole projects folder at every call (a session's figures may
    depend on other sessions' files); over a corpus of files that do not change meanwhile, read
    them once: the same figures, not a pass per session and figure."""
    files: dict[str, list[dict]] = {}
    requests: dict[str, list[dict]] = {}
    real_find, real_load = reference.find_files, reference.load

    def find_once(projects_dir: Path) -> list[dict]:
        key = str(projects_dir)
        if key not in files:
            files[key] = real_find(Path(projects_dir))
        return files[key]

    def load_once(projects_dir: Path, session: str) -> tuple[list[dict], list[dict]]:
        key = str(projects_dir)
        if key not in requests:
            requests[key] = real_load(projects_dir, "")[1]
        return [f for f in find_once(projects_dir) if f["session"] == session], requests[key]

    reference.find_files, reference_tools.find_files, reference.load = find_once, find_once, load_once
    try:
        yield
    finally:
        reference.find_files, reference_tools.find_files, reference.load = real_find, real_find, real_load


def cache_mismatches(session: str, report: dict, want: dict) -> list[tuple]:
    """DESIGN §2.8: the session's cache figures, its ten costliest misses and each subagent's
    misses; want is reference.compute_cache(...)[session]."""
    out: list[tuple] = []
    cache = report["summary"]["cache"]
    for key in CACHE_FIGURES:
        if cache[key] != want["summary"][key]:
            out.append((session, f"cache.{key}", cache[key], want["summary"][key]))
    ratio = want["summary"]["hit_ratio"]
    if cache["hit_ratio"] != (None if ratio is None else pytest.approx(ratio, rel=1e-12)):
        out.append((session, "cache.hit_ratio", cache["hit_ratio"], ratio))
    costliest = [{"at": (EPOCH + timedelta(microseconds=m["at_us"])).isoformat(), "agent": m["agent"],
                  "cause": m["cause"], "reason": m["reason"], "rewritten": m["rewritten"],
                  "extra_usd": reference.usd(m["extra"]), "pause_s": m["pause_s"], "prefix_before": m["prefix_before"]}
                 for m in want["costliest"]]
    if cache["costliest"] != costliest:
        out.append((session, "cache.costliest", cache["costliest"], costliest))
    for sub in report["subagents"]:
        expected = want["subagents"].get(sub["agent_id"])
        if expected is None or sub["cache"]["misses"] != expected["misses"]:
            out.append((session, f"subagent {sub['agent_id']} cache.misses", sub["cache"]["misses"],
                        expected and expected["misses"]))
    return out


def _us(iso: str | None) -> int | None:
    return None if iso is None else reference.to_microseconds(datetime.fromisoformat(iso))


def _bounds(windows: list[dict]) -> list[tuple[datetime, datetime]]:
    far = datetime(2100, 1, 1, tzinfo=UTC)  # an open window: every time from its start on
    return [(datetime.fromisoformat(w["start"]), datetime.fromisoformat(w["end"]) if w["end"] else far)
            for w in windows]


def _sum_phase_figures(rows: list[dict]) -> dict:
    out: dict = {"tokens": dict.fromkeys(("input", "output", "cache_read", "cache_create"), 0)}
    for key in ("requests", "tool_turns", "text_turns", "claude_s", "tool_s", "human_s", "away_s"):
        out[key] = round(sum(r[key] for r in rows), 3)
    for r in rows:
        for f in out["tokens"]:
            out["tokens"][f] += r["tokens"][f]
    return out


def plan_mismatches(root: Path, session: str, report: dict) -> list[tuple]:
    """DESIGN §2.9: the plan's family and counting calls, each task's name, status and windows,
    the tasks never started, and each task's figures over its windows (§2.5's phase figures,
    cost, calls) and subagents, against the reference."""
    out: list[tuple] = []
    plan = report["plan"]
    want = reference.compute_plan(root, session)
    for key in ("family", "calls"):
        if plan[key] != want[key]:
            out.append((session, f"plan.{key}", plan[key], want[key]))
    got_tasks = [(t["name"], t["status"], [(_us(w["start"]), _us(w["end"])) for w in t["windows"]])
                 for t in plan["tasks"]]
    want_tasks = [(t["name"], t["status"], [(s, e) for s, e in t["windows"]]) for t in want["tasks"]]
    if got_tasks != want_tasks:
        out.append((session, "plan.tasks", got_tasks, want_tasks))
    if plan["tasks_never_started"] != want["tasks_never_started"]:
        out.append((session, "plan.tasks_never_started", plan["tasks_never_started"], want["tasks_never_started"]))
    if out or not plan["tasks"]:
        if not plan["tasks"] and any(s["task"] is not None for s in report["subagents"]):
            out.append((session, "subagent task without tasks", [s["task"] for s in report["subagents"]], None))
        return out  # the figures below are only comparable over the same windows
    bounds = [_bounds(t["windows"]) for t in plan["tasks"]]
    flat = [b for task in bounds for b in task]
    figures = reference.compute_phases(root, session, flat)
    costs = reference.compute_phase_models(root, session, flat, with_cost=True)
    calls = reference_tools.tool_use(root, session, flat)["phases"]
    i = 0
    for task, windows in zip(plan["tasks"], bounds, strict=True):
        mine = slice(i, i + len(windows))
        i += len(windows)
        name = task["name"]
        got = {k: task[k] for k in TASK_FIGURES}
        expected = _sum_phase_figures(figures[mine])
        if got != expected:
            out.append((session, f"task {name!r} figures", got, expected))
        usd = [c["cost"]["usd"] for c in costs[mine] if c["cost"]["usd"] is not None]
        # Each window's cost is rounded to the micro-dollar, the task's once over all its windows:
        # they may differ by half a micro-dollar a window.
        if task["cost"]["usd"] != pytest.approx(sum(usd) if usd else None, abs=1e-6 + 5e-7 * len(windows)):
            out.append((session, f"task {name!r} cost", task["cost"]["usd"], sum(usd) if usd else None))
        for key in ("calls", "productive"):
            if task["tool_use"][key] != sum(c[key] for c in calls[mine]):
                out.append((session, f"task {name!r} tool_use.{key}", task["tool_use"][key],
                            sum(c[key] for c in calls[mine])))
    belongs = reference.subagent_phase(root, session, flat)
    window_task = [n for n, windows in enumerate(bounds, 1) for _ in windows]
    for sub in report["subagents"]:
        index = belongs.get(sub["agent_id"])
        if sub["task"] != (None if index is None else window_task[index]):
            out.append((session, f"subagent {sub['agent_id']} task", sub["task"],
                        None if index is None else window_task[index]))
    for n, task in enumerate(plan["tasks"], 1):
        if task["subagents"] != [s["agent_id"] for s in report["subagents"] if s["task"] == n]:
            out.append((session, f"task {task['name']!r} subagents", task["subagents"], n))
    return out


def chunked(root: Path, final: dict[Path, bytes], url: str, rng: random.Random, largest: int = 700) -> None:
    """Write the files in random chunks of 1 to `largest` bytes (a line split anywhere), reading
    them now and then with an ingester that restarts at random, then once more at the end."""
    written = dict.fromkeys(final, 0)
    with ConnectionPool(url, min_size=1, max_size=2, open=True) as pool:
        with pool.connection() as conn:
            prices.store_tiers(conn)
        ingester = Ingester(Store(pool, HOST), [root], rng.choice([512, 4096]))
        while pending := [p for p, n in written.items() if n < len(final[p])]:
            path = rng.choice(pending)
            upto = min(len(final[path]), written[path] + rng.randint(1, largest))
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as f:
                f.write(final[path][written[path]:upto])
            written[path] = upto
            if rng.random() < 0.5:
                if rng.random() < 0.3:
                    ingester = Ingester(Store(pool, HOST), [root], rng.choice([512, 4096]))
                ingester.scan()
        Ingester(Store(pool, HOST), [root]).scan()
