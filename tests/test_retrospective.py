"""The retrospective end to end: phases logged through the CLI and with plain SQL, the report's
figures against the independent reference, and every way the user can get it wrong."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

import reference
import reference_tools
from helpers import HOST, ingest, reports
from retrod.basics.json_text import json_text

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"
SECTIONS = ["## Summary", "## Timeline", "```mermaid", "## Verdict Breakdown", "## Tool Use", "## Waste Signals",
            "## Subagents", "## By Task", "## Phase Detail", "## Lessons Summary"]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def env(db_url: str, projects: Path, tmp_path: Path) -> dict:
    ingest(db_url, [projects])
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    environ.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects), RETROD_HOST_ID=HOST,
                   RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_REPORTS_DIR=str(tmp_path / "reports"),
                   HOME=str(tmp_path / "home"))
    return environ


def retrod(env: dict, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def user_error(done: subprocess.CompletedProcess, needle: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def phase_count(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT count(*) FROM cc_session_phases").fetchone()[0]


WINDOWS = [("2026-02-11T20:36:00", "2026-02-11T21:00:00"), ("2026-02-11T21:00:00", "2026-02-11T21:24:30"),
           ("2026-02-11T21:24:30", "2026-02-11T21:50:00")]


def test_phases_from_cli_and_sql_match_the_reference(env: dict, db_url: str, projects: Path) -> None:
    ok(retrod(env, "track", "start", "--session", SPOTTER[:6], "--description", "Hooks research"))
    (s1, e1), (s2, e2), (s3, e3) = WINDOWS
    ok(retrod(env, "phase", "log", "--session", SPOTTER, "--task", "hooks", "--phase", "read docs",
              "--start", s1 + "Z", "--end", e1 + "Z", "--verdict", "high_impact", "--lessons", "docs first"))
    ok(retrod(env, "phase", "log", "--session", SPOTTER, "--task", "hooks", "--phase", "subagent",
              "--start", s2 + "+00:00", "--end", e2 + "+00:00", "--verdict", "exploratory_useful"))
    with psycopg.connect(db_url) as conn:  # another tool writing the user's table directly
        conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict,"
                     " lessons_learned) SELECT id, 'build', 'implement', %s, %s, 'avoidable_waste', 'test earlier'"
                     " FROM cc_sessions WHERE session_uuid = %s", (utc(s3), utc(e3), SPOTTER))

    report = json.loads(ok(retrod(env, "report", SPOTTER, "--format", "json", "--no-save")))
    windows = [(utc(s), utc(e)) for s, e in WINDOWS]
    want = reference.compute_phases(projects, SPOTTER, windows)
    assert [p["verdict"] for p in report["phases"]] == ["high_impact", "exploratory_useful", "avoidable_waste"]
    for got, expected in zip(report["phases"], want, strict=True):
        for key, value in expected.items():
            assert got[key] == value, key
    (agent,) = report["subagents"]
    index = reference.subagent_phase(projects, SPOTTER, windows)[agent["agent_id"]]
    assert agent["phase"] == f"{report['phases'][index]['task']} / {report['phases'][index]['phase']}"
    assert agent["verdict"] == report["phases"][index]["verdict"]

    # Verdicts and tasks add the phases up; shares are of the session's output.
    total_out = report["summary"]["tokens"]["total"]["output"]
    for p in report["phases"]:
        assert report["verdicts"][p["verdict"]]["tokens"] == p["tokens"]
        assert report["verdicts"][p["verdict"]]["output_share"] == round(p["tokens"]["output"] / total_out, 4)
    assert report["tasks"]["hooks"]["phases"] == 2 and report["tasks"]["build"]["phases"] == 1
    assert report["lessons"] == ["docs first", "test earlier"]

    markdown = ok(retrod(env, "report", SPOTTER))
    positions = [markdown.index(section) for section in SECTIONS]
    assert positions == sorted(positions)
    assert markdown.startswith('# Session Retrospective: 2026-02-11 — "Hooks research"\n')
    assert '1. "docs first"\n2. "test earlier"' in markdown
    # Tool use (accounting.md §2.6), as the oracle counts it: the busiest tool's row and each signal's count.
    tools = reference_tools.tool_use(projects, SPOTTER)
    busiest = max(tools["tools"], key=lambda t: t["calls"])
    assert f"| {busiest['name']} | {busiest['calls']:,} | {busiest['failed']:,} |" in markdown
    for title, signal in (("Re-read, unchanged", "re_read"), ("Duplicate call", "duplicate")):
        assert f"| {title} | {tools['summary']['signals'][signal]:,} |" in markdown
    summary = tools["summary"]
    assert f"{summary['productive']:,} of {summary['calls']:,} tool calls productive" in markdown
    saved = Path(env["RETROD_REPORTS_DIR"]) / "2026-02-11-hooks-research-258c7280.md"
    assert saved.read_text() == markdown

    with psycopg.connect(db_url) as conn:  # the report filled the user's totals
        row = conn.execute("SELECT total_output_tokens, total_input_tokens, total_cache_read_tokens,"
                           " total_cache_create_tokens, claude_time_seconds FROM cc_sessions"
                           " WHERE session_uuid = %s", (SPOTTER,)).fetchone()
    total = report["summary"]["tokens"]["total"]
    assert row[:4] == (total["output"], total["input"], total["cache_read"], total["cache_create"])
    assert row[4] == pytest.approx(report["summary"]["claude_s"], rel=1e-6)


def test_live_phase_start_and_end(env: dict, db_url: str) -> None:
    ok(retrod(env, "phase", "start", "--session", SPOTTER, "--task", "t", "--phase", "p1"))
    user_error(retrod(env, "phase", "start", "--session", SPOTTER, "--task", "t", "--phase", "p2"), "still open")
    user_error(retrod(env, "phase", "end", "--session", SPOTTER, "--verdict", "great"),
               "use one of: high_impact, moderate_impact, small_impact, exploratory_useful, exploratory_waste,"
               " avoidable_waste")
    ok(retrod(env, "phase", "end", "--session", SPOTTER, "--verdict", "small_impact", "--actions", "a"))
    user_error(retrod(env, "phase", "end", "--session", SPOTTER, "--verdict", "small_impact"), "no open phase")
    listing = ok(retrod(env, "phases", SPOTTER))
    assert "small_impact" in listing and '"t" / "p1"' in listing

    ok(retrod(env, "phase", "start", "--session", SPOTTER, "--task", "t", "--phase", "p3"))
    report = json.loads(ok(retrod(env, "report", SPOTTER, "--format", "json", "--close", "--no-save")))
    assert all(p["ended_at"] for p in report["phases"])
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT ended_at IS NOT NULL FROM cc_sessions WHERE session_uuid = %s",
                            (SPOTTER,)).fetchone()[0]


def test_mistakes_write_nothing(env: dict, db_url: str) -> None:
    before = phase_count(db_url)
    user_error(retrod(env, "phase", "log", "--session", SPOTTER, "--task", "t", "--phase", "p", "--start",
                      "2026-02-11T21:00:00Z", "--end", "2026-02-11T20:00:00Z", "--verdict", "high_impact"),
               "must end")
    user_error(retrod(env, "phase", "log", "--session", SPOTTER, "--task", "t", "--phase", "p", "--start",
                      "yesterday", "--end", "2026-02-11T20:00:00Z", "--verdict", "high_impact"), "not a time")
    user_error(retrod(env, "phase", "start", "--session", SPOTTER, "--task", " ", "--phase", "p"), "empty")
    user_error(retrod(env, "report", "0"), "ambiguous")
    user_error(retrod(env, "report", "zzzz"), "no session matches")
    assert phase_count(db_url) == before


def test_descriptions_cannot_escape_the_reports_folder(env: dict) -> None:
    nasty = 'He said "hi"\nthen ../../../etc/passwd; rm -rf /'
    ok(retrod(env, "track", "start", "--session", SPOTTER, "--description", nasty))
    done = retrod(env, "report", SPOTTER, "--format", "json")
    assert done.returncode == 0 and done.stderr.startswith("retrod: saved "), done.stderr
    saved = Path(done.stderr.strip().removeprefix("retrod: saved "))
    assert saved.parent == Path(env["RETROD_REPORTS_DIR"])
    assert saved.name == "2026-02-11-he-said-hi-then-etc-passwd-rm-rf-258c7280.json"
    assert json.loads(saved.read_text())["session"]["description"] == nasty  # JSON saved as JSON
    markdown = ok(retrod(env, "report", SPOTTER, "--no-save"))
    assert markdown.splitlines()[0] == ('# Session Retrospective: 2026-02-11 — "He said \\"hi\\" then '
                                        '../../../etc/passwd; rm -rf /"')


def test_session_ids_cannot_escape_the_reports_folder(env: dict, projects: Path, db_url: str) -> None:
    # A 2.0.x agent file names its session by whatever its first sessionId says.
    (projects / "-x").mkdir()
    (projects / "-x" / "agent-1.jsonl").write_text(json.dumps({
        "type": "assistant", "sessionId": "/../../x", "timestamp": "2026-01-01T00:00:00Z",
        "message": {"id": "m-escape", "usage": {"output_tokens": 1}}}) + "\n")
    ingest(db_url, [projects])
    done = retrod(env, "report", "/../../x")
    assert done.returncode == 0, done.stderr
    saved = Path(env["RETROD_REPORTS_DIR"]) / "2026-01-01-x.md"
    assert saved.exists() and list(Path(env["RETROD_REPORTS_DIR"]).parent.glob("*.md")) == []


def test_track_start_finds_the_session_of_the_working_directory(env: dict, projects: Path, tmp_path: Path) -> None:
    work = tmp_path / "my.repo" / "src"
    work.mkdir(parents=True)
    folder = projects / str(work).replace("/", "-").replace(".", "-")
    folder.mkdir()
    older = folder / "11111111-1111-4111-8111-111111111111.jsonl"
    newer = folder / f"{'2' * 8}-2222-4222-8222-{'2' * 12}.jsonl"
    older.write_text("")
    newer.write_text("")
    os.utime(older, (1, 1))
    out = ok(retrod(env, "track", "start", "--description", "here", cwd=work))
    assert newer.stem in out
    user_error(retrod(env, "track", "start", cwd=tmp_path), "no Claude Code transcript")


def test_no_database_is_one_clear_line(env: dict, tmp_path: Path) -> None:
    done = retrod(dict(env, RETROD_DATABASE_URL=f"postgresql://nobody@/x?host={tmp_path}/nowhere"), "report", "x")
    assert done.returncode == 1
    assert done.stderr.startswith("retrod: error:") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_skills_install(env: dict, tmp_path: Path) -> None:
    target = tmp_path / "skills"
    first = ok(retrod(env, "skills", "install", "--dir", str(target)))
    assert first.count("installed:") == 2
    for name in ("retrod-track", "retrod-retro"):
        text = (target / name / "SKILL.md").read_text()
        assert text.startswith(f"---\nname: {name}\n")
    assert all(v in (target / "retrod-track" / "SKILL.md").read_text()
               for v in ("high_impact", "moderate_impact", "small_impact", "exploratory_useful",
                         "exploratory_waste", "avoidable_waste"))
    assert ok(retrod(env, "skills", "install", "--dir", str(target))).count("unchanged:") == 2
    (target / "retrod-track" / "SKILL.md").write_text("my own edits")
    user_error(retrod(env, "skills", "install", "--dir", str(target)), "--force")
    assert "installed:" in ok(retrod(env, "skills", "install", "--dir", str(target), "--force"))


ODD_WINDOWS = [  # edges inside minutes, a window inside one minute, one across two partial minutes
    ("2026-02-11T20:40:10.250", "2026-02-11T20:40:50"), ("2026-02-11T20:41:59", "2026-02-11T20:42:01"),
    ("2026-02-11T20:50:00", "2026-02-11T20:50:00.000001"), ("2026-02-11T21:05:07.5", "2026-02-11T21:33:44.125"),
    ("2026-02-11T21:33:44.125", "2026-02-11T22:00:00"),
]


def test_phase_edges_inside_minutes_match_the_reference(env: dict, db_url: str, projects: Path) -> None:
    ok(retrod(env, "track", "start", "--session", SPOTTER))
    windows = [(utc(s), utc(e)) for s, e in ODD_WINDOWS]
    with psycopg.connect(db_url) as conn:
        for start, end in windows:
            conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                         " SELECT id, 't', %s, %s, %s, 'small_impact' FROM cc_sessions WHERE session_uuid = %s",
                         (start.isoformat(), start, end, SPOTTER))
    report = json.loads(ok(retrod(env, "report", SPOTTER, "--format", "json", "--no-save")))
    want = reference.compute_phases(projects, SPOTTER, windows)
    for got, expected in zip(report["phases"], want, strict=True):
        assert {k: got[k] for k in expected} == expected, got["phase"]
    # accounting.md §2.6: each window's calls, whole minutes from the rollup and edge minutes from the rows.
    want_calls = reference_tools.tool_use(projects, SPOTTER, windows)["phases"]
    assert [p["tool_use"] for p in report["phases"]] == want_calls
    assert sum(p["calls"] for p in want_calls) > 0


def test_many_random_phase_windows_match_the_reference(env: dict, db_url: str, projects: Path) -> None:
    """A phase's edge minutes read the gaps' pieces from their events (migration 0012): windows
    from under a second to forty minutes, inside one minute, across two partial ones, some on a
    whole minute, next to gaps that end in an edge, start in it or pass through it. Seeded;
    disjoint, as phases are."""
    import random

    rng = random.Random(13)
    minute = 60_000_000
    first = utc("2026-02-11T20:39:00")  # the session runs to 21:46:25
    cuts = sorted({rng.randrange(26 * minute) for _ in range(40)} | {m * minute for m in rng.sample(range(26), 6)})
    spans = list(zip(cuts[::2], cuts[1::2], strict=False))  # (an odd cut out ends nothing)
    spans.append((26 * minute + rng.randrange(minute), 66 * minute + rng.randrange(minute)))
    windows = [(first + timedelta(microseconds=a), first + timedelta(microseconds=b)) for a, b in spans]
    assert any(b - a < minute and a // minute != b // minute for a, b in spans)  # two partial minutes
    assert any(b - a < minute and a // minute == b // minute for a, b in spans)  # inside one
    assert any(a % minute == 0 for a, _ in spans) and any(b % minute == 0 for _, b in spans)
    ok(retrod(env, "track", "start", "--session", SPOTTER))
    with psycopg.connect(db_url) as conn:
        for n, (start, end) in enumerate(windows):
            conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                         " SELECT id, 't', %s, %s, %s, 'small_impact' FROM cc_sessions WHERE session_uuid = %s",
                         (f"w{n}", start, end, SPOTTER))
    report = json.loads(ok(retrod(env, "report", SPOTTER, "--format", "json", "--no-save")))
    want = reference.compute_phases(projects, SPOTTER, windows)
    for got, expected in zip(report["phases"], want, strict=True):
        assert {k: got[k] for k in expected} == expected, got["phase"]
    assert sum(p["claude_s"] + p["tool_s"] + p["human_s"] for p in want) > 600  # the windows hold real gaps


@pytest.mark.parametrize(("session", "cuts"), [
    # 15:16:56 to 17:11:28: a window holding the whole hour 16:00 and minutes on each side of it,
    # one starting on an hour, one ending on one
    ("a7da6a22-facc-4fcd-8bab-f83c87862004",
     ["2025-11-29T15:16:00", "2025-11-29T15:40:30.25", "2025-11-29T17:00:00", "2025-11-29T17:30:00"]),
    # 18 hours: windows of many whole hours, one inside an hour, edges inside minutes
    ("12a546d1-83a7-49a6-abba-5400db340b43",
     ["2025-07-20T00:10:00", "2025-07-20T03:59:59.5", "2025-07-20T04:20:00", "2025-07-20T04:40:10",
      "2025-07-20T12:00:00", "2025-07-20T19:00:00"]),
])
def test_windows_of_whole_hours_match_the_reference(env: dict, db_url: str, projects: Path, session: str,
                                                    cuts: list[str]) -> None:
    """A window's whole UTC hours come from the hour rollups, the minutes around them from the
    per-minute ones (migration 0031): the same figures as the reference's, calls included."""
    ok(retrod(env, "track", "start", "--session", session))
    windows = [(utc(a), utc(b)) for a, b in itertools.pairwise(cuts)]
    with psycopg.connect(db_url) as conn:
        for start, end in windows:
            conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                         " SELECT id, 't', %s, %s, %s, 'small_impact' FROM cc_sessions WHERE session_uuid = %s",
                         (start.isoformat(), start, end, session))
        assert conn.execute("SELECT count(*) FROM retrod.event_hours WHERE session_uuid = %s",
                            (session,)).fetchone()[0] > 1
    report = json.loads(ok(retrod(env, "report", session, "--format", "json", "--no-save")))
    want = reference.compute_phases(projects, session, windows)
    for got, expected in zip(report["phases"], want, strict=True):
        assert {k: got[k] for k in expected} == expected, got["phase"]
    assert sum(p["requests"] for p in want) > 0
    assert sum(p["claude_s"] + p["tool_s"] + p["human_s"] + p["away_s"] for p in want) > 600
    want_calls = reference_tools.tool_use(projects, session, windows)["phases"]
    assert [p["tool_use"] for p in report["phases"]] == want_calls


def test_idle_tracked_sessions_are_closed_at_their_last_activity(env: dict, db_url: str) -> None:
    from retrod.report.retrospective import close_idle_sessions

    ok(retrod(env, "track", "start", "--session", SPOTTER))
    ok(retrod(env, "phase", "start", "--session", SPOTTER, "--task", "t", "--phase", "open"))
    with psycopg.connect(db_url) as conn:
        assert close_idle_sessions(conn, idle_s=3600, away_after_s=1800) == [SPOTTER]
        assert close_idle_sessions(conn, idle_s=3600, away_after_s=1800) == []  # once
        ended, output = conn.execute("SELECT ended_at, total_output_tokens FROM cc_sessions WHERE session_uuid = %s",
                                     (SPOTTER,)).fetchone()
        open_phases = conn.execute("SELECT count(*) FROM cc_session_phases WHERE ended_at IS NULL").fetchone()[0]
    assert ended == utc("2026-02-11T21:46:25.781")  # the last event of the transcript
    assert output == 38908
    assert open_phases == 1  # a phase's verdict is the user's to give


def test_the_saved_report_reads_as_a_person_wants_it(db_url: str, projects: Path) -> None:
    """Issue 20, 11: only the verdicts given, a row for what no phase holds (its figures the
    reference's for the time between the phases), times to result as durations, no citation of a
    document the reader does not have, and the project as the folder Claude Code ran in."""
    from retrod.basics import format
    from retrod.report import markdown, model

    ingest(db_url, [projects])
    phases = [(utc("2026-02-11T20:40:00"), utc("2026-02-11T21:00:00"), "high_impact"),
              (utc("2026-02-11T21:10:00"), utc("2026-02-11T21:30:00"), "small_impact")]
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO cc_sessions (session_uuid, project_slug, started_at) VALUES (%s, 'p', now())",
                     (SPOTTER,))
        for start, end, verdict in phases:
            conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                         " SELECT id, 't', %s, %s, %s, %s FROM cc_sessions", (verdict, start, end, verdict))
        conn.commit()
        report = model.build(conn, SPOTTER)
    text = markdown.render(report)
    assert f'Session `{SPOTTER}` in "/home/USER/projects/spotter-worktrees/spotter-gqc"' in text
    assert report["session"]["project_path"] == "/home/USER/projects/spotter-worktrees/spotter-gqc"
    breakdown = text.split("## Verdict Breakdown")[1].split("\n## ")[0]
    rows = [line.split(" | ")[0].lstrip("| ") for line in breakdown.splitlines() if line.startswith("| ")][2:]
    assert rows == ["high_impact", "small_impact", "*outside every phase*"]
    assert "DESIGN" not in text
    # What no phase holds: the reference's figures for the session before, between and after them.
    far = timedelta(days=365)
    gaps = [(phases[0][0] - far, phases[0][0]), (phases[0][1], phases[1][0]), (phases[1][1], phases[1][1] + far)]
    between = reference.compute_phases(projects, SPOTTER, gaps)
    outside = report["outside_phases"]
    for field in ("input", "output", "cache_read", "cache_create"):
        assert outside["tokens"][field] == sum(w["tokens"][field] for w in between), field
    assert outside["requests"] == sum(w["requests"] for w in between)
    assert outside["claude_s"] == pytest.approx(sum(w["claude_s"] for w in between), abs=0.002)
    tool_rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in
                 text.split("## Tool Use")[1].split("\n## ")[0].splitlines() if line.startswith("| ")}
    for tool in report["tools"]:
        shown = tool_rows[tool["name"]][6]  # Time to result
        seconds = tool["result_s"]
        assert shown == format.duration(seconds)  # the one rendering: "0.5s", "45s", "23m 04s"
    assert any(tool["result_s"] >= 60 for tool in report["tools"])  # e.g. "23m 04s", not "1,384.1 s"


# Any JSON json.dumps writes: every string (escapes, surrogates), float (NaN and the infinities
# included, which json_text leaves to json.dumps itself), integer of any size, nesting, empty ones,
# keys of every kind json.dumps turns into strings.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text() | st.integers() | st.floats() | st.booleans() | st.none(), inner, max_size=4),
    max_leaves=30)


# What json.dumps writes only through `default` (`retrod sessions --json`'s instants).
NOT_JSON = datetime(2026, 12, 6, 15, 44, tzinfo=UTC)


@given(JSON_VALUES)
def test_every_json_answer_is_json_dumps_byte_for_byte(value: object) -> None:
    assert json_text(value) == json.dumps(value, indent=2)
    assert json_text([value, NOT_JSON], default=str) == json.dumps([value, NOT_JSON], indent=2, default=str)


def test_every_fixture_report_json_is_json_dumps_byte_for_byte(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    built = reports(db_url)
    assert len(built) > 40
    for report in built.values():
        assert json_text(report) == json.dumps(report, indent=2)
