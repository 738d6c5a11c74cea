"""`retrod statusline` (issue 21): fed the JSON Claude Code hands its status line (the documented
shapes in tests/fixtures/claude-code, fields missing, old versions, garbage), with a daemon
answering over its socket and without one; the cost it shows is `retrod report`'s, today is the
user's local day, what only the status line sees is kept and reported; and installing it into a
real settings file keeps every other key, backs it up, and puts back what it replaced."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool

from helpers import HOST, ingest
from retrod import tracking
from retrod.claude_code import settings as claude_settings
from retrod.claude_code import statusline as install
from retrod.fastpath.client import SOCKET_NAME, STATUSLINE
from retrod.fastpath.server import ReportServer
from retrod.report import markdown, model
from retrod.settings import Settings
from retrod.statusline import client, render
from retrod.statusline.served import StatuslineAnswer
from retrod.store.db import configure

PAYLOADS = Path(__file__).parent / "fixtures" / "claude-code"
FULL = json.loads((PAYLOADS / "statusline-full.json").read_text())
OLD = json.loads((PAYLOADS / "statusline-old.json").read_text())
SESSION = "258c7280-ae70-4798-800f-63464d01a85d"
SLUG = "-home-USER-projects-spotter-worktrees-spotter-gqc"
MODEL = "claude-sonnet-4-5-20250929"


def payload(base: dict = FULL, projects: Path | None = None, now: float | None = None, **changes: object) -> dict:
    """A documented payload naming the fixture session, its rate-limit windows resetting in 65
    minutes and 3 days 4 hours (the documented times are past by now)."""
    now = time.time() if now is None else now
    out = json.loads(json.dumps(base))
    if projects is not None:
        out["transcript_path"] = str(projects / SLUG / f"{SESSION}.jsonl")
    if "rate_limits" in out:
        out["rate_limits"]["five_hour"]["resets_at"] = int(now + 65 * 60)
        out["rate_limits"]["seven_day"]["resets_at"] = int(now + 3 * 86400 + 4 * 3600)
    out.update(changes)
    return out


def environment(data: Path, **extra: str) -> dict[str, str]:
    """A command's environment here: none of the user's retrod or Claude Code settings, no colour."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RETROD_", "CLAUDE_", "COLUMNS", "NO_COLOR"))}
    env.update(RETROD_DATA_DIR=str(data), NO_COLOR="1", **extra)
    return env


def statusline(env: dict[str, str], stdin: bytes | str | dict) -> subprocess.CompletedProcess:
    data = json.dumps(stdin) if isinstance(stdin, dict) else stdin
    done = subprocess.run([sys.executable, "-m", "retrod", "statusline"], input=data if isinstance(data, bytes)
                          else data.encode(), env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    return done


def lines(done: subprocess.CompletedProcess) -> list[str]:
    out = done.stdout.decode()
    assert out.endswith("\n") and out.strip(), repr(out)  # never blank
    return out.splitlines()


def fits(shown: list[str], columns: int) -> None:
    assert 1 <= len(shown) <= 2, shown
    assert all(render.width(line) <= columns for line in shown), shown


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short folder under /tmp: a unix socket's path holds ~100 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="rsl-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def served(db_url: str, projects: Path, short_tmp: Path) -> Iterator[dict]:
    """The fixture corpus read, and the daemon's report server answering on its socket (as
    `retrod run` serves it), with the environment of a status line command that finds it."""
    ingest(db_url, [projects])
    data = short_tmp / "data"
    data.mkdir()
    daemon_settings = Settings(database_url=db_url, projects_dir=str(projects), data_dir=data, host_id=HOST)
    with ConnectionPool(db_url, min_size=1, max_size=4, configure=configure, open=True) as pool, \
            ReportServer(pool, daemon_settings, {STATUSLINE: StatuslineAnswer(pool, daemon_settings)}) as server:
        assert (data / SOCKET_NAME).exists()
        yield {"env": environment(data, RETROD_DATABASE_URL=db_url), "db_url": db_url, "projects": projects,
               "data": data, "server": server}


def report(db_url: str, session: str = SESSION) -> dict:
    with psycopg.connect(db_url) as conn:
        return model.build(conn, session)


def open_phase(db_url: str, task: str, phase: str, minutes_ago: float, session: str = SESSION) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        tracking.phase_start(conn, session, task, phase)
        conn.execute("UPDATE cc_session_phases SET started_at = now() - make_interval(secs => %s)"
                     " WHERE ended_at IS NULL", (minutes_ago * 60,))


# ---- with the daemon ----------------------------------------------------------------------------

def test_it_shows_the_reports_cost_the_open_phase_efficiency_and_today(served: dict) -> None:
    open_phase(served["db_url"], "build", "implement", minutes_ago=12.5)
    expected = report(served["db_url"])["summary"]
    shown = lines(statusline(dict(served["env"], COLUMNS="80"), payload(projects=served["projects"])))
    fits(shown, 80)
    money, work = shown
    assert money.startswith(f"{markdown.usd(expected['cost']['usd'])} session | ")  # the report's, to the cent
    assert "Claude Code $12.01" in money or "CC $12.01" in money  # beside it, Claude Code's own estimate
    use = expected["tool_use"]
    assert f"eff {round(use['efficiency'] * 100)}% ({use['calls'] - use['productive']} " in money
    assert "today $0.00" in money  # the fixture session is from February: nothing of it today
    assert work.startswith("build / implement 12m | ctx 43%")
    assert "5h 24% 1h04m" in work or "5h 24% 1h05m" in work  # the seconds between building and asking


def test_the_daemons_figures_are_the_reports_to_the_micro_dollar(served: dict) -> None:
    fields = client.request(payload(projects=served["projects"]), served["env"], time.time())
    code, stderr, stdout = served["server"].answer(fields)
    assert (code, stderr) == ("0", "")
    figures = json.loads(stdout)["session"]
    summary = report(served["db_url"])["summary"]
    assert figures["cost_usd"] == summary["cost"]["usd"] and figures["cost_complete"]
    assert (figures["tool_calls"], figures["productive"]) == (summary["tool_use"]["calls"],
                                                              summary["tool_use"]["productive"])
    assert [figures[k] for k in ("claude_s", "tool_s", "human_s")] == [summary[k] for k in ("claude_s", "tool_s",
                                                                                            "human_s")]
    assert figures["open_phase"] is None and figures["phases"] == 0


@pytest.mark.parametrize("columns", [40, 200])
def test_narrow_and_wide_lines_keep_what_must_stay(served: dict, columns: int) -> None:
    open_phase(served["db_url"], "build", "implement", minutes_ago=3)
    cost = markdown.usd(report(served["db_url"])["summary"]["cost"]["usd"])
    shown = lines(statusline(dict(served["env"], COLUMNS=str(columns)), payload(projects=served["projects"])))
    fits(shown, columns)
    money, work = shown
    assert money.startswith(cost) and "today $0.00" in money and ("eff 93%" in money or "tools 93% efficient" in money)
    assert "implement 3m" in work
    if columns == 200:  # room for every figure at its longest
        assert money.startswith(f"{cost} session | Claude Code $12.01 | today $0.00 | tools 93% efficient, ")
        assert work.startswith("phase build / implement 3m | ctx 43% of 200k | 5h 24% (resets in 1h0")
        assert "Opus 4.8 (high)" in work and "7d 41% (resets in 3d0" in work and "+156 -23" in work


def test_old_claude_code_without_context_or_rate_limits_shows_no_zeros(served: dict) -> None:
    shown = lines(statusline(dict(served["env"], COLUMNS="80"), payload(OLD, projects=served["projects"])))
    fits(shown, 80)
    money, work = shown
    assert money.startswith(markdown.usd(report(served["db_url"])["summary"]["cost"]["usd"]))
    assert "CC $0.01" in money or "Claude Code $0.01" in money
    assert work.startswith("no phase logged") and "Sonnet 4.5" in work
    assert "ctx" not in work and "5h" not in work and "7d" not in work  # unknown: left out, not 0%


def test_a_session_the_daemon_has_not_seen_shows_claude_codes_figures_and_says_so(served: dict) -> None:
    unseen = payload(session_id="12345678-1234-4234-8234-123456789abc", transcript_path="/nowhere/x.jsonl")
    money, work = lines(statusline(dict(served["env"], COLUMNS="100"), unseen))
    assert money == "$12.01 session (Claude Code) | today $0.00 | 1h09m | retrod: no figures of this session yet"
    assert work.startswith("ctx 43% of 200k | 5h 24%")
    with psycopg.connect(served["db_url"]) as conn:  # what it reported is kept all the same
        assert conn.execute("SELECT cc_cost_usd FROM retrod.session_status").fetchall() == [(12.01,)]


def test_the_session_is_found_by_its_transcript_when_the_id_is_missing(served: dict) -> None:
    nameless = payload(projects=served["projects"])
    del nameless["session_id"]
    money, _ = lines(statusline(served["env"], nameless))
    assert money.startswith(markdown.usd(report(served["db_url"])["summary"]["cost"]["usd"]) + " session")


def test_garbage_or_empty_stdin_is_a_minimal_line_with_todays_cost(served: dict) -> None:
    for stdin in (b"", b"not json", b"[1, 2]", b"\xff\xfe{", b'{"session_id": 5', b"{} trailing"):
        assert lines(statusline(served["env"], stdin)) == ["today $0.00 | retrod: no status JSON on stdin"], stdin


def test_another_database_or_a_failing_daemon_leaves_claude_codes_figures_and_a_mark(served: dict,
                                                                                    tmp_path: Path) -> None:
    other = dict(served["env"], RETROD_DATABASE_URL=served["db_url"] + "?application_name=other", COLUMNS="100")
    money, _ = lines(statusline(other, payload(projects=served["projects"])))
    assert money == "$12.01 session (Claude Code) | 1h09m | retrod: its daemon serves another database"
    bad = tmp_path / "prices.json"
    bad.write_text("{not json")
    failing = statusline(dict(served["env"], RETROD_PRICES=str(bad), COLUMNS="120"),
                         payload(projects=served["projects"]))
    assert lines(failing)[0].endswith("| retrod: error (run `retrod statusline` by hand to see it)")
    stderr = failing.stderr.decode()  # the daemon's one line, for a person who runs it by hand
    assert stderr.startswith(f"retrod: error: configuration: RETROD_PRICES={bad}: not JSON") and stderr.count("\n") == 1


def test_today_is_the_users_local_day_across_all_sessions(served: dict) -> None:
    """Tokyo's day starts at 15:00 UTC the day before: a request at 14:30 UTC is yesterday there,
    whatever the UTC date says. Today's cost is the sessions' of today, part of one included."""
    zone = ZoneInfo("Asia/Tokyo")
    now = datetime.now(zone)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    elapsed = now - midnight
    today_only, straddling = "aaaaaaaa-0000-4000-8000-00000000000a", "bbbbbbbb-0000-4000-8000-00000000000b"
    folder = served["projects"] / "-today"
    write(folder / f"{today_only}.jsonl", today_only, [midnight + elapsed / 4, midnight + elapsed / 2])
    write(folder / f"{straddling}.jsonl", straddling, [midnight - timedelta(minutes=30), midnight + elapsed / 3])
    ingest(served["db_url"], [served["projects"]])
    with psycopg.connect(served["db_url"], autocommit=True) as conn:  # the straddling session's today, by a phase
        tracking.phase_log(conn, straddling, "t", "today", midnight, now, "small_impact", tracking.PhaseNotes())
    straddling_today = report(served["db_url"], straddling)["phases"][0]["cost"]["usd"]
    expected = report(served["db_url"], today_only)["summary"]["cost"]["usd"] + straddling_today
    assert 0 < straddling_today < report(served["db_url"], straddling)["summary"]["cost"]["usd"]

    fields = client.request(payload(projects=served["projects"]), {}, time.time())
    fields.update(day_start=str(int(midnight.timestamp())),
                  day_end=str(int((midnight + timedelta(days=1)).timestamp())))
    answer = json.loads(served["server"].answer({**fields, "database_url": served["db_url"]})[2])
    assert answer["today"]["cost_usd"] == pytest.approx(expected, abs=2e-6)
    assert answer["today"]["requests"] == 3
    money, _ = lines(statusline(dict(served["env"], TZ="Asia/Tokyo", COLUMNS="100"),
                                payload(projects=served["projects"])))
    assert f"today {markdown.usd(expected)}" in money


def write(path: Path, session: str, times: list[datetime]) -> None:
    """A main transcript of `session`: a user line, then one priced request at each time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines_ = [{"type": "user", "sessionId": session, "timestamp": _z(times[0] - timedelta(seconds=1)),
               "uuid": f"{session}-u", "message": {"role": "user", "content": "go"}}]
    for n, when in enumerate(times):
        lines_.append({"type": "assistant", "sessionId": session, "timestamp": _z(when), "uuid": f"{session}-{n}",
                       "message": {"id": f"msg_{session[:8]}_{n}", "role": "assistant", "model": MODEL,
                                   "content": [{"type": "text", "text": "ok"}],
                                   "usage": {"input_tokens": 1000 * (n + 1), "output_tokens": 500,
                                             "cache_read_input_tokens": 20000, "cache_creation_input_tokens": 3000}}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines_))


def _z(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_what_only_the_status_line_sees_is_kept_and_reported(served: dict) -> None:
    """Rate limits: the latest use of each window and the most reached while the session ran;
    Claude Code's own cost; one row per session, updated, and not written when nothing is new."""
    now = time.time()
    first_window = int(now + 3600)
    renders = [(23.5, first_window, 10.0), (31.0, first_window, 11.5), (12.0, int(now + 5 * 3600), 12.01)]
    with psycopg.connect(served["db_url"], autocommit=True) as conn:
        for pct, resets, cost in renders:
            seen = payload(projects=served["projects"], now=now)
            seen["rate_limits"]["five_hour"] = {"used_percentage": pct, "resets_at": resets}
            seen["cost"]["total_cost_usd"] = cost
            statusline(served["env"], seen)
        row = conn.execute("SELECT five_hour_pct, extract(epoch FROM five_hour_resets_at), five_hour_max_pct,"
                           " extract(epoch FROM five_hour_max_resets_at), seven_day_max_pct, cc_cost_usd,"
                           " cc_version, updated_at FROM retrod.session_status").fetchall()
        assert [r[:7] for r in row] == [(12.0, int(now + 5 * 3600), 31.0, first_window, 41.2, 12.01, "2.1.219")]
        statusline(served["env"], seen)  # the same again: nothing new to keep
        assert conn.execute("SELECT updated_at FROM retrod.session_status").fetchone()[0] == row[0][7]
        statusline(served["env"], payload(OLD, projects=served["projects"]))  # 1.0.x: no rate limits sent
        assert conn.execute("SELECT five_hour_max_pct, cc_cost_usd FROM retrod.session_status").fetchone() == (
            31.0, 0.01234)
    got = report(served["db_url"])
    five = got["claude_code"]["rate_limits"]["five_hour"]
    assert (five["used_pct"], five["max_used_pct"]) == (12.0, 31.0)
    assert datetime.fromisoformat(five["max_resets_at"]).timestamp() == first_window
    assert got["claude_code"]["cost_usd"] == 0.01234
    text = markdown.render(got)
    assert "## Claude Code's Own Figures" in text
    assert f"- **Estimated cost:** Claude Code $0.01, retrod {markdown.usd(got['summary']['cost']['usd'])}" in text
    assert "- **Rate limits reached during the session:** 5-hour window 31% (of the window that resets " in text
    assert "; 7-day window 41% (" in text
    assert report(served["db_url"], "6c2214d7-b87e-4432-8e41-22ba294ea584")["claude_code"] is None  # never seen


def test_it_imports_nothing_heavy(served: dict) -> None:
    """No psycopg, pydantic, genai-prices, json or socket module: only what a bare start has,
    retrod's own light modules and two C modules."""
    script = ("import sys; before = set(sys.modules); from retrod.cli.entry import main; code = main(['statusline']);"
              " sys.stderr.write(repr(sorted(set(sys.modules) - before))); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(payload(projects=served["projects"])),
                          env=served["env"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("$12.23 session")
    assert " ≈ $" in done.stdout  # the cache's cold cell drawn, and its symbol measured, without unicodedata
    loaded = eval(done.stderr)  # our own repr of a list of names
    assert {m for m in loaded if not m.startswith("retrod.") and m != "retrod"} <= {"_socket", "_json", "__future__"}
    assert "retrod.report.model" not in loaded and "retrod.cli.commands" not in loaded


# ---- the prompt cache (issue 29) -----------------------------------------------------------------

CACHED = "c0c0c0c0-0000-4000-8000-00000000005a"
LATER = datetime(2025, 11, 3, 10, 0, 10, tzinfo=UTC)  # the last request of `cached_session`


def cached_session(root: Path, session: str, requests: list[tuple[str, int, int, bool]]) -> None:
    """A main transcript of Sonnet 4.5 requests ($3.75 5m write, $6 1h write, $0.30 read per
    million), each (time on 2025-11-03, cache read, cache written, written for an hour)."""
    folder = root / "-p"
    folder.mkdir(parents=True, exist_ok=True)
    lines_ = [{"type": "user", "sessionId": session, "timestamp": "2025-11-03T10:00:00.000Z",
               "message": {"role": "user", "content": "go"}}]
    for n, (clock, read, written, hour) in enumerate(requests):
        usage = {"input_tokens": 3, "output_tokens": 10, "cache_read_input_tokens": read,
                 "cache_creation_input_tokens": written,
                 "cache_creation": {"ephemeral_5m_input_tokens": 0 if hour else written,
                                    "ephemeral_1h_input_tokens": written if hour else 0}}
        lines_.append({"type": "assistant", "sessionId": session, "timestamp": f"2025-11-03T{clock}.000Z",
                       "message": {"id": f"msg_{n}", "role": "assistant", "model": MODEL, "usage": usage,
                                   "content": [{"type": "text", "text": "ok"}]}})
    (folder / f"{session}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines_))


def answer_at(db_url: str, session: str, now: datetime) -> dict:
    """The daemon's answer to a status line at `now`."""
    from retrod.statusline import figures

    with psycopg.connect(db_url) as conn:
        return figures.figures(conn, session, None, now=now)


def live_at(db_url: str, session: str, now: datetime) -> dict:
    """The report's `summary.cache.live`, made at `now`."""
    import time_machine

    with time_machine.travel(now, tick=False):
        return report(db_url, session)["summary"]["cache"]["live"]


def work_line(answer: dict | None, now: datetime, **changes: object) -> str:
    seen = payload(now=now.timestamp(), session_id=CACHED, **changes)
    return render.render(seen, answer, None if answer else client.NO_DAEMON, 200, False, now.timestamp())[1]


def test_the_cache_counts_down_from_retrods_figures_and_flips_cold_at_the_reports_price(db_url: str,
                                                                                       tmp_path: Path) -> None:
    """Without Claude Code's prompt_cache: 5 minutes from the last request; the countdown moves
    at each refresh with the same answer (it is counted when the line is drawn); past the
    lifetime, what the next message writes again and its price, the report's live state's."""
    cached_session(tmp_path, CACHED, [("10:00:01", 0, 40_000, False), ("10:00:10", 40_000, 2_000, False)])
    ingest(db_url, [tmp_path])
    warm = answer_at(db_url, CACHED, LATER + timedelta(seconds=108))
    assert "| cache 3m12s |" in work_line(warm, LATER + timedelta(seconds=108))
    assert "| cache 3m02s |" in work_line(warm, LATER + timedelta(seconds=118))  # a timed refresh
    assert "| cache 0s |" in work_line(warm, LATER + timedelta(seconds=300))
    # 42,000 tokens written again at $3.75 instead of read at $0.30 a million: $0.1449
    assert "| cache cold: next msg rewrites 42k ≈ $0.14 |" in work_line(warm, LATER + timedelta(seconds=301))
    cold_at = LATER + timedelta(minutes=20)
    cold, live = answer_at(db_url, CACHED, cold_at)["session"]["cache"], live_at(db_url, CACHED, cold_at)
    assert (cold["state"], cold["prefix_tokens"], cold["rewrite_usd"], cold["ttl_s"]) \
        == (live["state"], live["prefix_tokens"], live["rewrite_usd"], live["ttl_s"]) == ("cold", 42_000, 0.1449, 300)
    assert datetime.fromtimestamp(cold["last_request_at"], UTC).isoformat() == live["last_request_at"]


def test_the_lifetime_is_the_last_writes_though_the_last_request_wrote_nothing(db_url: str, tmp_path: Path) -> None:
    """An hour's cache written, then a request that only reads it: still an hour, as the report
    says (the daemon reads the stream back to its last write, not the whole session)."""
    cached_session(tmp_path, CACHED, [("10:00:01", 0, 10_000, False), ("10:00:05", 10_000, 30_000, True),
                                      ("10:00:10", 40_000, 0, False)])
    ingest(db_url, [tmp_path])
    at = LATER + timedelta(minutes=50)
    ours, live = answer_at(db_url, CACHED, at)["session"]["cache"], live_at(db_url, CACHED, at)
    assert (ours["state"], ours["ttl_s"], ours["seconds_left"]) == (live["state"], live["ttl_s"],
                                                                   live["seconds_left"]) == ("warm", 3600, 600)
    assert "| cache 10m00s |" in work_line({"session": {**ANSWER["session"], "cache": ours}}, at)
    after = LATER + timedelta(hours=1, seconds=1)
    ours, live = answer_at(db_url, CACHED, after)["session"]["cache"], live_at(db_url, CACHED, after)
    assert ours["rewrite_usd"] == live["rewrite_usd"] == 0.228  # 40,000 tokens at $6 less $0.30 a million
    assert "| cache cold: next msg rewrites 40k ≈ $0.23 |" in work_line(
        {"session": {**ANSWER["session"], "cache": ours}}, after)


def test_a_session_without_cache_figures_shows_no_cache(db_url: str, tmp_path: Path) -> None:
    cached_session(tmp_path, CACHED, [("10:00:01", 0, 0, False)])  # a request that neither read nor wrote
    ingest(db_url, [tmp_path])
    answer = answer_at(db_url, CACHED, LATER)
    assert answer["session"] is not None and answer["session"]["cache"] is None
    assert "cache" not in work_line(answer, LATER)
    assert "cache" not in work_line({"session": {k: v for k, v in ANSWER["session"].items() if k != "cache"}}, LATER)


# ---- the current task of Claude's plan (issue 30) -------------------------------------------------

PLANNED = "0000000a-0000-4000-8000-000000003001"
LONG_TASK = "Run CI checks \x1b]0;pwned\x07 and fix every failure in the parser"
LONG_TASK_SHOWN = "Run CI checks ]0;pwned and fix…"  # stored text's rule (no control character), ≤ 32 cells


def planned_session(root: Path, *todos: tuple[str, str], later: tuple[tuple[str, str], ...] = ()) -> None:
    """A TodoWrite plan set at 10 s, then two costly requests (20,000 output tokens of Sonnet 4.5
    each: $0.30) at 20 s and 40 s; and the `later` list at 60 s, if any."""
    from plan_transcripts import Transcript

    transcript = Transcript(PLANNED).user(0).todos(10, *todos)
    for n, t in enumerate((20, 40)):
        transcript.say(t)
        transcript.lines[-1]["message"].update(id=f"msg_costly_{n}", model=MODEL)
        transcript.lines[-1]["message"]["usage"]["output_tokens"] = 20_000
    if later:
        transcript.todos(60, *later)
    transcript.write(root)


def test_with_no_phase_open_the_line_shows_the_current_task_and_its_cost_so_far(db_url: str, tmp_path: Path) -> None:
    """DESIGN §2.9's current task after the last call (its window open), as the report's plan has
    it: its name by the stored-text rule, cut short, and its cost so far to the micro-dollar."""
    from plan_transcripts import BASE

    planned_session(tmp_path, ("Parse the config", "completed"), (LONG_TASK, "in_progress"))
    ingest(db_url, [tmp_path])
    now = BASE + timedelta(minutes=5)
    task = report(db_url, PLANNED)["plan"]["tasks"][-1]
    assert task["name"] == LONG_TASK and task["ended_at"] is None  # still current: its window open
    answer = answer_at(db_url, PLANNED, now)
    current = answer["session"]["current_task"]
    assert (current["number"], current["name"]) == (task["number"], LONG_TASK)
    assert current["cost_usd"] == task["cost"]["usd"] and current["cost_complete"]
    assert current["cost_usd"] >= 0.6  # the two costly requests are the task's
    shown = render.render(payload(now=now.timestamp(), session_id=PLANNED), answer, None, 200, False,
                          now.timestamp())
    fits(shown, 200)
    assert shown[1].startswith(f"task {LONG_TASK_SHOWN} ${task['cost']['usd']:,.2f} so far (no phase open) | "), shown
    assert "\x1b" not in "".join(shown) and "\x07" not in "".join(shown)
    narrow = render.render(payload(now=now.timestamp(), session_id=PLANNED), answer, None, 40, False, now.timestamp())
    fits(narrow, 40)
    assert narrow[1].startswith(("Run CI checks ]0;pwned and fix… $0.60", "Run CI chec… $0.60")), narrow

    # a later plan call moves the current task on (the daemon derives the plan again)
    planned_session(tmp_path, ("Parse the config", "completed"), (LONG_TASK, "in_progress"),
                    later=(("Parse the config", "completed"), (LONG_TASK, "completed"), ("Ship it", "in_progress")))
    ingest(db_url, [tmp_path])
    shipping = report(db_url, PLANNED)["plan"]["tasks"][-1]
    current = answer_at(db_url, PLANNED, now)["session"]["current_task"]
    assert (current["name"], current["number"], current["cost_usd"]) == ("Ship it", shipping["number"],
                                                                         shipping["cost"]["usd"])

    # an open phase is shown instead, as before
    open_phase(db_url, "ci", "fix", minutes_ago=1, session=PLANNED)
    answer = answer_at(db_url, PLANNED, now)
    assert answer["session"]["current_task"] is None
    assert render.render(payload(session_id=PLANNED), answer, None, 200, False, now.timestamp())[1] \
        .startswith("phase ci / fix ")


def test_a_plan_with_no_task_in_progress_shows_the_nudge(db_url: str, tmp_path: Path) -> None:
    planned_session(tmp_path, ("Parse the config", "completed"), ("Run CI checks", "pending"))
    ingest(db_url, [tmp_path])
    from plan_transcripts import BASE

    now = BASE + timedelta(minutes=5)
    assert all(t["ended_at"] is not None for t in report(db_url, PLANNED)["plan"]["tasks"])
    answer = answer_at(db_url, PLANNED, now)
    assert answer["session"]["current_task"] is None
    work = render.render(payload(session_id=PLANNED), answer, None, 200, False, now.timestamp())[1]
    assert work.startswith("no phase logged: retrod phase start | "), work


PROMPT_CACHE = {"warm": True, "ttl": 300, "expires_at": 0, "hit_ratio": 0.93, "misses": 1, "expected_rebuilds": 0,
                "miss_recache_tokens": 77_000, "recache_tokens_if_cold": 420_000}


def test_claude_codes_prompt_cache_decides_warm_or_cold_and_retrod_prices_the_rewrite() -> None:
    now = LATER + timedelta(seconds=108)
    ours = {"state": "warm", "ttl_s": 300, "seconds_left": 192, "prefix_tokens": 420_000, "rewrite_usd": 2.6,
            "last_request_at": LATER.timestamp()}
    answer = {"session": {**ANSWER["session"], "cache": ours}}
    assert "| cache 3m12s |" in work_line(answer, now)
    expiring = dict(PROMPT_CACHE, expires_at=now.timestamp() + 250)
    assert "| cache 4m10s |" in work_line(answer, now, prompt_cache=expiring)  # its expiry wins
    in_ms = dict(PROMPT_CACHE, expires_at=(now.timestamp() + 250) * 1000)
    assert "| cache 4m10s |" in work_line(answer, now, prompt_cache=in_ms)
    assert "| cache 4m10s |" in work_line(None, now, prompt_cache=expiring)  # with no daemon too
    expired = dict(PROMPT_CACHE, expires_at=now.timestamp() - 1)
    assert "| cache cold: next msg rewrites 420k ≈ $2.60 |" in work_line(answer, now, prompt_cache=expired)
    cold = dict(PROMPT_CACHE, warm=False)
    assert "| cache cold: next msg rewrites 420k ≈ $2.60 |" in work_line(answer, now, prompt_cache=cold)
    # No daemon: Claude Code's own count of tokens, which has no price.
    assert "| cache cold: next msg rewrites 420k |" in work_line(None, now, prompt_cache=cold)
    assert "| cache warm |" in work_line(None, now, prompt_cache={"warm": True})


def test_where_the_line_is_narrow_a_cold_caches_price_outlasts_the_7_day_window_and_the_model() -> None:
    now = 1_000_000.0 + 12 * 60
    answer = json.loads(json.dumps(ANSWER))
    answer["session"]["cache"] = {"state": "cold", "ttl_s": 300, "seconds_left": 0, "prefix_tokens": 77_000,
                                  "rewrite_usd": 0.73, "last_request_at": now - 400}
    for columns in range(1, 161):
        fits([_plain(line) for line in render.render(payload(now=now), answer, None, columns, True, now)], columns)
    for columns in (80, 60):
        work = render.render(payload(now=now), answer, None, columns, False, now)[1]
        assert work.endswith(" | cold: 77k ≈ $0.73") and "7d" not in work and "+156" not in work
    assert "| Opus 4.8 |" in render.render(payload(now=now), answer, None, 80, False, now)[1]
    wide = render.render(payload(now=now), answer, None, 200, False, now)[1]
    assert "| cache cold: next msg rewrites 77k ≈ $0.73 |" in wide and "7d 41%" in wide


# ---- without the daemon ------------------------------------------------------------------------

def test_without_a_daemon_what_the_json_gives_and_a_mark_and_no_cluster_started(short_tmp: Path) -> None:
    data = short_tmp / "data"
    (data / "pgdata").mkdir(parents=True)
    (data / "pgdata" / "PG_VERSION").write_text("18\n")  # a private cluster there, stopped
    env = environment(data, COLUMNS="80")
    shown = lines(statusline(env, payload()))
    fits(shown, 80)
    assert shown == ["$12.01 session (Claude Code) | 1h09m | retrod: no daemon running (retrod run)",
                     "ctx 43% of 200k | 5h 24% 1h04m | Opus 4.8 (high) | 7d 41% 3d03h | +156 -23"]
    assert sorted(p.name for p in data.iterdir()) == ["pgdata"]  # no lock taken: nothing started
    narrow = lines(statusline(dict(env, COLUMNS="40"), payload()))
    fits(narrow, 40)
    assert narrow[0] == "$12.01 (CC) | 1h09m | retrod: no daemon"
    assert lines(statusline(env, payload(OLD))) == [
        "$0.01 session (Claude Code) | 45s | retrod: no daemon running (retrod run)", "Sonnet 4.5 | +156 -23"]
    assert lines(statusline(env, b"")) == ["retrod: no daemon running (retrod run)"]


def test_colours_unless_no_color(short_tmp: Path) -> None:
    env = environment(short_tmp, COLUMNS="80")
    del env["NO_COLOR"]
    coloured = lines(statusline(env, payload()))
    assert coloured[1].startswith("\x1b[32mctx 43% of 200k\x1b[0m\x1b[2m | \x1b[0m")  # below half: green
    assert "\x1b[33mretrod: no daemon running (retrod run)\x1b[0m" in coloured[0]
    assert all(render.width(_plain(line)) <= 80 for line in coloured)
    assert "\x1b[" not in statusline(dict(env, NO_COLOR="1"), payload()).stdout.decode()
    assert "\x1b[" not in statusline(dict(env, TERM="dumb"), payload()).stdout.decode()


def _plain(line: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", line)


# ---- the layout, without a process ------------------------------------------------------------

ANSWER = {"session": {"cost_usd": 12.225731, "cost_complete": True, "requests": 156, "wall_s": 4180.2,
                      "claude_s": 1815.0, "tool_s": 1792.3, "human_s": 572.8, "away_s": 0.0, "tool_calls": 188,
                      "productive": 174, "efficiency": 174 / 188, "phases": 2,
                      "open_phase": {"task": "hooks", "phase": "subagent survey", "started_at": 1_000_000.0}},
          "today": {"cost_usd": 40.1, "cost_complete": True, "requests": 300}}


@pytest.mark.parametrize("columns", range(1, 161))
def test_every_width_gets_at_most_two_lines_that_fit(columns: int) -> None:
    now = 1_000_000.0 + 12 * 60
    for answer, mark in ((ANSWER, None), (None, client.NO_DAEMON), ({"session": None, "today": None}, client.NOT_SEEN)):
        shown = render.render(payload(now=now), answer, mark, columns, True, now)
        fits([_plain(line) for line in shown], columns)
    shown = render.render(payload(now=now), ANSWER, None, columns, False, now)
    if columns >= 36:  # what must stay is all there, uncut
        assert shown[0].startswith("$12.23") and "today $40" in shown[0]
        assert "eff 93% " in shown[0] or "tools 93% efficient, 14 of 188 calls wasted" in shown[0]
        assert "subagent survey 12m" in shown[1]


COLD = {**ANSWER, "session": {**ANSWER["session"], "cache": {
    "state": "cold", "ttl_s": 300, "seconds_left": 0, "prefix_tokens": 77_000, "rewrite_usd": 0.73,
    "last_request_at": 999_000.0}}}


# Texts without letters: "None", "nan" or "inf" in the output then can only be a bug's.
MAYBE = st.one_of(st.none(), st.booleans(), st.integers(-10**400, 10**400), st.floats(allow_nan=True),
                  st.text(alphabet="0123 -_/é調\t\n\x00\x1b", max_size=30), st.lists(st.integers(), max_size=2),
                  st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), columns=st.integers(1, 200))
def test_any_field_missing_or_of_any_type_still_gives_lines_that_fit(data, columns: int) -> None:
    """ANY field may be missing, or hold what it should not: never an exception, never `None`,
    `nan` or a negative time shown, and still lines that fit."""
    seen = payload(now=1_000_000.0, prompt_cache=dict(PROMPT_CACHE, expires_at=1_000_100))
    paths = [("session_id",), ("transcript_path",), ("model",), ("model", "display_name"), ("model", "id"),
             ("cost",), ("cost", "total_cost_usd"), ("cost", "total_duration_ms"), ("cost", "total_lines_added"),
             ("context_window",), ("context_window", "used_percentage"), ("context_window", "context_window_size"),
             ("context_window", "current_usage"), ("rate_limits",), ("rate_limits", "five_hour"),
             ("rate_limits", "five_hour", "used_percentage"), ("rate_limits", "seven_day", "resets_at"),
             ("effort",), ("fast_mode",), ("prompt_cache",), ("prompt_cache", "warm"), ("prompt_cache", "expires_at"),
             ("prompt_cache", "recache_tokens_if_cold"), ("version",)]
    for path in data.draw(st.lists(st.sampled_from(paths), max_size=6)):
        parent = seen
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            if data.draw(st.booleans()):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = data.draw(MAYBE)
    answer = data.draw(st.sampled_from([ANSWER, None, {"session": None, "today": None}, COLD]))
    shown = render.render(seen, answer, None if answer else client.NO_DAEMON, columns, False, 1_000_000.0)
    fits(shown, columns)
    text = " ".join(shown)
    assert "None" not in text and "nan" not in text and "inf" not in text and "\x1b" not in text
    fields = client.request(seen, {}, 1_000_000.0)  # what goes to the daemon: text without NUL
    assert all(isinstance(v, str) and "\0" not in v for v in fields.values())


def test_the_json_reader_reads_what_json_reads_and_refuses_the_rest() -> None:
    for text in [json.dumps(FULL), json.dumps(OLD), ' {"a": [1, 2.5, -3e2, true, null, "é\\u00e9\\ud83d\\ude00"]} ',
                 "[]", '"x"', "0"]:
        assert client.loads(text) == json.loads(text)
    for text in ["", "   ", "{", '{"a": 1} {"b": 2}', "{'a': 1}", '{"a": 1,}', "nul"]:
        with pytest.raises(ValueError):
            client.loads(text)
    assert client.payload_of(b"\xef\xbb\xbf" + json.dumps(OLD).encode()) == OLD  # a byte order mark
    assert client.payload_of(b"[1]") is None and client.payload_of(b"\xff") is None


def test_a_window_that_has_reset_is_left_out_and_milliseconds_are_seconds() -> None:
    now = 1_800_000_000.0
    seen = payload(now=now)
    seen["rate_limits"]["five_hour"]["resets_at"] = now - 60  # over: its use now is not known
    seen["rate_limits"]["seven_day"]["resets_at"] = (now + 7200) * 1000
    work = render.render(seen, None, client.NO_DAEMON, 200, False, now)[1]
    assert "5h" not in work and "7d 41% (resets in 2h00m)" in work


def test_wide_characters_take_two_cells() -> None:
    answer = json.loads(json.dumps(ANSWER))
    answer["session"]["open_phase"]["phase"] = "調査と実装の段階"
    for columns in range(1, 60):
        shown = render.render(payload(now=1_000_720.0), answer, None, columns, False, 1_000_720.0)
        fits(shown, columns)
    assert render.width("調査 ok") == 7 and render.cut("調査と実装", 5) == "調査…"


# ---- finding the session's files -----------------------------------------------------------------

def test_refresh_near_the_transcript_finds_new_files_there_and_nothing_outside_the_roots(db_url: str,
                                                                                         projects: Path,
                                                                                         tmp_path: Path) -> None:
    from retrod.ingest.ingester import Ingester
    from retrod.store.store import Store

    ingest(db_url, [projects])
    before = report(db_url)["summary"]["requests"]

    def agent_file(folder: Path, session: str, key: str) -> None:
        path = folder / session / "subagents" / f"agent-{key}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"type": "assistant", "sessionId": session, "isSidechain": True, "agentId": key,
                                    "timestamp": "2026-02-11T21:50:00.000Z",
                                    "message": {"id": f"msg_{key}", "model": MODEL, "role": "assistant", "content": [],
                                                "usage": {"input_tokens": 5, "output_tokens": 7}}}) + "\n")

    elsewhere = tmp_path / "elsewhere"  # a transcript_path outside the roots names no folder to look in
    shutil.copytree(projects / SLUG, elsewhere / SLUG)
    agent_file(elsewhere / SLUG, SESSION, "outside")
    new = "eeeeeeee-0000-4000-8000-00000000000e"
    write(projects / "-new" / f"{new}.jsonl", new, [datetime(2026, 3, 1, tzinfo=UTC)])
    with ConnectionPool(db_url, min_size=1, max_size=3, open=True) as pool:
        ingester = Ingester(Store(pool, HOST), [projects], 4 << 20)
        unchanged = ingester.refresh(SESSION, [elsewhere / SLUG, projects / SLUG / ".." / ".."])
        assert (unchanged.files, unchanged.lines) == (3, 0)  # its three stored files: a stat each
        agent_file(projects / SLUG, SESSION, "inside")
        found = ingester.refresh(SESSION, [])  # beside its stored main transcript
        assert (found.files, found.lines) == (4, 1)
        assert ingester.refresh(new, []).files == 0  # a session not stored yet: only where it is said to be
        assert ingester.refresh(new, [projects / "-new"]).lines == 2
    assert report(db_url)["summary"]["requests"] == before + 1
    assert report(db_url, new)["summary"]["requests"] == 1


# ---- install and uninstall ----------------------------------------------------------------------

OTHER = {"type": "command", "command": "bunx ccusage statusline", "padding": 0}
SETTINGS = {"model": "opus", "env": {"FOO": "1"}, "permissions": {"allow": ["Bash(ls)"]},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}


def retrod(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_install_keeps_every_other_key_backs_up_and_runs_this_retrod(tmp_path: Path) -> None:
    config = tmp_path / "claude"
    config.mkdir()
    path = config / "settings.json"
    path.write_text(json.dumps(SETTINGS, indent=4))
    original = path.read_text()
    env = environment(tmp_path / "data", CLAUDE_CONFIG_DIR=f"{config},{tmp_path / 'second'}", HOME=str(tmp_path))
    done = retrod(env, "statusline", "install")
    assert done.returncode == 0, done.stderr
    written = json.loads(path.read_text())
    entry = written.pop("statusLine")
    assert written == SETTINGS
    assert entry == {"type": "command", "command": entry["command"], "padding": 0, "refreshInterval": 5}
    words = entry["command"].split()
    assert words[0] == f"RETROD_DATA_DIR={tmp_path / 'data'}" and words[-1] == "statusline"
    assert Path(words[1]).is_absolute() and Path(words[1]).name == "retrod" and Path(words[1]).exists()
    backups = list(config.glob("settings.json.retrod-backup-*"))
    assert [b.read_text() for b in backups] == [original]
    assert done.stdout.splitlines()[0] == (f"installed: {path} runs {entry['command']} after each of Claude's"
                                           " messages (and every 5 s)")
    again = retrod(env, "statusline", "install")
    assert again.returncode == 0 and again.stdout.startswith("unchanged: ")
    assert len(list(config.glob("settings.json.retrod-backup-*"))) == 1  # nothing changed: no backup
    # The command it wrote works as Claude Code runs it: through a shell, with the JSON on stdin.
    shell = subprocess.run(["/bin/sh", "-c", entry["command"]], input=json.dumps(payload()), capture_output=True,
                           text=True, env=dict(env, NO_COLOR="1"), timeout=60)
    assert shell.returncode == 0 and shell.stdout.startswith("$12.01 session (Claude Code) | 1h09m | retrod: no daemon")


def test_an_entry_of_retrods_gains_the_refresh_and_keeps_its_other_keys(tmp_path: Path) -> None:
    """An entry an older retrod wrote (no refreshInterval) gains one, so that the cache's countdown
    moves between messages; the padding the user set and a key retrod does not know are kept."""
    config = tmp_path / "claude"
    config.mkdir()
    path = config / "settings.json"
    env = environment(tmp_path / "data", CLAUDE_CONFIG_DIR=str(config), HOME=str(tmp_path))
    command = install.command(env)[0]
    path.write_text(json.dumps({**SETTINGS, "statusLine": {"type": "command", "command": command, "padding": 2,
                                                           "hideVimModeIndicator": True}}))
    done = retrod(env, "statusline", "install")
    assert done.returncode == 0, done.stderr
    written = json.loads(path.read_text())
    assert written.pop("statusLine") == {"type": "command", "command": command, "padding": 2,
                                         "hideVimModeIndicator": True, "refreshInterval": 5}
    assert written == SETTINGS
    assert retrod(env, "statusline", "install").stdout.startswith("unchanged: ")


def test_another_status_line_is_replaced_only_with_force_and_put_back_by_uninstall(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({**SETTINGS, "statusLine": OTHER}))
    env = environment(tmp_path / "data", CLAUDE_CONFIG_DIR=str(tmp_path))
    refused = retrod(env, "statusline", "install")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (f"retrod: error: {path} already has a status line (`bunx ccusage statusline`);"
                              " --force replaces it (and `retrod statusline uninstall` puts it back)\n")
    assert json.loads(path.read_text()) == {**SETTINGS, "statusLine": OTHER}  # untouched
    assert not list(tmp_path.glob("settings.json.retrod-*"))
    forced = retrod(env, "statusline", "install", "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"replaced `bunx ccusage statusline`, kept in {tmp_path / claude_settings.REPLACED_NAME}" in forced.stdout
    assert install.is_retrods(json.loads(path.read_text())["statusLine"])
    path.write_text(json.dumps({**json.loads(path.read_text()), "theme": "dark"}))  # another tool, meanwhile
    removed = retrod(env, "statusline", "uninstall")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith(f"put back the status line retrod replaced in {path}: `bunx ccusage statusline`")
    assert json.loads(path.read_text()) == {**SETTINGS, "statusLine": OTHER, "theme": "dark"}
    assert not (tmp_path / claude_settings.REPLACED_NAME).exists()
    left = retrod(env, "statusline", "uninstall")
    assert (left.returncode, left.stdout) == (
        0, f"the status line in {path} is not retrod's (`bunx ccusage statusline`): left alone\n")


def test_uninstall_without_a_replaced_entry_removes_only_retrods(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path)}
    path = tmp_path / "settings.json"
    assert install.install(env=env)[0].startswith(f"installed: {path} runs ")  # no file before: it is made
    assert path.stat().st_mode & 0o777 == 0o600
    assert install.uninstall(env=env) == [f"removed retrod's status line from {path}",
                                          f"backup of the file before: {next(tmp_path.glob('*.retrod-backup-*'))}"]
    assert json.loads(path.read_text()) == {}
    assert install.uninstall(env=env) == [f"no status line in {path}: nothing to do"]
    # A retrod status line from another install (another virtualenv) is retrod's: replaced without --force.
    path.write_text(json.dumps({"statusLine": {"type": "command", "command": "/old/venv/bin/retrod statusline"}}))
    assert install.install(env=env)[0].startswith("installed: ")
    assert not (tmp_path / claude_settings.REPLACED_NAME).exists()


def test_the_settings_it_needs_go_into_the_command_a_password_never(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path), "RETROD_DATA_DIR": "rel/data", "RETROD_AWAY_AFTER_S": "900",
           "RETROD_DATABASE_URL": "postgresql://me:s3cret@db.example/retrod", "RETROD_LOG_LEVEL": "DEBUG"}
    out = install.install(env=env)
    command = json.loads((tmp_path / "settings.json").read_text())["statusLine"]["command"]
    assert command.startswith(f"RETROD_DATA_DIR={Path('rel/data').absolute()} RETROD_AWAY_AFTER_S=900 /")
    assert "s3cret" not in (tmp_path / "settings.json").read_text() and "RETROD_LOG_LEVEL" not in command
    assert out[-1].startswith("RETROD_DATABASE_URL is not written into the settings (it holds a password)")
    env["RETROD_DATABASE_URL"] = "postgresql://me@db.example/retrod"
    install.install(env=env)
    assert "RETROD_DATABASE_URL=postgresql://me@db.example/retrod " in json.loads(
        (tmp_path / "settings.json").read_text())["statusLine"]["command"]


def test_a_settings_file_that_is_not_json_is_one_line_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{broken")
    done = retrod(environment(tmp_path / "data", CLAUDE_CONFIG_DIR=str(tmp_path)), "statusline", "install")
    assert done.returncode == 2 and done.stderr.startswith(f"retrod: error: {path}: not JSON")
    assert done.stderr.count("\n") == 1 and path.read_text() == "{broken"


def test_a_read_only_settings_file_or_a_setting_not_utf8_is_one_line_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"model": "opus"}')
    path.chmod(0o444)
    env = environment(tmp_path / "data", CLAUDE_CONFIG_DIR=str(tmp_path))
    done = retrod(env, "statusline", "install")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"retrod: error: {path} is read-only (mode 0444): retrod changes nothing in it; make it"
                           " writable (chmod u+w) and run this again, or add the entry by hand\n")
    path.chmod(0o600)
    # os.environ keeps the bytes of a setting that is not UTF-8 as lone surrogates
    undecodable = {**{k.encode(): v.encode() for k, v in env.items()}, b"RETROD_DATA_DIR": b"/tmp/caf\xe9"}
    done = subprocess.run([sys.executable, "-m", "retrod", "statusline", "install"], env=undecodable,
                          capture_output=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith(f"retrod: error: {path}: not changed: ".encode())
    assert b"surrogate" in done.stderr and done.stderr.count(b"\n") == 1
    assert path.read_text() == '{"model": "opus"}'
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".retrod")) == ["settings.json"]


def test_skills_install_mentions_the_status_line(tmp_path: Path) -> None:
    done = retrod(environment(tmp_path / "data", HOME=str(tmp_path)), "skills", "install", "--dir",
                  str(tmp_path / "skills"))
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    command = out[-1].removeprefix("the skills run ")
    assert f"  {command} statusline install" in out
