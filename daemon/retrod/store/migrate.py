"""Numbered `.sql` migrations, applied in order, one transaction each, under an advisory lock."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import psycopg
import structlog

from .queries import one, q

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


class MigrationRefused(RuntimeError):
    """The database needs a migration this role may not apply (a team member's)."""


def pending(conn: psycopg.Connection, folder: Path | None = None) -> list[Migration]:
    """The migrations not applied yet, read without writing anything."""
    if one(conn.execute("SELECT to_regclass('retrod.migrations')"))[0] is None:
        return load(folder)
    done = {row[0] for row in conn.execute("SELECT version FROM retrod.migrations")}
    return [m for m in load(folder) if m.version not in done]


def migrate(conn: psycopg.Connection, folder: Path | None = None) -> list[int]:
    """Apply what is missing; returns the versions applied. `conn` must be in autocommit mode.

    An up-to-date database costs one read and no lock or DDL: a team member's role may run none
    (store/team.sql). One that is not up to date, asked by a role that may not change it, is
    refused with the migration it needs."""
    if not pending(conn, folder):
        return []
    applied_now: list[int] = []
    conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
    try:
        if not pending(conn, folder):  # another process applied them while this one waited
            return applied_now
        with conn.transaction():
            conn.execute("CREATE SCHEMA IF NOT EXISTS retrod")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS retrod.migrations ("
                " version INT PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
        for migration in pending(conn, folder):
            with conn.transaction():
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO retrod.migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
                if one(conn.execute(q("team_enabled")))[0]:
                    conn.execute(q("team_policies"))  # a new table gets the team's grants and policies
            log.info("migration applied", version=migration.version, name=migration.name)
            applied_now.append(migration.version)
    except psycopg.errors.InsufficientPrivilege as exc:
        missing = pending(conn, folder)
        needed = f"migration {missing[0].version:04d} ({missing[0].name})" if missing else "a migration"
        raise MigrationRefused(
            f"the database needs {needed}, which this role may not apply ({' '.join(str(exc).split())}):"
            " run `retrod migrate` as the role that owns retrod's tables") from None
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied_now
