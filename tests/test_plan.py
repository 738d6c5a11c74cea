"""Tasks from Claude's own plan (accounting.md §2.9, issue 30): the plan calls stored as they are read,
the tasks derived when a report is asked for, each with a phase's figures over its windows.

Hand-made transcripts pin each rule, with the expected tasks worked out by hand from docs/accounting.md's
text (seconds after 2026-03-01T10:00:00Z); the fixtures are checked against tests/reference.py
(§2.9 written from docs/accounting.md alone); random chunks with restarts end where one pass does."""

from __future__ import annotations

import random
import shutil
import sys
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reference
from conftest import FIXTURES, fresh_database
from helpers import ingest
from plan_transcripts import BASE, Transcript, at, session_id
from report_checks import chunked, plan_mismatches, utc_ms
from retrod.report import markdown, model


# Each case: the transcript, and what accounting.md §2.9 makes of it, worked out by hand:
# (family, counting calls, [(name, status, [(start, end or None)])] in task order, [(name, status)] never started)
def _cases() -> dict[str, tuple[Transcript, tuple]]:
    cases: dict[str, tuple[Transcript, tuple]] = {}

    def case(name: str, transcript: Transcript, expected: tuple) -> None:
        cases[name] = (transcript, expected)

    n = iter(range(1, 100))
    # Each list replaces the plan; the task in progress is current until a call takes it out.
    case("todo_replace", Transcript(session_id(next(n))).user(0)
         .todos(10, ("Parse", "in_progress"), ("Test", "pending"))
         .todos(20, ("Parse", "completed"), ("Test", "in_progress"))
         .todos(30, ("Parse", "completed"), ("Test", "completed")).say(40),
         ("todo", 3, [("Parse", "completed", [(10, 20)]), ("Test", "completed", [(20, 30)])], []))
    # A content twice in one list: its first place (pending) counts, the copy is no candidate.
    case("todo_duplicate_content", Transcript(session_id(next(n))).user(0)
         .todos(10, ("A", "pending"), ("A", "in_progress"), ("B", "in_progress"))
         .todos(20, ("A", "in_progress"), ("B", "completed"))
         .todos(30, ("A", "completed"), ("B", "completed")),
         ("todo", 3, [("B", "completed", [(10, 20)]), ("A", "completed", [(20, 30)])], []))
    # An edited content is a new task; the old one leaves the plan and ends deleted.
    case("todo_edited_content", Transcript(session_id(next(n))).user(0)
         .todos(10, ("Parse config", "in_progress"))
         .todos(20, ("Parse the config", "in_progress"))
         .todos(30, ("Parse the config", "completed")),
         ("todo", 3, [("Parse config", "deleted", [(10, 20)]), ("Parse the config", "completed", [(20, 30)])], []))
    # Absent from the last list: deleted, unless completed in the last list that held it.
    case("todo_deleted_at_end", Transcript(session_id(next(n))).user(0)
         .todos(10, ("A", "in_progress"), ("B", "pending"), ("C", "completed"), ("D", "bogus"))
         .todos(20, ("A", "completed")),
         ("todo", 2, [("A", "completed", [(10, 20)])], [("B", "deleted"), ("C", "completed"), ("D", "deleted")]))
    # The task family: ids from the result (toolUseResult.task.id, else the text), renames,
    # an update of an unknown id, deleted.
    case("task_family", Transcript(session_id(next(n))).user(0)
         .create(10, "Parse", "1").create(12, "Test", "2", in_outcome=False)
         .update(20, "1", "in_progress").update(30, "1", "completed", subject="Parse config")
         .update(31, "2", "in_progress").update(40, "9", "pending", subject="Ghost")
         .update(50, "2", "deleted").say(60),
         ("task", 7, [("Parse config", "completed", [(20, 30)]), ("Test", "deleted", [(31, 50)])],
          [("Ghost", "pending")]))
    # Several in progress at once: the current one keeps the time until it ends.
    case("task_parallel", Transcript(session_id(next(n))).user(0)
         .create(10, "One", "1").create(11, "Two", "2")
         .update(20, "1", "in_progress").update(25, "2", "in_progress")
         .update(30, "1", "completed").update(40, "2", "completed"),
         ("task", 6, [("One", "completed", [(20, 30)]), ("Two", "completed", [(30, 40)])], []))
    # Failed results do not count (is_error; success: false), nor decide the family.
    case("failed_results", Transcript(session_id(next(n))).user(0)
         .todos(10, ("A", "in_progress"), is_error=True)
         .update(15, "5", "in_progress", outcome={"success": False, "error": "Task not found"})
         .todos(30, ("B", "in_progress")).todos(40, ("B", "completed")),
         ("todo", 2, [("B", "completed", [(30, 40)])], []))
    # A TaskCreate without a result does not count: the update makes "#1" from nothing.
    case("taskcreate_without_result", Transcript(session_id(next(n))).user(0)
         .create(10, "Lost", None).update(20, "1", "in_progress").update(30, "1", "completed"),
         ("task", 2, [("#1", "completed", [(20, 30)])], []))
    # The first counting call's family wins; the other family's calls are ignored.
    case("mixed_families", Transcript(session_id(next(n))).user(0)
         .create(10, "T", "1").todos(20, ("A", "in_progress"))
         .update(30, "1", "in_progress").update(40, "1", "completed"),
         ("task", 3, [("T", "completed", [(30, 40)])], []))
    # A task still current after the last call has an open window.
    case("open_last_window", Transcript(session_id(next(n))).user(0)
         .todos(10, ("A", "completed"), ("B", "in_progress")).say(20),
         ("todo", 1, [("B", "in_progress", [(10, None)])], [("A", "completed")]))
    # Two calls at one time: the window between them is dropped, and the two around it are one.
    case("zero_length_and_merge", Transcript(session_id(next(n))).user(0)
         .todos(10, ("A", "in_progress"), ("B", "pending"))
         .todos(20, ("A", "pending"), ("B", "in_progress"), after=5)
         .todos(20, ("A", "in_progress"), ("B", "pending"), after=5)
         .todos(30, ("A", "completed"), ("B", "completed")),
         ("todo", 4, [("A", "completed", [(10, 30)])], [("B", "completed")]))
    # No plan at all.
    case("no_plan", Transcript(session_id(next(n))).user(0).say(5), (None, 0, [], []))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def hand_made(pg_cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("plan") / "projects"
    for transcript, _ in CASES.values():
        transcript.write(root)
    with fresh_database(pg_cluster) as url:
        ingest(url, [root])
        with psycopg.connect(url) as conn:
            yield root, {name: model.build(conn, t.session) for name, (t, _) in CASES.items()}


def _shape(plan: dict) -> tuple:
    """A report's plan as the cases write it: seconds after BASE."""
    def secs(iso: str | None) -> float | None:
        return None if iso is None else (datetime.fromisoformat(iso) - BASE).total_seconds()
    return (plan["family"], plan["calls"],
            [(t["name"], t["status"], [(secs(w["start"]), secs(w["end"])) for w in t["windows"]])
             for t in plan["tasks"]],
            [(t["name"], t["status"]) for t in plan["tasks_never_started"]])


def _reference_shape(plan: dict) -> tuple:
    def secs(us: int | None) -> float | None:
        return None if us is None else (us - reference.to_microseconds(BASE)) / 1e6
    return (plan["family"], plan["calls"],
            [(t["name"], t["status"], [(secs(s), secs(e)) for s, e in t["windows"]]) for t in plan["tasks"]],
            [(t["name"], t["status"]) for t in plan["tasks_never_started"]])


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_rule(hand_made, case) -> None:
    root, reports = hand_made
    transcript, expected = CASES[case]
    assert _shape(reports[case]["plan"]) == expected
    assert _reference_shape(reference.compute_plan(root, transcript.session)) == expected  # the oracle agrees
    assert [t["number"] for t in reports[case]["plan"]["tasks"]] == list(range(1, len(expected[2]) + 1))


def test_a_task_counts_what_its_windows_hold(hand_made) -> None:
    """todo_replace: "Parse" [10, 20) holds the TodoWrite call of 10 (100 in, 20 out); the one of 20
    is Test's. Worked out by hand, the gaps are 0-10 claude (the assistant line at 10), 10-11 tool
    (its result), 11-20 claude, 20-21 tool, 21-30 claude, 30-31 tool, 31-40 claude: Parse holds
    9 s of Claude's time and 1 s of tools'."""
    _, reports = hand_made
    parse, test = reports["todo_replace"]["plan"]["tasks"]
    assert parse["tokens"] == {"input": 100, "output": 20, "cache_read": 0, "cache_create": 0}
    assert parse["requests"] == 1 and parse["tool_turns"] == 1 and parse["text_turns"] == 0
    assert (parse["claude_s"], parse["tool_s"], parse["human_s"], parse["away_s"]) == (9.0, 1.0, 0.0, 0.0)
    assert parse["tool_use"]["calls"] == 1
    assert parse["cost"]["usd"] is not None and parse["cost"]["usd"] > 0
    assert (test["started_at"], test["ended_at"]) == (utc_ms(at(20)), utc_ms(at(30)))


def test_fixtures_equal_the_reference(db_url) -> None:
    """accounting.md §2.9: "In the committed fixtures, 18 of 45 sessions hold a plan: 83 tasks were worked on,
    34 were never started" — and every session's tasks, windows and figures are the reference's."""
    ingest(db_url, [FIXTURES])
    with psycopg.connect(db_url) as conn:
        sessions = [r[0] for r in conn.execute(
            "SELECT DISTINCT session_uuid FROM retrod.files WHERE kind IN ('main', 'subagent', 'agent_root')"
            " AND session_uuid IS NOT NULL")]
        reports = {s: model.build(conn, s) for s in sessions}
    assert len(reports) == 45
    planned = [r["plan"] for r in reports.values() if r["plan"]["family"]]
    assert (len(planned), sum(len(p["tasks"]) for p in planned),
            sum(len(p["tasks_never_started"]) for p in planned)) == (18, 83, 34)
    assert [m for session, report in sorted(reports.items())
            for m in plan_mismatches(FIXTURES, session, report)] == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_chunks_end_like_one_pass(pg_cluster, tmp_path, seed) -> None:
    """Calls and their results arriving in any chunks, with restarts, give the plan one pass gives:
    every hand-made case, and a fixture session of each family."""
    source = tmp_path / "source"
    for transcript, _ in CASES.values():
        transcript.write(source)
    for rel in ("-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
                "-Users-schrockn--erk-repos-erk-worktrees-erk-slot-48/026e1400-7606-45c1-aa2f-392d2b6dce7e.jsonl"):
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / rel, source / rel)
    final = {tmp_path / "chunked" / p.relative_to(source): p.read_bytes() for p in sorted(source.rglob("*.jsonl"))}
    sessions = sorted(p.stem for p in final)
    with fresh_database(pg_cluster) as once, fresh_database(pg_cluster) as chunked_url:
        ingest(once, [source])
        chunked(tmp_path / "chunked", final, chunked_url, random.Random(seed))
        with psycopg.connect(once) as a, psycopg.connect(chunked_url) as b:
            for session in sessions:
                want, got = model.build(a, session)["plan"], model.build(b, session)["plan"]
                assert got == want, session


def test_markdown_shows_the_tasks_after_the_phases(hand_made) -> None:
    """task_family: "Parse config" [20, 30) and "Test" [31, 50) — Test holds more calls, so more
    tokens and cost: it is the costliest; "Ghost" was never started."""
    _, reports = hand_made
    text = markdown.render(reports["task_family"])
    section = text[text.index("## Tasks (from Claude's plan)"):]
    assert "`TaskCreate` / `TaskUpdate`, 7 calls" in section
    rows = [line for line in section.splitlines() if line.startswith(("| 1 ", "| 2 "))]
    assert rows[0].startswith("| 1 | Parse config | completed | 10s |")
    assert rows[1].startswith("| 2 | Test **(costliest)** | deleted | 19s |")
    # The session's times add to 60 s (0 to 60); the tasks hold 10 + 19.
    assert "Outside every task: 31s." in section
    assert 'Never started: "Ghost" (pending).' in section
    assert "## Tasks (from Claude's plan)" not in markdown.render(reports["no_plan"])
    open_task = markdown.render(reports["open_last_window"])
    assert "| 1 | B **(costliest)** | in_progress (current) |" in open_task
