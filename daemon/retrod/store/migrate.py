"""Numbered `.sql` migrations, applied in order, one transaction each, under an advisory lock."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import psycopg
import structlog

log = structlog.get_logger(__name__)

_FILE = re.compile(r"(\d{4})_(\w+)\.sql")
_LOCK_KEY = 0x726574726F64  # "retrod": serializes concurrent migrators (daemon + CLI)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations_dir() -> Path:
    """In a wheel the migrations ship inside the package; in a checkout they sit at the top."""
    packaged = files("retrod") / "migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "migrations"


def load(folder: Path | None = None) -> list[Migration]:
    folder = folder or migrations_dir()
    found = []
    for path in sorted(folder.iterdir()):
        m = _FILE.fullmatch(path.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), path.read_text(encoding="utf-8")))
    versions = [m.version for m in found]
    if not found or len(set(versions)) != len(versions):
        raise RuntimeError(f"no migrations, or duplicate version numbers, in {folder}")
    return found


def migrate(conn: psycopg.Connection, folder: Path | None = None) -> list[int]:
    """Apply what is missing; returns the versions applied. `conn` must be in autocommit mode."""
    applied_now = []
    conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
    try:
        with conn.transaction():
            conn.execute("CREATE SCHEMA IF NOT EXISTS retrod")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS retrod.migrations ("
                " version INT PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
        done = {row[0] for row in conn.execute("SELECT version FROM retrod.migrations")}
        for migration in load(folder):
            if migration.version in done:
                continue
            with conn.transaction():
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO retrod.migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
            log.info("migration applied", version=migration.version, name=migration.name)
            applied_now.append(migration.version)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied_now
