"""The skill workflow as it really runs, in Claude Code's Bash tool: the right session from any
folder, with two sessions open in one project; fresh figures with or without the daemon; many
commands at once; phases that never overlap; finding sessions; the small things around it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

import reference
from helpers import HOST, ingest
from retrod.fastpath import client
from retrod.service.cluster import Cluster

A = "aaaaaaaa-1111-4000-8000-000000000001"
B = "bbbbbbbb-2222-4000-8000-000000000002"
GHOST = "99999999-9999-4999-8999-999999999999"
T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _lines(session: str, start: float, requests: int, cwd: Path | None = None) -> str:
    """A user line (in `cwd`, as Claude Code writes it), then `requests` answers a second apart,
    each its own request."""
    out = [{"type": "user", "sessionId": session, "timestamp": _at(start), "uuid": f"{session}-u{start}",
            **({"cwd": str(cwd)} if cwd else {}), "message": {"role": "user", "content": "go"}}]
    for n in range(requests):
        out.append({"type": "assistant", "sessionId": session, "timestamp": _at(start + n + 1),
                    "message": {"id": f"msg-{session[:4]}-{start}-{n}", "role": "assistant",
                                "content": [{"type": "text", "text": "ok"}],
                                "usage": {"input_tokens": 3, "output_tokens": 10}}})
    return "".join(json.dumps(line) + "\n" for line in out)


@pytest.fixture
def project(tmp_path: Path) -> dict:
    """A project /…/work/my.app with two sessions open in it (B written last), a subfolder, and
    the environment of a command run there: no daemon, no Claude Code around it."""
    work = tmp_path / "work" / "my.app"
    (work / "src" / "deep").mkdir(parents=True)
    projects = tmp_path / "projects"
    folder = projects / str(work).replace("/", "-").replace(".", "-")
    folder.mkdir(parents=True)
    (folder / f"{A}.jsonl").write_text(_lines(A, 0, 2, work))
    (folder / f"{B}.jsonl").write_text(_lines(B, 100, 3, work))
    os.utime(folder / f"{A}.jsonl", (time.time() - 60, time.time() - 60))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    env.update(RETROD_PROJECTS_DIR=str(projects), RETROD_DATA_DIR=str(tmp_path / "data"),
               RETROD_REPORTS_DIR=str(tmp_path / "reports"), RETROD_HOST_ID=HOST, HOME=str(tmp_path / "home"),
               CLAUDE_CONFIG_DIR=str(tmp_path / "claude"))
    return {"work": work, "projects": projects, "folder": folder, "env": env, "tmp": tmp_path}


def retrod(env: dict, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stderr
    return done


def refused(done: subprocess.CompletedProcess, needle: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def stopping_done(cluster: Cluster) -> Cluster:
    """Once a stop in progress is over: the last command out leaves it to `pg_ctl stop`, which
    holds the control lock until the server is down."""
    import fcntl

    fd = os.open(cluster.root / "control.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)
    return cluster


def tracked(db_url: str) -> list[str]:
    with psycopg.connect(db_url) as conn:
        return [r[0] for r in conn.execute("SELECT session_uuid FROM cc_sessions ORDER BY id")]


# -- which session ------------------------------------------------------------------------

def test_from_a_subfolder_the_newest_session_of_the_project_and_a_warning_when_two_are_open(
        project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    done = ok(retrod(env, "track", "start", cwd=project["work"] / "src" / "deep"))
    assert f"tracking session {B}" in done.stdout
    assert f"session {B} (the newest transcript of {project['work']};" in done.stderr
    assert "2 sessions there were active in the last 5 minutes: pass --session to choose" in done.stderr
    refused(retrod(env, "track", "start", cwd=project["tmp"]), "no Claude Code transcript for")


def test_claude_codes_environment_variable_picks_the_session_it_runs_in(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url, CLAUDE_CODE_SESSION_ID=A)
    done = ok(retrod(env, "track", "start", cwd=project["work"] / "src"))
    assert f"tracking session {A}" in done.stdout and "(CLAUDE_CODE_SESSION_ID)" in done.stderr
    done = ok(retrod(env, "phase", "start", "--task", "t", "--phase", "p", cwd=project["work"]))
    assert tracked(db_url) == [A]
    # --session still wins over it; an empty one (a skill's unsubstituted variable) does not count
    ok(retrod(env, "track", "start", "--session", B[:8]))
    ok(retrod(env, "track", "start", "--session", ""))
    assert tracked(db_url) == [A, B]


def test_the_claude_code_process_above_names_the_session(project: dict, db_url: str) -> None:
    """Claude Code keeps <config>/sessions/<pid>.json; the test process plays Claude Code."""
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    sessions = Path(env["CLAUDE_CONFIG_DIR"]) / "sessions"
    sessions.mkdir(parents=True)
    me = sessions / f"{os.getpid()}.json"
    me.write_text(json.dumps({"pid": os.getpid(), "sessionId": A, "cwd": str(project["work"]),
                              "startedAt": int(time.time() * 1000)}))
    done = ok(retrod(env, "track", "start", cwd=project["work"]))
    assert f"tracking session {A}" in done.stdout
    assert f"(Claude Code process {os.getpid()} ({me}))" in done.stderr
    # A file left by a Claude Code that died long before this process started: its pid was reused.
    me.write_text(json.dumps({"pid": os.getpid(), "sessionId": A, "startedAt": 1_000_000}))
    assert f"tracking session {B}" in ok(retrod(env, "track", "start", cwd=project["work"])).stdout


def test_a_well_formed_uuid_with_no_transcript_is_refused_unless_allowed(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    refused(retrod(env, "track", "start", "--session", GHOST), f"no transcript of session {GHOST}")
    refused(retrod(env, "phase", "log", "--session", GHOST, "--task", "t", "--phase", "p", "--start",
                   _at(0), "--end", _at(5), "--verdict", "high_impact"), "--allow-unknown")
    assert tracked(db_url) == []
    ok(retrod(env, "track", "start", "--session", GHOST, "--allow-unknown"))
    ok(retrod(env, "phase", "start", "--session", GHOST, "--task", "t", "--phase", "p"))  # now it is known
    assert tracked(db_url) == [GHOST]


# -- fresh figures ---------------------------------------------------------------------------

def _report(env: dict, session: str) -> dict:
    return json.loads(ok(retrod(env, "report", session, "--format", "json", "--no-save")).stdout)


def test_without_a_daemon_a_report_reads_what_was_appended(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ingest(db_url, [project["projects"]])
    assert _report(env, A)["summary"]["requests"] == 2
    with (project["folder"] / f"{A}.jsonl").open("a") as f:
        f.write(_lines(A, 50, 4))
    report = _report(env, A)
    assert report["summary"]["requests"] == 6
    assert report["summary"] == report["summary"] | reference.compute(project["projects"])[A]["summary"]


def test_with_the_daemon_a_report_asked_right_after_a_write_includes_it(project: dict, db_url: str) -> None:
    # The watcher polling (every 300 ms) rather than told by inotify: the report, asked some
    # 30 ms after the write, nearly always comes first, and must read the lines itself.
    env = dict(project["env"], RETROD_DATABASE_URL=db_url, RETROD_WATCH_POLLING="true",
               RETROD_SCAN_INTERVAL_S="3600")
    daemon = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ask = ("import sys; from retrod.report import client;"
           " code = client.main(sys.argv[1:]); sys.exit(99 if code is None else code)")
    try:
        socket_path = Path(env["RETROD_DATA_DIR"]) / client.SOCKET_NAME
        deadline = time.monotonic() + 30
        while not socket_path.exists():
            assert time.monotonic() < deadline and daemon.poll() is None, "the daemon did not start"
            time.sleep(0.05)
        with (project["folder"] / f"{A}.jsonl").open("a") as f:
            f.write(_lines(A, 50, 4))
        answered = subprocess.run([sys.executable, "-c", ask, A, "--format", "json", "--no-save"], env=env,
                                  capture_output=True, text=True, timeout=60)
        assert answered.returncode == 0, (answered.returncode, answered.stderr)  # 99: no daemon answered
        assert json.loads(answered.stdout)["summary"]["requests"] == 6
        # With no session named, the daemon resolves it as the command would have, from its folder.
        answered = subprocess.run([sys.executable, "-c", ask, "--format", "json", "--no-save"], env=env,
                                  capture_output=True, text=True, timeout=60, cwd=project["work"] / "src")
        assert answered.returncode == 0, answered.stderr
        assert json.loads(answered.stdout)["session"]["uuid"] == A  # written last now
        assert f"retrod: session {A} (the newest transcript of {project['work']};" in answered.stderr
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0, daemon.stderr.read()


# -- many commands at once --------------------------------------------------------------------

@pytest.mark.slow
def test_twenty_mixed_commands_at_once_without_a_daemon(project: dict) -> None:
    """On the embedded default, where each command once started and stopped the server itself."""
    data = Path(tempfile.mkdtemp(prefix="retrod-mix-", dir="/tmp"))  # short: the socket path
    os.chmod(data, 0o711)
    env = dict(project["env"], RETROD_DATA_DIR=str(data / "d"))
    try:
        ok(retrod(env, "track", "start", "--session", A))
        commands = [
            *[("report", A, "--format", "json", "--no-save")] * 6,
            *[("phase", "log", "--session", A, "--task", "t", "--phase", f"p{n}", "--start", _at(n * 10),
               "--end", _at(n * 10 + 5), "--verdict", "small_impact") for n in range(6)],
            *[("phases", A, "--format", "json")] * 3,
            *[("status", "--json")] * 3,
            ("track", "start", "--session", B), ("sessions", "--json"),
        ]
        assert len(commands) == 20
        with ThreadPoolExecutor(len(commands)) as pool:
            done = list(pool.map(lambda args: retrod(env, *args), commands))
        for args, result in zip(commands, done, strict=True):
            assert result.returncode == 0, (args, result.stderr)
        phases = json.loads(ok(retrod(env, "phases", A, "--format", "json")).stdout)
        assert sorted(p["phase"] for p in phases) == [f"p{n}" for n in range(6)]
        final = _report(env, A)
        assert final["summary"]["requests"] == 2 and len(final["phases"]) == 6
        assert not stopping_done(Cluster(data / "d")).is_running()  # the last one out stopped it
    finally:
        Cluster(data / "d").shutdown("immediate")
        shutil.rmtree(data, ignore_errors=True)


# -- phases that add up -----------------------------------------------------------------------

def test_overlapping_phases_are_refused_and_the_clash_is_named(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ingest(db_url, [project["projects"]])

    def log(phase: str, start: float, end: float) -> subprocess.CompletedProcess:
        return retrod(env, "phase", "log", "--session", A, "--task", "t", "--phase", phase,
                      "--start", _at(start), "--end", _at(end), "--verdict", "high_impact")

    ok(log("outer", 0, 60))
    refused(log("inner", 10, 20), 'overlaps phase 1 "t" / "outer"')
    refused(log("straddle", 50, 70), "overlaps phase 1")
    done = ok(log("next", 60, 90))  # touching is not overlapping: windows are [start, end)
    assert "warning" not in done.stderr
    done = ok(log("early", -600, -300))  # before the session's first line: accepted, with a word
    assert "retrod: warning: the phase starts before the session's first line" in done.stderr
    # a phase that ends in the future blocks one starting now; an open phase runs on
    future = datetime.now(UTC) + timedelta(hours=1)
    done = ok(retrod(env, "phase", "log", "--session", A, "--task", "t", "--phase", "planned",
                     "--start", (future - timedelta(hours=2)).isoformat(), "--end", future.isoformat(),
                     "--verdict", "small_impact"))
    assert "the phase ends in the future" in done.stderr
    refused(retrod(env, "phase", "start", "--session", A, "--task", "t", "--phase", "now"), '"planned"')
    report = _report(env, A)
    shares = sum(v["output_share"] for v in report["verdicts"].values())
    assert shares <= 1.0


def test_phases_are_numbered_as_listed_and_as_errors_name_them_also_in_json(project: dict, db_url: str) -> None:
    """Issue 20: `phases --format json` gave only the database's id ("id": 2 for the phase listed
    as 1), while the errors say "phase 1"."""
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ingest(db_url, [project["projects"]])

    def log(session: str, phase: str, start: float, end: float) -> subprocess.CompletedProcess:
        return retrod(env, "phase", "log", "--session", session, "--task", "t", "--phase", phase,
                      "--start", _at(start), "--end", _at(end), "--verdict", "high_impact")

    ok(log(B, "elsewhere", 100, 110))  # another session's phase: the ids of A's start at 2
    ok(log(A, "second", 30, 60))
    ok(log(A, "first", 0, 30))  # logged last, listed first: by start
    rows = json.loads(ok(retrod(env, "phases", A, "--format", "json")).stdout)
    assert [(r["number"], r["phase"]) for r in rows] == [(1, "first"), (2, "second")]
    assert [r["id"] for r in rows] != [1, 2]  # so the numbers above are not the ids
    listed = ok(retrod(env, "phases", A)).stdout.splitlines()
    assert [(line.split(".")[0], line.split(" / ")[-1]) for line in listed] == [("1", '"first"'), ("2", '"second"')]
    refused(log(A, "clash", 40, 50), 'overlaps phase 2 "t" / "second"')


def test_report_close_leaves_no_empty_phase(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ok(retrod(env, "phase", "start", "--session", A, "--task", "t", "--phase", "open one"))
    with psycopg.connect(db_url) as conn:  # another host, its clock ahead, opened one "later"
        conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, verdict)"
                     " SELECT id, 't', 'skewed', now() + interval '1 minute', 'pending' FROM cc_sessions")
    report = json.loads(ok(retrod(env, "report", A, "--close", "--format", "json", "--no-save")).stdout)
    assert [p["phase"] for p in report["phases"]] == ["open one"]
    assert report["phases"][0]["ended_at"] > report["phases"][0]["started_at"]


def test_times_print_local_with_their_offset(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url, TZ="Asia/Kolkata")  # +05:30 all year
    done = ok(retrod(env, "phase", "log", "--session", A, "--task", "t", "--phase", "p",
                     "--start", "2026-05-04 15:30", "--end", "2026-05-04 15:31", "--verdict", "small_impact"))
    assert "2026-05-04 15:30:00+05:30 → 2026-05-04 15:31:00+05:30" in done.stdout
    listed = ok(retrod(env, "phases", A)).stdout
    assert "1. 2026-05-04 15:30:00+05:30 → 2026-05-04 15:31:00+05:30" in listed
    report = _report(env, A)
    assert report["phases"][0]["started_at"] == "2026-05-04T10:00:00+00:00"  # stored exactly


# -- finding sessions, and the small things ---------------------------------------------------

def test_sessions_lists_the_newest_first_with_their_figures(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ingest(db_url, [project["projects"]])
    ok(retrod(env, "track", "start", "--session", A, "--description", "first try"))
    rows = json.loads(ok(retrod(env, "sessions", "--json")).stdout)["sessions"]
    want = reference.compute(project["projects"])
    assert [r["uuid"] for r in rows] == [B, A]  # B started later
    for row in rows:
        summary = want[row["uuid"]]["summary"]
        assert row["wall_s"] == summary["wall_s"] and row["requests"] == summary["requests"]
        assert row["total_tokens"] == sum(summary["tokens"]["total"].values())
    assert (rows[1]["tracked"], rows[1]["description"], rows[1]["phases"]) == (True, "first try", 0)
    assert rows[0]["tracked"] is False
    first = json.loads(ok(retrod(env, "sessions", "--json", "--limit", "1")).stdout)
    assert [r["uuid"] for r in first["sessions"]] == [B] and first["more"] == 1
    since = json.loads(ok(retrod(env, "sessions", "--json", "--since", _at(50))).stdout)["sessions"]
    assert [r["uuid"] for r in since] == [B]
    for project_arg in (str(project["work"]), "my-app"):
        assert len(json.loads(ok(retrod(env, "sessions", "--json", "--project", project_arg)).stdout)["sessions"]) == 2
    refused(retrod(env, "sessions", "--json", "--project", "elsewhere"), "--project 'elsewhere' matches no project")
    text = ok(retrod(env, "sessions")).stdout.splitlines()
    work = json.dumps(str(project["work"]))  # stored text: quoted
    assert text[1].startswith(B) and text[1].endswith(work)  # untracked: no phases
    assert text[2].startswith(A) and text[2].endswith(f'{work}       0  "first try"')
    done = retrod(env, "sessions", "--limit", "0")  # argparse's own two lines: usage, then the error
    assert done.returncode == 2 and "argument --limit: must be at least 1" in done.stderr


def test_sessions_without_a_daemon_first_reads_what_no_one_has_read(project: dict, db_url: str) -> None:
    """Issue 20: after one `report`, `sessions` listed that one session without a word while the
    other transcripts were unread."""
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ok(retrod(env, "report", A, "--no-save"))  # reads A's transcript only
    done = ok(retrod(env, "sessions", "--json"))
    assert [r["uuid"] for r in json.loads(done.stdout)["sessions"]] == [B, A]
    assert done.stderr == ""


def _settings(project: dict, db_url: str):
    from retrod.settings import Settings

    return Settings(database_url=db_url, projects_dir=str(project["projects"]), data_dir=project["tmp"] / "data",
                    host_id=HOST)


def test_with_a_daemon_sessions_leaves_the_reading_to_it_and_says_when_it_is_behind(project: dict,
                                                                                    db_url: str) -> None:
    from psycopg_pool import ConnectionPool

    from retrod.ingest import catchup, progress
    from retrod.service.daemon_lock import daemon_lock

    settings = _settings(project, db_url)
    with ConnectionPool(db_url, min_size=1, max_size=3, open=True) as pool, daemon_lock(settings.data_dir) as taken:
        assert taken  # as `retrod run` holds it
        assert catchup.catch_up(settings, pool) is None
        assert tracked_files(db_url) == 0  # read nothing: the daemon does
        under_way = progress.Progress(settings.data_dir, write_every_s=0, large_bytes=0)
        under_way.start(10, 300_000_000)
        under_way.update(1, 12_500_000)
        try:
            note = catchup.catch_up(settings, pool)
        finally:
            under_way.end()
    assert note == ("the daemon is still catching up (12.5 of 300.0 MB read): sessions it has not reached yet"
                    " are missing or short")


def tracked_files(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT count(*) FROM retrod.files").fetchone()[0]


def test_sessions_says_when_a_transcript_could_not_be_read(project: dict, db_url: str, monkeypatch) -> None:
    from psycopg_pool import ConnectionPool

    from retrod.ingest import catchup
    from retrod.ingest.ingester import Ingester

    ingest_one = Ingester._ingest

    def failing(self, ref, stats, stored=None) -> None:  # a bug, or a value the database refuses
        if ref.path.name == f"{B}.jsonl":
            raise ValueError("cannot fold this")
        ingest_one(self, ref, stats, stored)

    monkeypatch.setattr(Ingester, "_ingest", failing)
    with ConnectionPool(db_url, min_size=1, max_size=3, open=True) as pool:
        note = catchup.catch_up(_settings(project, db_url), pool)
    assert note == "1 transcript file could not be read (logged above): sessions they hold may be missing or short"
    assert tracked_files(db_url) == 2  # A's was read; B's is retried at the next catch-up


def test_sessions_lists_what_was_read_before_when_the_database_refuses_writes(project: dict, db_url: str,
                                                                              monkeypatch) -> None:
    from psycopg_pool import ConnectionPool

    from retrod.ingest import catchup
    from retrod.ingest.ingester import Ingester

    def refused(_self) -> None:
        raise psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction")

    monkeypatch.setattr(Ingester, "scan", refused)
    with ConnectionPool(db_url, min_size=1, max_size=3, open=True) as pool:
        note = catchup.catch_up(_settings(project, db_url), pool)
    assert note == ("the transcripts could not be read into the database (cannot execute INSERT in a read-only"
                    " transaction): sessions may be missing or short")


def test_two_sessions_with_one_date_and_description_save_to_two_files(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    for session in (A, B):
        ok(retrod(env, "track", "start", "--session", session, "--description", "Same work"))
        ok(retrod(env, "report", session))
    saved = sorted(p.name for p in Path(env["RETROD_REPORTS_DIR"]).iterdir())
    assert saved == ["2026-05-04-same-work-aaaaaaaa.md", "2026-05-04-same-work-bbbbbbbb.md"]


def test_output_mistakes_are_one_line_and_exit_2(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    refused(retrod(env, "report", A, "--output", str(project["tmp"])), "is a folder; name a file in it")
    blocker = project["tmp"] / "a-file"
    blocker.write_text("")
    refused(retrod(env, "report", A, "--output", str(blocker / "report.md")), "cannot save the report (--output")
    # Issue 20: the folders of the path were created, though the README (now docs/reference.md) says
    # such an output is refused.
    missing = project["tmp"] / "nonexistent" / "dir"
    refused(retrod(env, "report", A, "--output", str(missing / "x.md")), f"the folder {missing} does not exist")
    assert not (project["tmp"] / "nonexistent").exists()


def test_a_reports_folder_that_cannot_be_written_still_prints_the_report(project: dict, db_url: str) -> None:
    """Issue 20: RETROD_REPORTS_DIR not writable was exit 1, and the report was lost."""
    blocker = project["tmp"] / "a-file"
    blocker.write_text("")
    env = dict(project["env"], RETROD_DATABASE_URL=db_url, RETROD_REPORTS_DIR=str(blocker / "reports"))
    done = retrod(env, "report", A)
    assert done.returncode == 2
    assert done.stdout.startswith("# Session Retrospective: 2026-05-04")
    assert done.stderr == ("retrod: error: the report was not saved in RETROD_REPORTS_DIR"
                           f" ({blocker}/reports/2026-05-04-aaaaaaaa.md): Not a directory\n")


def test_the_daemons_report_server_words_output_mistakes_as_the_command_does(project: dict, db_url: str) -> None:
    from psycopg_pool import ConnectionPool

    from retrod.fastpath.server import ReportServer

    blocker = project["tmp"] / "a-file"
    blocker.write_text("")
    missing = project["tmp"] / "nonexistent" / "dir"
    with ConnectionPool(db_url, min_size=1, max_size=3, open=True) as pool:
        server = ReportServer(pool, _settings(project, db_url))

        def answer(**extra: str) -> tuple[str, str, str]:
            return server.answer({"session": A, "pid": str(os.getpid()), "database_url": db_url, **extra})

        code, stderr, stdout = answer(reports_dir=str(blocker / "reports"))
        assert (code, stdout.startswith("# Session Retrospective: 2026-05-04")) == ("2", True)
        assert stderr == ("retrod: error: the report was not saved in RETROD_REPORTS_DIR"
                          f" ({blocker}/reports/2026-05-04-aaaaaaaa.md): Not a directory\n")
        assert answer(output=str(missing / "x.md")) == (
            "2", (f"retrod: error: --output {missing}/x.md: the folder {missing} does not exist; create it first,"
                 " or name a file in a folder that exists\n"), "")
    assert not (project["tmp"] / "nonexistent").exists()


def test_doctor_warns_about_no_service_and_fails_only_when_strict(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    project["projects"].mkdir(exist_ok=True)
    done = ok(retrod(env, "doctor"))
    unit = Path(env["HOME"]) / ".config" / "systemd" / "user" / "retrod.service"
    assert f"WARN  service: not installed ({unit} does not exist)" in done.stdout  # issue 20: said only the path
    assert "WARN  daemon: not running" in done.stdout
    assert "FAIL" not in done.stdout
    assert retrod(env, "doctor", "--strict").returncode == 1


def test_doctor_says_a_projects_folder_that_does_not_exist_does_not_and_how_to_fix_it(project: dict,
                                                                                     db_url: str) -> None:
    """Issue 20: with RETROD_PROJECTS_DIR naming a missing folder, doctor suggested setting it."""
    missing = project["tmp"] / "no such folder"
    done = retrod(dict(project["env"], RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(missing)), "doctor")
    assert done.returncode == 1
    assert f"FAIL  projects folder: {missing} does not exist\n" in done.stdout
    assert (f"      fix: create it (mkdir -p '{missing}'), or fix RETROD_PROJECTS_DIR if it names the wrong folder\n"
            in done.stdout)
    default = dict(project["env"], RETROD_DATABASE_URL=db_url)
    del default["CLAUDE_CONFIG_DIR"], default["RETROD_PROJECTS_DIR"]  # Claude Code's own folder, not made yet
    done = retrod(default, "doctor")
    assert f"FAIL  projects folder: {Path(default['HOME']) / '.claude' / 'projects'} does not exist" in done.stdout
    assert "fix: run Claude Code once (it creates the folder), or set RETROD_PROJECTS_DIR" in done.stdout


def test_version(project: dict) -> None:
    from importlib.metadata import version

    assert ok(retrod(project["env"], "--version")).stdout.strip() == f"retrod {version('retrod')}"


def test_skills_call_this_retrod_by_path_and_name_the_session(project: dict) -> None:
    target = project["tmp"] / "skills"
    done = ok(retrod(project["env"], "skills", "install", "--dir", str(target)))
    command = done.stdout.strip().splitlines()[-1].removeprefix("the skills run ")
    assert command.startswith("/") and Path(command.split()[0]).exists()
    for name in ("retrod-track", "retrod-retro"):
        text = (target / name / "SKILL.md").read_text()
        assert "{retrod}" not in text and f"{command} " in text
        assert '"${CLAUDE_SESSION_ID}"' in text
        commands = [line for line in text.splitlines()
                    if line.lstrip().startswith(f"{command} ") and line.split()[1] in ("track", "phase", "report")]
        assert commands and all('"${CLAUDE_SESSION_ID}"' in line for line in commands), commands


def test_the_skills_present_the_cost_and_say_how_to_get_iso_times() -> None:
    """Issue 20: the retro skill never asked Claude to present the cost, and nothing told Claude
    how to get the ISO 8601 times `phase log` needs."""
    from retrod.claude_code import skills

    shipped = skills.shipped("retrod")
    presenting = shipped["retrod-retro"].split("Present it to the user")[1]
    for words in ("the estimated cost", "by model", "by verdict", "Est. cost", "not a bill", "summary.cost"):
        assert words in presenting, words
    track = shipped["retrod-track"]
    assert "`date -u +%Y-%m-%dT%H:%M:%SZ`" in track
    assert "`phase start` and `phase end` stamp the time themselves" in track


# -- found in review ----------------------------------------------------------------------------

def test_a_command_never_stops_the_server_under_a_daemon_from_before_the_shared_lock(project: dict) -> None:
    """Such a daemon (still running after an upgrade) holds only daemon.lock."""
    import fcntl

    data = Path(tempfile.mkdtemp(prefix="retrod-old-", dir="/tmp"))
    os.chmod(data, 0o711)
    cluster = Cluster(data / "d")
    env = dict(project["env"], RETROD_DATA_DIR=str(cluster.root))
    try:
        cluster.ensure_running()  # as the old daemon did, then holds daemon.lock for its lifetime
        lock = os.open(cluster.root / "daemon.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            ok(retrod(env, "sessions"))
            assert stopping_done(cluster).is_running()
        finally:
            os.close(lock)
        ok(retrod(env, "sessions"))  # no daemon now: the last one out stops it
        assert not stopping_done(cluster).is_running()
    finally:
        cluster.shutdown("immediate")
        shutil.rmtree(data, ignore_errors=True)


def test_claude_codes_variable_naming_no_transcript_is_refused(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url, CLAUDE_CODE_SESSION_ID=GHOST)
    refused(retrod(env, "report", "--no-save"), f"CLAUDE_CODE_SESSION_ID names session {GHOST}")
    refused(retrod(env, "track", "start", cwd=project["work"]), "RETROD_PROJECTS_DIR")
    assert tracked(db_url) == []  # no ghost row
    ok(retrod(env, "track", "start", "--allow-unknown"))
    assert tracked(db_url) == [GHOST]


def test_report_close_keeps_an_early_phase_someone_wrote_notes_in(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ok(retrod(env, "track", "start", "--session", A))
    with psycopg.connect(db_url) as conn:
        conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, verdict, notes)"
                     " SELECT id, 't', 'mine', now() + interval '1 minute', 'pending', 'my notes' FROM cc_sessions")
    report = json.loads(ok(retrod(env, "report", A, "--close", "--format", "json", "--no-save")).stdout)
    assert [(p["phase"], p["notes"], p["ended_at"]) for p in report["phases"]] == [("mine", "my notes", None)]


def test_an_infinite_away_threshold_is_a_configuration_error(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url, RETROD_AWAY_AFTER_S="inf")
    done = retrod(env, "report", A, "--no-save")
    assert done.returncode == 2 and done.stderr.startswith("retrod: error: configuration: RETROD_AWAY_AFTER_S")


def test_sessions_json_times_and_a_project_path_with_dots(project: dict, db_url: str) -> None:
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ingest(db_url, [project["projects"]])
    dotted = project["work"] / "src" / ".." / ".." / project["work"].name
    rows = json.loads(ok(retrod(env, "sessions", "--json", "--project", str(dotted))).stdout)["sessions"]
    assert [r["uuid"] for r in rows] == [B, A]
    assert rows[0]["started_at"] == "2026-05-04T10:01:40+00:00"


def test_sessions_project_takes_a_claude_code_folder_name_and_a_folder_inside_a_project(project: dict,
                                                                                     db_url: str) -> None:
    """Issue 20: every Claude Code folder name starts with "-", which argparse took for an option
    after a space; and a folder inside a project matched nothing, though a command run there
    finds the project's sessions."""
    env = dict(project["env"], RETROD_DATABASE_URL=db_url)
    ingest(db_url, [project["projects"]])
    name = project["folder"].name
    assert name.startswith("-")
    deep = project["work"] / "src" / "deep"
    for args in (["--project", name], [f"--project={name}"], ["--project", str(deep)], ["--project", f"{deep}/"]):
        rows = json.loads(ok(retrod(env, "sessions", "--json", *args)).stdout)["sessions"]
        assert [r["uuid"] for r in rows] == [B, A], args
    relative = ok(retrod(env, "sessions", "--json", "--project", "src/deep", cwd=project["work"])).stdout
    assert [r["uuid"] for r in json.loads(relative)["sessions"]] == [B, A]
    # a folder above the project is no project's, but is a part of its working folder (rule 3)
    above = json.loads(ok(retrod(env, "sessions", "--json", "--project", str(project["tmp"]))).stdout)
    assert [r["uuid"] for r in above["sessions"]] == [B, A] and above["projects_matched"] == [str(project["work"])]
    done = retrod(env, "sessions", "--project", "--json")  # a forgotten value is still refused
    assert done.returncode == 2 and "argument --project: expected one argument" in done.stderr


def test_a_file_another_ingester_committed_first_is_read_again_in_the_same_round(project: dict,
                                                                                 db_url: str) -> None:
    """The daemon's scan meets a file a report brought up to date meanwhile: it must not wait
    for the next change or scan for the lines written after that."""
    from psycopg_pool import ConnectionPool

    from retrod.ingest.ingester import Ingester
    from retrod.store.store import Store

    path = project["folder"] / f"{A}.jsonl"
    with ConnectionPool(db_url, min_size=1, max_size=4, open=True) as pool:
        daemon, report = (Ingester(Store(pool, HOST), [project["projects"]]) for _ in range(2))
        daemon.scan()
        before = daemon.store.known_files()  # what the daemon's next scan will have read
        with path.open("a") as f:
            f.write(_lines(A, 50, 1))
        report.refresh(A)  # commits the file first
        with path.open("a") as f:
            f.write(_lines(A, 60, 1))
        daemon.store.known_files = lambda: before
        stats = daemon.scan()
    assert stats.raced == []
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM retrod.requests WHERE session_uuid = %s", (A,)).fetchone()[0] == 4


def test_a_mistyped_command_starts_and_creates_nothing(project: dict) -> None:
    """Its arguments are checked before the private cluster is started (or created)."""
    data = project["tmp"] / "fresh"
    env = dict(project["env"], RETROD_DATA_DIR=str(data))
    for args in (("sessions", "--limit", "0"), ("phase", "start", "--task", "t"), ("report", "--format", "x")):
        done = retrod(env, *args)
        assert done.returncode == 2, done.stderr
    assert ok(retrod(env, "status", "--hel")).stdout.startswith("usage: retrod status")  # help, abbreviated
    assert not data.exists()


def test_a_pid_file_left_by_a_crash_does_not_keep_the_server_down(project: dict) -> None:
    """postmaster.pid names a pid now used by a process that is not the server's (here init's):
    that is no running server, and the next command starts one, as `pg_ctl start` recovers."""
    data = Path(tempfile.mkdtemp(prefix="retrod-pid-", dir="/tmp"))
    os.chmod(data, 0o711)
    cluster = Cluster(data / "d")
    env = dict(project["env"], RETROD_DATA_DIR=str(cluster.root))
    try:
        ok(retrod(env, "sessions"))  # creates the cluster; stopped again after
        stopping_done(cluster)
        pid_file = cluster.pgdata / "postmaster.pid"
        pid_file.write_text(f"1\n{cluster.pgdata}\n")
        if cluster.run_as:
            shutil.chown(pid_file, cluster.run_as)
        assert not cluster.is_running()
        ok(retrod(env, "sessions"))
    finally:
        cluster.shutdown("immediate")
        shutil.rmtree(data, ignore_errors=True)
