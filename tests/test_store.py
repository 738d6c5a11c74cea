"""Migrations and store behaviour on a real PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import psycopg
import pytest

from helpers import ingest, reports
from retrod.store.migrate import load, migrate

REPO = Path(__file__).resolve().parents[1]
S = "cccccccc-0000-4000-8000-000000000000"


def test_migrations_are_numbered_and_apply_once(db_url: str) -> None:
    versions = [m.version for m in load()]
    assert versions == sorted(versions) and versions[0] == 1
    with psycopg.connect(db_url, autocommit=True) as conn:
        assert migrate(conn) == []  # the template database is migrated already
        applied = [r[0] for r in conn.execute("SELECT version FROM retrod.migrations ORDER BY 1")]
        assert applied == versions


def test_user_tables_have_exactly_the_designed_columns(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        def columns(table: str) -> list[str]:
            return [r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'"
                " AND table_name = %s ORDER BY ordinal_position", (table,))]

        assert columns("cc_sessions") == [
            "id", "session_uuid", "project_slug", "started_at", "ended_at", "description",
            "total_output_tokens", "total_input_tokens", "total_cache_read_tokens",
            "total_cache_create_tokens", "claude_time_seconds", "tool_time_seconds", "human_time_seconds"]
        assert columns("cc_session_phases") == [
            "id", "session_id", "task", "phase", "started_at", "ended_at", "actions_summary", "verdict",
            "subagents", "useful_info", "lessons_learned", "notes"]


def test_existing_user_tables_are_kept(pg_cluster) -> None:
    """The user's tables may exist before retrod; their rows survive the first migration."""
    from conftest import fresh_database

    with fresh_database(pg_cluster) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA retrod CASCADE")
        conn.execute("INSERT INTO cc_sessions (session_uuid, project_slug, started_at) VALUES ('x', 'p', now())")
        assert migrate(conn) == [m.version for m in load()]
        assert conn.execute("SELECT count(*) FROM cc_sessions").fetchone()[0] == 1


def test_wheel_ships_the_migrations(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path), str(REPO)], capture_output=True, text=True)
    if built.returncode != 0 and "hatchling" in built.stderr:
        pytest.fail("hatchling is needed to build the wheel: pip install hatchling")
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("retrod-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for migration in load():
        assert f"retrod/migrations/{migration.version:04d}_{migration.name}.sql" in names
    for shipped in ("retrod/store/sql/ingest.sql", "retrod/store/sql/report.sql", "retrod/store/sql/tracking.sql",
                    "retrod/units/retrod.service", "retrod/units/dev.retrod.daemon.plist",
                    "retrod/claude_code/skills/retrod-track/SKILL.md",
                    "retrod/claude_code/skills/retrod-retro/SKILL.md"):
        assert shipped in names


def test_project_level_agent_file_waits_for_its_session_id(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    (root / "-p").mkdir(parents=True)
    agent = root / "-p" / "agent-0badcafe.jsonl"
    usage = {"input_tokens": 3, "output_tokens": 11}
    agent.write_text(json.dumps({"type": "assistant", "requestId": "r1", "timestamp": "2026-01-01T00:00:00Z",
                                 "message": {"id": "r1", "usage": usage}}) + "\n")
    ingest(db_url, [root])
    assert reports(db_url) == {}  # no sessionId yet: belongs to no session
    with agent.open("a") as f:
        f.write(json.dumps({"type": "user", "sessionId": S, "timestamp": "2026-01-01T00:00:01Z"}) + "\n")
    ingest(db_url, [root])
    report = reports(db_url)[S]
    # The first line, read before the session was known, counts too.
    assert report["summary"]["tokens"]["subagents"]["output"] == 11
    assert [a["agent_id"] for a in report["subagents"]] == ["0badcafe"]


def test_meta_and_tool_results_alone_make_no_session(db_url: str, tmp_path: Path) -> None:
    from psycopg_pool import ConnectionPool

    from retrod import resolve
    from retrod.report.model import known_sessions

    root = tmp_path / "projects"
    (root / "-p" / S / "subagents").mkdir(parents=True)
    (root / "-p" / S / "tool-results").mkdir()
    (root / "-p" / S / "subagents" / "agent-a1.meta.json").write_text('{"agentType": "Explore"}')
    (root / "-p" / S / "tool-results" / "toolu_1.txt").write_text("x" * 100)
    ingest(db_url, [root])
    assert reports(db_url) == {}
    with ConnectionPool(db_url, open=True) as pool, pool.connection() as conn:
        assert known_sessions(conn, S) == []
        with pytest.raises(resolve.SessionError, match="no session matches"):  # nor on disk
            resolve.find(S[:8], [root], lambda prefix: known_sessions(conn, prefix))
    # Once a transcript appears, the persisted output is counted with it.
    (root / "-p" / f"{S}.jsonl").write_text("")
    ingest(db_url, [root])
    assert reports(db_url)[S]["summary"]["persisted_outputs"] == {"count": 1, "bytes": 100}


def test_two_meta_files_of_one_subagent_in_one_batch(db_url: str, tmp_path: Path) -> None:
    """Meta files commit with the batch they are read in: two of one session's subagent (two
    project folders) in one batch give one row and both files are read. Which one's row it is
    follows the order of reading, as when each committed on its own (scans go newest first)."""
    import os

    root = tmp_path / "projects"
    for project, agent_type, mtime in (("-old", "Explore", 1_000_000), ("-new", "Plan", 2_000_000)):
        meta = root / project / S / "subagents" / "agent-a1.meta.json"
        meta.parent.mkdir(parents=True)
        meta.write_text(json.dumps({"agentType": agent_type, "description": project}))
        os.utime(meta, (mtime, mtime))
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT agent_type, description FROM retrod.subagent_meta").fetchall() == [
            ("Explore", "-old")]
        assert conn.execute("""SELECT count(*) FROM retrod.files WHERE kind = 'meta' AND "offset" = size"""
                            " AND head <> ''").fetchone()[0] == 2


def _line(**fields) -> str:
    return json.dumps(fields) + "\n"


def test_lines_the_database_would_refuse_do_not_stop_ingest(db_url: str, tmp_path: Path) -> None:
    """Found in review: deep nesting, huge counts, NUL and lone surrogates in stored ids."""
    root = tmp_path / "projects"
    (root / "-a").mkdir(parents=True)
    other = "eeeeeeee-0000-4000-8000-000000000000"
    (root / "-a" / f"{S}.jsonl").write_text(
        '{"type":"user","toolUseResult":' + "[" * 3000 + "]" * 3000 + "}\n"
        + _line(type="assistant", requestId="r\ud800\u0000x", timestamp="2026-01-01T00:00:00Z",
                message={"id": "m\u0000", "usage": {"input_tokens": 2**64, "output_tokens": 7}})
        + _line(type="assistant", requestId="r2", timestamp="2026-01-01T00:00:01+99:99",
                message={"usage": {"output_tokens": 1}}), encoding="utf-8", errors="surrogatepass")
    (root / "-z").mkdir()
    (root / "-z" / f"{other}.jsonl").write_text(_line(type="assistant", requestId="ok", message={
        "usage": {"output_tokens": 3}}))
    ingest(db_url, [root])
    got = reports(db_url)
    assert got[other]["summary"]["tokens"]["total"]["output"] == 3
    summary = got[S]["summary"]
    assert summary["tokens"]["total"]["output"] == 8 and summary["tokens"]["total"]["input"] == 0
    assert got[S]["session"]["bad_lines"] == 1
    assert summary["wall_s"] == 0.0  # "+99:99" is no offset: that line has no timestamp


def test_replaced_subagent_file_reflects_its_new_content(db_url: str, tmp_path: Path) -> None:
    """Found in review: the span of a subagent file read again must follow its new content."""
    root = tmp_path / "projects"
    sub = root / "-p" / S / "subagents"
    sub.mkdir(parents=True)
    path = sub / "agent-a1.jsonl"
    path.write_text(_line(type="user", timestamp="2026-01-01T00:00:00Z")
                    + _line(type="user", timestamp="2026-01-01T00:10:00Z"))
    ingest(db_url, [root])
    assert reports(db_url)[S]["subagents"][0]["seconds"] == 600.0
    new = sub / "new.tmp"
    new.write_text(_line(type="user", timestamp="2026-01-01T00:05:00Z"))
    new.replace(path)
    ingest(db_url, [root])
    assert reports(db_url)[S]["subagents"][0]["seconds"] == 0.0


def test_one_file_under_two_spellings_counts_once(db_url: str, tmp_path: Path, monkeypatch) -> None:
    """Found in review: roots are resolved, so a symlinked or relative root is the same files."""
    from retrod.settings import Settings

    real = tmp_path / "real"
    (real / "-p").mkdir(parents=True)
    (real / "-p" / f"{S}.jsonl").write_text(
        _line(type="user", timestamp="2026-01-01T00:00:00Z") + _line(type="user", timestamp="2026-01-01T00:00:10Z"))
    (tmp_path / "alias").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    roots = Settings(projects_dir=f"alias,{real},./real").projects_roots()
    assert roots == [real.resolve()]  # named three ways, read once
    ingest(db_url, [real, real])  # found in review: a scan listing a new file twice failed
    for spelling in ("alias", str(real), "./real"):
        ingest(db_url, Settings(projects_dir=spelling).projects_roots())
    assert reports(db_url)[S]["summary"]["human_s"] == 10.0


def test_a_bogus_early_timestamp_costs_a_few_rows(db_url: str, tmp_path: Path) -> None:
    """Found in review: a gap of 56 years must not be stored minute by minute."""
    from helpers import rollups_match_raw

    root = tmp_path / "projects"
    (root / "-p").mkdir(parents=True)
    (root / "-p" / f"{S}.jsonl").write_text(
        _line(type="user", timestamp="1970-01-01T00:00:30Z") + _line(type="user", timestamp="2026-01-01T00:00:10Z")
        + _line(type="assistant", requestId="r-untimed", message={"usage": {"output_tokens": 2}})  # 'infinity' minute
        + _line(type="user", timestamp="2026-01-01T00:00:20Z", message={"content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "abc"}]}))
    ingest(db_url, [root])
    with psycopg.connect(db_url) as conn:
        rows = {t: conn.execute(f"SELECT count(*) FROM retrod.{t}").fetchone()[0]
                for t in ("events", "gap_spans", "event_minutes")}
    # events: the three timed lines (migration 0012: a gap's pieces are read from its event); the
    # 56 years as one span; event minutes: 1970-01-01 00:00 and 2026-01-01 00:00 (with the tool gap)
    assert rows == {"events": 3, "gap_spans": 1, "event_minutes": 2}
    summary = reports(db_url)[S]["summary"]
    # a human gap that long is away as a whole (accounting.md §2.3)
    assert (summary["human_s"], summary["away_s"], summary["tool_s"]) == (0.0, 1767225580.0, 10.0)
    assert summary["tokens"]["total"]["output"] == 2
    rollups_match_raw(db_url)


def test_rebuilding_by_truncation_does_not_double_count(db_url: str, projects: Path) -> None:
    """Found in review: the derived tables can be truncated and rebuilt; rollups must follow."""
    ingest(db_url, [projects])
    before = reports(db_url)
    with psycopg.connect(db_url) as conn:
        conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
    ingest(db_url, [projects])
    assert reports(db_url) == before


def test_concurrent_ingesters_count_a_tool_call_once(db_url: str) -> None:
    """Found in review: two hosts committing the same tool_use id of one session at once."""
    import threading

    with psycopg.connect(db_url, autocommit=True) as conn:
        ids = [conn.execute("INSERT INTO retrod.files (host_id, path, kind, slug, session_uuid) VALUES"
                            " (%s, '/p', 'main', '-p', %s) RETURNING id", (host, S)).fetchone()[0]
               for host in ("host-a", "host-b")]
    insert = ("INSERT INTO retrod.tool_calls (file_id, tool_use_id, session_uuid, name)"
              " VALUES (%s, 'toolu_same', %s, 'Bash')")
    first, second = psycopg.connect(db_url), psycopg.connect(db_url)
    try:
        first.execute(insert, (ids[0], S))  # uncommitted, holding the session's lock
        thread = threading.Thread(target=lambda: (second.execute(insert, (ids[1], S)), second.commit()))
        thread.start()
        thread.join(timeout=1)
        assert thread.is_alive()  # the second waits for the first...
        first.commit()
        thread.join(timeout=10)
        assert not thread.is_alive()
    finally:
        first.close()
        second.close()
    with psycopg.connect(db_url) as conn:  # ...and then sees its row: counted once
        assert conn.execute("SELECT tool_calls FROM retrod.session_tool_calls WHERE session_uuid = %s",
                            (S,)).fetchone() == (1,)


@pytest.mark.parametrize("batch_bytes", [1, 4 << 20], ids=["a batch per file", "both files in one batch"])
def test_a_tool_call_repeated_by_two_files_of_a_session_counts_once(db_url: str, tmp_path: Path,
                                                                   batch_bytes: int) -> None:
    """Several files share one transaction and one statement per table: the count of distinct
    tool_use ids must not depend on which files share a statement, and must follow a re-read."""
    from helpers import rollups_match_raw

    root = tmp_path / "projects"
    call = _line(type="assistant", timestamp="2026-01-01T00:00:00Z", requestId="r1",
                 message={"id": "m1", "usage": {"output_tokens": 1},
                          "content": [{"type": "tool_use", "id": "toolu_same", "name": "Bash", "input": {}}]})
    for slug in ("-a", "-b"):  # one session under two project folders (a renamed project)
        (root / slug).mkdir(parents=True)
        (root / slug / f"{S}.jsonl").write_text(call)
    ingest(db_url, [root], batch_bytes)
    assert reports(db_url)[S]["summary"]["tool_calls"] == 1
    (root / "-a" / f"{S}.jsonl").write_text("")  # truncated: its rows go, the other file's stay
    ingest(db_url, [root], batch_bytes)
    assert reports(db_url)[S]["summary"]["tool_calls"] == 1
    (root / "-b" / f"{S}.jsonl").write_text("")
    ingest(db_url, [root], batch_bytes)
    assert reports(db_url)[S]["summary"]["tool_calls"] == 0
    rollups_match_raw(db_url)
