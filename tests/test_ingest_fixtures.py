"""Ingesting the real fixture tree gives, for every session, the figures of the independent
reference computation (tests/reference.py, written from accounting.md §2 alone)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import reference
import reference_tools
from conftest import FIXTURES
from helpers import ingest, reports, rollups_match_raw, snapshot

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"


@pytest.fixture
def ingested(db_url: str, projects: Path) -> dict[str, dict]:
    ingest(db_url, [projects])
    return reports(db_url)


def test_every_session_matches_the_reference(ingested: dict[str, dict], projects: Path) -> None:
    expected = reference.compute(projects)
    assert sorted(ingested) == sorted(expected)
    assert len(expected) > 40  # the whole corpus, not a handful
    for session, want in expected.items():
        got = ingested[session]
        assert got["session"]["project_slug"] == want["project_slug"], session
        got_summary = {k: got["summary"][k] for k in want["summary"]}
        assert got_summary == want["summary"], session
        assert sorted(a["agent_id"] for a in got["subagents"]) == want["subagents"], session


def test_every_sessions_tool_use_matches_the_reference(ingested: dict[str, dict], projects: Path) -> None:
    expected = reference_tools.compute_tool_use(projects)
    assert sorted(ingested) == sorted(expected)
    calls = 0
    for session, want in expected.items():
        got = ingested[session]
        assert got["summary"]["tool_use"] == want["summary"], session
        assert sorted(got["tools"], key=lambda t: t["name"]) == want["tools"], session
        with_calls = {agent: figures for agent, figures in want["agents"].items() if figures["calls"]}
        assert got["summary"]["tool_use_by_agent"] == with_calls, session
        for subagent in got["subagents"]:
            assert subagent["tool_use"] == want["agents"][subagent["agent_id"]], session
        for signal, waste in got["waste"].items():
            assert waste["count"] == want["summary"]["signals"][signal]
            assert len(waste["examples"]) == min(3, waste["count"])
        calls += want["summary"]["calls"]
    assert calls > 1000


def test_hand_checked_session(ingested: dict[str, dict]) -> None:
    # Worked out by hand with jq on the raw files (see the closing note of issue 2): 152 distinct
    # message ids in the main file, 3 in agent-a881341, 1 in the compaction agent; the two
    # agent_progress copies repeat ids of agent-a881341 and add nothing.
    summary = ingested[SPOTTER]["summary"]
    assert summary["requests"] == 156
    assert summary["compactions"] == 1
    assert summary["tokens"]["compaction"] == {"input": 3, "output": 6, "cache_read": 166758, "cache_create": 2487}
    assert summary["tokens"]["subagents"]["output"] == 3
    (agent,) = ingested[SPOTTER]["subagents"]
    assert agent["agent_id"] == "a881341"
    # Linked through the parent's toolUseResult.agentId to its Task tool_use.
    assert agent["matched_by"] == "tool_use"
    assert agent["agent_type"] == "claude-code-guide"


def test_meta_json_names_subagents(ingested: dict[str, dict]) -> None:
    agents = ingested["ef958aa1-0e93-49f0-bb71-150f63befcd1"]["subagents"]
    assert agents and all(a["matched_by"] == "meta" for a in agents)
    assert all(a["agent_type"] != "unknown" and a["description"] != "unknown" for a in agents)


def test_second_run_changes_nothing(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    first = snapshot(db_url)
    ingest(db_url, [projects])
    assert snapshot(db_url) == first


def test_deleted_transcript_keeps_its_figures(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    before = reports(db_url)[SPOTTER]
    shutil.rmtree(projects / "-home-USER-projects-spotter-worktrees-spotter-gqc")
    ingest(db_url, [projects])
    after = reports(db_url)[SPOTTER]
    assert after["summary"] == before["summary"]
    assert after["session"]["transcripts_deleted"] == 3


def test_truncated_file_is_read_again_and_requests_stay(db_url: str, projects: Path) -> None:
    path = next(projects.glob(f"*/{SPOTTER}.jsonl"))
    ingest(db_url, [projects])
    before = reports(db_url)[SPOTTER]["summary"]
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:100]))  # shrinks below the stored offset
    ingest(db_url, [projects])
    after = reports(db_url)[SPOTTER]["summary"]
    # Requests already counted stay counted; time and compactions follow the new content.
    assert after["tokens"] == before["tokens"]
    assert after["requests"] == before["requests"]
    truncated = projects.parent / "truncated"
    shutil.copytree(path.parent, truncated / path.parent.name)
    want = reference.compute(truncated)[SPOTTER]["summary"]
    for key in ("wall_s", "claude_s", "tool_s", "human_s", "compactions", "tool_calls", "tool_result_bytes"):
        assert after[key] == want[key], key
    assert after["tool_use"] == reference_tools.compute_tool_use(truncated)[SPOTTER]["summary"]
    assert after["tool_use"]["calls"] < before["tool_use"]["calls"]  # calls follow the file's content
    rollups_match_raw(db_url)


def test_replaced_file_is_read_again(db_url: str, projects: Path) -> None:
    path = next(projects.glob(f"*/{SPOTTER}.jsonl"))
    ingest(db_url, [projects])
    before = reports(db_url)[SPOTTER]["summary"]
    data = path.read_bytes()
    head = b"".join(data.splitlines(keepends=True)[:100])
    replacement = path.with_suffix(".tmp")
    replacement.write_bytes(head + data)  # larger than the stored offset: only the inode tells
    os.replace(replacement, path)
    ingest(db_url, [projects])
    after = reports(db_url)[SPOTTER]["summary"]
    assert after["tokens"] == before["tokens"]  # the same requests, deduplicated by key
    want = reference.compute(projects)[SPOTTER]["summary"]
    for key in ("wall_s", "claude_s", "tool_s", "human_s", "compactions", "tool_calls", "tool_result_bytes"):
        assert after[key] == want[key], key
    # The head's lines come again with their uuids: each counts once, where first met (§2.3).
    assert (after["tool_result_bytes"], after["claude_s"]) == (before["tool_result_bytes"], before["claude_s"])
    # The head's calls are seen twice in one file: each id once, where first seen.
    assert after["tool_use"] == reference_tools.compute_tool_use(projects)[SPOTTER]["summary"]
    assert after["tool_use"]["calls"] == before["tool_use"]["calls"]
    rollups_match_raw(db_url)


def test_rollups_kept_by_triggers_equal_the_raw_rows(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects], batch_bytes=8192)  # many small batches: many trigger runs
    rollups_match_raw(db_url)


def test_sessions_sort_by_tokens_and_by_efficiency(db_url: str, projects: Path) -> None:
    ingest(db_url, [projects])
    tokens = {s: sum(r["summary"]["tokens"]["total"].values()) for s, r in reference.compute(projects).items()}
    tools = {s: r["summary"] for s, r in reference_tools.compute_tool_use(projects).items()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    env.update(RETROD_DATABASE_URL=db_url, RETROD_PROJECTS_DIR=str(projects))

    def listed(*args: str) -> list[dict]:
        done = subprocess.run([sys.executable, "-m", "retrod", "sessions", "--json", "--limit", "1000", *args],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["sessions"]

    by_tokens = listed("--sort", "tokens")
    assert len(by_tokens) == len(tokens)
    assert [r["total_tokens"] for r in by_tokens] == sorted(tokens.values(), reverse=True)
    for row in by_tokens:
        assert (row["tool_calls"], row["efficiency"]) == (tools[row["uuid"]]["calls"], tools[row["uuid"]]["efficiency"])
    by_efficiency = listed("--sort", "efficiency")
    rated = [tools[r["uuid"]]["efficiency"] for r in by_efficiency]
    unrated = rated.index(None)  # the least efficient first; sessions without calls last
    assert unrated > 0 and rated[:unrated] == sorted(tools[s]["efficiency"] for s in tools if tools[s]["calls"])
    assert set(rated[unrated:]) == {None}
    top = listed("--sort", "tokens", "--limit", "3")
    assert [r["uuid"] for r in top] == [r["uuid"] for r in by_tokens[:3]]


def test_a_session_copied_into_another_project_folder_counts_each_call_once(db_url: str, projects: Path) -> None:
    # One uuid in two project folders: two main transcripts, every call id in both (accounting.md §2.6:
    # counted once, in the main transcript whose path sorts first).
    folder = next(projects.glob(f"*/{SPOTTER}.jsonl")).parent
    shutil.copytree(folder, folder.with_name(folder.name + "-copy"))
    ingest(db_url, [projects], batch_bytes=65536)
    got = reports(db_url)[SPOTTER]
    want = reference_tools.compute_tool_use(projects)[SPOTTER]
    assert got["summary"]["tool_use"] == want["summary"]
    assert sorted(got["tools"], key=lambda t: t["name"]) == want["tools"]
    single = reference_tools.compute_tool_use(FIXTURES)[SPOTTER]["summary"]
    assert want["summary"]["calls"] == single["calls"]  # the copy adds no call
