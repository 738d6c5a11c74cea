"""The web UI's pages as HTML, rendered here from the figures `data` returns: small functions,
every text escaped, a little vanilla JavaScript (static/app.js) for the chart and the live page.

No web framework here, so that `retrod report --format html` renders the session page with the
same functions, its assets inline (`standalone`), as one file to share or archive.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from html import escape
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

STATIC = files(__package__) / "static"
ASSETS_CSS = ("uPlot.min.css", "app.css")
ASSETS_JS = ("uPlot.iife.min.js", "app.js")
VERDICT_TITLES = {"high_impact": "High impact", "moderate_impact": "Moderate impact", "small_impact": "Small impact",
                  "exploratory_useful": "Exploratory, useful", "exploratory_waste": "Exploratory, waste",
                  "avoidable_waste": "Avoidable waste", "pending": "Pending"}
SORT_TITLES = {"start": "Started (UTC)", "wall": "Wall clock", "tokens": "Tokens", "cost": "Est. cost",
               "efficiency": "Efficiency", "cache": "Cache waste"}


def e(value: object) -> str:
    """Text in HTML: on one line without a control or format character (stored_text.flat: a page
    printed by `retrod report --format html` reaches a terminal, and a bidirectional override
    would reorder what the page shows), then escaped."""
    return escape(flat(value))


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


def verdict_chip(verdict: str | None) -> str:
    v = verdict or "pending"
    css = v if v in VERDICT_TITLES else "other"
    return f'<span class="chip verdict-{css}">{e(VERDICT_TITLES.get(v, v))}</span>'


# --- the frame -----------------------------------------------------------------------------------

def _document(title: str, body: str, active: str = "", standalone: bool = False) -> str:
    """A whole page. Standalone: its styles and scripts inline, no links into the app."""
    if standalone:
        head = "".join(f"<style>{_asset(name)}</style>" for name in ASSETS_CSS)
        scripts = "".join(f"<script>{_inline(_asset(name))}</script>" for name in ASSETS_JS)
        nav = '<span class="brand">retrod</span><span class="note">a saved retrospective</span>'
    else:
        head = "".join(f'<link rel="stylesheet" href="/static/{name}">' for name in ASSETS_CSS)
        scripts = "".join(f'<script src="/static/{name}" defer></script>' for name in ASSETS_JS)
        links = "".join(f'<a href="{href}"{" class=active" if name == active else ""}>{name}</a>'
                        for name, href in (("Sessions", "/"), ("Trends", "/trends"), ("Lessons", "/lessons"),
                                           ("Live", "/live")))
        nav = f'<a class="brand" href="/">retrod</a><nav>{links}</nav>'
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,">'
            f"<title>{e(title)} · retrod</title>{head}</head>"
            f'<body><header class="top">{nav}</header><main>{body}</main>{scripts}</body></html>')


def _asset(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def _inline(script: str) -> str:
    """A script safe inside a script element: nothing in it may close the element."""
    return script.replace("</script", "<\\/script")


def _data(payload: object) -> str:
    """Data for the page's script: JSON in a script element the browser never runs."""
    text = json.dumps(payload, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="retrod-data">{text}</script>'


def error_page(status: int, message: str) -> str:
    return _document(f"{status}", f'<h1>{status}</h1><p class="lead">{e(message)}</p><p>'
                                  f'<a href="/">All sessions</a></p>')


# --- sessions ------------------------------------------------------------------------------------

def sessions_page(listing: dict, choices: dict, query: SessionQuery, today: date | None = None) -> str:
    today = today or datetime.now(UTC).date()
    rows = "".join(_session_row(row) for row in listing["sessions"])
    if not rows:
        rows = (f'<tr><td colspan="11" class="empty">No sessions'
                f'{" match" if query.params() else " yet"}.</td></tr>')
    heads = "".join(_sort_head(name, query) for name in ("start",)) + "<th>Project</th><th>Description</th>" + \
        "".join(_sort_head(name, query) for name in ("wall", "tokens", "cost", "cache", "efficiency")) + \
        '<th class="num">Requests</th><th class="num">Tool calls</th><th class="num">Phases</th>'
    shown = f"{count(listing['total'])} session{'s' if listing['total'] != 1 else ''}"
    pager = _pager(listing, query)
    body = (f'<div class="title-row"><h1>Sessions</h1><p class="lead" id="count">{shown}'
            f'{" match" if query.params(sort="start", order=FIRST_ORDER["start"], page=1) else ""}</p></div>'
            f"{_filters(choices, query, today)}"
            f'<table class="list" id="sessions"><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody>'
            f'</table>{pager}')
    return _document("Sessions", body, "Sessions")


def _session_row(row: Mapping) -> str:
    link = f"/sessions/{quote(row['uuid'])}"
    described = e(row["description"]) if row["description"] else f'<span class="muted">{e(row["uuid"][:8])}</span>'
    return (f'<tr data-uuid="{e(row["uuid"])}"><td><a href="{link}">{e(when(row["started_at"]))}</a></td>'
            f'<td class="project" title="{e(row["project_path"] or row["project_slug"])}">'
            f'<a href="/lessons?{e(urlencode({"project": row["project_path"] or row["project_slug"]}))}"'
            f' title="whether the brief works here">{e(project(row))}</a></td>'
            f'<td><a href="{link}">{described}</a></td>'
            f'<td class="num" data-field="wall">{e(duration(row["wall_s"]))}</td>'
            f'<td class="num" data-field="tokens" title="{count(row["total_tokens"])}">'
            f'{e(tokens(row["total_tokens"]))}</td>'
            f'<td class="num" data-field="cost">{e(cost_cell(row["cost"]))}</td>'
            f'<td class="num" data-field="cache">{e(usd(row["cache_waste_usd"]))}</td>'
            f'<td class="num" data-field="efficiency">{share(row["efficiency"])}</td>'
            f'<td class="num" data-field="requests">{count(row["requests"])}</td>'
            f'<td class="num" data-field="tool_calls">{count(row["tool_calls"])}</td>'
            f'<td class="num" data-field="phases">{count(row["phases"])}</td></tr>')


def _sort_head(name: str, query: SessionQuery) -> str:
    if query.sort == name:
        order = "asc" if query.order == "desc" else "desc"
        mark = " ▼" if query.order == "desc" else " ▲"
    else:
        order, mark = FIRST_ORDER[name], ""
    href = "?" + urlencode(query.params(sort=name, order=order, page=1))
    css = "num" if name != "start" else ""
    return (f'<th class="{css}"><a href="{e(href)}" data-sort="{name}"'
            f' title="sort by {e(SORT_TITLES[name].lower())}">{e(SORT_TITLES[name])}{mark}</a></th>')


def _filters(choices: dict, query: SessionQuery, today: date) -> str:
    def options(values: Iterable[str], chosen: str | None, everything: str) -> str:
        return f'<option value="">{everything}</option>' + "".join(
            f'<option value="{e(v)}"{" selected" if v == chosen else ""}>{e(v)}</option>' for v in values)

    ranges = [("Today", today, today), ("Last 7 days", today - timedelta(days=6), today),
              ("Last 30 days", today - timedelta(days=29), today), ("All time", None, None)]
    quick = "".join(
        f'<a class="chip{" on" if (query.since, query.until) == (start, end) else ""}" href="'
        f'{e("?" + urlencode(query.params(since=start, until=end, page=1)))}">{name}</a>'
        for name, start, end in ranges)
    keep = "".join(f'<input type="hidden" name="{k}" value="{e(v)}">'
                   for k, v in query.params().items() if k in ("sort", "order", "per_page"))
    return (f'<form class="filters" method="get" action="/">{keep}'
            f'<input type="search" name="q" value="{e(query.search)}"'
            ' placeholder="Search descriptions, uuids, projects"'
            f' aria-label="search">'
            f'<select name="project" aria-label="project">'
            f'{options(_listed(choices["projects"], query.project), query.project, "All projects")}</select>'
            f'<select name="model" aria-label="model">{options(choices["models"], query.model, "All models")}</select>'
            f'{_machine_select(choices.get("machines", []), query.machine)}'
            f'<label>From <input type="date" name="since" value="{e(query.since)}"></label>'
            f'<label>To <input type="date" name="until" value="{e(query.until)}"></label>'
            f'<button type="submit">Filter</button><a href="/" class="clear">Clear</a>'
            f'<div class="quick">{quick}</div></form>')


def _machine_select(machines: list[str], chosen: str | None) -> str:
    """The machine filter (DESIGN §4: a host id files are stored under), where there is a choice:
    one machine writing here has none to make."""
    listed = machines if not chosen or chosen in machines else [chosen, *machines]
    if len(listed) < 2 and not chosen:
        return ""
    return ('<select name="machine" aria-label="machine"><option value="">All machines</option>' + "".join(
        f'<option value="{e(m)}"{" selected" if m == chosen else ""}>{e(m)}</option>' for m in listed)
        + "</select>")


def _pager(listing: dict, query: SessionQuery) -> str:
    page, pages = listing["page"], listing["pages"]
    prev = (f'<a rel="prev" href="{e("?" + urlencode(query.params(page=page - 1)))}">← Newer</a>'
            if page > 1 else '<span class="muted">← Newer</span>')
    nxt = (f'<a rel="next" href="{e("?" + urlencode(query.params(page=page + 1)))}">Older →</a>'
           if page < pages else '<span class="muted">Older →</span>')
    if query.sort != "start":
        prev, nxt = prev.replace("← Newer", "← Previous"), nxt.replace("Older →", "Next →")
    return f'<nav class="pager">{prev}<span>page {page} of {pages}</span>{nxt}</nav>'


# --- a session ---------------------------------------------------------------------------------

def session_page(report: dict, standalone: bool = False) -> str:
    """The session's page (`/sessions/{uuid}`), or with `standalone` the HTML report file."""
    s, summary = report["session"], report["summary"]
    uuid = s["uuid"]
    title = s["description"] or f"Session {uuid[:8]}"
    links = "" if standalone else (
        f'<p class="downloads">Download: '
        f'<a href="/sessions/{quote(uuid)}/report.md" download>Markdown retrospective</a>'
        f' · <a href="/sessions/{quote(uuid)}/report.html" download>HTML file</a>'
        f' · <a href="/api/sessions/{quote(uuid)}">JSON</a></p>')
    head = (f'<h1>{e(title)}</h1><p class="lead">Session <code>{e(uuid)}</code> in '
            f'<code>{e(s["project_path"] or s["project_slug"])}</code>, {e(when(s["started_at"]))} → '
            f'{e(when(s["ended_at"]))} UTC</p>{links}')
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
    return _document(title, body, standalone=standalone)


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


def _cards(report: dict) -> str:
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


def _card_section(section_id: str, items: list[tuple[str, str, str]]) -> str:
    """Figures as cards: (data-field, label, value) each."""
    return f'<section class="cards" id="{section_id}">' + "".join(
        f'<div class="card" data-field="{k}"><div class="label">{e(label)}</div>'
        f'<div class="value">{e(value)}</div></div>'
        for k, label, value in items) + "</section>"


def _timeline(report: dict) -> str:
    legend = "".join(f'<span class="key"><i class="swatch verdict-{v}"></i>{e(VERDICT_TITLES[v])}</span>'
                     for v in (*VERDICTS, "pending") if any(p["verdict"] == v for p in report["phases"]))
    tasks = '<span class="key"><i class="mark task"></i>Task (Claude\'s plan)</span>' if report["plan"]["tasks"] else ""
    causes = "".join(f'<span class="key"><i class="mark miss-{c}"></i>Cache miss: {e(CAUSE_TITLES[c])}</span>'
                     for c in CAUSE_TITLES if any(m["cause"] == c for m in report["cache_misses"]))
    return ('<section><h2>Timeline</h2>'
            f'<p class="hint">Output tokens per minute (bars) and the estimated cost so far (line: it rises in '
            'the minutes money is spent, flat while nothing is); '
            'phases as bands coloured by their verdict; the tasks of Claude\'s plan as a lane of bars under the '
            'phases\' names; ▼ prompt-cache misses, coloured by cause; red dots: minutes with tool calls a waste '
            'signal flagged (below, by kind); ◆ compactions; subagents as spans along the bottom. Point at a minute '
            'for its figures, at a band for its phase, at a task\'s bar or a miss\'s marker for theirs.</p>'
            f'<div id="timeline" class="chart"></div><div class="legend">{legend}{tasks}{causes}'
            '<span class="key"><i class="mark compaction"></i>Compaction</span>'
            '<span class="key"><i class="mark subagent"></i>Subagent</span>'
            '<span class="key"><i class="mark flagged"></i>Flagged calls</span></div></section>')


def _plan(report: dict) -> str:
    """DESIGN §2.9's tasks, as the Markdown's Tasks section shows them: each task's figures, the
    costliest marked, the time outside every task, the tasks never started."""
    plan = report["plan"]
    if plan["family"] is None:
        return ""
    tasks, rows = plan["tasks"], []
    costliest = costliest_task(tasks) if tasks else None
    for t in tasks:
        cells = "".join(f'<td class="num" data-field="{k}">{e(v)}</td>' for k, v in task_cells(t).items())
        mark = ' <span class="badge costliest">costliest</span>' if t is costliest else ""
        rows.append(f'<tr data-task="{t["number"]}"{" class=costliest" if mark else ""}><td>{t["number"]}</td>'
                    f'<td data-field="name">{e(t["name"])}{mark}</td>'
                    f'<td data-field="status">{e(task_status(t))}</td>{cells}</tr>')
    if tasks:
        rows.append(f'<tr class="muted" id="outside-tasks"><td></td><td>outside every task</td><td></td>'
                    f'<td class="num" data-field="time">{e(duration(outside_tasks_s(tasks, report["summary"])))}'
                    f'</td><td colspan="6"></td></tr>')
    never = plan["tasks_never_started"]
    never_line = ('<p class="hint" id="never-started">Never started: '
                  + "; ".join(f"{e(t['name'])} ({e(t['status'])})" for t in never) + ".</p>") if never else ""
    table = ('<table class="list" id="tasks"><thead><tr><th>#</th><th>Task</th><th>Status</th>'
             '<th class="num">Time</th><th class="num">Output</th><th class="num">Tokens</th>'
             '<th class="num">Est. cost</th><th class="num">Tool calls</th><th class="num">Efficiency</th>'
             f'<th class="num">Wasted calls</th></tr></thead><tbody>{"".join(rows)}</tbody></table>') if tasks else ""
    return ('<section><h2>Tasks (from Claude\'s plan)</h2>'
            f'<p class="hint">From Claude\'s own plan ({count(plan["calls"])} calls): each task\'s time is when it '
            'was the one in progress; its figures are a phase\'s over that time. Log a verdict for task N with '
            '<code>retrod phase log --from-task N --phase P --verdict V</code>.</p>'
            f'{table}{never_line}</section>')


def _phases(report: dict) -> str:
    phases = report["phases"]
    if not phases:
        return ('<section><h2>Phases</h2>'
                '<p class="hint">No phases were logged for this session. Log them as you '
                'work (<code>retrod phase start</code> / <code>retrod phase end --verdict V</code>), or let the '
                'skills do it (<code>retrod skills install</code>).</p></section>')
    total_output = report["summary"]["tokens"]["total"]["output"] or 1
    rows = []
    for n, p in enumerate(phases, 1):
        part = p["tokens"]["output"] / total_output
        signals = ", ".join(f"{SIGNAL_TITLES[k]} {v}" for k, v in p["tool_use"]["signals"].items() if v) or "—"
        rows.append(
            f'<tr data-phase="{n}"><td>{n}</td><td>{e(p["task"])} / {e(p["phase"])}</td>'
            f'<td>{verdict_chip(p["verdict"])}</td>'
            f'<td>{e(when(p["started_at"]))} → {e(when(p["ended_at"]) if p["ended_at"] else "open")}</td>'
            f'<td class="num" data-field="output">{count(p["tokens"]["output"])}'
            f'<div class="bar"><i style="width:{min(100.0, part * 100):.1f}%"></i></div></td>'
            f'<td class="num" data-field="cost">{e(cost_cell(p["cost"]))}</td>'
            f'<td class="num">{e(duration(p["claude_s"]))}</td>'
            f'<td class="num" data-field="efficiency">{share(p["tool_use"]["efficiency"])}</td>'
            f'<td class="signals">{e(signals)}</td><td>{e(p["lessons_learned"] or "")}</td></tr>')
    outside = report.get("outside_phases")
    if outside and (outside["requests"] or outside["tool_use"]["calls"]):
        rows.append(f'<tr class="muted"><td></td><td>outside any phase</td><td></td><td></td>'
                    f'<td class="num">{count(outside["tokens"]["output"])}</td>'
                    f'<td class="num">{e(cost_cell(outside["cost"]))}</td>'
                    f'<td class="num">{e(duration(outside["claude_s"]))}</td>'
                    f'<td class="num">{share(outside["tool_use"]["efficiency"])}</td><td></td><td>'
                    f'</td></tr>')
    return ('<section><h2>Phases</h2><table class="list" id="phases"><thead><tr><th>#</th>'
            f'<th>Task / phase</th>'
            '<th>Verdict</th><th>Window (UTC)</th><th class="num">Output tokens</th>'
            f'<th class="num">Est. cost</th>'
            '<th class="num">Claude time</th><th class="num">Efficiency</th><th>Waste signals</th>'
            f'<th>Lessons</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></section>')


def _phase_of(phases: list[dict], at: str | None) -> str:
    for p in phases:
        if at and p["started_at"] <= at and (p["ended_at"] is None or at < p["ended_at"]):
            return f'{p["task"]} / {p["phase"]}'
    return ""


def _waste(report: dict) -> str:
    wasted = {k: v for k, v in report["waste"].items() if v["count"]}
    use = report["summary"]["tool_use"]
    if not wasted:
        return (f'<section><h2>Waste signals</h2>'
                f'<p class="hint">None: all {count(use["calls"])} calls productive.</p></section>')
    parts = []
    for signal, figures in wasted.items():
        examples = "".join(
            f'<tr><td>{e(when(x["at"]))}</td><td>{e(_phase_of(report["phases"], x["at"]))}</td>'
            f'<td>{e(x["tool"])}</td>'
            f'<td class="detail">{e(x["detail"])}</td><td>{e(x["agent"] or "main")}</td>'
            f'</tr>' for x in figures["examples"])
        parts.append(f'<h3 data-signal="{signal}">{e(SIGNAL_TITLES[signal])} '
                     f'<span class="badge">{figures["count"]}</span></h3>'
                     '<table class="list small"><thead><tr><th>At (UTC)</th><th>Phase</th><th>Tool</th>'
                     f'<th>Detail</th>'
                     f'<th>Agent</th></tr></thead><tbody>{examples}</tbody></table>')
    return (f'<section id="waste"><h2>Waste signals</h2>'
            f'<p class="hint">{count(use["calls"] - use["productive"])} of '
            f'{count(use["calls"])} tool calls flagged; the first three of each kind below.</p>'
            f'{"".join(parts)}</section>')


SEARCHES_HEADER = '<th class="num">Web searches</th>'


def _models(summary: dict) -> str:
    # Web searches (DESIGN §2.2) get a column only when a model made some, as in the Markdown.
    searched = any(m["web_searches"] for m in summary["tokens_by_model"])
    rows = "".join(
        f'<tr><td>{e(m["model"] or "unknown")}</td><td class="num">{count(m["requests"])}</td>'
        f'<td class="num">{count(m["output"])}</td><td class="num">{count(m["input"])}</td>'
        f'<td class="num">{count(m["cache_read"])}</td><td class="num">{count(m["cache_create"])}</td>'
        + (f'<td class="num" data-field="web_searches">{count(m["web_searches"])}</td>' if searched else '')
        + f'<td class="num" data-field="cost">{e(usd(m["cost_usd"]))}</td>'
        f'</tr>' for m in summary["tokens_by_model"])
    return ('<section><h2>Cost and tokens by model</h2><table class="list" id="models"><thead><tr>'
            f'<th>Model</th>'
            '<th class="num">Requests</th><th class="num">Output</th><th class="num">Input</th>'
            f'<th class="num">Cache read</th>'
            f'<th class="num">Cache create</th>{SEARCHES_HEADER if searched else ""}'
            f'<th class="num">Est. cost</th></tr></thead>'
            f'<tbody>{rows}</tbody></table></section>')


def _tools(tools: list[dict]) -> str:
    if not tools:
        return ""
    rows = "".join(
        f'<tr><td>{e(t["name"])}</td><td class="num">{count(t["calls"])}</td>'
        f'<td class="num">{count(t["failed"])}</td>'
        f'<td class="num">{count(t["rejected"])}</td><td class="num">{e(size(t["result_bytes"]))}</td>'
        f'<td class="num">{e(duration(t["median_result_s"]))}</td></tr>' for t in tools)
    return ('<section><h2>Tool use</h2><table class="list" id="tools"><thead><tr><th>Tool</th>'
            f'<th class="num">Calls</th>'
            '<th class="num">Failed</th><th class="num">Declined</th><th class="num">Result bytes</th>'
            f'<th class="num">Median time to result</th></tr></thead><tbody>{rows}</tbody></table></section>')


def _subagents(subagents: list[dict]) -> str:
    if not subagents:
        return ""
    rows = "".join(
        f'<tr><td><code>{e(a["agent_id"])}</code></td><td>{e(a["agent_type"])}</td>'
        f'<td>{e(a["description"])}</td>'
        f'<td>{e(a["phase"] or "")}</td><td class="num">{count(a["tokens"]["output"])}</td>'
        f'<td class="num">{count(a["requests"])}</td><td class="num">{e(duration(a["seconds"]))}</td>'
        f'<td class="num">{share(a["tool_use"]["efficiency"])}</td></tr>' for a in subagents)
    return ('<section><h2>Subagents</h2><table class="list" id="subagents"><thead><tr><th>Agent</th>'
            f'<th>Type</th>'
            '<th>Description</th><th>Phase</th><th class="num">Output</th><th class="num">Requests</th>'
            f'<th class="num">Time</th><th class="num">Efficiency</th></tr></thead><tbody>{rows}</tbody>'
            f'</table></section>')


def _lessons(report: dict) -> str:
    if not report["lessons"]:
        return ""
    return "<section><h2>Lessons</h2><ul>" + "".join(f"<li>{e(x)}</li>" for x in report["lessons"]) + "</ul></section>"


# --- trends --------------------------------------------------------------------------------------

PERIOD_TITLES = {"day": "Day", "week": "Week of", "month": "Month"}
TREND_HEAD = ('<th class="num">Sessions</th><th class="num">Est. cost</th><th class="num">Per session</th>'
              '<th class="num" title="per session, from the period before">Δ per session</th>'
              '<th class="num" title="what re-writing a lost prompt cache cost, compactions aside (see'
              ' docs/accounting.md)">Cache waste</th>'
              '<th class="num">Efficiency</th><th class="num" title="from the period before">Δ</th>'
              '<th class="num">Tool calls</th><th class="num">Output</th><th class="num">Claude</th>'
              '<th class="num">Tool</th><th class="num">Human</th><th class="num">Away</th>')


def trends_page(data: dict, costliest: list[dict], projects: Mapping[str, str], query: TrendsQuery,
                machines: list[str] | None = None) -> str:
    """`/trends`: `retrod trends` as a page — the periods' cost and efficiency drawn, their figures
    in rows (a run of empty periods is one row, as the command prints it), the total below; and
    the outliers: the costliest sessions, each against the average session."""
    periods = data["periods"]
    by = data["by"]
    if any(has_figures(p) for p in periods):
        rows = "".join(_trend_rows(p, change, through, data, projects)
                       for p, change, through in shown_periods(periods, by))
    else:
        rows = (f'<tr><td colspan="14" class="empty">No sessions'
                f'{" match" if data["project"] or data["since"] else " yet"}.</td></tr>')
    total = data["total"]
    prices = data["prices"]
    body = (f'<div class="title-row"><h1>Trends</h1><p class="lead">by {e(by)}, cut in {e(data["time_zone"])}; '
            f'each session counts wholly in the {e(by)} it started</p></div>'
            f"{_trend_filters(projects, query, machines or [])}"
            f"{_trend_cards(total)}"
            '<section><h2>Cost and efficiency</h2><p class="hint">Estimated cost per '
            f'{e(by)} (bars) and the share of tool calls no waste signal flagged (line).</p>'
            '<div id="trends-chart" class="chart"></div></section>'
            f"{_outliers(costliest, total, query.project if query.project in projects else None)}"
            f'<section><div class="scroll"><table class="list" id="trends"><thead><tr>'
            f'<th>{PERIOD_TITLES[by]}</th>{TREND_HEAD}</tr></thead><tbody>{rows}</tbody>'
            f'<tfoot><tr data-period="total"><th>Total</th>{_trend_cells(total, None)}</tr></tfoot></table></div>'
            f'<p class="hint">Costs are estimates at API list prices ({e(prices["source"])} '
            f'{e(prices["version"])}), not a bill. <a href="/api/trends?{e(urlencode(query.params()))}">JSON</a>'
            f'</p></section>'
            + _data({"by": by, "trends": [{"period": p["period"], "cost_usd": p["cost"]["usd"],
                                 "efficiency": p["tool_use"]["efficiency"], "sessions": p["sessions"]}
                                for p in periods if p["period"] is not None]}))
    return _document("Trends", body, "Trends")


def _outliers(rows: list[dict], total: dict, project_listed: str | None) -> str:
    """The costliest sessions; `project_listed`: the Claude Code folder the list can filter by."""
    if not rows:
        return ""
    average = total["cost_per_session"]
    listed = "/?" + urlencode({"sort": "cost", **({"project": project_listed} if project_listed else {})})

    def times(spent: float | None) -> str:
        return "—" if spent is None or not average else f"{spent / average:,.1f}×"

    body = "".join(
        f'<tr data-uuid="{e(r["uuid"])}"><td><a href="/sessions/{quote(r["uuid"])}">{e(when(r["started_at"]))}</a></td>'
        f'<td class="project" title="{e(r["project_path"] or r["project_slug"])}">{e(project(r))}</td>'
        f'<td>{e(r["description"] or "")}</td>'
        f'<td class="num" data-field="cost">{e(cost_cell(r["cost"]))}</td>'
        f'<td class="num" data-field="times">{times(r["cost"]["usd"])}</td>'
        f'<td class="num" data-field="efficiency">{share(r["efficiency"])}</td>'
        f'<td class="num" data-field="wall">{e(duration(r["wall_s"]))}</td></tr>' for r in rows)
    return ('<section id="outliers"><h2>Costliest sessions</h2><p class="hint">Of the sessions these figures'
            f' add up, those that cost the most, each against their average ({e(usd(average))}).'
            f' <a href="{e(listed)}">All sessions by cost</a></p>'
            '<table class="list" id="costliest"><thead><tr><th>Started (UTC)</th><th>Project</th>'
            '<th>Description</th><th class="num">Est. cost</th><th class="num">× average</th>'
            f'<th class="num">Efficiency</th><th class="num">Wall clock</th></tr></thead><tbody>{body}</tbody>'
            '</table></section>')


def _listed(projects: Iterable[str], chosen: str | None) -> list[str]:
    """The project filter's choices: a project asked by a path or a part of its name (as
    `--project` reads it) stays chosen."""
    names = list(projects)
    return names if not chosen or chosen in names else [chosen, *names]


def _trend_filters(projects: Iterable[str], query: TrendsQuery, machines: list[str]) -> str:
    def select(name: str, chosen: str | None, values: Iterable[tuple[str, str]]) -> str:
        return (f'<select name="{name}" aria-label="{name}">' + "".join(
            f'<option value="{e(v)}"{" selected" if v == (chosen or "") else ""}>{e(label)}</option>'
            for v, label in values) + "</select>")

    listed = _listed(projects, query.project)
    quick = "".join(
        f'<a class="chip{" on" if query.by == by else ""}" href="'
        f'{e("?" + urlencode(query.params(by=by)))}">{title}</a>'
        for by, title in (("day", "By day"), ("week", "By week"), ("month", "By month")))
    keep = "".join(f'<input type="hidden" name="{k}" value="{e(v)}">'
                   for k, v in query.params().items() if k in ("tz", "member"))
    return (f'<form class="filters" method="get" action="/trends">{keep}'
            f'{select("by", query.by, ((b, f"by {b}") for b in ("day", "week", "month")))}'
            f'{select("split", query.split, [("", "no split"), *((s, f"per {s}") for s in TREND_SPLITS)])}'
            f'{select("project", query.project, [("", "All projects"), *((p, p) for p in listed)])}'
            f'{_machine_select(machines, query.machine)}'
            f'<label>From <input type="date" name="since" value="{e(query.since)}"></label>'
            f'<button type="submit">Show</button><a href="/trends" class="clear">Clear</a>'
            f'<div class="quick">{quick}</div></form>')


def _trend_cards(total: dict) -> str:
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
                shorts: Mapping[str, str]) -> str:
    """A period's row and the rows of its projects or models; a run of empty periods: one row
    (`through`: its last period's name). As trends.shown_periods gives them."""
    name = period_name(p, data["by"])
    if not has_figures(p):
        return (f'<tr class="muted" data-period="{e(p["period"])}"><td>{e(name)}</td>'
                f'<td colspan="13">no sessions{e(f" to {through}" if through else "")}</td></tr>')
    detail = []
    if p["verdicts"]:
        detail.append(" ".join(verdict_chip(v) + f"&nbsp;{n}" for v, n in p["verdicts"].items()))
    if p["top_waste"]:
        detail.append("waste: " + e(", ".join(f"{SIGNAL_TITLES[w['signal']].lower()} {w['count']}"
                                                for w in p["top_waste"])))
    out = [f'<tr data-period="{e(p["period"] or "undated")}"><td>{e(name)}</td>{_trend_cells(p, change)}</tr>']
    if detail:
        out.append(f'<tr class="detail-row"><td></td><td colspan="13">{" · ".join(detail)}</td></tr>')
    for row in p.get("projects", []):
        out.append(f'<tr class="sub" data-project="{e(row["project_slug"])}"><td title="{e(row["project"])}">'
                   f'{e(project(row, shorts))}</td>{_trend_cells(row, None)}</tr>')
    for row in p.get("machines", []):
        out.append(f'<tr class="sub" data-machine="{e(row["machine"])}"><td>{e(row["machine"])}</td>'
                   f'{_trend_cells(row, None)}</tr>')
    if data["split"] == "model":
        for m in p["tokens_by_model"]:
            out.append(f'<tr class="sub" data-model="{e(m["model"] or "")}"><td>{e(m["model"] or "unknown model")}'
                       f'</td><td class="num">{count(m["sessions"])}</td>'
                       f'<td class="num" data-field="cost">{e(usd(m["cost_usd"]))}</td>'
                       f'<td colspan="2"></td>'
                       f'<td class="num" data-field="cache_waste">{e(usd(m["cache_waste_usd"]))}</td>'
                       f'<td colspan="3"></td><td class="num" data-field="output">{count(m["output"])}</td>'
                       f'<td colspan="4"></td></tr>')
    return "".join(out)


def _share(ratio: float | None) -> str:
    return "" if ratio is None else f"{share(ratio)} of the estimated cost"


def _delta(change: dict | None, key: str) -> str:
    """A change from the period before: dollars per session, or efficiency in points."""
    value = None if change is None else change[key]
    return usd_change(value) if key == "cost_per_session" else points(value)


def _trend_cells(f: dict, change: dict | None) -> str:
    """A period's (or project's, or the total's) cells under TREND_HEAD."""
    cost = f["cost"]
    return (f'<td class="num" data-field="sessions">{count(f["sessions"])}</td>'
            f'<td class="num" data-field="cost">{e(cost_cell(cost))}</td>'
            f'<td class="num" data-field="cost_per_session">{e(usd(f["cost_per_session"]))}</td>'
            f'<td class="num" data-field="change_cost_per_session">'
            f'{_delta(change, "cost_per_session")}</td>'
            f'<td class="num" data-field="cache_waste" title="{e(_share(f["cache"]["waste_share"]))}">'
            f'{e(usd(f["cache"]["waste_usd"]))}</td>'
            f'<td class="num" data-field="efficiency">{share(f["tool_use"]["efficiency"])}</td>'
            f'<td class="num" data-field="change_efficiency">'
            f'{_delta(change, "efficiency")}</td>'
            f'<td class="num" data-field="tool_calls">{count(f["tool_use"]["calls"])}</td>'
            f'<td class="num" data-field="output">{count(f["tokens"]["total"]["output"])}</td>'
            f'<td class="num" data-field="claude">{e(duration(f["claude_s"]))}</td>'
            f'<td class="num" data-field="tool">{e(duration(f["tool_s"]))}</td>'
            f'<td class="num" data-field="human">{e(duration(f["human_s"]))}</td>'
            f'<td class="num" data-field="away">{e(duration(f["away_s"]))}</td>')


# --- live ----------------------------------------------------------------------------------------

LIVE_HEAD = ('<tr><th>Session</th><th>Project</th><th class="num">Est. cost</th><th class="num">Output</th>'
             '<th class="num">Tokens</th><th class="num">Requests</th><th class="num">Tool calls</th>'
             '<th class="num">Efficiency</th><th class="num">Wall clock</th><th>Last line (UTC)</th></tr>')


def _example(text: str | None) -> str:
    return "" if text is None else f"<div>e.g. <code>{e(text)}</code></div>"


LESSON_STATUS = {"working": "verdict-high_impact", "not working": "verdict-avoidable_waste",
                 "too early": "verdict-pending", "unclear": "verdict-small_impact"}


def lessons_page(found: dict | None, projects: list[str]) -> str:
    """`/lessons`: `retrod lessons` of a project — the answer, then per pattern and per lesson its
    rate before retrod first named it and since, drawn as two bars on one scale (a page row's);
    without a project, the projects to choose from."""
    if found is None:
        items = "".join(f'<li><a href="/lessons?{e(urlencode({"project": name}))}">{e(name)}</a></li>'
                        for name in sorted(projects))
        return _document("Lessons", '<div class="title-row"><h1>Lessons</h1><p class="lead">whether what the brief'
                                    ' names falls after retrod starts naming it; choose a project</p></div>'
                                    f'<section><ul class="projects">{items or "<li>No sessions yet.</li>"}</ul>'
                                    '</section>', "Lessons")
    rows = found["patterns"] + found["lessons"]
    top = max([r[side]["rate"] or 0 for r in rows for side in ("before", "after")] + [0])

    def bars(r: dict) -> str:
        out = []
        for side in ("before", "after"):
            rate = r[side]["rate"]
            width = 0 if not top or rate is None else rate / top * 100
            label = per_100(rate)
            mark = " (all projects)" if side == "before" and r["baseline"] == "all projects" else ""
            out.append(f'<div class="lesson-bar" data-field="{side}" data-sessions="{r[side]["sessions"]}">'
                       f'<span class="muted">{side}{mark}</span> <b>{label}</b>'
                       f'<div class="bar"><i class="{side}" style="width:{width:.1f}%"></i></div></div>')
        return "".join(out)

    def status(r: dict) -> str:
        back = ", came back" if r["back"] else ""
        return f'<span class="chip {LESSON_STATUS[r["status"]]}" data-field="status">{e(r["status"] + back)}</span>'

    pattern_rows = "".join(
        f'<tr data-pattern="{e(r["pattern"])}"><td><code>{e(r["pattern"])}</code><div class="muted">{e(r["what"])}'
        f'</div>{_example(r["example"])}</td>'
        f'<td>{status(r)}</td><td>{bars(r)}</td>'
        f'<td class="num">{e(when(r["first_given"]["started_at"]))}<div class="muted">to {r["sessions_given"]}'
        f' session{"" if r["sessions_given"] == 1 else "s"}</div></td></tr>' for r in found["patterns"])
    lesson_rows = "".join(
        f'<tr data-lesson="{e(r["lesson"])}"><td>{e(r["lesson"])}<div class="muted">{e(r["logged"]["task"])} /'
        f' {e(r["logged"]["phase"])}</div></td><td>{status(r)}</td><td>{bars(r)}</td>'
        f'<td class="num">{e(when(r["logged"]["at"]))}</td></tr>' for r in found["lessons"])
    head = '<thead><tr><th>What</th><th>Status</th><th>Rate before → since</th><th>{}</th></tr></thead>'
    body = (f'<div class="title-row"><h1>Lessons</h1><p class="lead" id="lessons-answer">{e(found["answer"])}</p>'
            f'</div><p class="hint">{e(found["project"])}: per 100 tool calls (a cache cause: per 100 requests),'
            ' the last 10 sessions before retrod first named it against the last 10 since.'
            f' <a href="/api/lessons?{e(urlencode({"project": found["project"]}))}">JSON</a></p>'
            + (f'<section><h2>Patterns the brief named</h2><table class="list" id="lesson-patterns">'
               f'{head.format("First named")}<tbody>{pattern_rows}</tbody></table></section>' if pattern_rows else "")
            + (f'<section><h2>Lessons logged</h2><table class="list" id="lesson-lessons">'
               f'{head.format("First logged")}<tbody>{lesson_rows}</tbody></table></section>' if lesson_rows else ""))
    return _document("Lessons", body, "Lessons")


def live_row(row: Mapping) -> str:
    link = f"/sessions/{quote(row['uuid'])}"
    name = e(row["description"]) if row["description"] else e(row["uuid"][:8])
    return (f'<tr data-uuid="{e(row["uuid"])}"><td><a href="{link}">{name}</a></td>'
            f'<td class="project" title="{e(row["project_path"] or row["project_slug"])}">'
            f'{e(project(row))}</td>'
            f'<td class="num" data-field="cost">{e(cost_cell(row["cost"]))}</td>'
            f'<td class="num" data-field="output">{count(row["tokens"]["output"])}</td>'
            f'<td class="num" data-field="tokens">{count(row["total_tokens"])}</td>'
            f'<td class="num" data-field="requests">{count(row["requests"])}</td>'
            f'<td class="num" data-field="tool_calls">{count(row["tool_calls"])}</td>'
            f'<td class="num" data-field="efficiency">{share(row["efficiency"])}</td>'
            f'<td class="num" data-field="wall">{e(duration(row["wall_s"]))}</td>'
            f'<td data-field="ended_at">{e(when(row["ended_at"]))}</td></tr>')


def live_page(rows: list[dict]) -> str:
    body = ('<div class="title-row"><h1>Live</h1><p class="lead">'
            f'<span id="live-status" class="status">connecting…</span>'
            '</p></div>'
            f'<p class="hint">Sessions with transcript lines in the last hour, and any session that writes '
            'while this page is open: their figures move as the daemon reads each line.</p>'
            f'<table class="list" id="live"><thead>{LIVE_HEAD}</thead>'
            f'<tbody>{"".join(live_row(r) for r in rows)}'
            '</tbody></table><p class="empty" id="live-empty"' + (' hidden' if rows else '') +
            '>No session is active right now. Start Claude Code, and its session appears here.</p>')
    return _document("Live", body, "Live")
