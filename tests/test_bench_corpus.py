"""The benchmark corpus is made of real lines with fresh ids: retrod and the reference agree on
it, and each copy of a fixture folder counts like the original (no id shared between copies)."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import reference
from conftest import FIXTURES
from helpers import ingest, reports

sys.path.insert(0, str(Path(__file__).parent / "bench"))
from corpus import write_tree


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
