"""The report as data, assembled from precomputed rows only (no transcript is read here)."""

from __future__ import annotations

from datetime import datetime

from psycopg import Connection
from psycopg.rows import dict_row

from ..store.queries import q

BUCKETS = ("main", "subagents", "compaction", "total")
TOKEN_FIELDS = ("input", "output", "cache_read", "cache_create")


class SessionNotFound(LookupError):
    """No session, or more than one, matches what the user typed."""


def _seconds(us: int) -> float:
    return round(us / 1_000_000, 3)


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None


def resolve_session(conn: Connection, prefix: str) -> str:
    prefix = prefix.strip().lower()
    if not prefix:
        raise SessionNotFound("give a session uuid or a unique prefix of one")
    found = [row[0] for row in conn.execute(q("find_sessions"), {"prefix": prefix})]
    if not found:
        raise SessionNotFound(f"no session matches {prefix!r}")
    if len(found) > 1:
        raise SessionNotFound(f"{prefix!r} is ambiguous: it matches {found[0]}, {found[1]}, ...; type more of it")
    return found[0]


def build(conn: Connection, session: str) -> dict:
    args = {"session": session}
    with conn.cursor(row_factory=dict_row) as cur:
        files = cur.execute(q("session_files"), args).fetchone()
        by_bucket = {row["bucket"]: row for row in cur.execute(q("session_tokens"), args)}
        times = cur.execute(q("session_times"), args).fetchone()
        tool_calls = cur.execute(q("session_tool_calls"), args).fetchone()["tool_calls"]
        subagent_rows = cur.execute(q("session_subagents"), args).fetchall()
        user_row = cur.execute(q("user_session"), args).fetchone()

    tokens = {b: {f: int(by_bucket[b][f]) if b in by_bucket else 0 for f in TOKEN_FIELDS}
              for b in BUCKETS[:-1]}
    tokens["total"] = {f: sum(tokens[b][f] for b in BUCKETS[:-1]) for f in TOKEN_FIELDS}
    request_times = [t for row in by_bucket.values() for t in (row["first_ts"], row["last_ts"]) if t]
    started = times["first_ts"] or (min(request_times) if request_times else None)
    ended = times["last_ts"] or (max(request_times) if request_times else None)
    return {
        "session": {
            "uuid": session,
            "project_slug": files["project_slug"],
            "description": user_row["description"] if user_row else None,
            "started_at": _iso(started),
            "ended_at": _iso(ended),
            "transcripts": files["transcripts"],
            "transcripts_deleted": files["transcripts_deleted"],
            "bad_lines": int(files["bad_lines"]),
        },
        "summary": {
            "wall_s": _seconds(times["wall_us"]),
            "claude_s": _seconds(times["claude_us"]),
            "tool_s": _seconds(times["tool_us"]),
            "human_s": _seconds(times["human_us"]),
            "requests": sum(row["requests"] for row in by_bucket.values()),
            "compactions": int(files["compactions"]),
            "tool_calls": tool_calls,
            "tool_result_bytes": int(times["tool_result_bytes"]),
            "tool_result_tokens_est": int(times["tool_result_bytes"]) // 4,
            "persisted_outputs": {"count": files["persisted_outputs"], "bytes": int(files["persisted_bytes"])},
            "tokens": tokens,
        },
        "subagents": [_subagent(row) for row in subagent_rows],
    }


def _subagent(row: dict) -> dict:
    if row["meta_type"] or row["meta_description"]:
        matched_by, agent_type, description = "meta", row["meta_type"], row["meta_description"]
    elif row["linked_tool_use_id"]:
        matched_by, agent_type, description = "tool_use", row["linked_type"], row["linked_description"]
    elif row["nearest_tool_use_id"]:
        matched_by, agent_type, description = "timestamp", row["nearest_type"], row["nearest_description"]
    else:
        matched_by, agent_type, description = "unknown", None, None
    return {
        "agent_id": row["agent_id"],
        "agent_type": agent_type or "unknown",
        "description": description or "unknown",
        "matched_by": matched_by,
        "tokens": {f: int(row[f]) for f in TOKEN_FIELDS},
        "requests": row["requests"],
        "seconds": _seconds(row["span_us"] or 0),
        "started_at": _iso(row["first_ts"]),
        "phase": None,
    }
