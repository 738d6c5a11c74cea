"""The bulk path (issue 13): a scan with a large backlog commits on two connections at once and,
where the role may, without the foreign keys' row-by-row checks. It must end in exactly the
tables the incremental path gives: lines that arrive a few at a time, committed in small
batches on one connection, with every check."""

from __future__ import annotations

import shutil
import sys
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

import web_search_transcripts
from conftest import FIXTURES, fresh_database
from helpers import HOST, reports, rollups_match_raw, snapshot
from retrod.ingest import ingester as ingest
from retrod.ingest.ingester import Ingester
from retrod.service.cluster import Cluster
from retrod.store.store import Lane, Pending, Store

sys.path.insert(0, str(Path(__file__).parent / "bench"))
from corpus import write_tree


class RecordingStore(Store):
    """A store that notes how each batch was committed: bulk or not, on which thread, and the
    stretch of each file it took (start and end offset)."""

    def __init__(self, pool: ConnectionPool, host_id: str) -> None:
        super().__init__(pool, host_id)
        self.commits: list[tuple[bool, int]] = []
        self.stretches: dict[str, list[tuple[int, int]]] = {}
        self.skipped: list[bool] = []  # per bulk transaction: whether it skipped the checks

    def _skips_row_checks(self, conn: psycopg.Connection) -> bool:
        self.skipped.append(super()._skips_row_checks(conn))
        return self.skipped[-1]

    def commit(self, batch: Sequence[Pending], bulk: bool = False, lane: Lane | None = None) -> None:
        super().commit(batch, bulk, lane)
        self.commits.append((bulk, threading.get_ident()))
        for p in batch:
            self.stretches.setdefault(p.path, []).append((p.start, p.offset))


def broken_references(db_url: str) -> dict[str, int]:
    """Rows whose foreign key finds nothing, per foreign key of retrod's (the catalog's list,
    so that a new one is checked too): what skipping the checks must never leave."""
    with psycopg.connect(db_url) as conn:
        keys = conn.execute("""
            SELECT c.conname, c.conrelid::regclass::text, c.confrelid::regclass::text,
                   array(SELECT attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
                         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY i),
                   array(SELECT attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i)
                         JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY i)
            FROM pg_constraint c WHERE c.contype = 'f' AND c.connamespace = 'retrod'::regnamespace""").fetchall()
        assert len(keys) >= 6  # each per-file table to its file, gap spans to their events
        broken = {}
        for name, table, target, columns, target_columns in keys:
            match = " AND ".join(f't."{a}" = r."{b}"' for a, b in zip(target_columns, columns, strict=True))
            broken[name] = conn.execute(
                f"SELECT count(*) FROM {table} r WHERE NOT EXISTS (SELECT FROM {target} t WHERE {match})").fetchone()[0]
    return broken


@pytest.fixture(autouse=True)
def small_bulk_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many batches of the fixtures' few MB: both lanes at work, sessions split between them."""
    monkeypatch.setattr(ingest, "BULK_BATCH_BYTES", 256 << 10)


def bulk_scan(db_url: str, root: Path, role: str | None = None) -> RecordingStore:
    """One scan that takes the bulk path, in batches small enough for both lanes to work."""
    def as_role(conn: psycopg.Connection) -> None:
        if role is not None:
            conn.execute(f"SET ROLE {role}")
            conn.commit()

    with ConnectionPool(db_url, min_size=1, max_size=4, configure=as_role, open=True) as pool:
        store = RecordingStore(pool, HOST)
        # (the bulk path's batches are the larger of batch_bytes and the patched BULK_BATCH_BYTES)
        stats = Ingester(store, [root], batch_bytes=64 << 10, bulk_from=0).scan()
    assert stats.failed == 0
    assert store.commits and all(bulk for bulk, _ in store.commits)  # (a raced file's re-read is not)
    assert len({thread for _, thread in store.commits}) == 2  # both lanes committed
    for path, stretches in store.stretches.items():  # each file's chunks in order, none twice
        assert [start for start, _ in stretches] == [0] + [end for _, end in stretches[:-1]], path
    assert not any(broken_references(db_url).values()), broken_references(db_url)
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
        web_search_transcripts.write(full)  # (no real one searched the web: tests/web_search_transcripts.py)
    else:
        write_tree(full, 4_000_000, seed=13)
    return full


def test_bulk_and_incremental_paths_end_in_identical_tables(tree: Path, tmp_path: Path, pg_cluster: Cluster) -> None:
    root = tmp_path / "projects"
    with fresh_database(pg_cluster) as incremental, fresh_database(pg_cluster) as bulk:
        incremental_scans(incremental, root, tree)
        store = bulk_scan(bulk, root)
        assert store.skipped and all(store.skipped)  # the test cluster's role is a superuser
        rollups_match_raw(bulk)
        want, got = snapshot(incremental, root), snapshot(bulk, root)
        assert want.keys() == got.keys()
        for table in want:
            assert got[table] == want[table], table
        assert len(want["requests"]) > 100 and len(want["tool_uses"]) > 100 and len(want["events"]) > 100


def test_every_trigger_of_retrods_fires_in_replica_mode(db_url: str) -> None:
    """Migration 0011: else the bulk path leaves replica mode alone (next test)."""
    with psycopg.connect(db_url) as conn:
        states = conn.execute("""
            SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger
            WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'retrod'::regnamespace)
            """).fetchall()
    assert len(states) >= 10
    assert [s for s in states if s[2] != "A"] == []


def test_a_trigger_enabled_again_the_usual_way_keeps_the_bulk_path_off_replica_mode(db_url: str,
                                                                                     tmp_path: Path) -> None:
    """`ENABLE TRIGGER` (as pg_restore --disable-triggers leaves it) makes a trigger skip replica
    mode: the bulk path must then keep the checks, or that rollup would silently fall behind."""
    root = tmp_path / "projects"
    shutil.copytree(FIXTURES, root)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE retrod.events ENABLE TRIGGER events_inserted")
    store = bulk_scan(db_url, root)
    assert store.skipped and not any(store.skipped)
    rollups_match_raw(db_url)


@pytest.mark.slow
def test_a_role_that_may_not_skip_the_checks_takes_the_bulk_path_with_them(db_url: str, tmp_path: Path) -> None:
    """A team member (no superuser) cannot set session_replication_role: its bulk path keeps the
    checks, and counts the same. A superuser reading the same tree on that database afterwards
    keeps to its own files' rows (files are keyed by role): it sees the member's, but must not
    read on from their offsets nor hang its rows on their file ids."""
    root = tmp_path / "projects"
    shutil.copytree(FIXTURES, root)
    role = f"retrod_plain_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(db_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role}")
        admin.execute(f"GRANT USAGE ON SCHEMA retrod TO {role}")
        admin.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA retrod TO {role}")
        admin.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA retrod TO {role}")
    try:
        store = bulk_scan(db_url, root, role=role)
        assert store.skipped and not any(store.skipped)
        rollups_match_raw(db_url)
        with psycopg.connect(db_url) as conn:
            assert conn.execute("SELECT DISTINCT db_role FROM retrod.events").fetchall() == [(role,)]
        plain = reports(db_url)

        superuser = bulk_scan(db_url, root)  # checks the foreign keys after it, too
        assert superuser.skipped and all(superuser.skipped)
        with psycopg.connect(db_url) as conn:
            per_role = conn.execute("SELECT db_role = current_user, count(*) FROM retrod.events GROUP BY 1"
                                    " ORDER BY 1").fetchall()
        assert per_role[0][1] == per_role[1][1] > 100  # each role's own rows, the same count

        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("TRUNCATE retrod.files, retrod.requests CASCADE")
        bulk_scan(db_url, root)
        with psycopg.connect(db_url) as conn:
            superuser = conn.execute("SELECT current_user").fetchone()[0]
        for report in plain.values():  # the same figures, now the superuser's own
            assert report["session"]["member"] == role
            report["session"]["member"] = superuser
        assert reports(db_url) == plain
    finally:
        with psycopg.connect(db_url, autocommit=True) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_a_bulk_lanes_connection_goes_back_to_the_pool_checking_rows(db_url: str, tmp_path: Path) -> None:
    """A bulk lane skips the checks for its whole session (Store.lane): a connection left so
    would let another command's deletes skip their cascades."""
    root = tmp_path / "projects"
    shutil.copytree(FIXTURES, root)
    with ConnectionPool(db_url, min_size=3, max_size=3, open=True) as pool:
        store = RecordingStore(pool, HOST)
        assert Ingester(store, [root], batch_bytes=64 << 10, bulk_from=0).scan().failed == 0
        assert store.skipped and all(store.skipped)
        assert len({thread for _, thread in store.commits}) == 2
        with pool.connection() as a, pool.connection() as b, pool.connection() as c:  # (every one)
            assert [conn.execute("SHOW session_replication_role").fetchone()[0] for conn in (a, b, c)] \
                == ["origin"] * 3


def test_a_trigger_enabled_the_usual_way_during_a_bulk_round_brings_the_checks_back(db_url: str,
                                                                                    tmp_path: Path) -> None:
    """The lanes' sessions skip the checks from the round's start; a trigger enabled the usual way
    after that must still fire: each transaction asks again, and keeps the checks from then on."""
    root = tmp_path / "projects"
    shutil.copytree(FIXTURES, root)

    class EnablingStore(RecordingStore):
        def commit(self, batch: Sequence[Pending], bulk: bool = False, lane: Lane | None = None) -> None:
            super().commit(batch, bulk, lane)
            if len(self.commits) == 2:  # (the lanes' sessions skip the checks by now)
                with psycopg.connect(db_url, autocommit=True) as conn:
                    conn.execute("ALTER TABLE retrod.events ENABLE TRIGGER events_inserted")

    with ConnectionPool(db_url, min_size=1, max_size=4, open=True) as pool:
        store = EnablingStore(pool, HOST)
        assert Ingester(store, [root], batch_bytes=64 << 10, bulk_from=0).scan().failed == 0
    assert store.skipped[0] and not store.skipped[-1]
    assert len(store.commits) > 4
    rollups_match_raw(db_url)
    assert not any(broken_references(db_url).values())
