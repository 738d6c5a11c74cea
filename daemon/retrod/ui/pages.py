"""The web UI's pages as HTML, rendered here from the figures `data` returns: small functions,
a little vanilla JavaScript (static/app.js) for the chart and the live page.

Every fragment is `Html` (markup.py): markup is written only as literals, and every value goes in
through `format`, `join` or `+`, which escape it unless it is Html itself — so a text is escaped
whether or not its line remembers to (tests/test_ui_escaping.py holds every page to it, and the
code to writing no markup in an f-string).

No web framework here, so that `retrod report --format html` renders the session page with the
same functions, its assets inline (`standalone`), as one file to share or archive.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from importlib.resources import files
from urllib.parse import quote, urlencode

from ..basics.format import count, duration, points, share, size, tokens, usd, usd_change
from ..basics.format import rate as per_100
from ..basics.stored_text import flat
from ..basics.verdicts import VERDICTS
from ..history.trends import has_figures, period_name, shown_periods
from ..report.markdown import (
    CAUSE_TITLES,
    SIGNAL_TITLES,
    cost_cell,
    costliest_task,
    outside_tasks_s,
    task_cells,
    task_status,
)
from .data import FIRST_ORDER, TREND_SPLITS, SessionQuery, TrendsQuery
from .markup import Html, e

STATIC = files(__package__) / "static"
ASSETS_CSS = ("uPlot.min.css", "app.css")
ASSETS_JS = ("uPlot.iife.min.js", "app.js")
VERDICT_TITLES = {"high_impact": "High impact", "moderate_impact": "Moderate impact", "small_impact": "Small impact",
                  "exploratory_useful": "Exploratory, useful", "exploratory_waste": "Exploratory, waste",
                  "avoidable_waste": "Avoidable waste", "pending": "Pending"}
SORT_TITLES = {"start": "Started (UTC)", "wall": "Wall clock", "tokens": "Tokens", "cost": "Est. cost",
               "efficiency": "Efficiency", "cache": "Cache waste"}
NOTHING = Html("")


def when(iso: str | None) -> str:
    """An ISO time as the pages show it: UTC, to the minute."""
    return "—" if not iso else iso[:16].replace("T", " ")


def project(row: Mapping, shorts: Mapping[str, str] | None = None) -> str:
    """A project as a cell shows it: its short name (data.short_names: the end of the folder
    Claude Code ran in, longer where two would read the same), else its folder name."""
    short = row.get("project_short") or (shorts or {}).get(row.get("project") or "")
    if short:
        return str(short)
    path = row.get("project_path")
    if not path:
        return str(row["project_slug"])
    parts = [part for part in str(path).split("/") if part]
    return "/".join(parts[-2:]) if len(parts) > 2 else str(path)


def verdict_chip(verdict: str | None) -> Html:
    v = verdict or "pending"
    css = v if v in VERDICT_TITLES else "other"
    return Html('<span class="chip verdict-{}">{}</span>').format(css, VERDICT_TITLES.get(v, v))


# --- the frame -----------------------------------------------------------------------------------

def _document(title: str, body: Html, active: str = "", standalone: bool = False,
              alternate: str | None = None) -> Html:
    """A whole page. Standalone: its styles and scripts inline, no links into the app.
    `alternate`: the address of its `/api/` twin, the same figures as JSON (linked in the head,
    as Datasette links its pages' JSON)."""
    if standalone:
        head = NOTHING.join(Html("<style>{}</style>").format(_stylesheet(name)) for name in ASSETS_CSS)
        scripts = NOTHING.join(Html("<script>{}</script>").format(_inline(_asset(name))) for name in ASSETS_JS)
        nav = Html('<span class="brand">retrod</span><span class="note">a saved retrospective</span>')
    else:
        head = NOTHING.join(Html('<link rel="stylesheet" href="/static/{}">').format(name) for name in ASSETS_CSS)
        scripts = NOTHING.join(Html('<script src="/static/{}" defer></script>').format(name) for name in ASSETS_JS)
        links = NOTHING.join(Html('<a href="{}"{}>{}</a>').format(href, Html(" class=active") if name == active else "",
                                                                  name)
                             for name, href in (("Sessions", "/"), ("Trends", "/trends"), ("Lessons", "/lessons"),
                                                ("Live", "/live")))
        nav = Html('<a class="brand" href="/">retrod</a><nav>{}</nav>').format(links)
        if alternate is not None:
            head += Html('<link rel="alternate" type="application/json" href="{}">').format(alternate)
    return Html('<!doctype html><html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                '<link rel="icon" href="data:,">'
                "<title>{title} · retrod</title>{head}</head>"
                '<body><header class="top">{nav}</header><main>{body}</main>{scripts}</body></html>').format(
        title=title, head=head, nav=nav, body=body, scripts=scripts)


def _asset(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def _stylesheet(name: str) -> Html:
    return Html(_asset(name))  # vouched: retrod's own stylesheet, which holds no `</style`


def _inline(script: str) -> Html:
    """A script safe inside a script element: nothing in it may close the element."""
    return Html(script.replace("</script", "<\\/script"))  # vouched: retrod's own script, unable to close it


def _data(payload: object) -> Html:
    """Data for the page's script: JSON in a script element the browser never runs, every `<` in
    it escaped (so neither `</script>` nor `<!--` can end or change the element)."""
    text = json.dumps(payload, separators=(",", ":")).replace("<", "\\u003c")
    return Html('<script type="application/json" id="retrod-data">{}</script>').format(
        Html(text))  # vouched: JSON holding no `<`


def error_page(status: int, message: str) -> Html:
    return _document(f"{status}", Html('<h1>{}</h1><p class="lead">{}</p><p><a href="/">All sessions</a></p>').format(
        status, message))


# --- sessions ------------------------------------------------------------------------------------

def sessions_page(listing: dict, choices: dict, query: SessionQuery, today: date | None = None,
                  alternate: str | None = None) -> Html:
    today = today or datetime.now(UTC).date()
    rows = NOTHING.join(_session_row(row) for row in listing["sessions"])
    if not rows:
        rows = Html('<tr><td colspan="11" class="empty">No sessions{}.</td></tr>').format(
            Html(" match") if query.params() else Html(" yet"))
    heads = (_sort_head("start", query) + Html("<th>Project</th><th>Description</th>")
             + NOTHING.join(_sort_head(name, query) for name in ("wall", "tokens", "cost", "cache", "efficiency"))
             + Html('<th class="num">Requests</th><th class="num">Tool calls</th><th class="num">Phases</th>'))
    shown = f"{count(listing['total'])} session{'s' if listing['total'] != 1 else ''}"
    pager = _pager(listing, query)
    body = Html('<div class="title-row"><h1>Sessions</h1><p class="lead" id="count">{shown}{match}</p></div>'
                '{filters}<table class="list" id="sessions"><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody>'
                '</table>{pager}').format(
        shown=shown, match=Html(" match") if query.params(sort="start", order=FIRST_ORDER["start"], page=1) else "",
        filters=_filters(choices, query, today), heads=heads, rows=rows, pager=pager)
    return _document("Sessions", body, "Sessions", alternate=alternate)


def _session_row(row: Mapping) -> Html:
    link = f"/sessions/{quote(row['uuid'])}"
    described = (e(row["description"]) if row["description"]
                 else Html('<span class="muted">{}</span>').format(row["uuid"][:8]))
    return Html('<tr data-uuid="{uuid}"><td><a href="{link}">{started}</a></td>'
                '<td class="project" title="{path}">'
                '<a href="/lessons?{lessons}" title="whether the brief works here">{project}</a></td>'
                '<td><a href="{link}">{described}</a></td>'
                '<td class="num" data-field="wall">{wall}</td>'
                '<td class="num" data-field="tokens" title="{tokens}">{short}</td>'
                '<td class="num" data-field="cost">{cost}</td>'
                '<td class="num" data-field="cache">{cache}</td>'
                '<td class="num" data-field="efficiency">{efficiency}</td>'
                '<td class="num" data-field="requests">{requests}</td>'
                '<td class="num" data-field="tool_calls">{tool_calls}</td>'
                '<td class="num" data-field="phases">{phases}</td></tr>').format(
        uuid=row["uuid"], link=link, started=when(row["started_at"]), path=row["project_path"] or row["project_slug"],
        lessons=urlencode({"project": row["project_path"] or row["project_slug"]}), project=project(row),
        described=described, wall=duration(row["wall_s"]), tokens=count(row["total_tokens"]),
        short=tokens(row["total_tokens"]), cost=cost_cell(row["cost"]),
        cache=usd(row["cache_waste_usd"]), efficiency=share(row["efficiency"]),
        requests=count(row["requests"]), tool_calls=count(row["tool_calls"]), phases=count(row["phases"]))


def _sort_head(name: str, query: SessionQuery) -> Html:
    if query.sort == name:
        order = "asc" if query.order == "desc" else "desc"
        mark = Html(" ▼") if query.order == "desc" else Html(" ▲")
    else:
        order, mark = FIRST_ORDER[name], NOTHING
    href = "?" + urlencode(query.params(sort=name, order=order, page=1))
    css = "num" if name != "start" else ""
    return Html('<th class="{}"><a href="{}" data-sort="{}" title="sort by {}">{}{}</a></th>').format(
        css, href, name, SORT_TITLES[name].lower(), SORT_TITLES[name], mark)


def _options(values: Iterable[tuple[str, str]], chosen: str | None) -> Html:
    """A select's options: (value, label) each, `chosen`'s selected."""
    return NOTHING.join(Html('<option value="{}"{}>{}</option>').format(v, Html(" selected") if v == chosen else "",
                                                                        label)
                        for v, label in values)


def _filters(choices: dict, query: SessionQuery, today: date) -> Html:
    def options(values: Iterable[str], chosen: str | None, everything: str) -> Html:
        return Html('<option value="">{}</option>').format(everything) + _options(((v, v) for v in values), chosen)

    ranges = [("Today", today, today), ("Last 7 days", today - timedelta(days=6), today),
              ("Last 30 days", today - timedelta(days=29), today), ("All time", None, None)]
    quick = NOTHING.join(
        Html('<a class="chip{}" href="{}">{}</a>').format(
            Html(" on") if (query.since, query.until) == (start, end) else "",
            "?" + urlencode(query.params(since=start, until=end, page=1)), name)
        for name, start, end in ranges)
    keep = NOTHING.join(Html('<input type="hidden" name="{}" value="{}">').format(k, v)
                        for k, v in query.params().items() if k in ("sort", "order", "per_page"))
    return Html('<form class="filters" method="get" action="/">{keep}'
                '<input type="search" name="q" value="{search}"'
                ' placeholder="Search descriptions, uuids, projects"'
                ' aria-label="search">'
                '<select name="project" aria-label="project">{projects}</select>'
                '<select name="model" aria-label="model">{models}</select>'
                '{machines}'
                '<label>From <input type="date" name="since" value="{since}"></label>'
                '<label>To <input type="date" name="until" value="{until}"></label>'
                '<button type="submit">Filter</button><a href="/" class="clear">Clear</a>'
                '<div class="quick">{quick}</div></form>').format(
        keep=keep, search=e(query.search),
        projects=options(_listed(choices["projects"], query.project), query.project, "All projects"),
        models=options(choices["models"], query.model, "All models"),
        machines=_machine_select(choices.get("machines", []), query.machine),
        since=e(query.since), until=e(query.until), quick=quick)


def _machine_select(machines: list[str], chosen: str | None) -> Html:
    """The machine filter (accounting.md §4: a host id files are stored under), where there is a choice:
    one machine writing here has none to make."""
    listed = machines if not chosen or chosen in machines else [chosen, *machines]
    if len(listed) < 2 and not chosen:
        return NOTHING
    return Html('<select name="machine" aria-label="machine"><option value="">All machines</option>{}'
                '</select>').format(_options(((m, m) for m in listed), chosen))


def _pager(listing: dict, query: SessionQuery) -> Html:
    page, pages = listing["page"], listing["pages"]
    newer, older = ("← Previous", "Next →") if query.sort != "start" else ("← Newer", "Older →")
    prev = (Html('<a rel="prev" href="{}">{}</a>').format("?" + urlencode(query.params(page=page - 1)), newer)
            if page > 1 else Html('<span class="muted">{}</span>').format(newer))
    nxt = (Html('<a rel="next" href="{}">{}</a>').format("?" + urlencode(query.params(page=page + 1)), older)
           if page < pages else Html('<span class="muted">{}</span>').format(older))
    return Html('<nav class="pager">{}<span>page {} of {}</span>{}</nav>').format(prev, page, pages, nxt)


# --- a session ---------------------------------------------------------------------------------

def session_page(report: dict, standalone: bool = False, alternate: str | None = None) -> Html:
    """The session's page (`/sessions/{uuid}`), or with `standalone` the HTML report file."""
    s, summary = report["session"], report["summary"]
    uuid = s["uuid"]
    title = s["description"] or f"Session {uuid[:8]}"
    links = NOTHING if standalone else Html(
        '<p class="downloads">Download: '
        '<a href="/sessions/{uuid}/report.md" download>Markdown retrospective</a>'
        ' · <a href="/sessions/{uuid}/report.html" download>HTML file</a>'
        ' · <a href="/api/sessions/{uuid}">JSON</a></p>').format(uuid=quote(uuid))
    head = Html('<h1>{}</h1><p class="lead">Session <code>{}</code> in <code>{}</code>, {} → {} UTC</p>{}').format(
        title, uuid, s["project_path"] or s["project_slug"], when(s["started_at"]), when(s["ended_at"]), links)
    body = (head + _cards(report) + _timeline(report) + _phases(report) + _plan(report) + _waste(report)
            + _models(summary) + _tools(report["tools"]) + _subagents(report["subagents"]) + _lessons(report)
            + _data({"timeline": report["timeline"], "phases": [
                {k: p[k] for k in ("task", "phase", "verdict", "started_at", "ended_at")}
                | {"output": p["tokens"]["output"], "tip": _phase_tip(p)}
                for p in report["phases"]], "subagents": [
                {k: a[k] for k in ("agent_id", "agent_type", "started_at", "seconds")} for a in report["subagents"]],
                "tasks": [{"number": t["number"], "name": t["name"], "windows": t["windows"], "tip": _task_tip(t)}
                          for t in report["plan"]["tasks"]],
                "misses": [{"at": m["at"], "cause": m["cause"], "tip": _miss_tip(m)}
                           for m in report["cache_misses"]]}))
    return _document(title, body, standalone=standalone, alternate=alternate)


def _phase_tip(phase: dict) -> str:
    """What pointing at a phase's band says: its name, verdict and window, as the phases table
    writes them, and how long it lasted (a short phase's band is wider than its window)."""
    start, end = phase["started_at"], phase["ended_at"]
    window = f"{when(start)} → {when(end) if end else 'open'} UTC"
    if start and end:
        window += f" ({duration((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())})"
    return f'{phase["task"]} / {phase["phase"]} · {VERDICT_TITLES.get(phase["verdict"], phase["verdict"])} · {window}'


def _task_tip(task: dict) -> str:
    """What pointing at a task's band says: its number, name and status, its time and cost as the
    task table writes them, and its windows."""
    cells = task_cells(task)
    windows = ", ".join(f"{when(w['start'])} → {when(w['end']) if w['end'] else 'open'}" for w in task["windows"])
    return (f"Task {task['number']}: {flat(task['name'])} · {task_status(task)} · {cells['time']} · "
            f"{cells['cost']} · {windows} UTC")


def _miss_tip(miss: dict) -> str:
    """What pointing at a cache miss's marker says: its cause (Claude Code's own reason beside
    it), its time to the second, the tokens written again and what that cost beyond a read."""
    reason = f" ({flat(miss['reason'])})" if miss["reason"] else ""
    agent = f" · {flat(miss['agent'])}" if miss["agent"] else ""
    return (f"Cache miss: {CAUSE_TITLES[miss['cause']]}{reason} · {miss['at'][:19].replace('T', ' ')} UTC{agent} · "
            f"{count(miss['rewritten'])} tokens rewritten · {usd(miss['extra_usd'])} extra")




def _cards(report: dict) -> Html:
    summary = report["summary"]
    cost = summary["cost"]
    items = [("cost", "Est. cost", cost_cell(cost)),
             ("wall", "Wall clock", duration(summary["wall_s"])),
             ("claude", "Claude", duration(summary["claude_s"])), ("tool", "Tool", duration(summary["tool_s"])),
             ("human", "Human", duration(summary["human_s"])), ("away", "Away", duration(summary["away_s"])),
             ("output", "Output tokens", count(summary["tokens"]["total"]["output"])),
             ("requests", "Requests", count(summary["requests"])),
             ("tool_calls", "Tool calls", count(summary["tool_use"]["calls"])),
             ("efficiency", "Efficiency", share(summary["tool_use"]["efficiency"])),
             ("compactions", "Compactions", count(summary["compactions"])),
             ("subagents", "Subagents", count(len(report["subagents"])))]
    return _card_section("summary", items)


def _card_section(section_id: str, items: list[tuple[str, str, str]]) -> Html:
    """Figures as cards: (data-field, label, value) each."""
    return Html('<section class="cards" id="{}">{}</section>').format(section_id, NOTHING.join(
        Html('<div class="card" data-field="{}"><div class="label">{}</div><div class="value">{}</div></div>').format(
            k, label, value)
        for k, label, value in items))


def _timeline(report: dict) -> Html:
    legend = NOTHING.join(
        Html('<span class="key"><i class="swatch verdict-{}"></i>{}</span>').format(v, VERDICT_TITLES[v])
        for v in (*VERDICTS, "pending") if any(p["verdict"] == v for p in report["phases"]))
    tasks = (Html('<span class="key"><i class="mark task"></i>Task (Claude\'s plan)</span>') if report["plan"]["tasks"]
             else NOTHING)
    causes = NOTHING.join(
        Html('<span class="key"><i class="mark miss-{}"></i>Cache miss: {}</span>').format(c, CAUSE_TITLES[c])
        for c in CAUSE_TITLES if any(m["cause"] == c for m in report["cache_misses"]))
    return Html('<section><h2>Timeline</h2>'
                '<p class="hint">Output tokens per minute (bars) and the estimated cost so far (line: it rises in '
                'the minutes money is spent, flat while nothing is); '
                'phases as bands coloured by their verdict; the tasks of Claude\'s plan as a lane of bars under the '
                'phases\' names; ▼ prompt-cache misses, coloured by cause; red dots: minutes with tool calls a waste '
                'signal flagged (below, by kind); ◆ compactions; subagents as spans along the bottom. Point at a '
                'minute for its figures, at a band for its phase, at a task\'s bar or a miss\'s marker for theirs.</p>'
                '<div id="timeline" class="chart"></div><div class="legend">{}{}{}'
                '<span class="key"><i class="mark compaction"></i>Compaction</span>'
                '<span class="key"><i class="mark subagent"></i>Subagent</span>'
                '<span class="key"><i class="mark flagged"></i>Flagged calls</span></div></section>').format(
        legend, tasks, causes)


def _plan(report: dict) -> Html:
    """accounting.md §2.9's tasks, as the Markdown's Tasks section shows them: each task's figures, the
    costliest marked, the time outside every task, the tasks never started."""
    plan = report["plan"]
    if plan["family"] is None:
        return NOTHING
    tasks, rows = plan["tasks"], []
    costliest = costliest_task(tasks) if tasks else None
    for t in tasks:
        cells = NOTHING.join(Html('<td class="num" data-field="{}">{}</td>').format(k, v)
                             for k, v in task_cells(t).items())
        mark = Html(' <span class="badge costliest">costliest</span>') if t is costliest else NOTHING
        rows.append(Html('<tr data-task="{number}"{css}><td>{number}</td>'
                         '<td data-field="name">{name}{mark}</td>'
                         '<td data-field="status">{status}</td>{cells}</tr>').format(
            number=t["number"], css=Html(" class=costliest") if mark else "", name=t["name"], mark=mark,
            status=task_status(t), cells=cells))
    if tasks:
        rows.append(Html('<tr class="muted" id="outside-tasks"><td></td><td>outside every task</td><td></td>'
                         '<td class="num" data-field="time">{}</td><td colspan="6"></td></tr>').format(
            duration(outside_tasks_s(tasks, report["summary"]))))
    never = plan["tasks_never_started"]
    never_line = Html('<p class="hint" id="never-started">Never started: {}.</p>').format(
        Html("; ").join(Html("{} ({})").format(t["name"], t["status"]) for t in never)) if never else NOTHING
    table = Html('<table class="list" id="tasks"><thead><tr><th>#</th><th>Task</th><th>Status</th>'
                 '<th class="num">Time</th><th class="num">Output</th><th class="num">Tokens</th>'
                 '<th class="num">Est. cost</th><th class="num">Tool calls</th><th class="num">Efficiency</th>'
                 '<th class="num">Wasted calls</th></tr></thead><tbody>{}</tbody></table>').format(
        NOTHING.join(rows)) if tasks else NOTHING
    return Html('<section><h2>Tasks (from Claude\'s plan)</h2>'
                '<p class="hint">From Claude\'s own plan ({} calls): each task\'s time is when it '
                'was the one in progress; its figures are a phase\'s over that time. Log a verdict for task N with '
                '<code>retrod phase log --from-task N --phase P --verdict V</code>.</p>'
                '{}{}</section>').format(count(plan["calls"]), table, never_line)


def _phases(report: dict) -> Html:
    phases = report["phases"]
    if not phases:
        return Html('<section><h2>Phases</h2>'
                    '<p class="hint">No phases were logged for this session. Log them as you '
                    'work (<code>retrod phase start</code> / <code>retrod phase end --verdict V</code>), or let the '
                    'skills do it (<code>retrod skills install</code>).</p></section>')
    total_output = report["summary"]["tokens"]["total"]["output"] or 1
    rows = []
    for n, p in enumerate(phases, 1):
        part = p["tokens"]["output"] / total_output
        signals = ", ".join(f"{SIGNAL_TITLES[k]} {v}" for k, v in p["tool_use"]["signals"].items() if v) or "—"
        rows.append(Html(
            '<tr data-phase="{n}"><td>{n}</td><td>{task} / {phase}</td>'
            '<td>{verdict}</td>'
            '<td>{start} → {end}</td>'
            '<td class="num" data-field="output">{output}'
            '<div class="bar"><i style="width:{width:.1f}%"></i></div></td>'
            '<td class="num" data-field="cost">{cost}</td>'
            '<td class="num">{claude}</td>'
            '<td class="num" data-field="efficiency">{efficiency}</td>'
            '<td class="signals">{signals}</td><td>{lessons}</td></tr>').format(
            n=n, task=p["task"], phase=p["phase"], verdict=verdict_chip(p["verdict"]), start=when(p["started_at"]),
            end=when(p["ended_at"]) if p["ended_at"] else "open", output=count(p["tokens"]["output"]),
            width=min(100.0, part * 100), cost=cost_cell(p["cost"]),
            claude=duration(p["claude_s"]), efficiency=share(p["tool_use"]["efficiency"]), signals=signals,
            lessons=e(p["lessons_learned"])))
    outside = report.get("outside_phases")
    if outside and (outside["requests"] or outside["tool_use"]["calls"]):
        rows.append(Html('<tr class="muted"><td></td><td>outside any phase</td><td></td><td></td>'
                         '<td class="num">{}</td><td class="num">{}</td><td class="num">{}</td>'
                         '<td class="num">{}</td><td></td><td></td></tr>').format(
            count(outside["tokens"]["output"]), cost_cell(outside["cost"]),
            duration(outside["claude_s"]), share(outside["tool_use"]["efficiency"])))
    return Html('<section><h2>Phases</h2><table class="list" id="phases"><thead><tr><th>#</th>'
                '<th>Task / phase</th>'
                '<th>Verdict</th><th>Window (UTC)</th><th class="num">Output tokens</th>'
                '<th class="num">Est. cost</th>'
                '<th class="num">Claude time</th><th class="num">Efficiency</th><th>Waste signals</th>'
                '<th>Lessons</th>'
                '</tr></thead><tbody>{}</tbody></table></section>').format(NOTHING.join(rows))


def _phase_of(phases: list[dict], at: str | None) -> str:
    for p in phases:
        if at and p["started_at"] <= at and (p["ended_at"] is None or at < p["ended_at"]):
            return f'{p["task"]} / {p["phase"]}'
    return ""


def _waste(report: dict) -> Html:
    wasted = {k: v for k, v in report["waste"].items() if v["count"]}
    use = report["summary"]["tool_use"]
    if not wasted:
        return Html('<section><h2>Waste signals</h2>'
                    '<p class="hint">None: all {} calls productive.</p></section>').format(count(use["calls"]))
    parts = []
    for signal, figures in wasted.items():
        examples = NOTHING.join(
            Html('<tr><td>{}</td><td>{}</td><td>{}</td><td class="detail">{}</td><td>{}</td></tr>').format(
                when(x["at"]), _phase_of(report["phases"], x["at"]), e(x["tool"]), e(x["detail"]),
                x["agent"] or "main")
            for x in figures["examples"])
        parts.append(Html('<h3 data-signal="{}">{} <span class="badge">{}</span></h3>'
                          '<table class="list small"><thead><tr><th>At (UTC)</th><th>Phase</th><th>Tool</th>'
                          '<th>Detail</th>'
                          '<th>Agent</th></tr></thead><tbody>{}</tbody></table>').format(
            signal, SIGNAL_TITLES[signal], figures["count"], examples))
    return Html('<section id="waste"><h2>Waste signals</h2>'
                '<p class="hint">{} of {} tool calls flagged; the first three of each kind below.</p>'
                '{}</section>').format(count(use["calls"] - use["productive"]), count(use["calls"]),
                                       NOTHING.join(parts))


SEARCHES_HEADER = Html('<th class="num">Web searches</th>')


def _models(summary: dict) -> Html:
    # Web searches (accounting.md §2.2) get a column only when a model made some, as in the Markdown.
    searched = any(m["web_searches"] for m in summary["tokens_by_model"])
    rows = NOTHING.join(
        Html('<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td>'
             '<td class="num">{}</td><td class="num">{}</td>{}<td class="num" data-field="cost">{}</td></tr>').format(
            m["model"] or "unknown", count(m["requests"]), count(m["output"]), count(m["input"]),
            count(m["cache_read"]), count(m["cache_create"]),
            Html('<td class="num" data-field="web_searches">{}</td>').format(count(m["web_searches"]))
            if searched else NOTHING, usd(m["cost_usd"]))
        for m in summary["tokens_by_model"])
    return Html('<section><h2>Cost and tokens by model</h2><table class="list" id="models"><thead><tr>'
                '<th>Model</th>'
                '<th class="num">Requests</th><th class="num">Output</th><th class="num">Input</th>'
                '<th class="num">Cache read</th>'
                '<th class="num">Cache create</th>{}'
                '<th class="num">Est. cost</th></tr></thead>'
                '<tbody>{}</tbody></table></section>').format(SEARCHES_HEADER if searched else NOTHING, rows)


def _tools(tools: list[dict]) -> Html:
    if not tools:
        return NOTHING
    rows = NOTHING.join(
        Html('<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td>'
             '<td class="num">{}</td><td class="num">{}</td></tr>').format(
            t["name"], count(t["calls"]), count(t["failed"]), count(t["rejected"]), size(t["result_bytes"]),
            duration(t["median_result_s"]))
        for t in tools)
    return Html('<section><h2>Tool use</h2><table class="list" id="tools"><thead><tr><th>Tool</th>'
                '<th class="num">Calls</th>'
                '<th class="num">Failed</th><th class="num">Declined</th><th class="num">Result bytes</th>'
                '<th class="num">Median time to result</th></tr></thead><tbody>{}</tbody></table></section>').format(
        rows)


def _subagents(subagents: list[dict]) -> Html:
    if not subagents:
        return NOTHING
    rows = NOTHING.join(
        Html('<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td class="num">{}</td>'
             '<td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>').format(
            e(a["agent_id"]), e(a["agent_type"]), e(a["description"]), e(a["phase"]), count(a["tokens"]["output"]),
            count(a["requests"]), duration(a["seconds"]), share(a["tool_use"]["efficiency"]))
        for a in subagents)
    return Html('<section><h2>Subagents</h2><table class="list" id="subagents"><thead><tr><th>Agent</th>'
                '<th>Type</th>'
                '<th>Description</th><th>Phase</th><th class="num">Output</th><th class="num">Requests</th>'
                '<th class="num">Time</th><th class="num">Efficiency</th></tr></thead><tbody>{}</tbody>'
                '</table></section>').format(rows)


def _lessons(report: dict) -> Html:
    if not report["lessons"]:
        return NOTHING
    return Html("<section><h2>Lessons</h2><ul>{}</ul></section>").format(
        NOTHING.join(Html("<li>{}</li>").format(x) for x in report["lessons"]))


# --- trends --------------------------------------------------------------------------------------

PERIOD_TITLES = {"day": "Day", "week": "Week of", "month": "Month"}
TREND_HEAD = Html('<th class="num">Sessions</th><th class="num">Est. cost</th><th class="num">Per session</th>'
                  '<th class="num" title="per session, from the period before">Δ per session</th>'
                  '<th class="num" title="what re-writing a lost prompt cache cost, compactions aside (see'
                  ' docs/accounting.md)">Cache waste</th>'
                  '<th class="num">Efficiency</th><th class="num" title="from the period before">Δ</th>'
                  '<th class="num">Tool calls</th><th class="num">Output</th><th class="num">Claude</th>'
                  '<th class="num">Tool</th><th class="num">Human</th><th class="num">Away</th>')


def trends_page(data: dict, costliest: list[dict], projects: Mapping[str, str], query: TrendsQuery,
                machines: list[str] | None = None, alternate: str | None = None) -> Html:
    """`/trends`: `retrod trends` as a page — the periods' cost and efficiency drawn, their figures
    in rows (a run of empty periods is one row, as the command prints it), the total below; and
    the outliers: the costliest sessions, each against the average session."""
    periods = data["periods"]
    by = data["by"]
    if any(has_figures(p) for p in periods):
        rows = NOTHING.join(_trend_rows(p, change, through, data, projects)
                            for p, change, through in shown_periods(periods, by))
    else:
        rows = Html('<tr><td colspan="14" class="empty">No sessions{}.</td></tr>').format(
            Html(" match") if data["project"] or data["since"] else Html(" yet"))
    total = data["total"]
    prices = data["prices"]
    body = Html('<div class="title-row"><h1>Trends</h1><p class="lead">by {by}, cut in {zone}; '
                'each session counts wholly in the {by} it started</p></div>'
                "{filters}"
                "{cards}"
                '<section><h2>Cost and efficiency</h2><p class="hint">Estimated cost per '
                '{by} (bars) and the share of tool calls no waste signal flagged (line).</p>'
                '<div id="trends-chart" class="chart"></div></section>'
                "{outliers}"
                '<section><div class="scroll"><table class="list" id="trends"><thead><tr>'
                '<th>{period}</th>{head}</tr></thead><tbody>{rows}</tbody>'
                '<tfoot><tr data-period="total"><th>Total</th>{total}</tr></tfoot></table></div>'
                '<p class="hint">Costs are estimates at API list prices ({source} '
                '{version}), not a bill. <a href="/api/trends?{params}">JSON</a>'
                '</p></section>{data}').format(
        by=by, zone=data["time_zone"], filters=_trend_filters(projects, query, machines or []),
        cards=_trend_cards(total), outliers=_outliers(costliest, total, query.project if query.project in projects
                                                      else None),
        period=PERIOD_TITLES[by], head=TREND_HEAD, rows=rows, total=_trend_cells(total, None),
        source=prices["source"], version=prices["version"], params=urlencode(query.params()),
        data=_data({"by": by, "trends": [{"period": p["period"], "cost_usd": p["cost"]["usd"],
                                          "efficiency": p["tool_use"]["efficiency"], "sessions": p["sessions"]}
                                         for p in periods if p["period"] is not None]}))
    return _document("Trends", body, "Trends", alternate=alternate)


def _outliers(rows: list[dict], total: dict, project_listed: str | None) -> Html:
    """The costliest sessions; `project_listed`: the Claude Code folder the list can filter by."""
    if not rows:
        return NOTHING
    average = total["cost_per_session"]
    listed = "/?" + urlencode({"sort": "cost", **({"project": project_listed} if project_listed else {})})

    def times(spent: float | None) -> str:
        return "—" if spent is None or not average else f"{spent / average:,.1f}×"

    body = NOTHING.join(
        Html('<tr data-uuid="{uuid}"><td><a href="/sessions/{link}">{started}</a></td>'
             '<td class="project" title="{path}">{project}</td>'
             '<td>{description}</td>'
             '<td class="num" data-field="cost">{cost}</td>'
             '<td class="num" data-field="times">{times}</td>'
             '<td class="num" data-field="efficiency">{efficiency}</td>'
             '<td class="num" data-field="wall">{wall}</td></tr>').format(
            uuid=r["uuid"], link=quote(r["uuid"]), started=when(r["started_at"]),
            path=r["project_path"] or r["project_slug"], project=project(r), description=e(r["description"]),
            cost=cost_cell(r["cost"]), times=times(r["cost"]["usd"]),
            efficiency=share(r["efficiency"]), wall=duration(r["wall_s"]))
        for r in rows)
    return Html('<section id="outliers"><h2>Costliest sessions</h2><p class="hint">Of the sessions these figures'
                ' add up, those that cost the most, each against their average ({}).'
                ' <a href="{}">All sessions by cost</a></p>'
                '<table class="list" id="costliest"><thead><tr><th>Started (UTC)</th><th>Project</th>'
                '<th>Description</th><th class="num">Est. cost</th><th class="num">× average</th>'
                '<th class="num">Efficiency</th><th class="num">Wall clock</th></tr></thead><tbody>{}</tbody>'
                '</table></section>').format(usd(average), listed, body)


def _listed(projects: Iterable[str], chosen: str | None) -> list[str]:
    """The project filter's choices: a project asked by a path or a part of its name (as
    `--project` reads it) stays chosen."""
    names = list(projects)
    return names if not chosen or chosen in names else [chosen, *names]


def _trend_filters(projects: Iterable[str], query: TrendsQuery, machines: list[str]) -> Html:
    def select(name: str, chosen: str | None, values: Iterable[tuple[str, str]]) -> Html:
        return Html('<select name="{0}" aria-label="{0}">{1}</select>').format(name, _options(values, chosen or ""))

    listed = _listed(projects, query.project)
    quick = NOTHING.join(
        Html('<a class="chip{}" href="{}">{}</a>').format(Html(" on") if query.by == by else "",
                                                          "?" + urlencode(query.params(by=by)), title)
        for by, title in (("day", "By day"), ("week", "By week"), ("month", "By month")))
    keep = NOTHING.join(Html('<input type="hidden" name="{}" value="{}">').format(k, v)
                        for k, v in query.params().items() if k in ("tz", "member"))
    return Html('<form class="filters" method="get" action="/trends">{keep}'
                '{by}{split}{project}{machines}'
                '<label>From <input type="date" name="since" value="{since}"></label>'
                '<button type="submit">Show</button><a href="/trends" class="clear">Clear</a>'
                '<div class="quick">{quick}</div></form>').format(
        keep=keep, by=select("by", query.by, ((b, f"by {b}") for b in ("day", "week", "month"))),
        split=select("split", query.split, [("", "no split"), *((s, f"per {s}") for s in TREND_SPLITS)]),
        project=select("project", query.project, [("", "All projects"), *((p, p) for p in listed)]),
        machines=_machine_select(machines, query.machine), since=e(query.since), quick=quick)


def _trend_cards(total: dict) -> Html:
    items = [("sessions", "Sessions", count(total["sessions"])),
             ("cost", "Est. cost", cost_cell(total["cost"])),
             ("cost_per_session", "Per session", usd(total["cost_per_session"])),
             ("cache_waste", "Cache waste", usd(total["cache"]["waste_usd"])
              + (f" ({share(total['cache']['waste_share'])})" if total["cache"]["waste_share"] else "")),
             ("efficiency", "Efficiency", share(total["tool_use"]["efficiency"])),
             ("claude", "Claude", duration(total["claude_s"])), ("tool", "Tool", duration(total["tool_s"])),
             ("human", "Human", duration(total["human_s"])),
             ("output", "Output tokens", count(total["tokens"]["total"]["output"]))]
    return _card_section("totals", items)


def _trend_rows(p: dict, change: dict | None, through: str | None, data: dict,
                shorts: Mapping[str, str]) -> Html:
    """A period's row and the rows of its projects or models; a run of empty periods: one row
    (`through`: its last period's name). As trends.shown_periods gives them."""
    name = period_name(p, data["by"])
    if not has_figures(p):
        return Html('<tr class="muted" data-period="{}"><td>{}</td><td colspan="13">no sessions{}</td></tr>').format(
            e(p["period"]), name, Html(" to {}").format(through) if through else NOTHING)
    detail = []
    if p["verdicts"]:
        detail.append(Html(" ").join(verdict_chip(v) + Html("&nbsp;{}").format(n) for v, n in p["verdicts"].items()))
    if p["top_waste"]:
        detail.append(Html("waste: {}").format(", ".join(f"{SIGNAL_TITLES[w['signal']].lower()} {w['count']}"
                                                         for w in p["top_waste"])))
    out = [Html('<tr data-period="{}"><td>{}</td>{}</tr>').format(p["period"] or "undated", name,
                                                                   _trend_cells(p, change))]
    if detail:
        out.append(Html('<tr class="detail-row"><td></td><td colspan="13">{}</td></tr>').format(
            Html(" · ").join(detail)))
    for row in p.get("projects", []):
        out.append(Html('<tr class="sub" data-project="{}"><td title="{}">{}</td>{}</tr>').format(
            e(row["project_slug"]), e(row["project"]), project(row, shorts), _trend_cells(row, None)))
    for row in p.get("machines", []):
        out.append(Html('<tr class="sub" data-machine="{0}"><td>{0}</td>{1}</tr>').format(
            row["machine"], _trend_cells(row, None)))
    if data["split"] == "model":
        for m in p["tokens_by_model"]:
            out.append(Html('<tr class="sub" data-model="{}"><td>{}</td><td class="num">{}</td>'
                            '<td class="num" data-field="cost">{}</td>'
                            '<td colspan="2"></td>'
                            '<td class="num" data-field="cache_waste">{}</td>'
                            '<td colspan="3"></td><td class="num" data-field="output">{}</td>'
                            '<td colspan="4"></td></tr>').format(
                m["model"] or "", m["model"] or "unknown model", count(m["sessions"]), usd(m["cost_usd"]),
                usd(m["cache_waste_usd"]), count(m["output"])))
    return NOTHING.join(out)


def _share(ratio: float | None) -> str:
    return "" if ratio is None else f"{share(ratio)} of the estimated cost"


def _delta(change: dict | None, key: str) -> str:
    """A change from the period before: dollars per session, or efficiency in points."""
    value = None if change is None else change[key]
    return usd_change(value) if key == "cost_per_session" else points(value)


def _trend_cells(f: dict, change: dict | None) -> Html:
    """A period's (or project's, or the total's) cells under TREND_HEAD."""
    cost = f["cost"]
    return Html('<td class="num" data-field="sessions">{sessions}</td>'
                '<td class="num" data-field="cost">{cost}</td>'
                '<td class="num" data-field="cost_per_session">{per_session}</td>'
                '<td class="num" data-field="change_cost_per_session">{change_cost}</td>'
                '<td class="num" data-field="cache_waste" title="{share}">{cache_waste}</td>'
                '<td class="num" data-field="efficiency">{efficiency}</td>'
                '<td class="num" data-field="change_efficiency">{change_efficiency}</td>'
                '<td class="num" data-field="tool_calls">{tool_calls}</td>'
                '<td class="num" data-field="output">{output}</td>'
                '<td class="num" data-field="claude">{claude}</td>'
                '<td class="num" data-field="tool">{tool}</td>'
                '<td class="num" data-field="human">{human}</td>'
                '<td class="num" data-field="away">{away}</td>').format(
        sessions=count(f["sessions"]), cost=cost_cell(cost),
        per_session=usd(f["cost_per_session"]), change_cost=_delta(change, "cost_per_session"),
        share=_share(f["cache"]["waste_share"]), cache_waste=usd(f["cache"]["waste_usd"]),
        efficiency=share(f["tool_use"]["efficiency"]), change_efficiency=_delta(change, "efficiency"),
        tool_calls=count(f["tool_use"]["calls"]), output=count(f["tokens"]["total"]["output"]),
        claude=duration(f["claude_s"]), tool=duration(f["tool_s"]), human=duration(f["human_s"]),
        away=duration(f["away_s"]))


# --- live ----------------------------------------------------------------------------------------

LIVE_HEAD = Html('<tr><th>Session</th><th>Project</th><th class="num">Est. cost</th><th class="num">Output</th>'
                 '<th class="num">Tokens</th><th class="num">Requests</th><th class="num">Tool calls</th>'
                 '<th class="num">Efficiency</th><th class="num">Wall clock</th><th>Last line (UTC)</th></tr>')


def _example(text: str | None) -> Html:
    return NOTHING if text is None else Html("<div>e.g. <code>{}</code></div>").format(text)


LESSON_STATUS = {"working": "verdict-high_impact", "not working": "verdict-avoidable_waste",
                 "too early": "verdict-pending", "unclear": "verdict-small_impact"}


def lessons_page(found: dict | None, projects: list[str], alternate: str | None = None) -> Html:
    """`/lessons`: `retrod lessons` of a project — the answer, then per pattern and per lesson its
    rate before retrod first named it and since, drawn as two bars on one scale (a page row's);
    without a project, the projects to choose from."""
    if found is None:
        items = NOTHING.join(Html('<li><a href="/lessons?{}">{}</a></li>').format(urlencode({"project": name}), name)
                             for name in sorted(projects))
        return _document("Lessons", Html('<div class="title-row"><h1>Lessons</h1><p class="lead">whether what the'
                                         ' brief names falls after retrod starts naming it; choose a project</p></div>'
                                         '<section><ul class="projects">{}</ul></section>').format(
            items or Html("<li>No sessions yet.</li>")), "Lessons")
    rows = found["patterns"] + found["lessons"]
    top = max([r[side]["rate"] or 0 for r in rows for side in ("before", "after")] + [0])

    def bars(r: dict) -> Html:
        out = []
        for side in ("before", "after"):
            rate = r[side]["rate"]
            width = 0 if not top or rate is None else rate / top * 100
            label = per_100(rate)
            mark = Html(" (all projects)") if side == "before" and r["baseline"] == "all projects" else NOTHING
            out.append(Html('<div class="lesson-bar" data-field="{side}" data-sessions="{sessions}">'
                            '<span class="muted">{side}{mark}</span> <b>{label}</b>'
                            '<div class="bar"><i class="{side}" style="width:{width:.1f}%"></i></div></div>').format(
                side=side, sessions=r[side]["sessions"], mark=mark, label=label, width=width))
        return NOTHING.join(out)

    def status(r: dict) -> Html:
        back = ", came back" if r["back"] else ""
        return Html('<span class="chip {}" data-field="status">{}</span>').format(LESSON_STATUS[r["status"]],
                                                                                  r["status"] + back)

    pattern_rows = NOTHING.join(
        Html('<tr data-pattern="{pattern}"><td><code>{pattern}</code><div class="muted">{what}</div>{example}</td>'
             '<td>{status}</td><td>{bars}</td>'
             '<td class="num">{first}<div class="muted">to {given} session{s}</div></td></tr>').format(
            pattern=r["pattern"], what=r["what"], example=_example(r["example"]), status=status(r), bars=bars(r),
            first=when(r["first_given"]["started_at"]), given=r["sessions_given"],
            s="" if r["sessions_given"] == 1 else "s")
        for r in found["patterns"])
    lesson_rows = NOTHING.join(
        Html('<tr data-lesson="{lesson}"><td>{lesson}<div class="muted">{task} / {phase}</div></td>'
             '<td>{status}</td><td>{bars}</td><td class="num">{at}</td></tr>').format(
            lesson=r["lesson"], task=e(r["logged"]["task"]), phase=e(r["logged"]["phase"]), status=status(r),
            bars=bars(r), at=when(r["logged"]["at"]))
        for r in found["lessons"])
    head = Html('<thead><tr><th>What</th><th>Status</th><th>Rate before → since</th><th>{}</th></tr></thead>')
    body = Html('<div class="title-row"><h1>Lessons</h1><p class="lead" id="lessons-answer">{answer}</p>'
                '</div><p class="hint">{project}: per 100 tool calls (a cache cause: per 100 requests),'
                ' the last 10 sessions before retrod first named it against the last 10 since.'
                ' <a href="/api/lessons?{params}">JSON</a></p>{patterns}{lessons}').format(
        answer=found["answer"], project=found["project"], params=urlencode({"project": found["project"]}),
        patterns=Html('<section><h2>Patterns the brief named</h2><table class="list" id="lesson-patterns">'
                      '{}<tbody>{}</tbody></table></section>').format(head.format("First named"), pattern_rows)
        if pattern_rows else NOTHING,
        lessons=Html('<section><h2>Lessons logged</h2><table class="list" id="lesson-lessons">'
                     '{}<tbody>{}</tbody></table></section>').format(head.format("First logged"), lesson_rows)
        if lesson_rows else NOTHING)
    return _document("Lessons", body, "Lessons", alternate=alternate)


def live_row(row: Mapping) -> Html:
    link = f"/sessions/{quote(row['uuid'])}"
    return Html('<tr data-uuid="{uuid}"><td><a href="{link}">{name}</a></td>'
                '<td class="project" title="{path}">{project}</td>'
                '<td class="num" data-field="cost">{cost}</td>'
                '<td class="num" data-field="output">{output}</td>'
                '<td class="num" data-field="tokens">{tokens}</td>'
                '<td class="num" data-field="requests">{requests}</td>'
                '<td class="num" data-field="tool_calls">{tool_calls}</td>'
                '<td class="num" data-field="efficiency">{efficiency}</td>'
                '<td class="num" data-field="wall">{wall}</td>'
                '<td data-field="ended_at">{ended}</td></tr>').format(
        uuid=row["uuid"], link=link, name=row["description"] or row["uuid"][:8],
        path=row["project_path"] or row["project_slug"], project=project(row),
        cost=cost_cell(row["cost"]), output=count(row["tokens"]["output"]),
        tokens=count(row["total_tokens"]), requests=count(row["requests"]), tool_calls=count(row["tool_calls"]),
        efficiency=share(row["efficiency"]), wall=duration(row["wall_s"]), ended=when(row["ended_at"]))


def live_page(rows: list[dict], alternate: str | None = None) -> Html:
    body = Html('<div class="title-row"><h1>Live</h1><p class="lead">'
                '<span id="live-status" class="status">connecting…</span>'
                '</p></div>'
                '<p class="hint">Sessions with transcript lines in the last hour, and any session that writes '
                'while this page is open: their figures move as the daemon reads each line.</p>'
                '<table class="list" id="live"><thead>{}</thead>'
                '<tbody>{}'
                '</tbody></table><p class="empty" id="live-empty"{}'
                '>No session is active right now. Start Claude Code, and its session appears here.</p>').format(
        LIVE_HEAD, NOTHING.join(live_row(r) for r in rows), Html(" hidden") if rows else "")
    return _document("Live", body, "Live", alternate=alternate)
