"""The report as Markdown."""

from __future__ import annotations

BUCKET_TITLES = {"main": "main", "subagents": "subagents", "compaction": "compaction", "total": "total"}


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def render(report: dict) -> str:
    session, summary = report["session"], report["summary"]
    date = (session["started_at"] or "")[:10] or "undated"
    lines = [
        f"# Session Retrospective: {date} — {session['description'] or session['uuid']}",
        "",
        f"Session `{session['uuid']}` in `{session['project_slug']}`.",
        "",
        "## Summary",
        "",
        "| | |",
        "|---|---:|",
        f"| Wall clock | {_duration(summary['wall_s'])} |",
        f"| Claude time | {_duration(summary['claude_s'])} |",
        f"| Tool time | {_duration(summary['tool_s'])} |",
        f"| Human time | {_duration(summary['human_s'])} |",
        f"| Requests | {summary['requests']:,} |",
        f"| Tool calls | {summary['tool_calls']:,} |",
        f"| Compactions | {summary['compactions']:,} |",
        f"| Tool result input | ~{summary['tool_result_tokens_est']:,} tokens |",
        "",
        "| tokens | input (fresh) | output | cache read | cache create |",
        "|---|---:|---:|---:|---:|",
    ]
    for bucket, title in BUCKET_TITLES.items():
        t = summary["tokens"][bucket]
        lines.append(f"| {title} | {t['input']:,} | {t['output']:,} | {t['cache_read']:,} | {t['cache_create']:,} |")
    if report["subagents"]:
        lines += ["", "## Subagents", "",
                  "| agent | type | description | output | input | cache read | cache create | time |",
                  "|---|---|---|---:|---:|---:|---:|---:|"]
        for a in report["subagents"]:
            t = a["tokens"]
            desc = a["description"].replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{a['agent_id']}` | {a['agent_type']} | {desc} | {t['output']:,} | {t['input']:,} "
                         f"| {t['cache_read']:,} | {t['cache_create']:,} | {_duration(a['seconds'])} |")
    return "\n".join(lines) + "\n"
