"""The web UI's Starlette app: the routes, and the guard every request passes first.

Read-only: GET routes only, and none writes (the Markdown download renders the report; it does
not save it or fill the user's tables as `retrod report` does). The guard: the Host header must
name the loopback address or `localhost` with this port (a DNS-rebinding page names its own host),
and every request must carry the per-user token as `?token=` (the URL `retrod ui` prints), or
the cookie of a session a page asked with it began (sessions.py; HttpOnly, SameSite=Strict). No
CORS headers: another origin's page can neither read an answer nor send the cookie.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from hmac import compare_digest
from importlib.metadata import version
from urllib.parse import quote, urlencode

import psycopg
import structlog
from psycopg_pool import ConnectionPool
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders, QueryParams
from starlette.requests import HTTPConnection, Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..basics.errors import UserError
from ..report import markdown
from ..report.prices import Prices
from ..report.prices import load as load_prices
from ..settings import Settings
from . import data, pages
from .hub import Full, Hub
from .markup import Html
from .sessions import SESSION_S, Sessions

log = structlog.get_logger(__name__)

KEEPALIVE_S = 15.0  # a comment line on a quiet event stream, so that idle connections stay open
# Pages may run their own scripts and styles only (the chart's bars are sized in style attributes).
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


class NotFound(UserError):
    """No session by that uuid, or a uuid's start that names several."""

    status = 404


def cookie_name(port: int) -> str:
    """Per port: cookies ignore ports, and two users' UIs on one machine must not overwrite each other's."""
    return f"retrod_ui_{port}"


def build(pool: ConnectionPool, settings: Settings, token: str, port: int, hub: Hub) -> Starlette:
    def prices() -> Prices:
        return load_prices(settings.prices)  # read per request, as each report reads it

    @contextmanager
    def connection() -> Iterator[psycopg.Connection]:
        with pool.connection() as conn:
            yield conn

    def resolved(conn: psycopg.Connection, uuid: str) -> str:
        if "\x00" in uuid:  # no session's, and no text PostgreSQL takes
            raise NotFound(f"no session {uuid!r}")
        found = data.find(conn, uuid)
        if uuid in found:
            return uuid
        if len(found) != 1:
            raise NotFound(f"no session {uuid}" if not found else f"{uuid} names several sessions")
        return found[0]

    def session_report(request: Request) -> tuple[str, dict]:
        uuid = request.path_params["uuid"]
        with connection() as conn:
            full = resolved(conn, uuid)
            member = data.ReportQuery.parse(request.query_params).member
            return full, data.session(conn, full, settings.away_after_s, prices(), member)

    def sessions_page(request: Request, twin: str) -> Response:
        query = data.SessionQuery.parse(request.query_params)
        with connection() as conn:
            listing = data.sessions(conn, query, prices())
            choices = data.choices(conn)
        return HTMLResponse(pages.sessions_page(listing, choices, query, alternate=twin))

    def sessions_api(request: Request) -> Response:
        query = data.SessionQuery.parse(request.query_params)
        with connection() as conn:
            return JSONResponse(data.sessions(conn, query, prices()))

    def session_page(request: Request, twin: str) -> Response:
        uuid, report = session_report(request)
        if uuid != request.path_params["uuid"]:  # a uuid's start: the page's own address
            return RedirectResponse(f"/sessions/{quote(uuid)}", 303)
        return HTMLResponse(pages.session_page(report, alternate=twin))

    def session_api(request: Request) -> Response:
        _uuid, report = session_report(request)
        return JSONResponse(report)

    def session_markdown(request: Request) -> Response:
        _uuid, report = session_report(request)
        return Response(markdown.render(report), media_type="text/markdown; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{_file(report, "md")}"'})

    def session_html(request: Request) -> Response:
        _uuid, report = session_report(request)
        return HTMLResponse(pages.session_page(report, standalone=True),
                            headers={"Content-Disposition": f'attachment; filename="{_file(report, "html")}"'})

    def trend_figures(conn: psycopg.Connection, query: data.TrendsQuery) -> dict:
        return data.trends(conn, query, prices(), settings.away_after_s)

    def trends_page(request: Request, twin: str) -> Response:
        query = data.TrendsQuery.parse(request.query_params)
        with connection() as conn:
            costliest = data.costliest(conn, query, prices())
            figures = trend_figures(conn, query)
            return HTMLResponse(pages.trends_page(figures, costliest, data.short_names(data.projects(conn)), query,
                                                  data.machines(conn), alternate=twin))

    def trends_api(request: Request) -> Response:
        query = data.TrendsQuery.parse(request.query_params)
        with connection() as conn:
            return Response(data.trends_json(conn, query, prices(), settings.away_after_s),
                            media_type="application/json")

    def lessons_page(request: Request, twin: str) -> Response:
        project = data.LessonsQuery.parse(request.query_params).project
        with connection() as conn:
            found = data.lessons(conn, project, prices(), settings.away_after_s)
            # without a project, the projects to choose from: no twin (/api/lessons asks for one)
            return HTMLResponse(pages.lessons_page(found, data.projects(conn), alternate=twin if found else None))

    def lessons_api(request: Request) -> Response:
        project = data.LessonsQuery.parse(request.query_params).project
        with connection() as conn:
            found = data.lessons(conn, project, prices(), settings.away_after_s)
        if found is None:
            raise data.QueryError("ask for one project: /api/lessons?project=…")
        return JSONResponse(found)

    def live_page(_request: Request, twin: str) -> Response:
        with connection() as conn:
            return HTMLResponse(pages.live_page(data.live(conn, None, prices()), alternate=twin))

    def live_api(_request: Request) -> Response:
        with connection() as conn:
            return JSONResponse({"sessions": data.live(conn, None, prices())})

    def ping(_request: Request) -> Response:
        return JSONResponse({"retrod": version("retrod")})

    async def events(request: Request) -> Response:
        try:
            queue = hub.subscribe()
        except Full as exc:
            return _refusal(503, str(exc), html=False)

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n: following\n\n"
                while True:
                    try:
                        text = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if text is None:  # the server is stopping
                        return
                    yield f"event: figures\ndata: {text}\n\n"
            finally:
                hub.unsubscribe(queue)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await hub.start()
        try:
            yield
        finally:
            await hub.stop()

    # Each page beside its /api/ twin: the twin answers the figures the page shows, as JSON, for
    # the same parameters, and the page links it (rel="alternate").
    twins = [
        ("/", sessions_page, "/api/sessions", sessions_api),
        ("/trends", trends_page, "/api/trends", trends_api),
        ("/live", live_page, "/api/live", live_api),
        ("/lessons", lessons_page, "/api/lessons", lessons_api),
        ("/sessions/{uuid}", session_page, "/api/sessions/{uuid}", session_api),
    ]
    routes = [
        *(Route(path, _errors(_linked(page, twin), html=True)) for path, page, twin, _api in twins),
        *(Route(twin, _errors(api)) for _path, _page, twin, api in twins),
        Route("/sessions/{uuid}/report.md", _errors(session_markdown, html=True)),
        Route("/sessions/{uuid}/report.html", _errors(session_html, html=True)),
        Route("/api/ping", ping),
        Route("/api/events", events),
        Mount("/static", StaticFiles(packages=[("retrod.ui", "static")]), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan, middleware=[])  # the guard wraps it (guarded)


def live_figures(pool: ConnectionPool, settings: Settings) -> Callable[[set[str]], str]:
    """What the hub sends every live page when sessions change: their rows, and each row as the
    page shows it (rendered once here, not by each page's script)."""
    def figures(sessions: set[str]) -> str:
        with pool.connection() as conn:
            rows = data.live(conn, sessions, load_prices(settings.prices))
        return json.dumps({"sessions": rows, "rows_html": {row["uuid"]: pages.live_row(row) for row in rows}},
                          separators=(",", ":"))
    return figures


def _file(report: dict, extension: str) -> str:
    session = report["session"]
    return f"{(session['started_at'] or 'undated')[:10]}-{session['uuid'][:8]}.{extension}"


def _linked(page: Callable[[Request, str], Response], twin: str) -> Callable[[Request], Response]:
    """The page, told the address of its twin: `twin` with the page's own path parameters and
    query (less a token), so that it answers the figures of what the page shows."""
    def endpoint(request: Request) -> Response:
        path = twin.format(**{k: quote(str(v), safe="") for k, v in request.path_params.items()})
        query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        return page(request, path + (f"?{urlencode(query)}" if query else ""))
    return endpoint


def _errors(endpoint: Callable[[Request], Response], html: bool = False) -> Callable[[Request], Response]:
    """A refused request as one clear sentence: the user's mistake (basics/errors.py) with its own
    status (400 for a parameter that is not one, 404 for no such session), 503 when the database
    is away (the page says so; the daemon retries)."""
    def guarded(request: Request) -> Response:
        try:
            return endpoint(request)
        except UserError as exc:  # its own status: 400, or 404 for a session that is not there
            return _refusal(exc.status, f"{exc.prefix}{exc}", html)
        except psycopg.Error as exc:
            return _refusal(503, f"the database is not reachable ({_one_line(exc)}); try again", html)
        except Exception as exc:  # noqa: BLE001 - a bug: one line here and in the log, never a traceback
            log.warning("web UI request failed", path=request.url.path, error=f"{type(exc).__name__}: {_one_line(exc)}")
            return _refusal(500, f"internal error ({type(exc).__name__}): {_one_line(exc)}", html)
    return guarded


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _refusal(status: int, message: str, html: bool) -> Response:
    if html:
        return HTMLResponse(pages.error_page(status, message), status_code=status)
    return JSONResponse({"error": message}, status_code=status)


class Guard:
    """Host check, then the token (query) or a session (cookie), then the app; security headers
    on every answer."""

    def __init__(self, app: ASGIApp, token: str, port: int, sessions: Sessions | None = None) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.sessions = sessions or Sessions()
        self.cookie = cookie_name(port)
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        conn = HTTPConnection(scope)
        send = _headers(send, time.perf_counter())
        host = (conn.headers.get("host") or "").lower()
        if host not in self.hosts:
            await PlainTextResponse(f"403: this server answers only at http://127.0.0.1:{self.port}/ "
                                    f"(the Host header named {host or 'nothing'})\n", 403)(scope, receive, send)
            return
        given = conn.query_params.get("token")
        if given is not None:
            if not compare_digest(given.encode(), self.token.encode()):
                await self._refuse(scope, receive, send, "the token in the address is not this user's")
                return
            if scope["method"] in ("GET", "HEAD") and not scope["path"].startswith("/api/"):
                # A page: logged in. A session of this browser's in the cookie, never the token,
                # and on to the same page without the token (out of the address bar; a refresh
                # replaces the history's entry). Not a redirect: one continues the navigation
                # that brought the token, which is another site's when `retrod ui`'s file opened
                # it, and a SameSite=Strict cookie is not sent on it; the refresh is this page's own.
                target = _same_page(host, scope["raw_path"], conn.query_params)
                response: Response = HTMLResponse(_ONWARD.format(target=target))
                response.set_cookie(self.cookie, self.sessions.new(), max_age=SESSION_S, httponly=True,
                                    samesite="strict", path="/")
                await response(scope, receive, send)
                return
            await self.app(scope, receive, send)  # a script's request: answered, no session made
            return
        session = conn.cookies.get(self.cookie)
        if session and self.sessions.valid(session):
            await self.app(scope, receive, send)
            return
        await self._refuse(scope, receive, send, f"your session has ended (after {SESSION_S // 3600} hours, or the "
                           "daemon restarted)" if session else "no token")

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, why: str) -> None:
        await PlainTextResponse(f"401: {why}. Open the address `retrod ui` prints: it carries your token.\n",
                                401)(scope, receive, send)


_ONWARD = Html('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
               '<meta http-equiv="refresh" content="0; url={target}">\n<link rel="icon" href="data:,">\n'
               '<title>retrod</title></head>\n'
               '<body><p>Logged in. <a href="{target}">Go on</a>.</p></body></html>\n')


def _same_page(host: str, raw_path: bytes, query: QueryParams) -> str:
    """The path as asked, with `query` less the token, at this server's own address: written
    whole, so that a path such as `//evil.example/` cannot make the login lead to another host
    (an address starting `//` names one to a browser)."""
    rest = [(k, v) for k, v in query.multi_items() if k != "token"]
    path = quote(raw_path.decode("latin-1"), safe="/%:@!$&'()*+,;=-._~")  # its escapes kept as sent
    return f"http://{host}{path}" + (f"?{urlencode(rest)}" if rest else "")


def _headers(send: Send, started: float) -> Send:
    """Headers every answer carries: no sniffing, no framing, no referrer, no caching; a policy
    that lets pages run only their own scripts; and the server's time to the answer
    (Server-Timing, which the benchmark reads)."""
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
            headers["X-Content-Type-Options"] = "nosniff"
            headers["X-Frame-Options"] = "DENY"
            headers["Referrer-Policy"] = "no-referrer"
            headers["Content-Security-Policy"] = CSP
            headers.setdefault("Cache-Control", "no-store")
        await send(message)
    return sending


def guarded(pool: ConnectionPool, settings: Settings, token: str, port: int, hub: Hub) -> ASGIApp:
    return Guard(build(pool, settings, token, port, hub), token, port)

