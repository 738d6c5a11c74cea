"""The bulk path (issue 13): a scan with a large backlog commits on two connections at once and,
where the role may, without the foreign keys' row-by-row checks. It must end in exactly the
tables the incremental path gives: lines that arrive a few at a time, committed in small
batches on one connection, with every check."""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from conftest import FIXTURES, fresh_database
from helpers import HOST, reports, rollups_match_raw, snapshot
from retrod.ingest import Ingester
from retrod.service.cluster import Cluster
from retrod.store.store import Pending, Store

sys.path.insert(0, str(Path(__file__).parent / "bench"))
from corpus import write_tree


class RecordingStore(Store):
    """A store that notes how each batch was committed: bulk or not, and on which thread."""

    def __init__(self, pool: ConnectionPool, host_id: str) -> None:
        super().__init__(pool, host_id)
        self.commits: list[tuple[bool, int]] = []

    def commit(self, batch: Sequence[Pending], bulk: bool = False) -> None:
        super().commit(batch, bulk)
        self.commits.append((bulk, threading.get_ident()))


def bulk_scan(db_url: str, root: Path, role: str | None = None) -> RecordingStore:
    """One scan that takes the bulk path, in batches small enough for both lanes to work."""
    def as_role(conn: psycopg.Connection) -> None:
        if role is not None:
            conn.execute(f"SET ROLE {role}")
            conn.commit()

    with ConnectionPool(db_url, min_size=1, max_size=4, configure=as_role, open=True) as pool:
        store = RecordingStore(pool, HOST)
        stats = Ingester(store, [root], batch_bytes=64 << 10, bulk_from=0).scan()
    assert stats.failed == 0 and not stats.raced
    assert store.commits and all(bulk for bulk, _ in store.commits)
    assert len({thread for _, thread in store.commits}) == 2  # both lanes committed
    return store


def incremental_scans(db_url: str, root: Path, full: Path) -> None:
    """The files of `full` written into `root` in two steps, each followed by an incremental
    scan: first up to a line in their middle, then the rest, appended."""
    transcripts = sorted(p for p in full.rglob("*") if p.is_file())
    for path in transcripts:
        data = path.read_bytes()
        lines = data.splitlines(keepends=True)
        (root / path.relative_to(full)).parent.mkdir(parents=True, exist_ok=True)
        (root / path.relative_to(full)).write_bytes(b"".join(lines[: len(lines) // 2]))
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True) as pool:
        ingester = Ingester(Store(pool, HOST), [root], batch_bytes=16 << 10)
        assert ingester.scan().failed == 0
        for path in transcripts:
            target = root / path.relative_to(full)
            with target.open("ab") as f:
                f.write(path.read_bytes()[target.stat().st_size:])
        assert ingester.scan().failed == 0


@pytest.fixture(params=["fixtures", "generated"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The real fixtures (copied history across sessions, compaction, subagents of both
    layouts, odd lines), or a generated corpus of fresh copies of them."""
    full = tmp_path / "full"
    if request.param == "fixtures":
        shutil.copytree(FIXTURES, full)
    else:
        write_tree(full, 4_000_000, seed=13)
    return full


def test_bulk_and_incremental_paths_end_in_identical_tables(tree: Path, tmp_path: Path, pg_cluster: Cluster) -> None:
    root = tmp_path / "projects"
    with fresh_database(pg_cluster) as incremental, fresh_database(pg_cluster) as bulk:
        incremental_scans(incremental, root, tree)
        store = bulk_scan(bulk, root)
        assert store._may_skip_row_checks  # the test cluster's role is a superuser: checks skipped
        rollups_match_raw(bulk)
        want, got = snapshot(incremental, root), snapshot(bulk, root)
        assert want.keys() == got.keys()
        for table in want:
            assert got[table] == want[table], table
        assert len(want["requests"]) > 100 and len(want["tool_uses"]) > 100 and len(want["gap_pieces"]) > 100


def test_a_role_that_may_not_skip_the_checks_takes_the_bulk_path_with_them(db_url: str, tmp_path: Path) -> None:
    """A team member (no superuser) cannot set session_replication_role: its bulk path keeps the
    checks, and counts the same."""
    root = tmp_path / "projects"
    shutil.copytree(FIXTURES, root)
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute("CREATE ROLE retrod_plain_member")
        admin.execute("GRANT USAGE ON SCHEMA retrod TO retrod_plain_member")
        admin.execute("GRANT ALL ON ALL TABLES IN SCHEMA retrod TO retrod_plain_member")
        admin.execute("GRANT ALL ON ALL SEQUENCES IN SCHEMA retrod TO retrod_plain_member")
    store = bulk_scan(db_url, root, role="retrod_plain_member")
    assert store._may_skip_row_checks is False
    rollups_match_raw(db_url)
    with psycopg.connect(db_url) as conn:
        roles = conn.execute("SELECT DISTINCT db_role FROM retrod.events").fetchall()
    assert roles == [("retrod_plain_member",)]
    plain = reports(db_url)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
    bulk_scan(db_url, root)
    assert reports(db_url) == plain
