"""`retrod ui`: the web dashboard the daemon serves on 127.0.0.1 (issue 23).

Read-only pages over the daemon's own figures — sessions, a session, live — each with a JSON twin.
Starlette and uvicorn are an optional extra (`pip install 'retrod[ui]'`): only `app`, `server`
and `connections` import them, and this package's own module imports nothing, so that the daemon
and `retrod ui` can ask whether the extra is there without loading it. `data` (the figures), `pages` (the HTML),
`secret` (the token) and `hub` (the live page's fan-out) need neither.
"""

from __future__ import annotations

EXTRA = "pip install 'retrod[ui]'"
INSTALL_HINT = f"the web UI needs Starlette and uvicorn, an optional extra: {EXTRA}"


def installed() -> bool:
    try:
        import starlette.applications  # noqa: F401 - only whether they import
        import uvicorn  # noqa: F401
    except ImportError:
        return False
    return True
