"""The retrospective as Markdown (GitHub-flavoured, with a Mermaid timeline).

Every stored string (accounting.md §2.10: descriptions, paths, commands, tool, task, phase, model and agent
names, lessons) is shown by stored_text's rule: quoted in the prose, on one line without quotes in
a table's cell (`cell`) and in the timeline's labels, where quotes would only be noise."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..basics.format import cost as shown_cost
from ..basics.format import count, duration, instant, share, size, usd
from ..basics.stored_text import one_line, quoted
from ..basics.verdicts import shown
from .model import BUCKETS, SIGNALS

# Token columns in the order the report shows them, with their row titles.
TOKEN_TITLES = {"output": "Output", "input": "Input (fresh)", "cache_read": "Cache read",
                "cache_create": "Cache create"}
SHOWN = tuple(TOKEN_TITLES)
# Mermaid gantt tags: the nearest it has to colours, by how well the phase went.
GANTT_TAG = {"high_impact": "done, ", "moderate_impact": "done, ", "small_impact": "",
             "exploratory_useful": "active, ", "exploratory_waste": "crit, ", "avoidable_waste": "crit, "}
SIGNAL_TITLES = {"sibling_error": "Sibling error", "error_retry": "Error, retried",
                 "persisted_output_read": "Persisted output read back", "post_write_read": "Read after own write",
                 "duplicate": "Duplicate call", "re_read": "Re-read, unchanged"}
NO_PHASES = ("No phases were logged for this session, so there is no verdict breakdown. Log them as you "
             "work: `retrod phase start --task T --phase P`, then `retrod phase end --verdict V` "
             "(or `retrod skills install` and let Claude do it).")


def cell(value: object) -> str:
    """Stored text inside a table cell: stored_text.one_line (one line, no control character, at
    most 200 characters), and no column break."""
    return one_line(value).replace("|", "\\|")


def efficiency(tool_use: Mapping[str, Any]) -> str:
    """Productive calls as a share of all calls (accounting.md §2.6); a dash without calls."""
    return share(tool_use["efficiency"])


def _table(header: list[str], rows: list[list[str]], text_columns: tuple[int, ...] = (0,)) -> list[str]:
    align = ["---" if i in text_columns else "---:" for i in range(len(header))]
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |",
            *("| " + " | ".join(r) + " |" for r in rows)]


def render(report: Mapping[str, Any]) -> str:
    session, summary = report["session"], report["summary"]
    date = (session["started_at"] or "")[:10] or "undated"
    # (a session's id is stored text too: a 2.0.x agent file names its session by any sessionId)
    title = quoted(session["description"]) if one_line(session["description"]) else one_line(session["uuid"])
    out = [f"# Session Retrospective: {date} — {title}", "",
           f"Session `{one_line(session['uuid'])}` in {quoted(session['project_path'] or session['project_slug'])}"
           + (f", {session['started_at'][:16].replace('T', ' ')} → {session['ended_at'][:16].replace('T', ' ')} UTC."
              if session["started_at"] and session["ended_at"] else "."), ""]
    out += _summary(summary)
    out += _tokens_by_model(summary, report["prices"])
    out += _cache(summary["cache"])
    out += _claude_code(report.get("claude_code"), summary["cost"])
    if report["phases"]:
        out += _timeline(report["phases"]) + _verdicts(report["verdicts"], report["outside_phases"])
    else:
        out += ["", NO_PHASES]
    out += _tool_use(report["tools"]) + _waste(report["waste"], summary["tool_use"])
    out += _subagents(report["subagents"])
    if report["phases"]:
        out += _tasks(report["tasks"]) + _phase_detail(report["phases"]) + _lessons(report["lessons"])
    out += _plan(report["plan"], summary)
    return "\n".join(out) + "\n"


def _summary(summary: dict) -> list[str]:
    tokens = summary["tokens"]
    rows = [[TOKEN_TITLES[f], *(count(tokens[b][f]) for b in BUCKETS)] for f in SHOWN]
    out = ["## Summary", ""]
    out += _table(["", "Wall clock", "Claude", "Tool", "Human", "Away", "Requests", "Tool calls", "Efficiency",
                   "Compactions", "Phases"],
                  [["Time and work", duration(summary["wall_s"]), duration(summary["claude_s"]),
                    duration(summary["tool_s"]), duration(summary["human_s"]), duration(summary["away_s"]),
                    count(summary["requests"]), count(summary["tool_use"]["calls"]), efficiency(summary["tool_use"]),
                    count(summary["compactions"]), count(summary["phases"])]])
    out += ["", ("*Claude*: the model answering (and compacting). *Tool*: tools running. *Human*: the "
                 "person reading and typing. *Tool calls*: the main thread's and its subagents'. *Away*: "
                 "pauses longer than "
                 f"{duration(summary['away_after_s'])} (`RETROD_AWAY_AFTER_S`). They add up to the wall "
                 "clock unless the first line is stamped later than one after it.")]
    out += [""] + _table(["Tokens", "Main", "Subagents", "Compaction", "Total"], rows)
    out += ["", (f"Tool results read into context: ~{count(summary['tool_result_tokens_est'])} tokens "
                 f"({count(summary['tool_result_bytes'])} bytes).")]
    out += ["", _cost_line(summary["cost"], summary["cache"])]
    return out


def _cost_line(cost: dict, cache: dict) -> str:
    """The estimated cost, and the share of it paid to write again a prompt cache that was lost
    (accounting.md §2.8's waste: compactions' re-writes are expected, not counted)."""
    line = f"Estimated cost: {cost_cell(cost)}"
    waste = cache["waste_usd"]
    if not waste:
        return line + "; no prompt-cache waste."
    part = f", {share(waste / cost['usd'])} of it" if cost["usd"] else ""
    return line + f"; prompt-cache waste {usd(waste)}{part} (see *Prompt Cache*)."


def cost_cell(cost: Mapping[str, Any]) -> str:
    """A report's cost figure (`{usd, complete, unknown_models}`) as format.cost shows it: a total
    that leaves out models with no price says it is a lower bound."""
    return shown_cost(cost["usd"], cost["complete"], priced=not cost.get("unknown_models"))


def model_name(name: str | None) -> str:
    """As code, so that `<synthetic>` is not taken for an HTML tag; None: the line named no model."""
    if name is None:
        return "unknown"
    return cell(name) if "`" in name else f"`{cell(name)}`"


def _tokens_by_model(summary: dict, prices: dict) -> list[str]:
    rows, cost = summary["tokens_by_model"], summary["cost"]
    if not rows:
        return []
    # Web searches get a column only when a model made some (docs/decisions.md): most sessions
    # make none, and a column of zeros would crowd the table.
    counted = ("requests", *SHOWN, "cache_create_1h", *(("web_searches",) if any(r["web_searches"] for r in rows)
                                                         else ()))
    table = [[model_name(r["model"]), *(count(r[f]) for f in counted), usd(r["cost_usd"])] for r in rows]
    table.append(["**Total**", *(count(sum(r[f] for r in rows)) for f in counted), f"**{cost_cell(cost)}**"])
    source = f"{prices['source']} {prices['version']}"
    if prices["override"]:
        source = f"`RETROD_PRICES` {cell(prices['override'])} over {source}"
    note = (f"Estimated from {source}: each request part at the list price of its model on its day, with"
            " long-context and fast-mode prices where they applied, and its web searches at the list price"
            " per search; not a bill (a subscription and batch use are not priced).")
    if summary.get("split_requests"):
        note += (f" {count(summary['split_requests'])} requests had several parts (a refused attempt and the model"
                 " that answered, an advisor): each part is counted under its own model.")
    if any(r.get("fast_requests") for r in rows):
        note += " Fast mode: " + ", ".join(f"{model_name(r['model'])} {count(r['fast_requests'])}"
                                          for r in rows if r.get("fast_requests")) + "."
    if cost["unknown_models"]:
        names = ", ".join(model_name(m) for m in cost["unknown_models"])
        note += (f" Not priced (no price known for their tokens or their web searches; the total leaves those"
                 f" out): {names}.")
    return ["", "## Tokens by Model", ""] + _table(
        ["Model", "Requests", "Output", "Input", "Cache read", "Cache create", "of which 1h",
         *(["Web searches"] if "web_searches" in counted else []), "Est. cost"],
        table) + ["", note]


CAUSE_TITLES = {"compaction": "After a compaction (expected)", "model": "Model switched",
                "expired": "Pause past the cache's lifetime", "invalidated": "Prefix changed or dropped"}


def _cache(cache: dict) -> list[str]:
    """accounting.md §2.8: the hit ratio, the misses by cause with the tokens written again and what
    that cost beyond a cache read, and the costliest misses with their time, the pause before
    them and the context they re-wrote."""
    misses = cache["misses"]
    missed = sum(m["count"] for m in misses.values())
    out = ["", "## Prompt Cache", "",
           (f"Hit ratio {share(cache['hit_ratio'])}: {count(cache['read'])} tokens read from the cache, "
            f"{count(cache['create'])} written to it.")]
    out += _live(cache["live"])
    if not missed:
        return out + ["", "No cache miss: every request read back what the one before it had cached."]
    out += [""] + _table(["Cause", "Misses", "Re-written", "Extra cost"],
                         [[CAUSE_TITLES[c], count(m["count"]), count(m["rewritten"]), usd(m["extra_usd"])]
                          for c, m in misses.items() if m["count"]])
    out += ["", (f"Waste: {usd(cache['waste_usd'])} — what the misses other than compactions cost beyond reading "
                 "the same tokens from the cache. See docs/accounting.md for what causes each and what to do.")]
    rows = [[_utc_seconds(m["at"]), cell(m["agent"]) or "main", m["cause"] + (f" ({cell(m['reason'])})"
                                                                           if m["reason"] else ""),
             duration(m["pause_s"]), count(m["prefix_before"]), count(m["rewritten"]), usd(m["extra_usd"])]
            for m in cache["costliest"]]
    return out + ["", "Costliest misses:", ""] + _table(
        ["Time (UTC)", "Agent", "Cause (Claude Code's reason)", "Pause before", "Context before", "Re-written",
         "Extra cost"], rows, text_columns=(0, 1, 2))


def _live(live: dict) -> list[str]:
    """The main conversation's cache when the report was made: what the next message would cost
    to write again once it is cold (the moment it can still be saved)."""
    if live["state"] == "none":
        return []
    rewrite = f" (≈ {usd(live['rewrite_usd'])} more than reading it)" if live["rewrite_usd"] is not None else ""
    if live["state"] == "warm":
        return ["", (f"When this report was made the cache was warm for {duration(live['seconds_left'])} more: "
                     f"a message after that writes {count(live['prefix_tokens'])} tokens again{rewrite}.")]
    return ["", (f"When this report was made the cache was cold: the next message writes "
                 f"{count(live['prefix_tokens'])} tokens again{rewrite}.")]


def _utc_seconds(iso: str) -> str:
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%m-%d %H:%M:%S")


WINDOWS = {"five_hour": "5-hour window", "seven_day": "7-day window"}


def _claude_code(figures: dict | None, cost: dict) -> list[str]:
    """What Claude Code's status line reported (`retrod statusline` keeps it): its own cost
    estimate beside retrod's, and the rate-limit use reached while the session ran."""
    if not figures:
        return []
    lines = []
    if figures["cost_usd"] is not None:
        lines.append(f"- **Estimated cost:** Claude Code {usd(figures['cost_usd'])}, retrod {cost_cell(cost)}")
    reached = [f"{WINDOWS[w]} {share(r['max_used_pct'] / 100)}"
               + (f" (of the window that resets {_utc(r['max_resets_at'])})" if r["max_resets_at"] else "")
               for w, r in figures["rate_limits"].items() if r]
    if reached:
        lines.append(f"- **Rate limits reached during the session:** {'; '.join(reached)}")
    if not lines:
        return []
    return ["", "## Claude Code's Own Figures", "",
            f"As Claude Code's status line last reported them ({_utc(figures['updated_at'])}), beside retrod's:",
            "", *lines]


def _utc(iso: str) -> str:
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


_GANTT_KEYWORDS = re.compile(r"^(title|section|dateFormat|axisFormat|tickInterval|excludes|includes|todayMarker"
                             r"|weekday|click|accTitle|accDescr)\b", re.IGNORECASE)


def _gantt_text(text: str) -> str:
    """One line with no gantt syntax in it: no separators, and no keyword a line could start with."""
    clean = re.sub(r"[:#;%]", " ", one_line(text)).strip() or "-"
    return "'" + clean if _GANTT_KEYWORDS.match(clean) else clean


def _gantt_time(iso: str) -> str:
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _timeline(phases: list[dict]) -> list[str]:
    out = ["", "## Timeline", "", "```mermaid", "gantt", "    title Phases by verdict (UTC)",
           "    dateFormat YYYY-MM-DD HH:mm:ss", "    axisFormat %H:%M"]
    section = None
    for i, p in enumerate(phases, 1):
        if p["task"] != section:
            section = p["task"]
            out.append(f"    section {_gantt_text(section)}")
        end = p["ended_at"] or instant(datetime.now(UTC))  # an open phase runs until now
        tag = GANTT_TAG.get(p["verdict"], "")
        out.append(f"    {_gantt_text(p['phase'])} ({_gantt_text(p['verdict'])}) :{tag}p{i}, "
                   f"{_gantt_time(p['started_at'])}, {_gantt_time(end)}")
    return out + ["```"]


def _tool_use(tools: list[dict]) -> list[str]:
    if not tools:
        return ["", "## Tool Use", "", "No tool calls."]
    rows = [[cell(t["name"]) or "(unnamed)", count(t["calls"]), count(t["failed"]), count(t["rejected"]),
             size(t["result_bytes"]), size(t["median_result_bytes"]), duration(t["result_s"]),
             duration(t["median_result_s"])] for t in tools]
    note = ("Failed: the tool's errors. Declined: calls the person refused at its permission prompt (no error,"
            " and never an error retried).")
    return ["", "## Tool Use", ""] + _table(
        ["Tool", "Calls", "Failed", "Declined", "Results", "Median result", "Time to result", "Median time"],
        rows) + ["", note]


def _waste(waste: dict, tool_use: dict) -> list[str]:
    if not tool_use["calls"]:
        return []
    out = ["", "## Waste Signals", "",
           (f"{count(tool_use['productive'])} of {count(tool_use['calls'])} tool calls productive "
            f"({efficiency(tool_use)}); each call counts under the first signal that applies, in the order below.")]
    rows = []
    for signal in SIGNALS:
        kind = waste[signal]
        examples = "; ".join(
            f"{_when(e['at'])} {cell(e['tool'])} {cell(e['detail'] or '')}".strip()
            + (f" (agent {cell(e['agent'])})" if e["agent"] else "") for e in kind["examples"])
        rows.append([SIGNAL_TITLES[signal], count(kind["count"]), examples or "—"])
    return out + [""] + _table(["Signal", "Calls", "First examples (UTC)"], rows, text_columns=(0, 2))


def _when(iso: str | None) -> str:
    """Month, day and time of day (UTC), short enough for a table cell."""
    return f"{iso[5:10]} {iso[11:19]}" if iso else "untimed"


def _verdicts(verdicts: dict, outside: dict | None) -> list[str]:
    def row(title: str, phases: str, f: dict) -> list[str]:
        return [title, phases, *(count(f["tokens"][t]) for t in SHOWN), duration(f["claude_s"]),
                share(f["output_share"]), cost_cell(f["cost"]), efficiency(f["tool_use"])]

    rows = [row(cell(v), count(f["phases"]), f) for v, f in verdicts.items() if f["phases"]]  # the verdicts given
    if outside is not None:
        rows.append(row("*outside every phase*", "—", outside))
    out = ["", "## Verdict Breakdown", ""] + _table(
        ["Verdict", "Phases", "Output", "Input", "Cache read", "Cache create", "Claude time", "% of output",
         "Est. cost", "Efficiency"], rows)
    return out if outside is not None else out + ["", "(Phases overlap: what lies outside them is not shown.)"]


def _subagents(agents: list[dict]) -> list[str]:
    if not agents:
        return ["", "## Subagents", "", "No subagents."]
    rows = [[cell(a["description"]), cell(a["agent_type"]),
             *(count(a["tokens"][t]) for t in SHOWN), duration(a["seconds"]),
             count(a["tool_use"]["calls"]), efficiency(a["tool_use"]), cell(a["phase"]) or "—",
             cell(a["verdict"]) or "—"]
            for a in agents]
    return ["", "## Subagents", ""] + _table(
        ["Description", "Type", "Output", "Input", "Cache read", "Cache create", "Time", "Tool calls", "Efficiency",
         "Phase", "Verdict"], rows, text_columns=(0, 1, 9, 10))


def _tasks(tasks: dict) -> list[str]:
    rows = [[cell(task), count(f["phases"]), *(count(f["tokens"][t]) for t in SHOWN),
             duration(f["claude_s"]), cost_cell(f["cost"]), efficiency(f["tool_use"]),
             ", ".join(f"{cell(v)} ×{n}" for v, n in f["verdicts"].items())]
            for task, f in tasks.items()]
    return ["", "## By Task", ""] + _table(
        ["Task", "Phases", "Output", "Input", "Cache read", "Cache create", "Claude time", "Est. cost", "Efficiency",
         "Verdicts"],
        rows, text_columns=(0, 9))


TIMES = ("claude_s", "tool_s", "human_s", "away_s")
PLAN_TOOLS = {"todo": "`TodoWrite`", "task": "`TaskCreate` / `TaskUpdate`"}


def costliest_task(tasks: list[dict]) -> dict:
    """The task the Tasks section marks: the largest cost (output tokens between equals)."""
    return max(tasks, key=lambda t: (t["cost"]["usd"] or 0, t["tokens"]["output"]))


def task_status(task: dict) -> str:
    return task["status"] + ("" if task["ended_at"] else " (current)")


def task_cells(task: Mapping[str, Any]) -> dict[str, str]:
    """A task's figures as the Tasks section writes them (the web UI's task table too): time,
    output, tokens, cost, tool calls, efficiency and wasted calls, by the UI's field names."""
    use = task["tool_use"]
    return {"time": duration(sum(task[k] for k in TIMES)), "output": count(task["tokens"]["output"]),
            "tokens": count(sum(task["tokens"].values())), "cost": cost_cell(task["cost"]),
            "calls": count(use["calls"]),
            "efficiency": efficiency(use), "wasted": count(use["calls"] - use["productive"])}


def outside_tasks_s(tasks: list[dict], summary: dict) -> float:
    """The session's time that no task's window holds (its four times less the tasks')."""
    return max(sum(summary[k] for k in TIMES) - sum(t[k] for t in tasks for k in TIMES), 0)


def _plan(plan: dict, summary: dict) -> list[str]:
    """accounting.md §2.9's tasks, beside the phases: what each cost and how its calls went, the
    costliest marked, the time no task holds, and the tasks never started in one line."""
    if plan["family"] is None:
        return []
    tasks = plan["tasks"]
    out = ["", "## Tasks (from Claude's plan)", "",
           (f"From Claude's own plan ({PLAN_TOOLS[plan['family']]}, {count(plan['calls'])} calls): each task's "
            "time is when it was the one in progress; its figures are a phase's over that time.")]
    if tasks:
        costliest = costliest_task(tasks)
        rows = [[str(t["number"]), cell(t["name"]) + (" **(costliest)**" if t is costliest else ""),
                 cell(task_status(t)), *task_cells(t).values()] for t in tasks]
        out += [""] + _table(["#", "Task", "Status", "Time", "Output", "Tokens", "Est. cost", "Tool calls",
                              "Efficiency", "Wasted calls"], rows, text_columns=(1, 2))
        out += ["", (f"Outside every task: {duration(outside_tasks_s(tasks, summary))}. Log a verdict for task N with "
                     "`retrod phase log --from-task N --phase P --verdict V`.")]
    if plan["tasks_never_started"]:
        out += ["", "Never started: " + "; ".join(f"{quoted(t['name'])} ({t['status']})"
                                                  for t in plan["tasks_never_started"]) + "."]
    return out


def _phase_detail(phases: list[dict]) -> list[str]:
    out = ["", "## Phase Detail"]
    for i, p in enumerate(phases, 1):
        t = p["tokens"]
        end = p["ended_at"][11:19] if p["ended_at"] else "open"
        out += ["", f"### {i}. {quoted(p['task'])} / {quoted(p['phase'])} — {shown(p['verdict'])}", "",
                f"- **When:** {p['started_at'][:19].replace('T', ' ')} → {end} UTC",
                f"- **Actions:** {quoted(p['actions_summary']) if one_line(p['actions_summary']) else '—'}",
                (f"- **Tokens:** {count(t['output'])} out, {count(t['input'])} in, "
                 f"{count(t['cache_read'])} cache read, {count(t['cache_create'])} cache create "
                 f"({count(p['requests'])} requests)"),
                f"- **Estimated cost:** {_phase_cost(p)}",
                f"- **Turns:** {count(p['tool_turns'])} tool-heavy, {count(p['text_turns'])} text",
                f"- **Tool result input:** ~{count(p['tool_result_tokens_est'])} tokens",
                f"- **Tool calls:** {_tool_calls_line(p['tool_use'])}",
                (f"- **Time:** Claude {duration(p['claude_s'])}, tool {duration(p['tool_s'])}, "
                 f"human {duration(p['human_s'])}, away {duration(p['away_s'])}")]
        if p["useful_info"]:
            out.append(f"- **Useful info:** {quoted(p['useful_info'])}")
        if p["lessons_learned"]:
            out.append(f"- **Lessons learned:** {quoted(p['lessons_learned'])}")
    return out


def _tool_calls_line(tool_use: dict) -> str:
    if not tool_use["calls"]:
        return "none"
    wasted = ", ".join(f"{n} {SIGNAL_TITLES[s].lower()}" for s, n in tool_use["signals"].items() if n)
    return f"{count(tool_use['calls'])}, efficiency {efficiency(tool_use)}" + (f" ({wasted})" if wasted else "")


def _phase_cost(phase: dict) -> str:
    """The phase's estimated cost, and by model when it used more than one."""
    rows = phase["tokens_by_model"]
    total = cost_cell(phase["cost"])
    if len(rows) < 2:
        return total
    parts = ", ".join(f"{model_name(r['model'])} {usd(r['cost_usd'])}" for r in rows)
    return f"{total} ({parts})"


def _lessons(lessons: list[str]) -> list[str]:
    if not lessons:
        return []
    return ["", "## Lessons Summary", ""] + [f"{i}. {quoted(text)}" for i, text in enumerate(lessons, 1)]

