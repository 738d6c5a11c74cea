"""Opening the database: the user's (RETROD_DATABASE_URL) or the private cluster, migrated."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import psycopg
from psycopg_pool import ConnectionPool

from ..service.cluster import Cluster
from ..settings import Settings
from .migrate import migrate


def configure(conn: psycopg.Connection) -> None:
    # Safe here: each file's rows and offset commit together, so a commit lost in a server
    # crash only means that batch is read again.
    conn.execute("SET synchronous_commit = off")
    conn.execute("SET TimeZone = 'UTC'")  # reports print times as UTC
    conn.commit()


# A command the daemon serves (served.py) uses the daemon's pool, migrated and open, not one of its own.
_lent: ContextVar[ConnectionPool | None] = ContextVar("retrod_lent_pool", default=None)


@contextmanager
def lend(pool: ConnectionPool) -> Iterator[None]:
    """open_pool on this thread yields `pool` (kept open) for as long as this lasts."""
    token = _lent.set(pool)
    try:
        yield
    finally:
        _lent.reset(token)


def cluster_for(settings: Settings) -> Cluster:
    return Cluster(settings.data_dir, settings.pg_bindir, settings.pg_os_user)


@contextmanager
def open_pool(settings: Settings, *, owner: bool = False, max_size: int = 4) -> Iterator[ConnectionPool]:
    """A migrated pool. The private cluster is started if needed and kept running while any
    user of it (this one, the daemon, other commands) needs it; the last one out stops it.
    The `owner` (the daemon) waits a little for the others before it stops it (Cluster.in_use)."""
    lent = _lent.get()
    if lent is not None:
        yield lent
        return
    if settings.database_url is not None:
        with _pool(settings.database_url, max_size) as pool:
            yield pool
        return
    cluster = cluster_for(settings)
    with cluster.in_use(owner=owner), _pool(cluster.url(), max_size) as pool:
        yield pool


@contextmanager
def _pool(url: str, max_size: int) -> Iterator[ConnectionPool]:
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    pool = ConnectionPool(url, min_size=1, max_size=max_size, configure=configure, open=False)
    pool.open(wait=True, timeout=30)
    try:
        yield pool
    finally:
        pool.close()
