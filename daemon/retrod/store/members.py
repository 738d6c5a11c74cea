"""Whose rows a read reads (accounting.md §3): on a team's database every key includes the member, so
one session id may be several members' sessions. Alone, or as a member, one reads one's own; a
team's reader reads the one member holding the session, or the one it names."""

from __future__ import annotations

from psycopg import Connection

from ..basics.errors import UserError
from .queries import one, q


class MemberError(UserError, ValueError):
    """A team's reader named no member, or one that holds nothing of the session: the user's mistake."""


def current_role(conn: Connection) -> str:
    """The role this connection writes rows as (its own, alone or as a member)."""
    return str(one(conn.execute(q("report_current_role")))[0])


def member_of(conn: Connection, session: str, member: str | None = None) -> str:
    """The database role whose rows a report of `session` reads (accounting.md §3: on a team's database
    every key includes the member). Alone, or as a member: one's own. A team's reader sees
    every member's rows: the one member holding the session, or the one it names."""
    me, holders = one(conn.execute(q("report_session_members"), {"session": session}))
    if member is not None:
        if holders and member not in holders:
            raise MemberError(f"member {member!r} holds nothing of session {session}; its members: "
                              f"{', '.join(holders)}")
        return member
    if me in holders or not holders:
        return me
    if len(holders) == 1:
        return holders[0]
    raise MemberError(f"session {session} is held by several members ({', '.join(holders)}): "
                      "name one with --member ROLE")
