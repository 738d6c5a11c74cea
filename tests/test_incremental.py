"""Incremental = batch (DESIGN §2.2, last rule): feeding the same files in random chunks —
lines split mid-way, files interleaved, small batches, the ingester restarted between chunks,
files deleted and written again at the same path (where the file system hands the new file the
old inode number, and at times a stranger's content first) — ends in exactly the database that
one pass over the final files gives."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool

import web_search_transcripts
from conftest import FIXTURES, fresh_database
from helpers import HOST, ingest, snapshot
from retrod.ingest.ingester import Ingester
from retrod.report import prices
from retrod.store.store import Store
from test_cache import causes

SPOTTER = "-home-USER-projects-spotter-worktrees-spotter-gqc/258c7280-ae70-4798-800f-63464d01a85d"
EXAMPLES = int(os.environ.get("RETROD_HYPOTHESIS_EXAMPLES", "12"))


def _corpus(dest: Path) -> None:
    """Real files covering each layout and rule, small enough for many examples."""
    for folder in ("-Users-dain-workspace-danieldemmel-me-next",  # 2.0.x agent-<id>.jsonl, empty file
                   "-home-marco-projects-spotter"):
        shutil.copytree(FIXTURES / folder, dest / folder)
    shutil.copytree(FIXTURES / SPOTTER, dest / SPOTTER)  # subagent + compaction agent files
    # The main transcript's lines around its compaction and its agent_progress copies.
    lines = (FIXTURES / f"{SPOTTER}.jsonl").read_bytes().splitlines(keepends=True)
    (dest / f"{SPOTTER}.jsonl").write_bytes(b"".join(lines[1239:1480]))
    # One timeline (issue 19): a copy of the project folder, its name first in order, with part
    # of the lines and one of its own; the original keeps its own lines on after it.
    copy = dest / "-a-spotter-copy" / Path(SPOTTER).name
    copy.parent.mkdir()
    copy.with_suffix(".jsonl").write_bytes(b"".join(lines[1239:1400]) + lines[1500])
    worktree = "-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1"
    shutil.copytree(FIXTURES / worktree, dest / worktree)  # .meta.json sidecars
    # Bad lines, CRLF endings and a partial last line.
    (dest / "-synthetic").mkdir()
    (dest / "-synthetic" / "00000000-0000-4000-8000-000000000000.jsonl").write_bytes(
        b'{"type":"user","timestamp":"2026-01-01T00:00:00Z","message":{"content":"hi"}}\r\n'
        b"not json\n[1,2]\n\n"
        b'{"type":"assistant","timestamp":"2026-01-01T00:00:02.5Z","requestId":"req_x",'
        b'"message":{"id":"msg_x","usage":{"input_tokens":5,"output_tokens":1}}}\r\n'
        b'{"type":"assistant","timestamp":"2026-01-01T00:00:03Z","requestId":"req_x",'
        b'"message":{"id":"msg_x","usage":{"input_tokens":5,"output_tokens":9}}}\n'
        b'{"type":"user","timestamp":"2026-01-01T00:00:09Z","mess'
    )
    # Models (issue 11): records of one request that tie on the usage but name different models,
    # or none, in two sessions' files (copied history); a larger snapshot naming no model after a
    # smaller one naming one; a <synthetic> entry. Any chunking and order picks the same model.
    one, two = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"

    def record(key: str, second: int, output: int, model: str | None, session: str = one) -> bytes:
        message = {"id": key, "usage": {"input_tokens": 2, "output_tokens": output}}
        if model is not None:
            message["model"] = model
        return json.dumps({"type": "assistant", "sessionId": session, "message": message,
                           "timestamp": f"2026-01-01T00:01:{second:02d}Z"}).encode() + b"\n"

    # Parts (issue 19): a refusal fallback's first snapshot (one iteration), then its final one
    # (two, of two models), and a fast-mode record.
    def parts(key: str, second: int, output: int, iterations: list, speed: str = "standard") -> bytes:
        usage = {"input_tokens": 2, "output_tokens": output, "iterations": iterations, "speed": speed}
        return json.dumps({"type": "assistant", "sessionId": one, "timestamp": f"2026-01-01T00:02:{second:02d}Z",
                           "message": {"id": key, "model": "claude-opus-4-8", "usage": usage}}).encode() + b"\n"

    refused = {"input_tokens": 1, "output_tokens": 2, "model": "claude-fable-5"}
    answered = {"input_tokens": 1, "output_tokens": 7, "model": "claude-opus-4-8"}
    (dest / "-synthetic" / f"{one}.jsonl").write_bytes(
        record("msg_t", 1, 9, "claude-b") + record("msg_t", 1, 9, None) + record("msg_u", 2, 0, "<synthetic>")
        + record("msg_v", 3, 3, "claude-z") + parts("msg_f", 1, 1, [refused | {"output_tokens": 1}])
        + parts("msg_f", 2, 7, [refused, answered]) + parts("msg_g", 3, 4, [], speed="fast"))
    (dest / "-synthetic" / f"{two}.jsonl").write_bytes(
        record("msg_t", 1, 9, "Claude-a", session=one) + record("msg_v", 4, 5, None, session=one)
        + record("msg_w", 5, 1, "claude-z", session=two))


    # Prompt-cache misses (DESIGN §2.8): each cause, reasons, keyless records, an agent's own
    # compaction boundary.
    causes(dest)
    # Web searches (§2.2): in the top level and in iterations, odd values, records that tie on
    # all but their searches.
    web_search_transcripts.write(dest)


class Tree(dict):
    """relative path -> final content; a short repr keeps failure reports readable."""

    def __repr__(self) -> str:
        return f"<{len(self)} files, {sum(map(len, self.values()))} bytes>"


@pytest.fixture(scope="module")
def final_tree() -> Tree:
    with tempfile.TemporaryDirectory() as tmp:
        _corpus(Path(tmp))
        return Tree({str(p.relative_to(tmp)): p.read_bytes()
                     for p in sorted(Path(tmp).rglob("*")) if p.is_file()})


def _write_tree(root: Path, contents: dict[str, bytes]) -> None:
    for rel, data in contents.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


class Snapshot(dict):
    def __repr__(self) -> str:
        return "<" + ", ".join(f"{table}: {len(rows)} rows" for table, rows in self.items()) + ">"


@pytest.fixture(scope="module")
def batch_snapshot(pg_cluster, final_tree, tmp_path_factory) -> Snapshot:
    root = tmp_path_factory.mktemp("batch") / "projects"
    _write_tree(root, final_tree)
    with fresh_database(pg_cluster) as url:
        ingest(url, [root])
        return Snapshot(snapshot(url, relative_to=root))


_STRANGER = b'{"type":"user","timestamp":"2026-02-02T00:00:00Z","message":{"content":"not the same file"}}\n'


def _replace(path: Path, read: int, data: st.DataObject, scan: Callable[[], None]) -> None:
    """Delete a file its reader has `read` bytes of; maybe let it be seen gone; maybe put a
    stranger there first, at least as long, so only the fingerprint tells it apart (DESIGN §2.1)."""
    path.unlink()
    if data.draw(st.booleans(), label="ingest while gone"):
        scan()
    if data.draw(st.booleans(), label="a stranger first"):
        path.write_bytes(_STRANGER * (read // len(_STRANGER) + 1))
        scan()
        path.unlink()


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(data=st.data())
def test_random_chunks_end_like_one_pass(pg_cluster, final_tree, batch_snapshot, data) -> None:
    with tempfile.TemporaryDirectory() as tmp, fresh_database(pg_cluster) as url:
        root = Path(tmp) / "projects"
        written = dict.fromkeys(final_tree, 0)
        # Both connections opened up front: a pool growing later would call `random` (its jitter)
        # on its own thread while hypothesis draws, which hypothesis flags.
        pool = ConnectionPool(url, min_size=2, max_size=2, open=False)
        pool.open(wait=True)
        with pool.connection() as conn:  # as the daemon, at its start (and as helpers.ingest)
            prices.store_tiers(conn)
        try:
            ingester = None

            def scan() -> None:
                nonlocal ingester
                if ingester is None or data.draw(st.booleans(), label="restart ingester"):
                    batch = data.draw(st.sampled_from([512, 4096, 65536, 4 << 20]), label="batch bytes")
                    ingester = Ingester(Store(pool, HOST), [root], batch)
                ingester.scan()

            replacements = 0
            while pending := sorted(rel for rel, n in written.items() if n < len(final_tree[rel])):
                rel = data.draw(st.sampled_from(pending), label="file")
                full = final_tree[rel]
                if written[rel] and replacements < 3 and data.draw(st.booleans(), label="replace it"):
                    replacements += 1
                    _replace(root / rel, written[rel], data, scan)
                    written[rel] = data.draw(st.integers(0, written[rel]), label="bytes kept")
                    (root / rel).write_bytes(full[:written[rel]])
                    continue
                # Shrinks towards appending the whole rest: the simplest example is one pass.
                short = data.draw(st.integers(0, len(full) - written[rel] - 1), label="bytes held back")
                upto = len(full) - short
                path = root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "ab") as f:
                    f.write(full[written[rel]:upto])
                written[rel] = upto
                if data.draw(st.booleans(), label="ingest now"):
                    scan()
            for rel in final_tree:  # files that are empty in the end never got an append
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).touch()
            Ingester(Store(pool, HOST), [root]).scan()
        finally:
            pool.close()
        got = snapshot(url, relative_to=root)
        for table, rows in batch_snapshot.items():
            assert got[table] == rows, f"retrod.{table} differs from one pass"
