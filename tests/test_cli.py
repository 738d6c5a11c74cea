"""The commands as a user runs them, on the embedded default (no RETROD_DATABASE_URL)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import reference
from retrod.service.cluster import Cluster

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"


@pytest.fixture(scope="module")
def embedded_env(tmp_path_factory) -> Iterator[dict]:
    from conftest import FIXTURES

    data_dir = Path(tempfile.mkdtemp(prefix="retrod-e2e-", dir="/tmp"))  # short: socket path
    os.chmod(data_dir, 0o711)
    projects = tmp_path_factory.mktemp("e2e") / "projects"
    shutil.copytree(FIXTURES, projects)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATA_DIR=str(data_dir / "d"), RETROD_PROJECTS_DIR=str(projects),
               RETROD_REPORTS_DIR=str(projects.parent / "reports"), HOME=str(projects.parent / "home"))
    yield env
    Cluster(data_dir / "d").shutdown("immediate")
    shutil.rmtree(data_dir, ignore_errors=True)


def retrod(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_run_once_then_report_on_the_private_cluster(embedded_env: dict) -> None:
    first = retrod(embedded_env, "run", "--once")
    assert first.returncode == 0, first.stderr
    assert not Cluster(Path(embedded_env["RETROD_DATA_DIR"])).is_running()  # stopped cleanly on exit

    done = retrod(embedded_env, "report", SPOTTER[:8], "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    want = reference.compute(Path(embedded_env["RETROD_PROJECTS_DIR"]))[SPOTTER]
    assert report["session"]["uuid"] == SPOTTER
    assert {k: report["summary"][k] for k in want["summary"]} == want["summary"]

    markdown = retrod(embedded_env, "report", SPOTTER)
    assert markdown.returncode == 0, markdown.stderr
    assert markdown.stdout.startswith("# Session Retrospective: 2026-02-11")
    assert "| Output | 38,899 | 3 | 6 | 38,908 |" in markdown.stdout  # main, subagents, compaction, total
    saved = Path(embedded_env["RETROD_REPORTS_DIR"]) / "2026-02-11-258c7280.md"
    assert saved.read_text() == markdown.stdout

    again = retrod(embedded_env, "run", "--once")
    assert again.returncode == 0, again.stderr
    assert json.loads(retrod(embedded_env, "report", SPOTTER, "--format", "json").stdout) == report


@pytest.mark.parametrize(("prefix", "message"), [
    ("ffffffff", "no session matches 'ffffffff'"),
    ("", "cannot tell which session this is"),  # blank: the current session, and there is none here
])
def test_unknown_session_is_a_usage_error(embedded_env: dict, prefix: str, message: str) -> None:
    done = retrod(embedded_env, "report", prefix)
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_ambiguous_prefix_is_a_usage_error(embedded_env: dict) -> None:
    sessions = sorted(reference.compute(Path(embedded_env["RETROD_PROJECTS_DIR"])))
    # The longest prefix that two sessions share, so it is ambiguous by construction.
    shared = max((os.path.commonprefix([a, b]) for a, b in itertools.pairwise(sessions)),  # noqa: RUF071 - uuids
                 key=len)
    assert shared
    retrod(embedded_env, "run", "--once")
    done = retrod(embedded_env, "report", shared)
    assert done.returncode == 2
    assert "ambiguous" in done.stderr


def test_bad_configuration_is_one_line(embedded_env: dict) -> None:
    done = retrod(dict(embedded_env, RETROD_SCAN_INTERVAL_S="soon"), "run", "--once")
    assert done.returncode == 2
    assert done.stderr.startswith("retrod: error: configuration:")
    assert "Traceback" not in done.stderr


# The command as entry.py runs it, printing on stderr which modules it loaded (after its output)
LOADED = ("import atexit, sys; atexit.register(lambda: sys.stderr.write('\\nloaded: ' + ' '.join(sys.modules)));"
          " from retrod.cli.entry import main; sys.exit(main())")


@pytest.mark.parametrize(("argv", "unused"), [
    (["phases", SPOTTER], {"genai_prices", "retrod.history.brief", "retrod.history.trends", "retrod.lessons",
                           "retrod.ingest.catchup", "retrod.transcript.fold", "retrod.cli.served"}),
    (["track", "start", "--session", SPOTTER], {"genai_prices", "retrod.history.brief", "retrod.history.trends",
                                                "retrod.ingest.catchup"}),
    (["sessions"], {"retrod.history.brief", "retrod.history.trends", "retrod.lessons", "retrod.claude_code.hooks",
                    "retrod.cli.served"}),
    (["lessons"], {"retrod.history.brief", "retrod.history.trends", "retrod.report.markdown", "retrod.cli.served"}),
])
def test_a_command_working_alone_loads_only_what_it_uses(embedded_env: dict, argv: list[str], unused: set) -> None:
    """Issue 32: without a daemon, loading the libraries is most of a short command's time."""
    assert retrod(embedded_env, "run", "--once").returncode == 0  # (its sessions to list)
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], env=embedded_env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stderr.rpartition("loaded: ")[2].split())
    assert "psycopg" in loaded and not loaded & unused, loaded & unused


@pytest.mark.parametrize("argv", [
    ["258c7280"], ["258c7280", "--format", "json"], ["--format=json", "258c7280", "--no-save"],
    ["258c7280", "--output", "out.md", "--close"], ["258c7280", "--output=sub/out.json", "--format", "json"],
    [], ["--close"],  # no session: the current one
    ["--session", "258c7280"], ["--session=258c7280", "--format", "json"], ["--close", "--session", ""],
])
def test_the_report_fast_path_reads_its_arguments_as_argparse_does(argv: list[str]) -> None:
    """`retrod report` is first parsed without argparse (fastpath/client.py), to ask the daemon."""
    from retrod.cli.arguments import parser
    from retrod.fastpath import client

    full = vars(parser().parse_args(["report", *argv]))
    fast = client.parse(argv)
    assert fast == {k: str(full[k]) if k == "output" and full[k] else full[k] for k in fast}


@pytest.mark.parametrize("argv", [
    ["--help"], ["a", "b"], ["258c7280", "--format", "yaml"], ["258c7280", "--form", "json"],
    ["258c7280", "--output"], ["--", "258c7280"], ["258c7280", "--no-save=1"],
    ["258c7280", "--session", "258c7280"], ["--session", "--close"], ["--output", "--close"], ["--session"],
])
def test_the_report_fast_path_leaves_anything_else_to_argparse(argv: list[str]) -> None:
    from retrod.fastpath import client

    assert client.parse(argv) is None


@pytest.mark.parametrize("command", [
    ["report"], ["phases"], ["track", "start"], ["phase", "start", "--task", "t", "--phase", "p"],
    ["phase", "end", "--verdict", "high_impact"],
    ["phase", "log", "--task", "t", "--phase", "p", "--start", "x", "--end", "y", "--verdict", "high_impact"],
])
def test_every_command_that_takes_a_session_takes_session(command: list[str]) -> None:
    """Issue 20: `report` said "pass --session UUID", then refused --session."""
    from retrod.cli.arguments import parser

    assert parser().parse_args([*command, "--session", "258c7280"]).session == "258c7280"
    assert parser().parse_args([*command, "--session=258c7280"]).session == "258c7280"


@pytest.mark.parametrize("command", [["report"], ["phases"]])
def test_the_session_given_both_ways_must_agree(command: list[str], capsys) -> None:
    from retrod.cli.arguments import parser

    assert parser().parse_args([*command, "258c7280", "--session", "258c7280"]).session == "258c7280"
    assert parser().parse_args([*command, "--session", "258c7280", ""]).session == "258c7280"  # blank: not given
    with pytest.raises(SystemExit) as refused:
        parser().parse_args([*command, "258c7280", "--session", "ffffffff"])
    assert refused.value.code == 2
    assert "the session is given twice ('258c7280' and 'ffffffff'); give it once" in capsys.readouterr().err


def test_the_report_fast_path_falls_back_when_the_daemon_closes_without_answering(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """A daemon stopping mid-request: the command does the work itself rather than fail."""
    import socket
    import threading

    from retrod.fastpath import client

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(tmp_path / client.SOCKET_NAME))
    server.listen(1)

    def accept_and_close() -> None:
        conn, _ = server.accept()
        conn.recv(1 << 16)
        conn.close()

    thread = threading.Thread(target=accept_and_close)
    thread.start()
    monkeypatch.setenv("RETROD_DATA_DIR", str(tmp_path))
    try:
        assert client.main(["258c7280", "--no-save"]) is None
    finally:
        thread.join(timeout=10)
        server.close()
    monkeypatch.setenv("RETROD_DATA_DIR", str(tmp_path / "nowhere"))
    assert client.main(["258c7280", "--no-save"]) is None  # no daemon at all
