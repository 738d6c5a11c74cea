"""Named SQL statements from the `.sql` files of `sql/`, called as `q("report_window_figures")`.

A file holds the statements of one reader (`report.sql`: the report's). It starts with a header
comment, then a blank line; each statement is

    -- name: report_session_tokens
    -- The description: what it answers, and why it is written so (the comment lines right
    -- under the name are the statement's description, never sent to the server).
    SELECT ...;

then a blank line before the next `-- name:`. A name is the file's stem, `_`, then what it answers
(`report_session_tokens`, `ui_price_keys`, `ingest_upsert_requests`): one word, so that a call
reads as `q("trends_figures")` and a grep for the name finds its file. A line `-- include: x` in a
statement is replaced by the SQL of `x` (a fragment two statements share). The files are read
when the first statement is asked for, and strictly: a name defined twice (both places named), a
name without its file's prefix, SQL above the first name, a statement with no SQL, comment lines
between a statement's SQL and the next name (an old-style description, which would describe the
wrong statement), or an include of an unknown name raise SqlFileError, naming the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from psycopg import Connection, Cursor
    from psycopg.rows import Row

_NAME = re.compile(r"-- name: (\S*)")
_WORD = re.compile(r"\w+")
# A line `-- include: x` in a statement stands for the text of `x`, a fragment two statements share
# (report.sql's report_window_bounds): one rule stated once, and still one statement for the planner.
_INCLUDE = re.compile(r"^[ \t]*-- include: (\S*)[ \t]*$", re.MULTILINE)


class SqlFileError(ValueError):
    """A shipped `.sql` file breaks the rules of this module's docstring: the developer's to fix,
    found when the store first loads, so that a test run fails rather than a query changing."""


@dataclass(frozen=True)
class Statement:
    name: str
    description: str  # the comment lines under its name, without their `-- `
    sql: str  # as written (`-- include:` lines not yet replaced)
    where: str  # file:line of its name


def parse(text: str, filename: str) -> list[Statement]:
    """The statements of one file (`filename`, e.g. report.sql: their names' prefix, and the
    place an error names)."""
    prefix = filename.removesuffix(".sql") + "_"
    found: list[Statement] = []
    current: tuple[str, str, list[str]] | None = None  # name, where, lines

    def close() -> None:
        if current is None:
            return
        name, where, lines = current
        description = []
        while lines and lines[0].startswith("--"):
            description.append(lines.pop(0).removeprefix("--").removeprefix(" "))
        while lines and not lines[-1].strip():
            lines.pop()
        if not lines:
            raise SqlFileError(f"{where}: statement {name} has no SQL")
        if lines[-1].lstrip().startswith("--") and not _INCLUDE.fullmatch(lines[-1]):
            raise SqlFileError(f"{where}: statement {name} ends with a comment: a description goes under its"
                               " own statement's `-- name:` line, with nothing but blank lines above that line")
        found.append(Statement(name, "\n".join(description), "\n".join(lines).strip(), where))

    for n, line in enumerate(text.splitlines(), 1):
        where = f"{filename}:{n}"
        named = _NAME.fullmatch(line.rstrip())
        if named:
            close()
            name = named.group(1)
            if not _WORD.fullmatch(name):
                raise SqlFileError(f"{where}: {name!r} is no statement name (letters, digits and _)")
            if not name.startswith(prefix):
                raise SqlFileError(f"{where}: statement {name} must be named {prefix}…, after its file")
            current = (name, where, [])
        elif current is not None:
            current[2].append(line)
        elif line.strip() and not line.lstrip().startswith("--"):
            raise SqlFileError(f"{where}: SQL with no `-- name:` line above it (only the file's header"
                               " comment comes before the first statement)")
    close()
    return found


def load(folder: Traversable) -> dict[str, str]:
    """{name: statement} of every `.sql` file of `folder`, fragments included in place; raises
    SqlFileError on a name defined twice, a name without its file's prefix, a statement with no
    name or no SQL, a comment between a statement's SQL and the next name, an unknown include."""
    statements: dict[str, Statement] = {}
    for resource in sorted(folder.iterdir(), key=lambda r: r.name):
        if not resource.name.endswith(".sql"):
            continue
        for statement in parse(resource.read_text(encoding="utf-8"), resource.name):
            if statement.name in statements:
                raise SqlFileError(f"{statement.where}: statement {statement.name} is defined twice"
                                   f" (first at {statements[statement.name].where})")
            statements[statement.name] = statement
    return {name: _included(s, statements, ()) for name, s in statements.items()}


def _included(statement: Statement, statements: dict[str, Statement], within: tuple[str, ...]) -> str:
    def text(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in statements:
            line = statement.sql.count("\n", 0, m.start())  # (the name line, the description, then the SQL)
            raise SqlFileError(f"{statement.where}: statement {statement.name} includes {name!r}, which no"
                               f" `-- name:` line defines (its line {line + 1} of SQL)")
        if name in within:
            raise SqlFileError(f"{statement.where}: statement {statement.name} includes itself, through {name}")
        return _included(statements[name], statements, (*within, statement.name))
    return _INCLUDE.sub(text, statement.sql)


@cache
def _all() -> dict[str, str]:
    return load(files(__package__) / "sql")


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
