"""`retrod team`: the SQL that shares one PostgreSQL among a team (store/team.sql), printed for
a database administrator to read, or applied as the role that owns retrod's tables."""

from __future__ import annotations

import re

import psycopg

from ..basics.errors import UserError
from .queries import one, q

# Plain role names only: they are written into SQL text, and a name needing quotes inside a
# DO block's literal is not worth the risk.
_ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.@-]{0,62}")


class TeamError(UserError, ValueError):
    pass


def role_name(text: str) -> str:
    if not _ROLE_NAME.fullmatch(text) or text.lower().startswith(("pg_", "retrod_")):
        raise TeamError(f"{text!r} is not a role name retrod creates: use letters, digits, _ . @ -,"
                        " at most 63, not starting with pg_ or retrod_")
    return text


def _grant(role: str, group: str) -> list[str]:
    return [
        (f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN"
         f' CREATE ROLE "{role}" LOGIN; END IF; END $$;'),
        f'GRANT {group} TO "{role}";',
    ]


def statements(members: list[str], readers: list[str]) -> list[str]:
    """The whole script, in order; every statement may run again (the roles are kept)."""
    both = sorted(set(members) & set(readers))
    if both:
        # A reader's view would make a member's own writes (its report, its idle sessions)
        # meet rows it may read but not write.
        raise TeamError(f"{', '.join(both)}: a role is a member or a reader, not both")
    script = [q("team_roles"), q("team_policies")]
    for member in members:
        script += _grant(role_name(member), "retrod_member")
    for reader in readers:
        script += _grant(role_name(reader), "retrod_reader")
    return script


def script(members: list[str], readers: list[str]) -> str:
    head = ["-- retrod team: run as the role that owns retrod's tables (one that may create roles),",
            "-- on the database the members' RETROD_DATABASE_URL names. Give each login role a password",
            "-- (ALTER ROLE name PASSWORD '...') or your usual authentication; retrod never prints one."]
    body = ["BEGIN;", *statements(members, readers), "COMMIT;"]  # all or nothing, as --apply
    return "\n".join(head) + "\n\n" + "\n\n".join(body) + "\n"


def apply(conn: psycopg.Connection, members: list[str], readers: list[str]) -> list[str]:
    """Run the script in one transaction; returns what it set up, a line each."""
    with conn.transaction():
        for statement in statements(members, readers):
            conn.execute(statement)
        tables = one(conn.execute(q("team_secured_tables")))[0]
    lines = [f"row-level security on {tables} tables; roles retrod_member (own rows) and retrod_reader (all rows)"]
    lines += [f"member: {m}" for m in members] + [f"reader: {r}" for r in readers]
    return lines
