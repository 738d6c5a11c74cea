"""Producing a retrospective: close what is asked, fill the user's totals, build, save."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from psycopg import Connection
from psycopg.rows import dict_row

from ..basics.errors import UserError
from ..basics.json_text import json_text
from ..store.queries import q
from ..tracking import PhaseNotes, TrackingError, ensure_session, give_verdict, may_write
from . import kept_reports, markdown, model, shapes
from .prices import DEFAULT, Prices

INT_MAX = 2**31 - 1  # cc_sessions keeps the original design's INT columns


class OutputError(UserError, ValueError):
    """`--output` names nothing a report can be written to: the user's mistake."""


def slugify(text: str, max_len: int = 60) -> str:
    """A file-name-safe slug: no separators, no dots, so no path can escape the reports folder."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:max_len].rstrip("-")


def file_name(report: Mapping[str, Any], extension: str = "md") -> str:
    """`<date>-<description>-<short uuid>.<ext>`, slugified: two sessions never share a file, and
    whatever the description or session id holds, the name stays inside the reports folder."""
    session = report["session"]
    date = (session["started_at"] or "")[:10] or "undated"
    short = slugify(session["uuid"][:8]) or "session"
    name = slugify(session["description"] or "")
    return f"{date}-{name}-{short}.{extension}" if name else f"{date}-{short}.{extension}"


def check_output(output: Path | None) -> None:
    """Refuse an `--output` that cannot be a file before any work is done. Its folder must exist:
    a mistyped path would otherwise leave a trail of new folders (RETROD_REPORTS_DIR, retrod's own
    setting, is created when needed)."""
    if output is None:
        return
    if output.is_dir():
        raise OutputError(f"--output {output} is a folder; name a file in it, e.g. {output / 'report.md'}")
    if not output.parent.exists():
        raise OutputError(f"--output {output}: the folder {output.parent} does not exist; create it first,"
                          " or name a file in a folder that exists")


def produce(conn: Connection, session: str, *, close: bool = False, output: Path | None = None,
            reports_dir: Path | None = None, as_json: bool = False,
            away_after_s: float = model.AWAY_AFTER_S, prices: Prices = DEFAULT,
            member: str | None = None, html: Callable[[Connection, Any], str] | None = None,
            verdict: str | None = None, notes: PhaseNotes | None = None) -> tuple[shapes.Retrospective, str]:
    """Build the report and save it to `output`, else into `reports_dir` (None for both: not saved).
    `prices`: what its estimated costs use; `member`: a team's member whose session it is; `html`:
    renders it as a page instead of Markdown or JSON (`--format html`: the web UI's). The
    report says where it was saved (`saved_to`), or why it could not be saved into `reports_dir`
    (`not_saved`). `verdict` and `notes` (with `close` only): the open phase ends with them, as
    `phase end` ends it (else the latest phase that ended still `pending` gets them).

    One transaction: a failure anywhere, writing an `output` included, leaves the database
    untouched. A report that cannot be saved into `reports_dir` (RETROD_REPORTS_DIR, a setting)
    is still answered, so as not to lose it: the caller shows it and says why it was not saved,
    and what it shows (its session closed, the totals filled) is kept.
    """
    check_output(output)
    if verdict is not None and not close:
        raise TrackingError("--verdict goes with --close (a phase ends when the session is closed);"
                            " else use `retrod phase end --verdict VERDICT`")
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        # A team's reader role reads everyone's sessions and writes none: its report is read only.
        writable = may_write(conn)
        if close and not writable:
            raise TrackingError("--close: this database role may only read (a team's reader)")
        if writable:
            user_session = ensure_session(cur, session)
            if close and verdict is not None:
                give_verdict(cur, user_session["id"], verdict, notes or PhaseNotes())
            if close:
                cur.execute(q("tracking_close_open_phases"), {"session_id": user_session["id"]})
        render: Callable[[Any], str] = (
            (lambda r: html(conn, r)) if html is not None else (lambda r: json_text(r) + "\n") if as_json
            else markdown.render)
        if html is None and not close:  # (what closing changes, or a page reads, is not kept)
            built, text = kept_reports.report(conn, session, away_after_s, prices, member,
                                              "json" if as_json else "md", render)
        else:
            built = model.build(conn, session, away_after_s, prices, member)
            text = render(built)
        report: shapes.Retrospective = {**built}  # (a kept report is shared: only its top level is added to)
        summary = report["summary"]
        if writable:
            cur.execute(q("tracking_fill_session_totals"), {
                "session": session, "close": close,
                **{f: min(cast(dict[str, int], summary["tokens"]["total"])[f], INT_MAX) for f in model.TOKEN_FIELDS},
                "claude_s": summary["claude_s"], "tool_s": summary["tool_s"], "human_s": summary["human_s"],
            })
        extension = "html" if html else "json" if as_json else "md"
        path = output or (reports_dir / file_name(report, extension) if reports_dir else None)
        if path is not None:
            not_saved = _save(path, text, given=output is not None)
            # For the caller (after the text is made: the saved file itself does not say)
            if not_saved:
                report["not_saved"] = not_saved
            else:
                report["saved_to"] = str(path)
    return report, text


def _save(path: Path, text: str, given: bool) -> str | None:
    """Write the report to `path`. An `--output` that cannot be written is refused (OutputError);
    for RETROD_REPORTS_DIR, the reason it could not be written is returned instead."""
    try:
        if not given:  # an --output's folder is checked, never created (check_output)
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        if given:
            raise OutputError(f"cannot save the report (--output {path}): {exc.strerror or exc}") from None
        return f"the report was not saved in RETROD_REPORTS_DIR ({path}): {exc.strerror or exc}"
    return None


def close_idle_sessions(conn: Connection, idle_s: float, away_after_s: float) -> list[str]:
    """End tracked sessions quiet for `idle_s`: ended_at = their last activity, totals filled.

    Their open phases stay open: only the user can give a phase its verdict."""
    closed = []
    for session, last_activity in conn.execute(q("tracking_idle_open_sessions"), {"idle": idle_s}).fetchall():
        produce(conn, session, away_after_s=away_after_s)  # fills the totals, saves nothing
        with conn.transaction():
            conn.execute(q("tracking_end_session_at"), {"session": session, "ended_at": last_activity})
        closed.append(session)
    return closed
