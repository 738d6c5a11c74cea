"""Shared test fixtures: a throwaway PostgreSQL cluster (the same code as the embedded default)
and temp copies of the real transcript fixtures (never the fixtures in place)."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from retrod.service.cluster import Cluster
from retrod.store.migrate import migrate

FIXTURES = Path(__file__).parent / "fixtures" / "claude-projects"

# The daemons the tests start serve no web UI unless a test asks for one (tests/test_ui*.py): the
# default port is one per machine, and tests (and other people's) run side by side.
os.environ.setdefault("RETROD_UI_PORT", "0")
TEMPLATE_DB = "retrod_template"


@contextmanager
def throwaway_cluster(prefix: str) -> Iterator[tuple[Cluster, Path]]:
    """A running private cluster in a new folder, and the folder; both gone afterwards."""
    # A short path under /tmp: unix socket paths are limited to ~100 bytes. Mode 711 so that,
    # when the tests run as root, the server's own OS user can reach its folder.
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(root, 0o711)
    cluster = Cluster(root / "c")
    try:
        cluster.ensure_running()
        yield cluster, root
    finally:
        cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    with throwaway_cluster("retrod-pg-") as (cluster, _root):
        cluster.create_database(TEMPLATE_DB)
        with psycopg.connect(cluster.url(TEMPLATE_DB), autocommit=True) as conn:
            migrate(conn)
        yield cluster


@contextmanager
def fresh_database(cluster: Cluster) -> Iterator[str]:
    """A new, migrated database (copied from the template), dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    cluster.create_database(name, template=TEMPLATE_DB)
    try:
        yield cluster.url(name)
    finally:
        with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def db_url(pg_cluster: Cluster) -> Iterator[str]:
    with fresh_database(pg_cluster) as url:
        yield url


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    """A writable copy of the real fixture tree."""
    dest = tmp_path / "projects"
    shutil.copytree(FIXTURES, dest)
    return dest
