"""One timeline over the copies of a main transcript (accounting.md §2.3, §2.4; issue 19).

Claude Code names a project folder after the working folder: a folder copied (`cp -r`) or moved
(`mv`) leaves a session's main transcript at two paths. Its time, compactions and tool-result
bytes count each line once (by its uuid, where it is first met in the order of the folders'
names), also when the old copy is gone, and whatever order the files are read in. Expected
figures are the independent reference's (tests/reference.py) or worked out by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg

import reference
from conftest import FIXTURES
from helpers import ingest, reports, rollups_match_raw

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"
SPOTTER_DIR = "-home-USER-projects-spotter-worktrees-spotter-gqc"
TIMES = ("wall_s", "claude_s", "tool_s", "human_s", "away_s", "compactions", "tool_result_bytes", "requests",
         "tool_calls")


def figures(summary: dict) -> dict:
    return {key: summary[key] for key in TIMES} | {"tokens": summary["tokens"]}


def spotter_tree(root: Path) -> Path:
    """The fixture session (1,877 lines, a compaction, subagents) alone in a projects folder."""
    shutil.copytree(FIXTURES / SPOTTER_DIR, root / SPOTTER_DIR)
    return root


def test_a_copied_project_folder_counts_each_line_once(db_url: str, tmp_path: Path) -> None:
    root = spotter_tree(tmp_path / "projects")
    single = reference.compute(root)[SPOTTER]["summary"]
    # `cp -r` to a name that sorts first and to one that sorts last: three copies in all.
    for name in ("-a-copy", "-z-copy"):
        shutil.copytree(root / SPOTTER_DIR, root / name)
    ingest(db_url, [root])
    got = reports(db_url)[SPOTTER]["summary"]
    want = reference.compute(root)[SPOTTER]["summary"]
    assert figures(want) == figures(single)  # the reference agrees: three copies, one session's time
    assert figures(got) == figures(want)
    assert round(got["claude_s"] + got["tool_s"] + got["human_s"] + got["away_s"], 3) <= got["wall_s"]
    with psycopg.connect(db_url) as conn:
        rows = dict(conn.execute("SELECT counted, count(*) FROM retrod.events WHERE session_uuid = %s AND NOT sub"
                                 " GROUP BY 1",
                                 (SPOTTER,)).fetchall())
    assert rows[False] == 2 * rows[True]  # the two copies' lines are kept, and not counted
    rollups_match_raw(db_url)


def test_a_folder_moved_while_followed_keeps_its_figures_once(db_url: str, tmp_path: Path) -> None:
    root = spotter_tree(tmp_path / "projects")
    ingest(db_url, [root])
    before = reports(db_url)[SPOTTER]["summary"]
    # `mv` of the project folder: the old file is gone (kept, as deleted), the new one read anew;
    # to either side of the old name in the folders' order.
    for moved_to in ("-a-moved", "-zz-moved"):
        current = next(p for p in root.iterdir() if p.is_dir())
        current.rename(root / moved_to)
        ingest(db_url, [root])
        after = reports(db_url)[SPOTTER]
        assert figures(after["summary"]) == figures(before), moved_to
        assert after["session"]["transcripts_deleted"] >= 1
    rollups_match_raw(db_url)


def test_any_order_of_reading_the_copies_ends_the_same(db_url: str, tmp_path: Path) -> None:
    """Lines appended to each copy in turn, each read as it comes (a live session that was
    copied): the first copy read is not always the first in the timeline."""
    session = "eeeeeeee-1111-4000-8000-00000000000e"
    root = tmp_path / "projects"
    lines = [_line(session, n) for n in range(12)]
    early, late = root / "-a-copy" / f"{session}.jsonl", root / "-z-written-first" / f"{session}.jsonl"
    for path in (early, late):
        path.parent.mkdir(parents=True)
        path.write_text("")
    # The later folder name gets the lines first, the earlier one a copy of them and then more
    # of its own (lines 8-11): the copy comes first in the timeline, and its lines extend it.
    for n, line in enumerate(lines[:8]):
        with late.open("a") as f:
            f.write(line)
        ingest(db_url, [root])
        with early.open("a") as f:
            f.write(line)
        if n % 3 == 0:
            ingest(db_url, [root])
    for line in lines[8:]:
        with early.open("a") as f:
            f.write(line)
        ingest(db_url, [root])
    got = reports(db_url)[session]["summary"]
    want = reference.compute(root)[session]["summary"]
    assert figures(got) == figures(want)
    # By hand: lines n = 0..11 at 10 s apart, user/assistant alternating (user first); every
    # gap 10 s: 6 claude gaps (assistant lines 1, 3, ..., 11), 5 human gaps (user lines 2..10).
    assert (got["wall_s"], got["claude_s"], got["human_s"]) == (110.0, 60.0, 50.0)
    rollups_match_raw(db_url)


def test_a_uuid_repeated_in_one_file_counts_once(db_url: str, tmp_path: Path) -> None:
    session = "dddddddd-1111-4000-8000-00000000000d"
    root = tmp_path / "projects"
    path = root / "-p" / f"{session}.jsonl"
    path.parent.mkdir(parents=True)
    lines = [_line(session, n) for n in range(4)]
    # Line 1 again at the end, with a later timestamp: as a copy it adds no event, so no gap
    # from 30 s to 95 s.
    again = json.loads(lines[1])
    again["timestamp"] = "2026-05-01T10:01:35.000Z"
    path.write_text("".join(lines) + json.dumps(again) + "\n")
    ingest(db_url, [root])
    got = reports(db_url)[session]["summary"]
    assert (got["wall_s"], got["claude_s"], got["human_s"]) == (30.0, 20.0, 10.0)
    assert figures(got) == figures(reference.compute(root)[session]["summary"])


def test_a_copy_read_again_from_its_start_leaves_the_timeline_right(db_url: str, tmp_path: Path) -> None:
    """The first copy in the timeline truncated (read again from its start): the lines only the
    other copy still has count there now."""
    root = spotter_tree(tmp_path / "projects")
    shutil.copytree(root / SPOTTER_DIR, root / "-a-copy")
    ingest(db_url, [root])
    first = root / "-a-copy" / f"{SPOTTER}.jsonl"
    first.write_bytes(b"".join(first.read_bytes().splitlines(keepends=True)[:300]))
    ingest(db_url, [root])
    got = reports(db_url)[SPOTTER]["summary"]
    assert figures(got) == figures(reference.compute(root)[SPOTTER]["summary"])
    rollups_match_raw(db_url)


def _line(session: str, n: int) -> str:
    """Line n of a small session: user lines at even n, assistant at odd, 10 s apart."""
    when = f"2026-05-01T10:00:{10 * n:02d}.000Z" if n < 6 else f"2026-05-01T10:01:{10 * (n - 6):02d}.000Z"
    line: dict = {"type": "user" if n % 2 == 0 else "assistant", "sessionId": session, "timestamp": when,
                  "uuid": f"{session[:8]}-line-{n}"}
    if n % 2:
        line["message"] = {"id": f"msg_{session[:8]}_{n}", "role": "assistant", "content": [],
                           "usage": {"input_tokens": 1, "output_tokens": n}}
    else:
        line["message"] = {"role": "user", "content": f"step {n}"}
    return json.dumps(line) + "\n"


def test_a_folder_moved_under_a_running_daemon_keeps_one_timeline(db_url: str, tmp_path: Path) -> None:
    """`mv` of a project folder while `retrod run` follows it (issue 19, as a new user tried it):
    the old file goes (its figures kept), the new one is read by the watcher; nothing doubles."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = spotter_tree(tmp_path / "projects")
    want = figures(reference.compute(root)[SPOTTER]["summary"])
    env = dict(os.environ, RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(root),
               RETROD_DATA_DIR=str(tmp_path / "data"), RETROD_SCAN_INTERVAL_S="3600")
    daemon = subprocess.Popen([sys.executable, "-m", "retrod", "run"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)

    def read_up(path: Path) -> bool:
        with psycopg.connect(db_url) as conn:
            row = conn.execute('SELECT "offset" FROM retrod.files WHERE path = %s', (str(path),)).fetchone()
        return row is not None and row[0] == path.stat().st_size

    def wait_for(done, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.1)

    try:
        wait_for(lambda: read_up(root / SPOTTER_DIR / f"{SPOTTER}.jsonl"))
        (root / SPOTTER_DIR).rename(root / "-home-user-code-spotter")
        wait_for(lambda: read_up(root / "-home-user-code-spotter" / f"{SPOTTER}.jsonl"))
        wait_for(lambda: reports(db_url)[SPOTTER]["session"]["transcripts_deleted"] >= 1)
        assert figures(reports(db_url)[SPOTTER]["summary"]) == want
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0, daemon.stderr.read()


def test_a_uuid_repeated_in_one_file_leaves_later_batches_right(db_url: str, tmp_path: Path) -> None:
    """Found in review: the file's own high-water mark holds the repeated line's time; the lines
    read in later batches must still be timed from the timeline's mark."""
    session = "dddddddd-2222-4000-8000-00000000000d"
    root = tmp_path / "projects"
    path = root / "-p" / f"{session}.jsonl"
    path.parent.mkdir(parents=True)
    first = {"type": "user", "sessionId": session, "uuid": "u-a", "timestamp": "2026-05-01T10:00:00.000Z",
             "message": {"role": "user", "content": "go"}}
    again = dict(first, timestamp="2026-05-01T10:30:00.000Z")  # the same line, written again later
    path.write_text(json.dumps(first) + "\n" + json.dumps(again) + "\n")
    ingest(db_url, [root])
    later = dict(first, uuid="u-c", timestamp="2026-05-01T10:20:00.000Z")
    with path.open("a") as f:
        f.write(json.dumps(later) + "\n")
    ingest(db_url, [root])
    got = reports(db_url)[session]["summary"]
    assert (got["human_s"], got["wall_s"]) == (1200.0, 1200.0)  # 10:00 → 10:20; the copy at 10:30 counts not
    assert figures(got) == figures(reference.compute(root)[session]["summary"])
