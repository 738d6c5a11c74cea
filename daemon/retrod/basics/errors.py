"""The user's mistakes: one base class that every surface answers the same way.

A `UserError` is the user's to fix (a bad option, a session that is not there, a setting that
is not one), not a failure of what retrod uses. Every surface answers it once, by this class and
not by a list: the command line exits 2 with its message on one line (`cli/commands.py`, and the
daemon answering for a command: `fastpath/server.py`, `statusline/served.py`), the web UI answers
`status` with it (`ui/app.py`), MCP a tool error (`mcp/tools.py`). A new mistake is one subclass
where it is raised, and nothing else changes. Standard library only and nothing imported: every
command loads it, including those that import little else (as Datasette's `Base400`).

A subclass may also derive from the built-in error it was before (`ValueError`,
`RuntimeError`, …) so that code catching that still catches it.
"""

from __future__ import annotations


class UserError(Exception):
    """The user's to fix: the command exits 2, the web UI answers `status`, MCP a tool error."""

    status = 400  # the web UI's answer; 404 for something asked for that is not there
    prefix = ""  # put before the message on every surface, e.g. "configuration: " for a setting
