"""Which paths are read (accounting.md §2.1), and reading only complete lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retrod.transcript.discovery import classify, walk
from retrod.transcript.tailer import read_chunk

U = "0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f"
ROOT = Path("/p")


@pytest.mark.parametrize(("rel", "expected"), [
    (f"slug/{U}.jsonl", ("main", "slug", U, "")),
    (f"slug/{U}/subagents/agent-a2271d1.jsonl", ("subagent", "slug", U, "a2271d1")),
    (f"slug/{U}/subagents/deep/er/agent-x.jsonl", ("subagent", "slug", U, "x")),
    (f"slug/{U}/subagents/agent-acompact-fffbd0.jsonl", ("subagent", "slug", U, "acompact-fffbd0")),
    (f"slug/{U}/subagents/agent-a1.meta.json", ("meta", "slug", U, "a1")),
    (f"slug/{U}/tool-results/toolu_01.txt", ("tool_result", "slug", U, "")),
    ("slug/agent-ea02459f.jsonl", ("agent_root", "slug", None, "ea02459f")),
])
def test_read_paths(rel: str, expected: tuple) -> None:
    ref = classify(ROOT, ROOT / rel)
    assert (ref.kind, ref.slug, ref.session_uuid, ref.agent_id) == expected


@pytest.mark.parametrize("rel", [
    f"{U}.jsonl",                                # no project folder
    f"slug/{U.upper()}.jsonl",                   # not lower-case
    "slug/notes.jsonl",
    "slug/agent-.jsonl",                         # empty id
    f"slug/{U}.json",
    f"slug/{U}/subagents/agent-.jsonl",
    f"slug/{U}/session-memory/summary.md",
    "slug/not-a-uuid/subagents/agent-a.jsonl",
    f"slug/{U}/tool-results/nested/x.txt",
])
def test_ignored_paths(rel: str) -> None:
    assert classify(ROOT, ROOT / rel) is None


def test_walk_finds_the_fixture_layouts(projects: Path) -> None:
    kinds = {}
    for ref in walk(projects):
        kinds[ref.kind] = kinds.get(ref.kind, 0) + 1
    # 61 transcripts and 6 meta files in the corpus (fixtures/SOURCES.md).
    assert kinds["meta"] == 6
    assert kinds["main"] + kinds["subagent"] + kinds["agent_root"] == 61


def _chunk(tmp_path: Path, data: bytes, offset: int = 0, max_bytes: int = 1 << 20):
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_chunk(fd, offset, max_bytes)
    finally:
        os.close(fd)


def test_partial_last_line_waits(tmp_path: Path) -> None:
    chunk = _chunk(tmp_path, b'{"a":1}\r\n{"b":2}\n{"c":')
    assert chunk.lines == [(0, b'{"a":1}'), (9, b'{"b":2}')]
    assert chunk.end == 17


def test_reads_from_an_offset(tmp_path: Path) -> None:
    chunk = _chunk(tmp_path, b"one\ntwo\nthree\n", offset=4)
    assert chunk.lines == [(4, b"two"), (8, b"three")] and chunk.end == 14


def test_a_line_longer_than_the_batch_is_read_whole(tmp_path: Path) -> None:
    long = b"x" * 10_000
    chunk = _chunk(tmp_path, long + b"\nnext\n", max_bytes=100)
    assert chunk.lines[0] == (0, long)


def test_no_complete_line_reads_nothing(tmp_path: Path) -> None:
    chunk = _chunk(tmp_path, b'{"unfinished"', offset=0)
    assert chunk.lines == [] and chunk.end == 0


def test_walk_below_one_folder(projects: Path) -> None:
    session_dir = next(projects.glob("-experiments-worktrees/*-*-*-*-*/"))
    found = {ref.kind for ref in walk(projects, session_dir)}
    assert found == {"subagent", "meta"}  # only what lies below that session's folder
    assert list(walk(projects, projects.parent)) == []  # outside the root: nothing
