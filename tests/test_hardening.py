"""Faults and hostile inputs (the hardening issue): the first of its failures, each with a test
that failed before its fix."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psycopg
import pytest

from helpers import HOST, ingest, output_tokens
from retrod.basics.redact import mask_password
from retrod.ingest.ingester import Ingester
from retrod.service.cluster import Cluster
from retrod.store.store import Store

S = "eeeeeeee-0000-4000-8000-000000000000"
FIFO = "ffffffff-0000-4000-8000-000000000000"
LINE = {"type": "assistant", "sessionId": S, "timestamp": "2026-01-01T00:00:00Z",
        "message": {"id": "m1", "usage": {"output_tokens": 7}}}


def test_a_fifo_named_like_a_transcript_is_skipped_not_opened(db_url: str, tmp_path: Path) -> None:
    """Opening it for reading would wait for a writer, and every rescan would wait again."""
    from psycopg_pool import ConnectionPool

    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    (folder / f"{S}.jsonl").write_text(json.dumps(LINE) + "\n")
    os.mkfifo(folder / f"{FIFO}.jsonl")
    with ConnectionPool(db_url, min_size=1, max_size=4, open=True) as pool:
        ingester = Ingester(Store(pool, HOST), [tmp_path / "projects"])
        for work in (ingester.scan, lambda: ingester.ingest_paths([folder / f"{FIFO}.jsonl"])):
            done = threading.Thread(target=work, daemon=True)
            done.start()
            done.join(timeout=20)
            assert not done.is_alive(), "reading stopped at the FIFO"
    with psycopg.connect(db_url) as conn:
        paths = [r[0] for r in conn.execute("SELECT path FROM retrod.files")]
        output = conn.execute("SELECT sum(output_tokens) FROM retrod.requests").fetchone()[0]
    assert paths == [str(folder / f"{S}.jsonl")] and output == 7  # no row, no session, for the FIFO


@pytest.mark.parametrize(("dsn", "secret"), [
    ("postgresql://me:s3cret@localhost/db", "s3cret"),
    ("postgresql:///db?password=s3cret&host=/tmp", "s3cret"),
    ("postgresql:///db?host=/tmp&PASSWORD=s3cret", "s3cret"),
    ("host=/tmp dbname=db password=s3cret", "s3cret"),
    ("host=/tmp password = 's3 cr\\'et' dbname=db", "s3 cr"),
    ("postgresql://me:pa/ss@h/db", "pa/ss"),
    ("host=db password=p&ssw0rd", "ssw0rd"),
    ("host=db sslpassword=k3y password=x", "k3y"),
    ("host=db password=a\\ b1 dbname=x", "b1"),
    ('RETROD_DATABASE_URL="postgresql://db:5432/r?password=s3cret"\nRETROD_PROJECTS_DIR="/home/me@corp/p"',
     "s3cret"),
])
def test_every_form_of_password_is_masked(dsn: str, secret: str) -> None:
    masked = mask_password(dsn)
    assert secret not in masked and "***" in masked
    assert (masked.count("\n") == dsn.count("\n") and "/home/me@corp/p" in masked) or "\n" not in dsn


def test_status_and_doctor_never_print_the_password(db_url: str, tmp_path: Path) -> None:
    """The password as a URL parameter and in keyword form; the test server (peer authentication)
    never asks for it, so the commands get as far as printing where the database is."""
    host = db_url.split("host=", 1)[1]
    dbname = db_url.split("@/", 1)[1].split("?", 1)[0]
    user = db_url.split("//", 1)[1].split("@", 1)[0]
    projects = tmp_path / "projects"
    projects.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_PROJECTS_DIR=str(projects), RETROD_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))
    for dsn in (f"{db_url}&password=s3cret", f"host={host} dbname={dbname} user={user} password=s3cret"):
        for args in (["status"], ["status", "--json"], ["--debug", "status"], ["doctor"]):
            done = subprocess.run([sys.executable, "-m", "retrod", *args], env=dict(env, RETROD_DATABASE_URL=dsn),
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode in (0, 1), done.stderr
            assert "password=***" in done.stdout, (args, done.stdout)
            assert "s3cret" not in done.stdout + done.stderr, args


def test_the_private_clusters_folder_and_log_are_owner_only_whatever_existed(tmp_path: Path) -> None:
    """Its log holds the text of failed statements; an older retrod left them 0755 / 0644."""
    data = Path(tempfile.mkdtemp(prefix="retrod-perm-", dir="/tmp"))
    os.chmod(data, 0o711)
    cluster = Cluster(data / "d")
    try:
        cluster.root.mkdir(mode=0o755)
        os.chmod(cluster.root, 0o755)
        cluster.logfile.write_text("")
        os.chmod(cluster.logfile, 0o644)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
        env.update(RETROD_DATA_DIR=str(cluster.root), RETROD_PROJECTS_DIR=str(tmp_path), HOME=str(tmp_path))
        done = subprocess.run([sys.executable, "-m", "retrod", "status"], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        # as root the server's user passes through the folder (test_root_mode.py), and no one else
        assert stat.S_IMODE(cluster.root.stat().st_mode) == (0o710 if cluster.run_as else 0o700)
        assert stat.S_IMODE(cluster.logfile.stat().st_mode) == 0o600
    finally:
        cluster.shutdown("immediate")
        shutil.rmtree(data, ignore_errors=True)


def test_a_report_of_the_fifo_session_is_no_ghost(db_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    os.mkfifo(folder / f"{FIFO}.jsonl")
    ingest(db_url, [tmp_path / "projects"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(tmp_path / "projects"),
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_HOST_ID=HOST, HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "retrod", "report", FIFO[:8], "--no-save"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no session matches" in done.stderr


def _assistant(key: str, output: int, text: str = "ok") -> dict:
    return {"type": "assistant", "sessionId": S, "timestamp": "2026-01-01T00:00:01Z",
            "message": {"id": key, "content": [{"type": "text", "text": text}],
                        "usage": {"output_tokens": output}}}


@pytest.mark.parametrize("batch_bytes", [4 << 20, 4096])
def test_a_byte_order_mark_is_ignored_and_bytes_that_are_not_utf8_make_a_bad_line(
        db_url: str, tmp_path: Path, batch_bytes: int) -> None:
    import reference
    from helpers import reports

    folder = tmp_path / "projects" / "-p"
    (folder / S / "subagents").mkdir(parents=True)
    lines = [
        b"\xef\xbb\xbf" + json.dumps(_assistant("m1", 1)).encode(),        # the first line, after a BOM
        json.dumps(_assistant("m2", 10)).encode().replace(b'"ok"', b'"o\xffk"'),  # raw byte: bad line
        json.dumps(_assistant("m3", 100, "\ud800")).encode(),              # a \ud800 escape: valid
    ]
    (folder / f"{S}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (folder / S / "subagents" / "agent-a1.meta.json").write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"agentType": "Explore", "description": "look"}).encode())
    (folder / S / "subagents" / "agent-a1.jsonl").write_text(json.dumps(_assistant("m4", 1000)) + "\n")
    ingest(db_url, [tmp_path / "projects"], batch_bytes)
    report = reports(db_url)[S]
    assert report["summary"]["tokens"]["total"]["output"] == 1101  # m1 + m3 + m4, not m2
    assert report["session"]["bad_lines"] == 1
    assert (report["subagents"][0]["agent_type"], report["subagents"][0]["matched_by"]) == ("Explore", "meta")
    want = reference.compute(tmp_path / "projects")[S]["summary"]
    assert report["summary"] == report["summary"] | want


def test_request_keys_compare_exactly_whatever_they_hold(db_url: str, tmp_path: Path) -> None:
    """DESIGN §2.2: escaped for storage, never replaced — these are five requests, not two."""
    import reference
    from helpers import reports

    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    keys = ["m\ud800", "m\ud801", "m\x00", "m\ufffd", "m\\0"]
    (folder / f"{S}.jsonl").write_text("".join(
        json.dumps(_assistant(key, 10 ** n)) + "\n" for n, key in enumerate(keys)))
    ingest(db_url, [tmp_path / "projects"])
    summary = reports(db_url)[S]["summary"]
    assert (summary["requests"], summary["tokens"]["total"]["output"]) == (5, 11111)
    assert summary == summary | reference.compute(tmp_path / "projects")[S]["summary"]


def test_a_tool_input_the_database_cannot_hold_or_python_cannot_walk_stops_nothing(db_url: str,
                                                                                    tmp_path: Path) -> None:
    """Found in review: a path with a NUL or a lone surrogate, or an input nested deeper than
    Python recurses, stopped the whole file. Each line still counts; the paths are stored as the
    other text is (U+FFFD), and the two Reads of one such path are still one path (re_read)."""
    from helpers import reports

    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)

    def read(call_id: str, tool_input: str, n: int) -> str:  # the input spliced in as raw JSON text
        line = {"type": "assistant", "sessionId": S, "timestamp": f"2024-01-01T00:00:0{n}.000Z",
                "message": {"id": f"m{n}", "usage": {"output_tokens": 10 ** n},
                            "content": [{"type": "tool_use", "id": call_id, "name": "Read", "input": "INPUT"}]}}
        return json.dumps(line).replace('"INPUT"', tool_input) + "\n"
    deep = "[" * 600 + "]" * 600
    (folder / f"{S}.jsonl").write_text(
        read("t1", '{"file_path":"/a\\u0000b"}', 0) + read("t2", '{"file_path":"/a\\u0000b","limit":5}', 1)
        + read("t3", '{"file_path":"/c\\ud800"}', 2) + read("t4", deep, 3) + read("t5", deep, 4))
    ingest(db_url, [tmp_path / "projects"])
    summary = reports(db_url)[S]["summary"]
    assert summary["tokens"]["total"]["output"] == 11111  # every line counted
    # t2 re-reads t1's path; t5 repeats t4's input (compared as written); t1, t3, t4 productive.
    assert summary["tool_use"]["signals"]["re_read"] == 1 and summary["tool_use"]["signals"]["duplicate"] == 1
    assert summary["tool_use"]["calls"] == 5
    with psycopg.connect(db_url) as conn:
        paths = [row[0] for row in conn.execute("SELECT path FROM retrod.tool_uses ORDER BY \"offset\"")]
    assert paths == ["/a\ufffdb", "/a\ufffdb", "/c\ufffd", None, None]


@pytest.mark.parametrize("batch_bytes", [4 << 20, 1])  # one statement for both files, or one each (the SQL's rule)
def test_in_a_tie_a_named_agent_wins_over_an_unnamed_copy(db_url: str, tmp_path: Path, batch_bytes: int) -> None:
    """DESIGN §2.2: the unnamed and inline threads sort after every named agent, compaction
    agents included — the request is the compaction agent's, not the unnamed thread's."""
    import reference
    from helpers import reports

    folder = tmp_path / "projects" / "-p"
    (folder / S / "subagents").mkdir(parents=True)
    at = "2026-01-01T00:00:05Z"
    record = {"type": "assistant", "sessionId": S, "timestamp": at,
              "message": {"id": "k", "usage": {"output_tokens": 5}}}
    progress = {"type": "progress", "sessionId": S, "timestamp": at,
                "data": {"type": "agent_progress", "message": {**record}}}
    (folder / f"{S}.jsonl").write_text(json.dumps(progress) + "\n")
    (folder / S / "subagents" / "agent-acompact-1.jsonl").write_text(json.dumps(record) + "\n")
    ingest(db_url, [tmp_path / "projects"], batch_bytes)
    tokens = reports(db_url)[S]["summary"]["tokens"]
    assert (tokens["compaction"]["output"], tokens["subagents"]["output"]) == (5, 0)
    assert tokens == reference.compute(tmp_path / "projects")[S]["summary"]["tokens"]


def test_a_subagent_file_truncated_or_refilled_with_a_partial_line_stays_listed(db_url: str,
                                                                              tmp_path: Path) -> None:
    from helpers import reports

    folder = tmp_path / "projects" / "-p"
    (folder / S / "subagents").mkdir(parents=True)
    (folder / f"{S}.jsonl").write_text(json.dumps(LINE) + "\n")
    agent = folder / S / "subagents" / "agent-a1.jsonl"
    agent.write_text(json.dumps(_assistant("s1", 3)) + "\n")
    ingest(db_url, [tmp_path / "projects"])
    assert [a["agent_id"] for a in reports(db_url)[S]["subagents"]] == ["a1"]
    agent.write_text("")  # truncated to nothing
    ingest(db_url, [tmp_path / "projects"])
    assert [a["agent_id"] for a in reports(db_url)[S]["subagents"]] == ["a1"]
    agent.unlink()
    agent.write_text('{"type": "assistant", "sessionId"')  # replaced: only a partial line so far
    ingest(db_url, [tmp_path / "projects"])
    assert [a["agent_id"] for a in reports(db_url)[S]["subagents"]] == ["a1"]


@pytest.mark.slow
def test_a_database_refusing_writes_is_an_outage_waited_out_and_caught_up(db_url: str, tmp_path: Path) -> None:
    """As a failover to a read-only standby, or a full disk: the lines written meanwhile must be
    in soon after writes are allowed again, not at the next scan."""
    import signal
    import time

    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    path = folder / f"{S}.jsonl"
    path.write_text(json.dumps(_assistant("r1", 1)) + "\n")
    dbname = db_url.split("@/", 1)[1].split("?", 1)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(tmp_path / "projects"),
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_SCAN_INTERVAL_S="3600", HOME=str(tmp_path))

    def wait_for(predicate, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.1)
        return False

    def read_only(on: bool) -> None:  # for new sessions; then the daemon's are made to reconnect
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = off")  # this session may still write
            conn.execute(f"ALTER DATABASE {dbname} SET default_transaction_read_only = {'on' if on else 'off'}")
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE datname = current_database() AND pid <> pg_backend_pid()")

    daemon = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: output_tokens(db_url) == 1, 30)
        read_only(True)
        with path.open("a") as f:
            f.write(json.dumps(_assistant("r2", 10)) + "\n")
        time.sleep(3)  # the daemon meets the refusal
        assert output_tokens(db_url) == 1
        read_only(False)
        assert wait_for(lambda: output_tokens(db_url) == 11, 20), "lines written during the refusal were not caught up"
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = off")
            conn.execute(f"ALTER DATABASE {dbname} RESET default_transaction_read_only")
    assert "database unavailable; retrying with backoff" in daemon.stderr.read()


def test_a_file_whose_first_bytes_changed_is_read_again_from_its_start(db_url: str, tmp_path: Path) -> None:
    """Deleted and recreated at once, a file often gets its inode number back (ext4); or it is
    truncated and refilled past the offset before the daemon looks. Same inode, bigger size: only
    the fingerprint of its first bytes tells — else the new file's first lines were lost."""
    import reference
    from helpers import reports

    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    path = folder / f"{S}.jsonl"

    def user(at: int) -> str:
        return json.dumps({"type": "user", "sessionId": S, "timestamp": f"2026-01-01T00:00:{at:02d}Z",
                           "message": {"content": "go"}}) + "\n"

    path.write_text(user(0) + json.dumps(_assistant("old", 1, "y" * 5000)) + "\n")  # past the 4 KiB
    ingest(db_url, [tmp_path / "projects"])
    with psycopg.connect(db_url) as conn:  # as a database from before fingerprints left it
        conn.execute("UPDATE retrod.files SET head = ''")
    with path.open("a") as f:
        f.write(json.dumps(_assistant("older", 100)) + "\n")
    ingest(db_url, [tmp_path / "projects"])  # gets its fingerprint now, though past its start
    inode = path.stat().st_ino
    new = user(10) + json.dumps({**_assistant("new", 10, "x" * 6000), "timestamp": "2026-01-01T00:00:30Z"}) + "\n" \
        + user(45)
    assert len(new) > path.stat().st_size
    with path.open("r+") as f:  # same inode, other bytes, longer than what was read
        f.write(new)
        f.truncate()
    assert path.stat().st_ino == inode
    ingest(db_url, [tmp_path / "projects"])
    report = reports(db_url)[S]
    summary = report["summary"]
    assert report["session"]["bad_lines"] == 0
    assert summary["tokens"]["total"]["output"] == 111  # the old requests stay counted (history is kept)
    want = reference.compute(tmp_path / "projects")[S]["summary"]  # time follows the new content
    assert {k: summary[k] for k in ("wall_s", "claude_s", "tool_s", "human_s", "away_s")} == \
        {k: want[k] for k in ("wall_s", "claude_s", "tool_s", "human_s", "away_s")} == \
        {"wall_s": 35.0, "claude_s": 20.0, "tool_s": 0.0, "human_s": 15.0, "away_s": 0.0}


def test_a_meta_file_rewritten_in_place_at_the_same_size_is_read_again(db_url: str, tmp_path: Path) -> None:
    from helpers import reports

    folder = tmp_path / "projects" / "-p"
    (folder / S / "subagents").mkdir(parents=True)
    (folder / f"{S}.jsonl").write_text(json.dumps(LINE) + "\n")
    (folder / S / "subagents" / "agent-a1.jsonl").write_text(json.dumps(_assistant("s1", 3)) + "\n")
    meta = folder / S / "subagents" / "agent-a1.meta.json"
    meta.write_text(json.dumps({"agentType": "Explore", "description": "look"}))
    ingest(db_url, [tmp_path / "projects"])
    assert reports(db_url)[S]["subagents"][0]["agent_type"] == "Explore"
    stat_before = meta.stat()
    with meta.open("r+") as f:
        f.write(json.dumps({"agentType": "Planner", "description": "look"}))
    os.utime(meta, ns=(stat_before.st_atime_ns, stat_before.st_mtime_ns))  # even the time unchanged
    assert (meta.stat().st_size, meta.stat().st_ino) == (stat_before.st_size, stat_before.st_ino)
    ingest(db_url, [tmp_path / "projects"])
    assert reports(db_url)[S]["subagents"][0]["agent_type"] == "Planner"


def test_a_second_daemon_on_one_data_folder_is_refused_and_the_first_keeps_going(db_url: str,
                                                                                 tmp_path: Path) -> None:
    import signal
    import time

    folder = tmp_path / "projects" / "-p"
    folder.mkdir(parents=True)
    path = folder / f"{S}.jsonl"
    path.write_text(json.dumps(_assistant("r1", 1)) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(tmp_path / "projects"),
               RETROD_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))

    first = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while output_tokens(db_url) != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert output_tokens(db_url) == 1
        second = subprocess.run([sys.executable, "-m", "retrod", "run"], env=env, capture_output=True,
                                text=True, timeout=60)
        assert second.returncode == 1
        assert second.stderr.strip().splitlines() == [
            f"retrod: error: another `retrod run` is using {tmp_path / 'data'}"]
        with path.open("a") as f:
            f.write(json.dumps(_assistant("r2", 10)) + "\n")
        deadline = time.monotonic() + 30
        while output_tokens(db_url) != 11 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert output_tokens(db_url) == 11 and first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)
