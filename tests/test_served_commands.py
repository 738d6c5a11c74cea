"""`sessions`, `trends`, `brief` and `phases` answered by the running daemon (served.py), as
`report` is: the same output, exit code and error lines as the command working alone, with the
client's working folder, environment and terminal; declined whenever the daemon could answer
otherwise (issue 32)."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from retrod.cli import served
from retrod.fastpath.client import SOCKET_NAME, served_argv
from test_cli_output import A, B, C, lines, slug

# psycopg made unimportable: what answers can only be the daemon
NO_DRIVER = [sys.executable, "-c", ("import sys; sys.modules['psycopg'] = None; from retrod.cli.entry import main;"
                                    " sys.exit(main())")]


@pytest.fixture
def env(tmp_path: Path, db_url: str) -> dict:
    """Three sessions of one project, a phase logged in the newest, and the daemon's settings."""
    work = tmp_path / "work" / "app"
    (work / "src").mkdir(parents=True)
    folder = tmp_path / "projects" / slug(work)
    folder.mkdir(parents=True)
    for n, session in enumerate((A, B, C)):
        (folder / f"{session}.jsonl").write_text(lines(session, 100 * n, n + 1, str(work)))
    out = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_", "TZ"))}
    out.update(RETROD_PROJECTS_DIR=str(tmp_path / "projects"), RETROD_DATA_DIR=str(tmp_path / "data"),
               RETROD_DATABASE_URL=db_url, RETROD_HOST_ID="served-test", HOME=str(tmp_path / "home"),
               CLAUDE_CONFIG_DIR=str(tmp_path / "claude"), TZ="UTC", COLUMNS="200", work=str(work))
    return out


def _run(env: dict, *args: str, cwd: Path | None = None, python: list[str] | None = None,
         extra: dict | None = None) -> tuple[int, str, str]:
    done = subprocess.run([*(python or [sys.executable, "-m", "retrod"]), *args], env={**env, **(extra or {})},
                          cwd=cwd or env["work"], capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr, done.stdout


def _daemon(env: dict) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(str(Path(env["RETROD_DATA_DIR"]) / SOCKET_NAME))
                return process
            except OSError:
                time.sleep(0.1)
    process.terminate()
    raise AssertionError("the daemon did not open its socket")


COMMANDS = [
    ("sessions",), ("sessions", "--json", "--limit", "2"), ("sessions", "--project", "."),
    ("trends", "--json"), ("trends", "--by", "day"), ("brief",), ("brief", "--format", "json"),
    ("phases", C), ("phases", C, "--format", "json"),
    ("sessions", "--sort", "nonsense"), ("trends", "--since", "yesterday-ish"), ("phases", "ffffffff"),
]


def test_each_command_answers_through_the_daemon_as_it_does_alone(env: dict) -> None:
    # The phase's and the brief's figures need the transcripts read: a report reads its session's
    for session in (A, B, C):
        assert _run(env, "report", session, "--no-save")[0] == 0
    assert _run(env, "phase", "log", "--session", C, "--task", "t", "--phase", "p", "--start",
                "2026-11-02T10:00:00+00:00", "--end", "2026-11-02T10:01:00+00:00", "--verdict", "high_impact")[0] == 0
    src = Path(env["work"]) / "src"
    alone = {args: _run(env, *args, cwd=src) for args in COMMANDS}
    assert alone[("sessions", "--sort", "nonsense")][0] == 2 and alone[("phases", "ffffffff")][0] == 2
    assert all(code == 0 for args, (code, _, _) in alone.items() if args[-1] not in ("nonsense", "yesterday-ish",
                                                                                       "ffffffff"))
    process = _daemon(env)
    try:
        for args in COMMANDS:
            assert _run(env, *args, cwd=src, python=NO_DRIVER) == alone[args], args
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_what_the_daemon_must_not_answer_the_command_does_itself(env: dict) -> None:
    """--debug, --help and settings unlike the daemon's: without psycopg the command fails, so
    the daemon did not answer."""
    process = _daemon(env)
    try:
        for args, extra in [(("--debug", "sessions"), {}), (("sessions", "--help"), {}),
                            (("sessions",), {"TZ": "Asia/Kolkata"}), (("sessions",), {"RETROD_BATCH_BYTES": "8192"}),
                            (("brief",), {"RETROD_PROJECTS_DIR": "relative/projects"})]:
            code, err, out = _run(env, *args, python=NO_DRIVER, extra=extra)
            assert "psycopg" in err or (args[-1] == "--help" and code == 0 and "usage: retrod sessions" in out), args
        # the command's own RETROD_PRICES and RETROD_AWAY_AFTER_S are sent along, not refused
        code, err, out = _run(env, "sessions", "--json", python=NO_DRIVER, extra={"RETROD_AWAY_AFTER_S": "60"})
        assert code == 0 and "sessions" in json.loads(out), err
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_request_names_only_commands_the_daemon_serves() -> None:
    def request(*argv: str) -> dict[str, str]:
        return {"argc": str(len(argv)), **{f"argv.{i}": a for i, a in enumerate(argv)}}

    assert served_argv(request("sessions", "--json")) == ["sessions", "--json"]
    for refused in [request("report", "x"), request("track", "start"), request("run"), request("brief", "--hook"),
                    request("brief", "--ho"), request("sessions", "-h"), request("trends", "--he"),
                    request("sessions", "--deb"), {"argc": "2", "argv.0": "sessions"}, {"argc": "x"}, request()]:
        assert served_argv(refused) is None, refused


def _served(pool: object, argv: list[str], cwd: str, execute, env: dict | None = None) -> tuple[str, str, str]:
    daemon_env = {"HOME": "/home/x"}
    request = {"argc": str(len(argv)), **{f"argv.{i}": a for i, a in enumerate(argv)}, "cwd": cwd, "pid": "1",
               **{f"env.{k}": v for k, v in (env or daemon_env).items()}}
    return served.answer(pool, request, execute, daemon_env=daemon_env)


def test_commands_served_at_once_each_print_to_their_own_client_and_read_its_folder() -> None:
    """Two threads at once: each command's prints, working folder and terminal are its own, and
    the daemon's own stdout is untouched."""
    from retrod.basics import invocation

    both = threading.Barrier(2)

    def execute(args, settings) -> int:
        both.wait(timeout=10)  # both are running before either prints
        for _ in range(200):
            print(invocation.cwd(), args.project)
        print("tty" if sys.stdout.isatty() else "pipe", file=sys.stderr)
        return 0

    answers: dict[str, tuple] = {}
    real_stdout = io.StringIO()
    saved = sys.stdout
    sys.stdout = real_stdout
    try:
        threads = [threading.Thread(target=lambda c=c: answers.__setitem__(
            c, _served(None, ["sessions", "--project", c], f"/work/{c}", execute))) for c in ("one", "two")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        print("the daemon's own")
    finally:
        routed, sys.stdout = sys.stdout, saved
    for name in ("one", "two"):
        code, err, out = answers[name]
        assert code == "0" and err == "pipe\n" and out == f"/work/{name} {name}\n" * 200
    assert real_stdout.getvalue() == "the daemon's own\n" and invocation.unrouted(routed) is real_stdout


def test_settings_unlike_the_daemons_are_declined() -> None:
    def execute(args, settings) -> int:
        raise AssertionError("not to be run")

    for env in [{"HOME": "/home/y"}, {"HOME": "/home/x", "TZ": "UTC"}, {"HOME": "/home/x", "RETROD_HOST_ID": "h"},
                {"HOME": "/home/x", "CLAUDE_CONFIG_DIR": "rel"}]:
        assert _served(None, ["sessions"], "/", execute, env) == served.DECLINED
    bad_setting = {"HOME": "/home/x", "RETROD_AWAY_AFTER_S": "-1"}  # the command words it itself
    assert _served(None, ["sessions"], "/", execute, bad_setting) == served.DECLINED
