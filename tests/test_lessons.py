"""accounting.md §2.10 (issue 31): whether what retrod tells the next session works. Histories built for
it — hand-made sessions of three projects whose waste is known by construction, with the briefs
that named patterns to some of them stored as the hook stores them — and `retrod lessons`
compared with tests/reference.py's §2.10, computed from the reference's own per-session reports;
then the brief's policy (modes, order, `fixed` said once, limits) and the hook storing what it
said, and the same figures from the command line and the MCP tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

import reference
import reference_tools
from helpers import HOST, ingest
from plan_transcripts import BASE, Transcript, session_id
from retrod import lessons, tracking
from retrod.history import brief, lesson_data
from retrod.resolve import project_slugs
from test_ui_browser import browser  # noqa: F401 - the fixture

ALPHA, BETA, GAMMA = Path("/home/me/alpha"), Path("/home/me/beta"), Path("/home/me/gamma")
DAY = 86_400


def _session(n: int, day: int, *, productive: int = 30, re_read: int = 0, duplicate: int = 0,
             post_write_read: int = 0, error_retry: int = 0) -> Transcript:
    """A session on `day` (after BASE) whose calls carry exactly these signals (accounting.md §2.6):
    Reads of distinct files, Reads of the first file again with another input (re_read), a Grep
    repeated (duplicate), a Write read back (post_write_read), a failed Bash followed by a Bash."""
    t = Transcript(session_id(n))
    clock = day * DAY
    t.user(clock)

    def call(name: str, given: dict, **kw) -> None:
        nonlocal clock
        clock += 3
        t.call(clock, name, given, "ok", **kw)

    for k in range(productive):
        call("Read", {"file_path": f"/src/s{n}/f{k}.py"})
    for k in range(re_read):
        call("Read", {"file_path": f"/src/s{n}/f0.py", "offset": k + 1})
    if duplicate:
        for _ in range(duplicate + 1):
            call("Grep", {"pattern": "needle", "path": "/src"})
    for k in range(post_write_read):
        call("Write", {"file_path": f"/src/s{n}/w{k}.py", "content": "x"})
        call("Read", {"file_path": f"/src/s{n}/w{k}.py"})
    for _ in range(error_retry):
        call("Bash", {"command": "make test", "timeout": 60.0}, is_error=True)
        call("Bash", {"command": "make test", "timeout": 120})
    return t


# (project folder, n, day, signals) — alpha: re_read falls after it is first given (A5), duplicate
# does not, post_write_read falls then comes back, error_retry is never given; beta: two sessions
# only; gamma: given from its first session on, so measured against alpha's sessions before.
HISTORY = [
    *((ALPHA, n, n, {"re_read": 5, "duplicate": 1, "post_write_read": 2}) for n in (1, 2, 3, 4)),
    *((ALPHA, n, n, {"duplicate": 2, "productive": 40}) for n in (5, 6, 7)),
    *((ALPHA, n, n, {"duplicate": 2, "post_write_read": 6, "error_retry": 1}) for n in (8, 9, 10)),
    (BETA, 11, 11, {"re_read": 1}), (BETA, 12, 12, {"re_read": 1}),
    *((GAMMA, n, n, {"productive": 40}) for n in (13, 14, 15)),
]
GIVEN = {5: ["re_read", "duplicate", "post_write_read", "expired"], 6: ["re_read"], 11: ["re_read"],
         13: ["re_read"]}


def _at(n: int, minutes: float = 0) -> datetime:
    day = next(d for _, k, d, _ in HISTORY if k == n)
    return BASE + timedelta(seconds=day * DAY + minutes * 60)


# phases with lessons: (session n, task, phase, verdict, start and end in minutes after its start, lesson)
PHASES = [
    (2, "build", "parser", "avoidable_waste", 0, 1, "Trust a write that succeeded"),
    (4, "build", "reads", "high_impact", 0, 30, "Read each file once"),
    (8, "build", "again", "exploratory_waste", 0, 1, "  trust A   write that succeeded "),
    (13, "elsewhere", "other", "avoidable_waste", 0, 2, None),
]


@pytest.fixture(scope="module")
def history(pg_cluster, tmp_path_factory) -> dict:
    from conftest import fresh_database

    tmp = tmp_path_factory.mktemp("lessons")
    projects = tmp / "projects"
    for folder, n, day, signals in HISTORY:
        _session(n, day, **signals).write(projects, project_slugs(folder)[0])
    with fresh_database(pg_cluster) as url:
        ingest(url, [projects])
        with psycopg.connect(url) as conn:
            for n, task, phase, verdict, start, end, lesson in PHASES:
                tracking.phase_log(conn, session_id(n), task, phase, _at(n, start), _at(n, end), verdict,
                                   tracking.PhaseNotes(lessons=lesson))
            for n, named in GIVEN.items():  # as the hook stores them (its source, any)
                conn.execute("INSERT INTO retrod.briefs (session_uuid, source, project, text, patterns)"
                             " VALUES (%s, 'startup', %s, 'a brief', %s)",
                             (session_id(n), "x", json.dumps([{"pattern": p, "mode": "new"} for p in named])))
        yield {"url": url, "projects": projects, "tmp": tmp, "oracle": _oracle(projects)}


def _oracle(projects: Path) -> dict:
    """The reference's per-session reports, as §2.10 reads them, and the phases' times."""
    reports = reference.compute(projects)
    tools = reference_tools.compute_tool_use(projects)
    caches = reference.compute_cache(projects)
    member = [reference.lesson_session(u, reports[u], tools[u], caches.get(u)) for u in reports]
    phases = []
    for n, task, phase, verdict, start, end, lesson in PHASES:
        seconds = reference.compute_phases(projects, session_id(n), [(_at(n, start), _at(n, end))])[0]
        phases.append({"session": session_id(n), "task": task, "phase": phase, "verdict": verdict,
                       "started_at": _at(n, start), "ended_at": _at(n, end), "lessons_learned": lesson,
                       "seconds": seconds["claude_s"] + seconds["tool_s"] + seconds["human_s"]})
    return {"member": member, "phases": phases,
            "given": {session_id(n): set(named) for n, named in GIVEN.items()}}


def _want(history: dict, folder: Path) -> dict:
    o = history["oracle"]
    mine = {session_id(n) for f, n, _, _ in HISTORY if f == folder}
    return reference.lessons(o["member"], mine, o["given"], o["phases"])


def _lessons(history: dict, folder: Path) -> dict:
    with psycopg.connect(history["url"]) as conn:
        return lesson_data.lessons(conn, folder=folder)


def _by_pattern(data: dict) -> dict:
    return {r["pattern"]: r for r in data["patterns"]}


def test_each_pattern_against_the_reference(history: dict) -> None:
    got = _lessons(history, ALPHA / "src")  # found from a folder inside it, as `retrod brief` finds it
    want = _want(history, ALPHA)
    assert got["project"] == str(ALPHA)
    assert got["patterns"] == want["patterns"]
    rows = _by_pattern(got)
    # by construction: fell after A5 (working), rose (not working), fell then rose again (back),
    # absent on both sides (unclear); never given: no row
    assert {p: (r["status"], r["back"]) for p, r in rows.items()} == {
        "re_read": ("working", False), "duplicate": ("not working", False),
        "post_write_read": ("not working", True), "expired": ("unclear", False)}
    assert [r["pattern"] for r in got["patterns"]] == ["post_write_read", "duplicate", "expired", "re_read"]
    re_read = rows["re_read"]
    assert re_read["first_given"] == {"session": session_id(5), "started_at": "2026-03-06T10:00:00.000Z"}
    assert re_read["sessions_given"] == 2 and re_read["baseline"] == "project"
    assert (re_read["before"]["sessions"], re_read["before"]["count"]) == (4, 20)
    assert (re_read["after"]["sessions"], re_read["after"]["count"]) == (6, 0)
    assert re_read["example"] == "/src/s1/f0.py"  # the before side's: the after side has none; ties: code points
    assert rows["duplicate"]["example"] == 'Grep {"path":"/src","pattern":"needle"}'
    assert rows["expired"]["example"] is None and rows["expired"]["after"]["extra_usd"] == 0
    assert got["answer"] == want["answer"] == (
        "1 of 4 patterns fell by half or more since retrod started naming them; 1 came back")


def test_too_early_and_a_baseline_from_all_projects(history: dict) -> None:
    beta, gamma = _lessons(history, BETA), _lessons(history, GAMMA)
    assert beta["patterns"] == _want(history, BETA)["patterns"]
    assert gamma["patterns"] == _want(history, GAMMA)["patterns"]
    # beta: nothing of its own before B11, alpha's four sessions before A5 (re_read's first given
    # anywhere) instead; two sessions after it: too early
    (row,) = beta["patterns"]
    assert (row["status"], row["baseline"], row["before"]["sessions"], row["after"]["sessions"]) == (
        "too early", "all projects", 4, 2)
    assert beta["answer"] == "1 pattern named, too early to tell"
    (row,) = gamma["patterns"]
    assert (row["status"], row["baseline"]) == ("working", "all projects")
    assert gamma["answer"] == ("1 of 1 pattern fell by half or more since retrod started naming them;"
                               " 1 judged against all projects")


def test_lessons_against_the_reference(history: dict) -> None:
    got, want = _lessons(history, ALPHA), _want(history, ALPHA)
    assert got["lessons"] == want["lessons"]
    assert [r["lesson"] for r in got["lessons"]] == ["Read each file once", "Trust a write that succeeded"]
    first = got["lessons"][1]  # written twice: the first phase's words and moment
    assert first["logged"] == {"session": session_id(2), "task": "build", "phase": "parser",
                               "at": "2026-03-03T10:01:00.000Z"}
    assert first["status"] == "too early"  # two sessions before it, of every project
    reads = got["lessons"][0]
    assert (reads["before"]["sessions"], reads["after"]["sessions"], reads["baseline"]) == (4, 6, "project")
    assert reads["waste_phase_share"]["before"] is not None and 0 < reads["waste_phase_share"]["before"] < 1


def test_no_history_answers_no_rows(history: dict) -> None:
    data = _lessons(history, history["tmp"] / "nowhere")
    assert (data["patterns"], data["lessons"]) == ([], [])
    assert data["answer"] == "retrod has named no pattern in this project's briefs yet"


def test_the_rules_on_their_own() -> None:
    """Cross-multiplied, not rounded: 1/3 against 2/6 is equal, so `not working`."""
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def s(k: int, calls: int, re_read: int) -> lessons.Session:
        return lessons.Session(f"u{k}", start + timedelta(days=k), True, 0, calls - re_read, {"re_read": re_read})

    before = [s(1, 100, 3), s(2, 100, 3), s(3, 100, 3)]
    assert lessons.status("re_read", before, [s(4, 200, 6), s(5, 200, 6), s(6, 200, 6)]) == "not working"
    assert lessons.status("re_read", before, [s(4, 200, 3), s(5, 200, 3), s(6, 200, 3)]) == "working"
    assert lessons.status("re_read", before, [s(4, 200, 0), s(5, 2, 0), s(6, 2, 0)]) == "working"
    assert lessons.status("re_read", before, [s(4, 20, 0), s(5, 20, 0), s(6, 20, 0)]) == "too early"  # base < 100
    low = [s(1, 100, 1), s(2, 100, 1), s(3, 100, 2)]  # 4 occurrences: a fall to none is no proof
    assert lessons.status("re_read", low, [s(4, 200, 0), s(5, 200, 0), s(6, 200, 0)]) == "unclear"


# -- the brief ---------------------------------------------------------------------------------

NEW = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f"
AGAIN = "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e90"


def test_the_brief_follows_the_policy_and_says_fixed_once(history: dict) -> None:
    payload = {"session_id": NEW, "cwd": str(ALPHA), "hook_event_name": "SessionStart", "source": "startup"}
    with psycopg.connect(history["url"]) as conn:
        data = brief.brief(conn, folder=ALPHA, exclude=NEW)
        # back and not working first (the larger count over the last 5 sessions first), then new,
        # then fixed; expired (unclear, absent lately) left out
        assert data["patterns"] == [
            {"pattern": "post_write_read", "mode": "back", "status": "not working", "back": True},
            {"pattern": "duplicate", "mode": "not working", "status": "not working", "back": False},
            {"pattern": "error_retry", "mode": "new", "status": None, "back": False},
            {"pattern": "re_read", "mode": "fixed", "status": "working", "back": False}]
        out, notes = brief.hook(conn, payload)
        conn.commit()
        text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        lines = text.splitlines()
        assert "not instructions" in lines[0] and notes == []
        named = [line for line in lines if line.startswith("- `")]
        assert [line.split("`")[1] + " " + line.split("`")[2].split(":")[0].strip() for line in named] == [
            "post_write_read back", "duplicate not working", "error_retry new", "re_read fixed"]
        assert named[3] == ('- `re_read` fixed: 12.2 → 0.0 per 100 calls since 2026-03-06, e.g. "/src/s1/f0.py"'
                            .replace("12.2", f"{100 * 20 / _base(history, 're_read', (1, 2, 3, 4)):.1f}"))
        stored = conn.execute("SELECT session_uuid, source, project, text, patterns FROM retrod.briefs"
                              " WHERE session_uuid = %s", (NEW,)).fetchall()
        assert stored == [(NEW, "startup", str(ALPHA), text, [
            {"pattern": "post_write_read", "mode": "back"}, {"pattern": "duplicate", "mode": "not working"},
            {"pattern": "error_retry", "mode": "new"}, {"pattern": "re_read", "mode": "fixed"}])]
        # lessons newest first by their newest moment, with their age
        lesson_lines = [line for line in lines if "day" in line and line.startswith('- "')]
        assert lesson_lines[0].startswith('- "trust A write that succeeded" (')  # the newest phase's words
        assert lesson_lines[1].startswith('- "Read each file once" (')
        now = _at(10, 24 * 60 * 3 - 1)  # 2 days, 23 h 59 min after session 10: whole days
        dated = brief.brief(conn, folder=ALPHA, exclude=NEW, now=now)["project_lessons"]
        assert [(x["lesson"], x["age_days"], x["task"], x["phase"]) for x in dated] == [
            ("  trust A   write that succeeded ", 4, "build", "again"), ("Read each file once", 8, "build", "reads")]
        # the next brief: `fixed` was said, so re_read is left out
        again = brief.brief(conn, folder=ALPHA, exclude=AGAIN)
        assert [p["pattern"] for p in again["patterns"]] == ["post_write_read", "duplicate", "error_retry"]
        # `retrod brief` without --hook stores nothing
        assert conn.execute("SELECT count(*) FROM retrod.briefs").fetchone()[0] == len(GIVEN) + 1


def _base(history: dict, pattern: str, ns: tuple[int, ...]) -> int:
    by = {s["uuid"]: s for s in history["oracle"]["member"]}
    return sum(by[session_id(n)]["calls"] for n in ns)


def test_the_limits_keep_the_first_line_and_the_pattern_lines() -> None:
    lines = [("first not instructions", brief.KEEP), ("patterns:", brief.HEADING),
             *((f"- `p{k}` new: " + "y" * 150, brief.KEEP) for k in range(9)),
             ("Lessons:", brief.HEADING), *((f"- {'x' * 300} {k}", brief.ITEM) for k in range(40)),
             ("Tail:", brief.HEADING), ("- one", brief.ITEM)]
    kept = brief.fit(lines)
    assert len(kept) <= brief.MAX_LINES and sum(len(line) + 1 for line in kept) <= brief.MAX_CHARS
    assert kept[:11] == [line for line, _ in lines[:11]]
    assert kept[-1] != "Lessons:" and len(kept) > 11  # some lessons fit, no heading left alone
    over = [(line, brief.KEEP) for line in ["first", *("z" * 2000 for _ in range(9))]]
    assert brief.fit(over) == [line for line, _ in over]  # never dropped, even over the limit


# -- the command line and the MCP tool ----------------------------------------------------------

def _env(history: dict) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_"))}
    env.update(RETROD_DATABASE_URL=history["url"], RETROD_PROJECTS_DIR=str(history["projects"]),
               RETROD_DATA_DIR=str(history["tmp"] / "data"), RETROD_HOST_ID=HOST, HOME=str(history["tmp"] / "home"),
               CLAUDE_CONFIG_DIR=str(history["tmp"] / "claude"))
    return env


def test_the_command_and_the_mcp_tool_answer_the_same(history: dict) -> None:
    from retrod.mcp.tools import OneConnection, Tools
    from retrod.settings import Settings

    slug = project_slugs(ALPHA)[0]
    done = subprocess.run([sys.executable, "-m", "retrod", "lessons", "--project", slug, "--json"],
                          env=_env(history), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    with psycopg.connect(history["url"]) as conn:
        direct = lesson_data.lessons(conn, project=slug)
    assert data == json.loads(json.dumps(direct))
    assert data["patterns"] == _want(history, ALPHA)["patterns"]
    text = subprocess.run([sys.executable, "-m", "retrod", "lessons", "--project", slug],
                          env=_env(history), capture_output=True, text=True, timeout=120)
    assert text.returncode == 0 and text.stdout.splitlines()[0].endswith(data["answer"] + ".")
    assert "(all projects)" not in text.stdout.split("Lessons (")[0]
    assert "post_write_read: not working, came back" in text.stdout
    none = subprocess.run([sys.executable, "-m", "retrod", "lessons", "--json"], env=_env(history),
                          capture_output=True, text=True, timeout=120, cwd=history["tmp"])
    assert none.returncode == 0 and json.loads(none.stdout)["patterns"] == []

    db = OneConnection(history["url"])
    try:
        answered, said = Tools(Settings(database_url=history["url"]), db).lessons(slug)
    finally:
        db.close()
    assert json.loads(json.dumps(answered)) == data and said.startswith("Lessons in")


def test_stored_briefs_outlive_rebuilding_the_derived_tables(db_url: str, tmp_path: Path) -> None:
    """accounting.md §3: the briefs are records, not derived: a rebuild of retrod's derived tables (files
    and requests, cascading to every table hung on them) keeps them, as it keeps the phases."""
    _session(1, 1).write(tmp_path / "projects", project_slugs(ALPHA)[0])
    ingest(db_url, [tmp_path / "projects"])
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO retrod.briefs (session_uuid, source, project, text, patterns)"
                     " VALUES (%s, 'startup', 'p', 't', '[{\"pattern\": \"re_read\", \"mode\": \"new\"}]')",
                     (session_id(1),))
        conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
        assert conn.execute("SELECT session_uuid, patterns FROM retrod.briefs").fetchall() == [
            (session_id(1), [{"pattern": "re_read", "mode": "new"}])]


# -- the web UI's Lessons page, in a browser -----------------------------------------------------

def test_the_lessons_page_draws_each_row_and_its_api_twin_answers_the_same(history: dict, browser) -> None:  # noqa: F811
    import urllib.request

    from psycopg_pool import ConnectionPool

    from retrod.settings import Settings
    from retrod.ui import secret
    from retrod.ui.server import UiServer
    from test_ui import free_port

    slug = project_slugs(ALPHA)[0]
    want = _lessons(history, ALPHA)
    data_dir = history["tmp"] / "ui-data"
    settings = Settings(database_url=history["url"], data_dir=data_dir, ui_port=free_port())
    with ConnectionPool(history["url"], min_size=1, max_size=4) as pool, UiServer(pool, settings) as server:
        token = secret.read(data_dir)
        base = f"http://127.0.0.1:{server.port}"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{base}/api/lessons?project={slug}&token={token}", timeout=30) as answer:
            assert json.loads(answer.read()) == json.loads(json.dumps({**want, "project": slug}))
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        try:
            page.goto(f"{base}/?token={token}")  # linked from each project of the session list
            page.click(f'td.project a[href="/lessons?project={slug}"] >> nth=0')
            page.wait_for_selector("#lesson-patterns")
            assert page.inner_text("#lessons-answer") == want["answer"]
            shown = page.eval_on_selector_all("#lesson-patterns tbody tr", """rows => rows.map(r => [
                r.dataset.pattern, r.querySelector('[data-field=status]').textContent,
                ...['before', 'after'].map(s => [r.querySelector(`[data-field=${s}] b`).textContent,
                    r.querySelector(`[data-field=${s}] .bar i`).getBoundingClientRect().width])])""")
            assert [row[:2] for row in shown] == [
                [r["pattern"], r["status"] + (", came back" if r["back"] else "")] for r in want["patterns"]]
            for row, r in zip(shown, want["patterns"], strict=True):
                for (label, width), side in zip(row[2:], ("before", "after"), strict=True):
                    assert label == f"{r[side]['rate']:.1f}"
                    assert (width > 0) == (r[side]["rate"] > 0)  # drawn to scale: none where nothing fell
            assert page.locator("#lesson-lessons tbody tr").count() == len(want["lessons"])
        finally:
            context.close()
    assert problems == []


def test_trends_gives_each_named_patterns_rate_per_period(history: dict) -> None:
    from retrod.history import trends

    with psycopg.connect(history["url"]) as conn:
        data = trends.trends(conn, by="day", project=project_slugs(ALPHA)[0], tz="UTC")
        assert "patterns" not in trends.trends(conn, by="day", tz="UTC")  # for one project only
    # the signals alpha's briefs named, most occurrences first (expired: a cache cause, not here)
    assert data["patterns"] == ["post_write_read", "re_read", "duplicate"]
    by = {s["uuid"]: s for s in history["oracle"]["member"]}
    for p in data["periods"]:
        day = datetime.fromisoformat(p["period"]) if p["period"] else None
        ns = [n for f, n, d, _ in HISTORY if f == ALPHA and day and (BASE + timedelta(days=d)).date() == day.date()]
        calls = sum(by[session_id(n)]["calls"] for n in ns)
        for x in data["patterns"]:
            want = 100 * sum(by[session_id(n)]["signals"][x] for n in ns) / calls if calls else None
            assert p["pattern_rates"][x] == want
    assert "Waste patterns the brief named here" in trends.render(data)
