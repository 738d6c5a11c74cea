"""One base for the user's mistakes (basics/errors.py): every surface answers a `UserError` by
that class alone — the command line (and the daemon answering for it) exits 2 with one line, the
web UI answers the class's status, MCP a tool error — for every subclass in the code, and for a
class no module knows (so that no list of classes anywhere decides it)."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError
from starlette.requests import Request
from starlette.responses import Response

import retrod
from retrod.basics.errors import UserError
from retrod.cli import arguments, commands
from retrod.fastpath.server import ReportServer
from retrod.mcp.server import server as mcp_server
from retrod.report import retrospective
from retrod.settings import Settings
from retrod.statusline import served as statusline_served
from retrod.ui import app

for _module in pkgutil.walk_packages(retrod.__path__, "retrod."):
    if _module.name != "retrod.__main__":  # (it runs the command line)
        importlib.import_module(_module.name)


def subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *subclasses(direct))]


class NewMistake(UserError):
    """A mistake added after every surface was written: no surface names it."""


class NewAbsence(UserError):
    status = 404
    prefix = "elsewhere: "


IN_THE_CODE = [cls for cls in subclasses(UserError) if cls.__module__.startswith("retrod.")]
EVERY = [*IN_THE_CODE, NewMistake, NewAbsence]
MESSAGE = "no such  thing\nhere"  # spaces and a line break: every surface says it on one line
ONE_LINE = "no such thing here"


def test_every_mistake_of_the_users_derives_from_the_one_base() -> None:
    """The user's mistakes of every room, and none of the failures of what retrod uses (exit 1)."""
    names = {cls.__name__ for cls in IN_THE_CODE}
    assert {"TrackingError", "SkillsError", "SessionError", "ProjectError", "OutputError", "PricesError",
            "TrendsError", "MemberError", "TeamError", "SettingsError", "StatuslineError", "QueryError",
            "UiError", "NotFound"} <= names
    assert not names & {"ClusterError", "ServiceError", "MigrationRefused", "TokenFileError", "LinkRefused",
                        "AlreadyRunning"}


def test_a_mistake_keeps_the_builtin_error_code_may_catch() -> None:
    """Code that catches ValueError (a time or a date parsed) still catches the mistakes it did."""
    from retrod.report.prices import PricesError
    from retrod.tracking import TrackingError
    from retrod.ui.data import QueryError

    assert all(issubclass(cls, ValueError) for cls in (TrackingError, PricesError, QueryError))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", reports_dir=tmp_path / "reports")


def raising(exc: BaseException):
    def work(*_args: object, **_kwargs: object):
        raise exc
    return work


@pytest.mark.parametrize("cls", EVERY, ids=lambda cls: cls.__name__)
def test_the_command_line_exits_2_with_one_line(cls: type[UserError], settings: Settings, monkeypatch,
                                                capsys) -> None:
    monkeypatch.setitem(commands.COMMANDS, "status", raising(cls(MESSAGE)))
    code = commands.execute(arguments.parser().parse_args(["status"]), settings=settings)
    assert (code, capsys.readouterr().err) == (2, f"retrod: error: {cls.prefix}{ONE_LINE}\n")


@pytest.mark.parametrize(("exc", "line"), [
    (RuntimeError(MESSAGE), f"retrod: error: {ONE_LINE}\n"),
    (OSError(MESSAGE), f"retrod: error: {ONE_LINE}\n"),
    (KeyError("x"), "retrod: error: internal error (KeyError): 'x'\n"),
    (ValueError(MESSAGE), f"retrod: error: internal error (ValueError): {ONE_LINE}\n"),
])
def test_a_failure_or_a_bug_is_exit_1_not_the_users(exc: Exception, line: str, settings: Settings, monkeypatch,
                                                    capsys) -> None:
    """A ValueError that is no UserError is a bug: the user has nothing to fix."""
    monkeypatch.setitem(commands.COMMANDS, "status", raising(exc))
    code = commands.execute(arguments.parser().parse_args(["status"]), settings=settings)
    assert (code, capsys.readouterr().err) == (1, line)


@pytest.mark.parametrize("cls", EVERY, ids=lambda cls: cls.__name__)
def test_the_web_ui_answers_the_mistakes_own_status(cls: type[UserError]) -> None:
    request = Request({"type": "http", "method": "GET", "path": "/api/x", "headers": [], "query_string": b""})

    def endpoint(_request: Request) -> Response:
        raise cls(MESSAGE)

    answer = app._errors(endpoint)(request)
    assert (answer.status_code, json.loads(bytes(answer.body))) == (cls.status, {"error": cls.prefix + MESSAGE})
    page = app._errors(endpoint, html=True)(request)
    assert page.status_code == cls.status and ONE_LINE.split()[-1] in bytes(page.body).decode()
    assert page.headers["content-type"].startswith("text/html")


def test_a_session_not_found_is_404_and_a_bad_parameter_400() -> None:
    from retrod.ui.data import QueryError

    assert (app.NotFound.status, QueryError.status) == (404, 400)


class _Failing:
    """Every tool's work raises `exc`."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __getattr__(self, _name: str):
        return raising(self.exc)


@pytest.mark.parametrize("cls", EVERY, ids=lambda cls: cls.__name__)
def test_mcp_answers_a_tool_error_of_one_sentence(cls: type[UserError]) -> None:
    async def call() -> str:
        with pytest.raises(ToolError) as refused:
            await mcp_server(_Failing(cls(MESSAGE))).call_tool("sessions", {})  # type: ignore[arg-type]
        return str(refused.value)

    assert anyio.run(call) == f"Error executing tool sessions: {cls.prefix}{ONE_LINE}"


@pytest.mark.parametrize("cls", EVERY, ids=lambda cls: cls.__name__)
def test_the_daemon_answers_a_report_and_the_status_line_as_the_command_would(
        cls: type[UserError], settings: Settings, monkeypatch) -> None:
    monkeypatch.setattr(retrospective, "check_output", raising(cls(MESSAGE)))
    said = f"retrod: error: {cls.prefix}{ONE_LINE}\n"
    assert ReportServer(None, settings).answer({"database_url": settings.database_url}) == (  # type: ignore[arg-type]
        "2", said, "")
    monkeypatch.setattr(statusline_served, "load_prices", raising(cls(MESSAGE)))
    assert statusline_served.StatuslineAnswer(None, settings)({}) == ("2", said, "")  # type: ignore[arg-type]
