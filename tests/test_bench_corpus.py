"""The benchmark corpus is made of real lines with fresh ids: retrod and the reference agree on
it, each copy of a fixture folder counts like the original (no id shared between copies), and
two sessions written from one transcript count alike, neither holding the other's copies."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import reference
from conftest import FIXTURES
from helpers import ingest, reports

sys.path.insert(0, str(Path(__file__).parent / "bench"))
from corpus import write_session, write_tree


def test_generated_tree_matches_the_reference(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "projects"
    assert write_tree(root, 3_000_000, seed=7) >= 3_000_000
    assert write_tree(tmp_path / "again", 3_000_000, seed=7) == sum(
        p.stat().st_size for p in root.rglob("*") if p.is_file())  # seeded: the same tree
    ingest(db_url, [root])
    got, want = reports(db_url), reference.compute(root)
    assert sorted(got) == sorted(want) and len(want) > 3
    for session, expected in want.items():
        assert {k: got[session]["summary"][k] for k in expected["summary"]} == expected["summary"], session
    # Each copy of a fixture folder counts exactly like the original folder alone.
    checked = 0
    for folder in root.iterdir():
        slug, copy = folder.name.rsplit("-c", 1)
        alone = tmp_path / "alone" / slug
        if not alone.exists():
            shutil.copytree(FIXTURES / slug, alone / slug)
        original = reference.compute(alone)
        for session, figures in original.items():
            renamed = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{session}/{copy}"))
            assert got[renamed]["summary"]["tokens"] == figures["summary"]["tokens"], (slug, session)
            assert got[renamed]["summary"]["claude_s"] == figures["summary"]["claude_s"], (slug, session)
            checked += 1
    assert checked >= 3


def test_two_sessions_written_from_one_transcript_share_no_id(db_url: str, tmp_path: Path) -> None:
    """The web UI benchmark's live session was written from the transcript its ~200 MB session
    repeats: with the same line uuids and message ids, accounting.md §2.2 gave every request of it to
    the other session, and the live page's figures never moved."""
    import json

    one, other = "aaaaaaaa-1111-4111-8111-000000000001", "bbbbbbbb-2222-4222-8222-000000000002"
    paths = [write_session(tmp_path, s, 400_000) for s in (one, other)]

    def ids(path: Path) -> set[str]:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        messages = [r["message"] for r in records if isinstance(r.get("message"), dict)]
        return {r["uuid"] for r in records if r.get("uuid")} | {m["id"] for m in messages if m.get("id")}

    assert ids(paths[0]) and not ids(paths[0]) & ids(paths[1])
    ingest(db_url, [tmp_path])
    got = reports(db_url)
    assert got[one]["summary"]["tokens"] == got[other]["summary"]["tokens"]
    assert got[one]["summary"]["tokens"]["total"]["output"] > 0
