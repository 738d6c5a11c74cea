"""HTML escapes by default (issue 35): a session whose every text a transcript, a phase's author
or the user's tooling can put on a page holds markup — `<script>alert(…)</script>`, an attribute
break `"><img src=x onerror=…>`, a single-quoted one, a comment opener — and every page that shows
it, and the HTML report, shows it as text: no element, attribute or script of its own, and each
hostile string found, escaped, where its field is shown. The JSON a page carries for its script
cannot close its element or open a comment. In a real browser: no dialog opens.

Pages are built from `ui/markup.Html` (MarkupSafe's `Markup`): a value goes in through `format`,
`join` or `+` and is escaped unless it is Html itself. `test_no_markup_is_made_from_an_fstring`
holds the pages to that: no f-string or %-string writes markup, and Html is made only of literals.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from conftest import fresh_database
from helpers import HOST, ingest
from plan_transcripts import BASE, Transcript, ts
from retrod import tracking
from retrod.report.prices import DEFAULT
from retrod.resolve import project_slugs
from retrod.settings import Settings
from retrod.ui import data, pages, secret
from retrod.ui.markup import Html, e
from retrod.ui.server import UiServer
from test_ui import free_port, get, login
from test_ui_browser import browser  # noqa: F401 - the fixture

SESSION = "5e55a0e0-0000-4000-8000-0000000e5cae"
OLD_SESSION = "5e55a0e0-0000-4000-8000-0000000e5caf"  # an earlier session of the project: the lessons' before


def evil(field: str) -> str:
    """Markup in each form an escape must stop: an element, a double- and a single-quoted attribute's
    end, a comment opener. `field` names the field, so a test can find each one on the page."""
    return f"<script>alert('{field}')</script>\"><img src=x onerror=alert('{field}')>'><u onmouseover=x><!--{field}"


def slashless(field: str) -> str:
    """For a file's name (an agent's id): no `/`."""
    return f"\"><img src=x onerror=alert('{field}')><u onclick=x>'<!--{field}"


CWD = "/w/" + slashless("cwd")
MODEL = "claude-" + evil("model")
AGENT = "a" + slashless("agent")
OLD_ID = "not-a-uuid" + slashless("session-id")  # a 2.0.x agent file: any sessionId names a session
def cached(session: str, key: str, seconds: float, read: int, written: int, *, model: str = MODEL,
           reason: object = None, agent: str | None = None) -> dict:
    """A request reading `read` and writing `written` prompt-cache tokens (a miss when it writes
    again what was read before: accounting.md §2.8)."""
    message = {"id": key, "model": model, "content": [{"type": "text", "text": "ok"}],
               "usage": {"input_tokens": 3, "output_tokens": 10, "cache_read_input_tokens": read,
                         "cache_creation_input_tokens": written,
                         "cache_creation": {"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": 0}}}
    if reason is not None:
        message["diagnostics"] = {"cache_miss_reason": reason}
    line = {"type": "assistant", "sessionId": session, "timestamp": ts(seconds), "message": message}
    if agent is not None:
        line |= {"isSidechain": True, "agentId": agent}
    return line


def write_transcripts(projects: Path) -> None:
    t = Transcript(SESSION).user(0, evil("prompt"))
    path = "/w/" + evil("path")
    t.call(10, "Read", {"file_path": path}).call(20, "Read", {"file_path": path})  # a re-read: its path an example
    t.call(30, "Bash", {"command": "echo " + evil("command"), "description": evil("bash-description")},
           evil("error"), is_error=True)
    t.call(40, "Bash", {"command": "echo " + evil("command"), "description": evil("bash-description")},
           evil("error"), is_error=True)
    t.call(50, evil("tool"), {"x": evil("tool-input")})
    t.create(70, evil("task-create"), "1")
    t.call(80, "TaskUpdate", {"taskId": "1", "status": "in_progress"})
    t.call(90, "Task", {"description": evil("subagent-description"), "subagent_type": evil("subagent-type"),
                        "prompt": "p"}, outcome={"agentId": AGENT})
    t.lines.append(cached(SESSION, "msg_c1", 110, 0, 20_000))
    t.lines.append(cached(SESSION, "msg_c2", 120, 0, 21_000, reason={"type": evil("miss-reason")}))
    for line in t.lines:
        line["cwd"] = CWD
        if line["type"] == "assistant":
            line["message"]["model"] = MODEL
    slug = project_slugs(CWD)[0]
    t.write(projects, slug)
    sub = projects / slug / SESSION / "subagents" / f"agent-{AGENT}.jsonl"
    sub.parent.mkdir(parents=True)
    sub.write_text("".join(json.dumps(line) + "\n" for line in (
        cached(SESSION, "msg_s1", 95, 0, 9_000, agent=AGENT),
        cached(SESSION, "msg_s2", 99, 0, 9_500, agent=AGENT, reason=evil("agent-miss-reason")))))
    old = Transcript(OLD_SESSION).user(-86_400)
    old.call(-86_390, "Read", {"file_path": path}).call(-86_380, "Read", {"file_path": path})  # the lessons' example
    old.todos(-86_370, (evil("todo"), "in_progress"), (evil("todo-pending"), "pending"))  # the other family
    old.todos(-86_360, (evil("todo"), "completed"), (evil("todo-pending"), "pending"))
    for line in old.lines:
        line["cwd"] = CWD
    old.write(projects, slug)
    (projects / "-ids").mkdir()
    (projects / "-ids" / "agent-1.jsonl").write_text(json.dumps(
        {"type": "assistant", "sessionId": OLD_ID, "timestamp": ts(-3600), "cwd": CWD,
         "message": {"id": "m-old", "model": MODEL, "usage": {"output_tokens": 1}}}) + "\n")


# The fields, each with the pages that show it ("report": the session's page and the HTML report).
SHOWN = {
    "description": ("sessions", "report", "trends"), "cwd": ("sessions", "report", "lessons"),
    "task": ("report", "lessons"), "phase": ("report", "lessons"), "lesson": ("report", "lessons"),
    "verdict": ("report",), "model": ("sessions", "report", "trends-model"), "tool": ("report",),
    "path": ("report",), "subagent-description": ("report",), "subagent-type": ("report",),
    "agent": ("report",), "task-create": ("report",), "todo": ("report-old",), "todo-pending": ("report-old",),
    "session-id": ("sessions",), "machine": ("sessions", "trends-machine"),
}
MACHINE = "m" + slashless("machine")


@pytest.fixture(scope="module")
def hostile(pg_cluster, tmp_path_factory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("escaping")
    projects = tmp / "projects"
    write_transcripts(projects)
    with fresh_database(pg_cluster) as url:
        ingest(url, [projects])
        other = tmp / "other"  # a second machine's copy of one file (accounting.md §4): its host id is listed
        (other / "-w-x").mkdir(parents=True)
        (other / "-w-x" / f"{OLD_SESSION}.jsonl").write_bytes(
            next((projects / project_slugs(CWD)[0]).glob(f"{OLD_SESSION}.jsonl")).read_bytes())
        ingest(url, [other], host=MACHINE)
        with psycopg.connect(url) as conn:
            tracking.track_start(conn, SESSION, evil("description"))
            tracking.phase_log(conn, SESSION, evil("task"), evil("phase"), BASE, BASE + timedelta(seconds=200),
                               "avoidable_waste", tracking.PhaseNotes(
                                   actions=evil("actions"), subagents=evil("notes-subagents"),
                                   useful_info=evil("useful-info"), lessons=evil("lesson"), notes=evil("notes")))
            tracking.phase_log(conn, SESSION, "second", "p2", BASE + timedelta(seconds=200),
                               BASE + timedelta(seconds=400), "exploratory_waste", tracking.PhaseNotes())
            # the user's own tooling writes the table directly: any verdict
            conn.execute("UPDATE cc_session_phases SET verdict = %s WHERE task = 'second'", (evil("verdict"),))
            conn.execute("INSERT INTO retrod.briefs (session_uuid, source, project, text, patterns)"
                         " VALUES (%s, 'startup', %s, %s, %s)",
                         (SESSION, CWD, evil("brief"), json.dumps([{"pattern": "re_read", "mode": "new"}])))
        yield {"url": url, "tmp": tmp}


@pytest.fixture(scope="module")
def served(hostile: dict) -> Iterator[tuple[UiServer, dict[str, str]]]:
    data_dir = hostile["tmp"] / "ui-data"
    settings = Settings(database_url=hostile["url"], data_dir=data_dir, ui_port=free_port())
    with ConnectionPool(hostile["url"], min_size=1, max_size=4) as pool, UiServer(pool, settings) as server:
        token = secret.read(data_dir) or ""
        yield server, {"token": token, **login(server.port, token)}


class Elements(HTMLParser):
    """What a page is made of: its elements and their attributes, each script element's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.comments: list[str] = []
        self.text: list[str] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def handle_data(self, text: str) -> None:
        if self._script is not None:
            attrs, before = self.scripts[-1]
            self.scripts[-1] = (attrs, before + text)
        else:
            self.text.append(text)

    def handle_comment(self, text: str) -> None:
        self.comments.append(text)


def parsed(page: str) -> Elements:
    found = Elements()
    found.feed(page)
    found.close()
    return found


ASSETS = {name: (pages.STATIC / name).read_text(encoding="utf-8") for name in pages.ASSETS_JS}


def assert_inert(page: str, where: str) -> Elements:
    """The page is made of retrod's own markup only: no image, no event handler, no comment, and
    its scripts are its own (the data block, parsed whole, and its assets, by reference or whole)."""
    found = parsed(page)
    assert found.tags and found.tags[0][0] == "html", where
    assert not [t for t, _ in found.tags if t in ("img", "svg", "u", "iframe")], where
    handlers = [(t, a) for t, attrs in found.tags for a in attrs if a.startswith("on")]
    assert handlers == [], where
    assert found.comments == [], where
    for attrs, text in found.scripts:
        if attrs.get("type") == "application/json":
            assert attrs.get("id") == "retrod-data", where
            json.loads(text)  # the whole block is one JSON value: nothing closed the element early
            assert "</" not in text and "<!--" not in text and "<" not in text, where
        elif attrs.get("src"):
            assert attrs["src"] in {f"/static/{name}" for name in pages.ASSETS_JS} and not text, where
        else:
            assert text in {s.replace("</script", "<\\/script") for s in ASSETS.values()}, where
    assert "alert(" not in " ".join(text for attrs, text in found.scripts if attrs.get("type") != "application/json")
    return found


def shown_fields(found: Elements) -> set[str]:
    """The fields whose hostile text the page shows as text, whole (in its text or attributes)."""
    texts = " ".join(found.text) + " " + " ".join(
        v or "" for _t, attrs in found.tags for v in attrs.values())
    return {field for field in (*SHOWN, "miss-reason", "agent-miss-reason", "brief", "prompt", "error")
            if (evil(field) if field not in ("cwd", "agent", "session-id", "machine") else slashless(field))
            in texts}


def fetch(served: tuple[UiServer, dict[str, str]], path: str) -> str:
    server, cookie = served
    status, headers, body = get(server.port, path, {k: v for k, v in cookie.items() if k != "token"})
    assert status == 200, (path, status, body[:300])
    assert headers["Content-Type"].startswith("text/html"), path
    return body.decode()


PAGES = {"sessions": "/", "sessions-filtered": "/?model={model}&machine={machine}&q=%3Cscript%3E",
         "report": f"/sessions/{SESSION}", "report-old": f"/sessions/{OLD_SESSION}",
         "trends": "/trends?since=2026-01-01&by=day",
         "trends-project": "/trends?since=2026-01-01&split=project",
         "trends-model": "/trends?since=2026-01-01&split=model",
         "trends-machine": "/trends?since=2026-01-01&split=machine", "lessons": "/lessons?project={project}",
         "lessons-all": "/lessons", "live": "/live", "error": "/sessions/{session_id}"}


def page_paths() -> dict[str, str]:
    from urllib.parse import quote

    return {name: path.format(project=quote(CWD, safe=""), model=quote(MODEL, safe=""), machine=quote(MACHINE, safe=""),
                              session_id=quote(OLD_ID + "<script>x", safe=""))
            for name, path in PAGES.items()}


def test_every_page_shows_every_hostile_text_as_text(hostile: dict, served) -> None:
    with psycopg.connect(hostile["url"]) as conn:  # each field reached the figures the pages show
        report = data.session(conn, SESSION)
        old = data.session(conn, OLD_SESSION)
        listed = data.sessions(conn, data.SessionQuery(per_page=data.PER_PAGE_MAX))
        machines = data.machines(conn)
    everything = "\n".join(strings([report, old, listed]))
    for field in (*SHOWN, "miss-reason", "agent-miss-reason"):
        if field not in ("machine", "session-id"):
            shown = evil(field) if field not in ("cwd", "agent") else slashless(field)
            assert shown in everything, field
    assert OLD_ID in everything and MACHINE in machines
    seen: dict[str, set[str]] = {}
    for name, path in page_paths().items():
        page = fetch(served, path) if name != "error" else _error_page(served, path)
        seen[name] = shown_fields(assert_inert(page, name))
    # the session's page's own file, as `/sessions/…/report.html` gives it
    seen["report-file"] = shown_fields(assert_inert(fetch(served, f"/sessions/{SESSION}/report.html"), "report-file"))
    assert seen["report-file"] == seen["report"]
    for field, where in SHOWN.items():
        for name in where:
            assert field in seen[name], (field, name, seen[name])
    assert "<script>x" in " ".join(parsed(_error_page(served, page_paths()["error"])).text)  # the 404's own words


def strings(value: object) -> Iterator[str]:
    """Every string in a JSON-able value, its keys' too."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings(v)


def _error_page(served, path: str) -> str:
    server, cookie = served
    status, _headers, body = get(server.port, path, {k: v for k, v in cookie.items() if k != "token"})
    assert status == 404
    return body.decode()


def test_live_rows_and_a_lessons_example_are_escaped(hostile: dict) -> None:
    """The live page's rows (which the event stream also sends, as pages.live_row writes them),
    and a pattern's example on the lessons page (a command or path from a transcript)."""
    with psycopg.connect(hostile["url"]) as conn:
        rows = data.live(conn, {SESSION, OLD_ID})
        found = data.lessons(conn, CWD, DEFAULT, 1800.0)
        projects = data.projects(conn)
    assert {r["uuid"] for r in rows} == {SESSION, OLD_ID}
    for row in rows:
        assert_inert(f"<html><table>{pages.live_row(row)}</table></html>", row["uuid"])
    page = pages.live_page(rows)
    assert {"description", "cwd", "session-id"} <= shown_fields(assert_inert(page, "live"))
    assert found is not None and found["patterns"]
    found["patterns"][0]["example"] = "echo " + evil("path")
    assert "path" in shown_fields(assert_inert(pages.lessons_page(found, projects), "lessons"))


def test_the_html_report_is_escaped_and_one_file(hostile: dict) -> None:
    tmp = hostile["tmp"]
    env = {"PATH": "/usr/bin:/bin", "RETROD_DATABASE_URL": hostile["url"], "RETROD_PROJECTS_DIR": str(tmp / "none"),
           "RETROD_HOST_ID": HOST, "RETROD_DATA_DIR": str(tmp / "data"), "RETROD_REPORTS_DIR": str(tmp / "reports"),
           "HOME": str(tmp / "home")}
    done = subprocess.run([sys.executable, "-m", "retrod", "report", SESSION, "--no-save", "--format", "html",
                           "--output", "-"], env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    page = done.stdout.decode()
    found = assert_inert(page, "report --format html")
    assert {f for f, where in SHOWN.items() if "report" in where} <= shown_fields(found)
    # one file: nothing it would fetch
    assert not [(t, a) for t, attrs in found.tags for a, v in attrs.items() if a in ("src", "href")
                and v and not v.startswith(("data:", "#"))], "the file links out"
    assert not [t for t, attrs in found.tags if t == "link" and attrs.get("rel") == "stylesheet"]


def test_data_for_the_pages_script_cannot_close_its_element() -> None:
    for hostile_text in ("</script><script>alert(1)</script>", "<!--<script>", "</SCRIPT >", "\u2028<\u2029"):
        block = str(pages._data({"x": hostile_text, hostile_text: [hostile_text]}))
        found = parsed(f"<html>{block}</html>")
        assert len(found.scripts) == 1 and found.comments == []
        _attrs, text = found.scripts[0]
        assert json.loads(text) == {"x": hostile_text, hostile_text: [hostile_text]}
        assert "<" not in text


def test_html_escapes_what_it_is_given_unless_it_is_html() -> None:
    hostile_text = evil("x")
    assert Html("<td>{}</td>").format(hostile_text) == f"<td>{e(hostile_text)}</td>"
    assert "<script>" not in Html("<p>") + hostile_text
    assert "<script>" not in Html("").join([hostile_text, Html("<br>")])
    assert Html("<p>{}</p>").format(Html("<b>x</b>")) == "<p><b>x</b></p>"  # Html is kept as it is
    assert Html("{}").format("a\u202eb\nc") == "a b c"  # on one line, no override (stored_text.flat)
    assert Html('<a title="{}">').format("\"'&") == '<a title="&quot;&#x27;&amp;">'
    # a missing value shows as nothing, as e(None) does, never as the text "None"
    assert Html("<td>{}</td><td>{x}</td>").format(None, x=None) == "<td></td><td></td>" == f"<td>{e(None)}</td>" * 2


def test_no_markup_is_made_from_an_fstring() -> None:
    """The pages write markup only as Html literals: an f-string or %-string holding a tag would
    escape nothing it is given, and Html made of anything but a literal would vouch for it."""
    root = Path(pages.__file__).parent
    found = []
    for module in ("pages.py", "app.py"):
        tree = ast.parse((root / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if re.search(r"<[a-zA-Z/!]", text):
                    found.append(f"{module}:{node.lineno}: an f-string writes markup")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Html", "Markup")
                    and not (len(node.args) == 1 and isinstance(node.args[0], ast.Constant))):
                found.append(f"{module}:{node.lineno}: Html of something not a literal")
    assert found == [f"pages.py:{n}: Html of something not a literal" for n in _vouched(root / "pages.py")]


def _vouched(path: Path) -> list[int]:
    """The lines marked `# vouched:` in pages.py (the packaged assets and the escaped JSON): the
    only Html made of a value."""
    return [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "# vouched:" in line]


def test_no_page_opens_a_dialog_in_a_browser(browser, served, tmp_path: Path) -> None:  # noqa: F811
    """Each page as served (its scripts running: the chart's tips, the live rows), each page's
    HTML without the server's Content-Security-Policy (which would also stop an inline script),
    and the HTML report opened as a file: no dialog, and no element the hostile text would make."""
    server, cookie = served
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    base = f"http://127.0.0.1:{server.port}"
    injected = "img, svg, u, iframe, [onerror], [onload], [onclick], [onmouseover]"

    def sweep(where: str) -> None:
        assert tab.eval_on_selector_all(injected, "found => found.length") == 0, where
        for chart in tab.query_selector_all(".chart"):  # point along the chart: its tips are hostile text
            box = chart.bounding_box()
            for k in range(1, 40):
                if box:
                    tab.mouse.move(box["x"] + box["width"] * k / 40, box["y"] + box["height"] / 2)
        assert dialogs == [], where

    try:
        tab.goto(f"{base}/?token={cookie['token']}")
        tab.wait_for_url(f"{base}/")
        for name, path in page_paths().items():
            tab.goto(base + path)
            sweep(name)
            html_text = fetch(served, path) if name != "error" else _error_page(served, path)
            tab.goto("about:blank")  # a document of its own: the served page's policy does not carry over
            tab.set_content(html_text, wait_until="domcontentloaded")
            sweep(f"{name} without its CSP")
        saved = tmp_path / "report.html"
        saved.write_text(fetch(served, f"/sessions/{SESSION}/report.html"), encoding="utf-8")
        tab.goto(saved.as_uri())
        tab.wait_for_selector("#timeline canvas")
        sweep("the HTML report")
    finally:
        context.close()
