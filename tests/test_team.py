"""A team on one shared PostgreSQL: an owner role migrates and runs `retrod team --apply`; two
members' daemons write their own rows; a reader sees everyone's; nobody writes another's rows.
Its own cluster: roles are cluster-wide, and the members log in (the tests' cluster admits one
user)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from conftest import FIXTURES, throwaway_cluster
from retrod.store.migrate import migrate, migrations_dir

ALICE_PROJECT = "-Users-chip-dev-ai-music"
BOB_PROJECT = "-Users-dain-workspace-claude-code-log-sample"


def _sessions_of(project: str) -> set[str]:
    return {p.stem for p in (FIXTURES / project).glob("*.jsonl") if not p.stem.startswith("agent-")}


@pytest.fixture(scope="module")
def team() -> Iterator[dict]:
    with throwaway_cluster("retrod-team-") as (cluster, root):
        with open(cluster.pgdata / "pg_hba.conf", "a") as hba:  # appending keeps the server's ownership
            hba.write("local all all trust\n")
        with psycopg.connect(cluster.url("postgres"), autocommit=True) as admin:
            admin.execute("SELECT pg_reload_conf()")
            admin.execute("CREATE ROLE owner LOGIN CREATEROLE")
            admin.execute("CREATE DATABASE team OWNER owner")
        url = {role: f"postgresql://{role}@/team?host={cluster.socket_dir}"
               for role in ("owner", "alice", "bob", "carol")}
        url["admin"] = cluster.url("team")
        yield {"url": url, "root": root}


def retrod(team: dict, role: str, *args: str, projects: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    home = team["root"] / f"home-{role}"
    env.update(RETROD_DATABASE_URL=team["url"][role], RETROD_HOST_ID=f"host-{role}", HOME=str(home),
               RETROD_PROJECTS_DIR=str(projects or home / "projects"), RETROD_REPORTS_DIR=str(home / "reports"),
               CLAUDE_CONFIG_DIR=str(home / "claude"))
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def members(team: dict) -> dict:
    """Set up as a team would: the owner applies, then each member's daemon catches up and the
    member logs a phase of one of its sessions."""
    applied = ok(retrod(team, "owner", "team", "--apply", "--member", "alice", "--member", "bob",
                        "--reader", "carol"))
    assert "member: alice" in applied and "reader: carol" in applied
    chosen = {}
    for role, project in (("alice", ALICE_PROJECT), ("bob", BOB_PROJECT)):
        projects = team["root"] / f"home-{role}" / "projects"
        shutil.copytree(FIXTURES / project, projects / project)
        ok(retrod(team, role, "run", "--once"))
        session = sorted(_sessions_of(project))[0]
        ok(retrod(team, role, "track", "start", "--session", session, "--description", f"{role}'s work"))
        ok(retrod(team, role, "phase", "log", "--session", session, "--task", f"{role} task", "--phase", "build",
                  "--start", "2020-01-01T10:00:00Z", "--end", "2020-01-01T11:00:00Z", "--verdict", "high_impact"))
        chosen[role] = session
    return chosen


def _listed(team: dict, role: str) -> set[str]:
    rows = json.loads(ok(retrod(team, role, "sessions", "--json", "--limit", "1000")))["sessions"]
    return {row["uuid"] for row in rows}


def test_each_member_sees_only_its_own_sessions_and_the_reader_sees_all(team: dict, members: dict) -> None:
    alice, bob = _listed(team, "alice"), _listed(team, "bob")
    # Each member's list holds its own transcripts' sessions (and those its project-level agent
    # files name), none of the other's.
    assert alice >= _sessions_of(ALICE_PROJECT) and not alice & _sessions_of(BOB_PROJECT)
    assert bob >= _sessions_of(BOB_PROJECT) and not bob & _sessions_of(ALICE_PROJECT)
    assert _listed(team, "carol") == alice | bob
    doctor = retrod(team, "alice", "doctor")  # a member's other commands work
    assert "database" in doctor.stdout and "FAIL" not in doctor.stdout, doctor.stdout
    with psycopg.connect(team["url"]["admin"]) as admin:  # rows named by role and host
        owners = set(admin.execute("SELECT DISTINCT db_role, host_id FROM retrod.files").fetchall())
    assert owners == {("alice", "host-alice"), ("bob", "host-bob")}


def test_the_reader_reads_a_members_report_and_writes_nothing(team: dict, members: dict) -> None:
    session = members["bob"]
    own = json.loads(ok(retrod(team, "bob", "report", session, "--format", "json", "--no-save")))
    seen = json.loads(ok(retrod(team, "carol", "report", session, "--format", "json", "--no-save")))
    assert seen["summary"]["tokens"] == own["summary"]["tokens"]
    assert seen["summary"]["tokens"]["total"]["output"] > 0
    assert [p["task"] for p in seen["phases"]] == ["bob task"]
    # With the transcript on the reader's own disk too: still read only, nothing ingested.
    shutil.copytree(FIXTURES / BOB_PROJECT, team["root"] / "home-carol" / "projects" / BOB_PROJECT)
    again = json.loads(ok(retrod(team, "carol", "report", session, "--format", "json", "--no-save")))
    assert again["summary"]["tokens"] == own["summary"]["tokens"]
    closing = retrod(team, "carol", "report", session, "--close", "--no-save")
    assert closing.returncode == 2 and "may only read" in closing.stderr
    with psycopg.connect(team["url"]["carol"]) as carol, pytest.raises(psycopg.errors.InsufficientPrivilege):
        carol.execute("UPDATE public.cc_session_phases SET verdict = 'avoidable_waste'")


def admin_value(team: dict, query: str) -> object:
    with psycopg.connect(team["url"]["admin"]) as admin:
        return admin.execute(query).fetchone()[0]


def test_a_member_cannot_see_or_write_anothers_rows(team: dict, members: dict) -> None:
    refused = retrod(team, "alice", "report", members["bob"], "--no-save")
    assert refused.returncode == 2 and "none recorded" in refused.stderr, refused.stderr
    with psycopg.connect(team["url"]["admin"]) as admin:
        alice_session_id = admin.execute("SELECT id FROM public.cc_sessions WHERE session_uuid = %s",
                                         (members["alice"],)).fetchone()[0]
        before = admin.execute("SELECT db_role, count(*) FROM retrod.requests GROUP BY 1 ORDER BY 1").fetchall()
    with psycopg.connect(team["url"]["bob"], autocommit=True) as bob:
        assert bob.execute("UPDATE public.cc_session_phases SET verdict = 'avoidable_waste'"
                           " WHERE session_id = %s", (alice_session_id,)).rowcount == 0
        assert bob.execute("DELETE FROM public.cc_sessions WHERE session_uuid = %s",
                           (members["alice"],)).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # a phase onto alice's session
            bob.execute("INSERT INTO public.cc_session_phases (session_id, task, phase, started_at, verdict)"
                        " VALUES (%s, 't', 'p', now(), 'high_impact')", (alice_session_id,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # a row in alice's name
            bob.execute("UPDATE retrod.requests SET db_role = 'alice'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # members never migrate
            bob.execute("DROP TABLE retrod.requests")
        # A foreign key check does not apply row-level security: the keys carry the role, so a
        # row cannot hang on alice's file (and take the key of a line she has yet to write).
        alice_file = admin_value(team, "SELECT id FROM retrod.files WHERE db_role = 'alice' LIMIT 1")
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            bob.execute("INSERT INTO retrod.events (file_id, \"offset\", session_uuid, gap_us, tool_result_bytes)"
                        " VALUES (%s, 999999999, 'x', 0, 0)", (alice_file,))
        bob.execute("SET ROLE retrod_member")  # allowed; it must not open a shared set of rows
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            bob.execute("INSERT INTO public.cc_sessions (session_uuid, project_slug, started_at)"
                        " VALUES ('shared', 'p', now())")
        assert bob.execute("SELECT count(*) FROM retrod.files").fetchone()[0] == 0
    with psycopg.connect(team["url"]["admin"]) as admin:
        assert admin.execute("SELECT verdict FROM public.cc_session_phases WHERE session_id = %s",
                             (alice_session_id,)).fetchall() == [("high_impact",)]
        after = admin.execute("SELECT db_role, count(*) FROM retrod.requests GROUP BY 1 ORDER BY 1").fetchall()
    assert after == before and {role for role, _n in after} == {"alice", "bob"}


def test_a_member_is_refused_a_migration_and_the_owner_secures_new_tables(team: dict, members: dict,
                                                                           tmp_path: Path) -> None:
    newer = tmp_path / "migrations"
    shutil.copytree(migrations_dir(), newer)
    (newer / "9999_extra.sql").write_text(
        "CREATE TABLE retrod.extra (x INT, db_role TEXT NOT NULL DEFAULT current_user);")
    with (psycopg.connect(team["url"]["alice"], autocommit=True) as alice,
          pytest.raises(RuntimeError, match=r"needs migration 9999 \(extra\).*retrod migrate")):
        migrate(alice, newer)
    with psycopg.connect(team["url"]["owner"], autocommit=True) as owner:
        assert migrate(owner, newer) == [9999]
    with psycopg.connect(team["url"]["alice"], autocommit=True) as alice:
        alice.execute("INSERT INTO retrod.extra (x) VALUES (1)")
    with psycopg.connect(team["url"]["bob"], autocommit=True) as bob:
        assert bob.execute("SELECT count(*) FROM retrod.extra").fetchone()[0] == 0
        bob.execute("INSERT INTO retrod.extra (x) VALUES (2)")
    with psycopg.connect(team["url"]["carol"], autocommit=True) as carol:
        assert sorted(carol.execute("SELECT x, db_role FROM retrod.extra").fetchall()) == [(1, "alice"), (2, "bob")]
    with psycopg.connect(team["url"]["owner"], autocommit=True) as owner:
        owner.execute("DROP TABLE retrod.extra")
        owner.execute("DELETE FROM retrod.migrations WHERE version = 9999")


def test_the_printed_script_names_only_plain_roles(team: dict) -> None:
    printed = ok(retrod(team, "owner", "team", "--member", "dana"))
    assert 'GRANT retrod_member TO "dana";' in printed and "ENABLE ROW LEVEL SECURITY" in printed
    hostile = retrod(team, "owner", "team", "--member", 'x"; DROP TABLE retrod.files; --')
    assert hostile.returncode == 2 and "not a role name" in hostile.stderr
    assert retrod(team, "owner", "team", "--reader", "pg_signal_backend").returncode == 2
    both = retrod(team, "owner", "team", "--member", "erin", "--reader", "erin")
    assert both.returncode == 2 and "not both" in both.stderr
    assert printed.index("BEGIN;") < printed.index("ENABLE ROW") < printed.index("COMMIT;")


def test_every_table_of_retrod_names_the_role_of_its_rows(db_url: str) -> None:
    """A table a future migration adds without db_role would be left out of the team's policies."""
    with psycopg.connect(db_url) as conn:
        unnamed = conn.execute(
            "SELECT relname FROM pg_class c WHERE relnamespace = 'retrod'::regnamespace AND relkind = 'r'"
            " AND relname <> 'migrations' AND NOT EXISTS (SELECT FROM pg_attribute a"
            " WHERE a.attrelid = c.oid AND a.attname = 'db_role' AND NOT a.attisdropped)").fetchall()
    assert unnamed == []


SQUATTED_PROJECT = "-home-marco-projects-spotter"


def _figures(report: dict) -> dict:
    summary = report["summary"]
    return {k: summary[k] for k in ("tokens", "requests", "wall_s", "claude_s", "tool_s", "human_s", "tool_calls",
                                    "cost")}


def test_a_member_squatting_anothers_session_and_request_keys_changes_nothing_of_theirs(
        team: dict, members: dict) -> None:
    """accounting.md §3: every key includes the member. Bob takes a session id and its request keys
    before Alice writes them (he copied her transcript, and tracks the session under its id):
    Alice's files go in whole, her figures are her transcript's, and the reader sees both
    sessions apart."""
    import reference

    session = min(_sessions_of(SQUATTED_PROJECT))
    source = FIXTURES / SQUATTED_PROJECT / f"{session}.jsonl"
    bob_copy = team["root"] / "home-bob" / "projects" / SQUATTED_PROJECT / source.name
    bob_copy.parent.mkdir(parents=True)
    shutil.copy(source, bob_copy)
    ok(retrod(team, "bob", "run", "--once"))
    ok(retrod(team, "bob", "track", "start", "--session", session, "--description", "bob squats"))
    alice_copy = team["root"] / "home-alice" / "projects" / SQUATTED_PROJECT / source.name
    alice_copy.parent.mkdir(parents=True)
    shutil.copy(source, alice_copy)
    done = retrod(team, "alice", "run", "--once")
    assert done.returncode == 0 and "not ingested" not in done.stderr, done.stderr
    ok(retrod(team, "alice", "track", "start", "--session", session, "--description", "alice's own"))
    ok(retrod(team, "alice", "phase", "log", "--session", session, "--task", "a", "--phase", "p",
              "--start", "2020-01-01T10:00:00Z", "--end", "2020-01-01T11:00:00Z", "--verdict", "small_impact"))

    want = reference.compute(alice_copy.parent.parent)[session]["summary"]
    alice = json.loads(ok(retrod(team, "alice", "report", session, "--format", "json", "--no-save")))
    bob = json.loads(ok(retrod(team, "bob", "report", session, "--format", "json", "--no-save")))
    for report in (alice, bob):
        assert report["summary"]["tokens"] == want["tokens"] and report["summary"]["claude_s"] == want["claude_s"]
    assert (alice["session"]["description"], [p["task"] for p in alice["phases"]]) == ("alice's own", ["a"])
    assert (bob["session"]["description"], bob["phases"]) == ("bob squats", [])

    ambiguous = retrod(team, "carol", "report", session, "--no-save")
    assert ambiguous.returncode == 2 and "alice, bob" in ambiguous.stderr and "--member" in ambiguous.stderr
    for role, own in (("alice", alice), ("bob", bob)):
        seen = json.loads(ok(retrod(team, "carol", "report", session, "--member", role, "--format", "json",
                                    "--no-save")))
        assert seen["session"]["member"] == role
        assert _figures(seen) == _figures(own) and seen["phases"] == own["phases"]
    phases = json.loads(ok(retrod(team, "carol", "phases", session, "--member", "alice", "--format", "json")))
    assert [p["task"] for p in phases] == ["a"]
    listed = [row for row in json.loads(ok(retrod(team, "carol", "sessions", "--json", "--limit", "1000")))["sessions"]
              if row["uuid"] == session]
    assert sorted((row["member"], row["requests"]) for row in listed) == [
        ("alice", want["requests"]), ("bob", want["requests"])]
    text = ok(retrod(team, "carol", "sessions", "--limit", "1000"))
    assert any(line.startswith(session) and "alice" in line for line in text.splitlines())


def test_a_readers_kept_trends_follow_a_members_phase_and_ingest(team: dict, members: dict) -> None:
    """Trends kept for the reader (migration 0034: the role reading is in each kept answer's key,
    the member's days tell what changed) are summed again when the member logs a phase (its
    trigger writes retrod's rows as their owner) and reads a new transcript."""
    from retrod.history import trends

    session = sorted(_sessions_of(ALICE_PROJECT))[1]
    with psycopg.connect(team["url"]["carol"], autocommit=True) as carol:
        before = trends.trends(carol, by="week", tz="Asia/Kolkata", member="alice")
        ok(retrod(team, "alice", "track", "start", "--session", session, "--description", "more of alice's"))
        ok(retrod(team, "alice", "phase", "log", "--session", session, "--task", "t", "--phase", "p",
                  "--start", "2020-01-01T10:00:00Z", "--end", "2020-01-01T11:00:00Z", "--verdict", "avoidable_waste"))
        after = trends.trends(carol, by="week", tz="Asia/Kolkata", member="alice")
        verdicts = before["total"]["verdicts"]
        assert after["total"]["verdicts"] == {**verdicts, "avoidable_waste": verdicts.get("avoidable_waste", 0) + 1}
        extra = "-Users-dain-workspace-danieldemmel-me-next"
        shutil.copytree(FIXTURES / extra, team["root"] / "home-alice" / "projects" / extra)
        ok(retrod(team, "alice", "run", "--once"))
        grown = trends.trends(carol, by="week", tz="Asia/Kolkata", member="alice")
        assert grown["total"]["sessions"] > after["total"]["sessions"]
        with psycopg.connect(team["url"]["alice"], autocommit=True) as alice:
            assert trends.trends(alice, by="week", tz="Asia/Kolkata") == grown  # (summed apart, as alice)
