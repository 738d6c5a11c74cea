"""DESIGN §2.9's plan calls, stored as they are read (migration 0025): each call's input, and
what its result tells — failed by is_error or by toolUseResult.success false, a TaskCreate's id —
whichever chunk brings the result, and learned by rows stored before when their files are read
again."""

from __future__ import annotations

import psycopg
from psycopg_pool import ConnectionPool

from helpers import HOST, ingest
from plan_transcripts import SLUG, Transcript, session_id
from retrod.ingest.ingester import Ingester
from retrod.store.store import Store

SESSION = session_id(901)


def _transcript() -> Transcript:
    return (Transcript(SESSION).user(0)
            .create(10, "Parse", "7", in_outcome=False)  # the id from the text alone
            .create(12, "Test", "8")  # from toolUseResult.task.id
            .update(20, "7", "in_progress", outcome={"success": False})
            .todos(30, ("A", "in_progress"), ("", "pending"), "not an item", is_error=True)
            .call(40, "TaskUpdate", {"status": "completed"}))  # no taskId: never counts


def _stored(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT name, plan, has_result, failed, refused, task_id FROM retrod.tool_uses"
            " WHERE session_uuid = %s AND counted ORDER BY ts", (SESSION,)).fetchall()


EXPECTED = [
    ("TaskCreate", {"subject": "Parse"}, True, False, False, "7"),
    ("TaskCreate", {"subject": "Test"}, True, False, False, "8"),
    ("TaskUpdate", {"taskId": "7", "subject": None, "status": "in_progress"}, True, False, True, None),
    ("TodoWrite", {"todos": [["A", "in_progress"]]}, True, True, False, None),
    ("TaskUpdate", None, True, False, False, None),
]


def test_results_in_a_later_chunk(db_url, tmp_path) -> None:
    root = tmp_path / "projects"
    path = _transcript().write(root)
    lines = path.read_bytes().splitlines(keepends=True)
    calls_only = b"".join(line for line in lines if b'"assistant"' in line or b'"go"' in line)
    path.write_bytes(calls_only)
    ingest(db_url, [root])
    assert [row[:3] for row in _stored(db_url)] == [row[:2] + (False,) for row in EXPECTED]
    path.write_bytes(calls_only + b"".join(line for line in lines if line not in calls_only.splitlines(True)))
    ingest(db_url, [root])
    assert _stored(db_url) == EXPECTED


def test_rows_from_before_learn_on_reading_again(db_url, tmp_path) -> None:
    """A file read under fold.RULES 2 (before migration 0025) is read again from its start: its
    calls and results learn their plan input, refusal and task id, its other rows stay."""
    root = tmp_path / "projects"
    _transcript().write(root, SLUG)
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE retrod.tool_uses SET plan = NULL, refused = false, task_id = NULL")
        conn.execute("UPDATE retrod.files SET state = jsonb_set(state, '{rules}', '2')")
    assert all(row[1] is None and row[5] is None for row in _stored(db_url))
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        Ingester(Store(pool, HOST), [root]).scan()
    assert _stored(db_url) == EXPECTED
