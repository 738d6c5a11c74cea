"""DESIGN §2.6 figures in the shape of tests/reference_tools.py's `tool_use`, from the oracle or
from retrod (its database, read through the report), so that one hand-worked test checks both.

- "reference": the oracle itself.
- "retrod": the files read into a database, again at every call (so a test that appends to a
  file between calls reads it incrementally), then the report built from it.
- "retrod-chunked": at every call the tree is written afresh, a few bytes of a file at a time
  (lines split mid-way, files interleaved), with a scan after each piece, into a new database:
  a call's signal must come out the same whatever arrived first.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg_pool import ConnectionPool

import reference_tools
from conftest import fresh_database
from helpers import HOST, ingest
from retrod.ingest.ingester import Ingester
from retrod.report import model
from retrod.store.store import Store

ENGINES = ("reference", "retrod", "retrod-chunked")
CHUNK_BYTES = 97  # less than any line: every line is read in pieces


class Engine:
    def __init__(self, run: Callable[..., dict], canonical_text: bool) -> None:
        self.run = run
        self.canonical_text = canonical_text  # the oracle shows each input's canonical JSON

    def __call__(self, projects: Path, session: str, windows=None) -> dict:
        return self.run(Path(projects), session, windows)


@contextmanager
def engine_for(name: str, request) -> Iterator[Engine]:
    if name == "reference":
        yield Engine(reference_tools.tool_use, canonical_text=True)
        return
    cluster = request.getfixturevalue("pg_cluster")
    with ExitStack() as stack:
        if name == "retrod":
            url = stack.enter_context(fresh_database(cluster))

            def run(projects: Path, session: str, windows) -> dict:
                ingest(url, [projects])
                return _figures(url, projects, session, windows)
        else:
            def run(projects: Path, session: str, windows) -> dict:
                with fresh_database(cluster) as url, tempfile.TemporaryDirectory() as tmp:
                    copy = Path(tmp) / "projects"
                    _feed_in_chunks(url, projects, copy)
                    return _figures(url, copy, session, windows)
        yield Engine(run, canonical_text=False)


def _feed_in_chunks(url: str, source: Path, dest: Path) -> None:
    files = {p.relative_to(source): p.read_bytes() for p in sorted(source.rglob("*")) if p.is_file()}
    written = dict.fromkeys(files, 0)
    with ConnectionPool(url, min_size=1, max_size=2, open=True) as pool:
        ingester = Ingester(Store(pool, HOST), [dest], batch_bytes=4096)
        while any(written[rel] < len(data) for rel, data in files.items()) or not dest.exists():
            for rel, data in files.items():  # round robin: each file a piece at a time
                path = dest / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("ab") as f:
                    f.write(data[written[rel]:written[rel] + CHUNK_BYTES])
                written[rel] = min(len(data), written[rel] + CHUNK_BYTES)
                ingester.scan()


def _figures(url: str, projects: Path, session: str, windows) -> dict:
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM cc_session_phases")
        conn.execute("DELETE FROM cc_sessions")
        if windows:
            (sid,) = conn.execute(
                "INSERT INTO cc_sessions (session_uuid, project_slug, started_at) VALUES (%s, 'p', now())"
                " RETURNING id", [session]).fetchone()
            for i, (start, end) in enumerate(windows):
                conn.execute("INSERT INTO cc_session_phases (session_id, task, phase, started_at, ended_at, verdict)"
                             " VALUES (%s, 't', %s, %s, %s, 'pending')",
                             [sid, f"{i:04d}", _moment(start), _moment(end)])
        conn.commit()
        report = model.build(conn, session)
        calls = conn.execute(
            "SELECT tool_use_id, agent, name, path, retrod.ts_to_us(ts), has_result, failed, result_bytes,"
            " retrod.ts_to_us(result_ts), signal FROM retrod.tool_uses WHERE session_uuid = %s AND counted"
            " ORDER BY agent, file_path, \"offset\", block", [session]).fetchall()
    agents = dict(report["summary"]["tool_use_by_agent"])
    for subagent in report["subagents"]:
        agents.setdefault(subagent["agent_id"], subagent["tool_use"])
        assert subagent["tool_use"] == agents[subagent["agent_id"]]
    if any(projects.glob(f"*/{session}.jsonl")):
        agents.setdefault("", model.tool_use_figures({}))
    phases = sorted(report["phases"], key=lambda p: p["phase"])
    return {
        "summary": report["summary"]["tool_use"],
        "agents": dict(sorted(agents.items())),
        "phases": [p["tool_use"] for p in phases],
        "tools": sorted(report["tools"], key=lambda t: t["name"]),
        "calls": [_call(*row) for row in calls],
    }


def _call(call_id, agent, name, path, ts_us, has_result, failed, result_bytes, result_ts_us, signal) -> dict:
    timed = has_result and ts_us is not None and result_ts_us is not None
    return {"id": call_id, "agent": agent, "name": name, "path": path, "ts_us": ts_us, "has_result": has_result,
            "failed": failed, "result_bytes": result_bytes, "result_ts_us": result_ts_us,
            "result_us": max(0, result_ts_us - ts_us) if timed else None, "signal": signal}


def main_transcript_line(session: str, second: int, kind: str, block: dict) -> str:
    """One line of a main transcript holding one content block, `second`s after 2024-01-01."""
    return json.dumps({"type": kind, "sessionId": session, "timestamp": f"2024-01-01T00:00:{second:02d}.000Z",
                       "message": {"role": kind, "content": [block]}}) + "\n"


def _moment(bound) -> datetime:
    if isinstance(bound, datetime):
        return bound
    return datetime.fromtimestamp(bound // 1_000_000, UTC).replace(microsecond=bound % 1_000_000)
