"""Named SQL statements from the `.sql` files beside this module."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psycopg import Connection, Cursor
    from psycopg.rows import Row

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
# A line `-- include: x` in a statement stands for the text of `x`, a fragment two statements share
# (report.sql's window_bounds): one rule stated once, and still one statement for the planner.
_INCLUDE = re.compile(r"^[ \t]*-- include: (\w+)[ \t]*$", re.MULTILINE)
_TRAILING_COMMENTS = re.compile(r"(\n[ \t]*(--[^\n]*)?)+\Z")


def parse(text: str) -> dict[str, str]:
    """Split a file of `-- name: x` blocks into {name: statement}; the comment lines that end a
    block are the next statement's, and are left out of this one (and of a fragment pasted in)."""
    pieces = _NAME.split(text)
    return {name: _TRAILING_COMMENTS.sub("", body.strip())
            for name, body in zip(pieces[1::2], pieces[2::2], strict=True)}


@cache
def _all() -> dict[str, str]:
    queries: dict[str, str] = {}
    for resource in files(__package__).iterdir():
        if resource.name.endswith(".sql"):
            queries.update(parse(resource.read_text(encoding="utf-8")))
    return {name: _included(text, queries) for name, text in queries.items()}


def _included(text: str, queries: dict[str, str]) -> str:
    return _INCLUDE.sub(lambda m: _included(queries[m.group(1)], queries), text)


def q(name: str) -> str:
    return _all()[name]


def one(cur: Cursor[Row]) -> Row:
    """The row of a statement that always returns one (an aggregate, an INSERT ... RETURNING)."""
    row = cur.fetchone()
    if row is None:
        raise AssertionError("a statement that always returns a row returned none")
    return row


@contextmanager
def generic_plans(conn: Connection) -> Iterator[None]:
    """The statements run in this block use one plan for every argument (PostgreSQL's generic plan,
    kept with the statement once psycopg prepares it, at its sixth run on a connection) instead of
    being planned again for each: planning was most of a small report's time (window_figures: ~5
    ms to plan, ~2 to run for 12 phases), and after five runs PostgreSQL would pick the generic
    plan or not by its estimates, session by session. The statements read in this block are
    written so that their one plan reads each range through an index whatever the session
    (report.sql's window_figures: a LATERAL per range). In a transaction (a savepoint inside one),
    so that the setting ends with it."""
    with conn.transaction():
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        yield
