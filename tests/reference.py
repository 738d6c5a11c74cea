"""Independent reference implementation of retrod's accounting rules (test oracle).

Written from docs/accounting.md §2 (the accounting rules) and notes on Claude Code's transcript
formats only, without looking at the daemon's code.  It covers 2.1-2.5 and 2.7-2.9, and 2.10's
`retrod lessons` figures; 2.6 (tool calls and waste signals) is in tests/reference_tools.py.
Tokens by model (issue 11) were first written from the issue's text and the README's
decisions; they now follow accounting.md §2.2 "Iterations": a request is made of parts, each with its
own model, and tokens by model sum parts.  It is deliberately naive:
it reads every file whole, parses every line with json.loads, collects everything
in plain lists and dicts, and then computes each figure with plain loops.  There
is no incremental state and no performance trick; readability beats speed.

What it covers, in short:
  2.2  requests: global keys, the usage-winning ("chosen") record, attribution, buckets;
       iterations: when the chosen record's usage.iterations holds at least one object and
       their sums reach the top level in input, output, cache read and cache create, each
       object is a part (its model, else the message's; its own 5m/1h split), else the
       request is one part (the top-level usage, the message's model).  Request tokens =
       the parts' sums; a model row's "requests" counts that model's parts.
  2.3  one timeline per session: its main transcripts in project-folder-name order, a line
       with a non-empty uuid counted where first met; events, H, wall over counted lines.
  2.4  compactions and tool_result_bytes over counted lines; tool_calls; listed subagents.
  2.5  phase windows: tokens, turns, times, tool_result bytes, by model, subagent phase.
  2.8  prompt-cache misses: streams, elements, misses, causes, extra cost, live state
       (compute_cache).
  2.9  tasks from Claude's plan: the plan calls, which count, the family, the current task,
       windows, end statuses (compute_plan; a task's figures are compute_phases' over its windows).
  2.7  cost of each part with genai-prices (provider anthropic, the request's timestamp,
       {"speed": "fast"} when the chosen record's usage.speed is "fast").

Decisions the oracle takes where the accounting rules leave a choice (they are the project's decisions
or the reference's own; a daemon that differs must say why):
  - Iterations: elements of usage.iterations that are not objects are skipped; each object
    is sanitised like a top-level usage (cache create = its flat field when an integer,
    else its own 5m + 1h).
  - Timeline: the uuid dedupe runs over the main transcripts' own lines (accounting.md §2.3), also
    within one file; lines without a non-empty string uuid always count; two main files in
    one folder name (impossible on one machine) go by full path.  tool_calls
    looks at every own line of every main file (distinct ids count a copy once anyway).
  - Cost: per part, calc_price(Usage(input_tokens = input + cache read + cache create,
    output_tokens, cache_read_tokens, cache_write_tokens = cache create,
    cache_write_1h_tokens = the 1h split, or 0 when the part's 5m and 1h do not add up to
    its cache create (accounting.md §2.7: then all its writes count as 5m)), model, provider_id="anthropic",
    genai_request_timestamp = the request's timestamp (None, i.e. now, when it has none),
    price_context).  Long-context tiers thus apply to one part of one request.  A part
    with no tokens costs 0 and is not unpriced (e.g. <synthetic>); one with tokens whose
    model is None, or that the package cannot find (LookupError), is unpriced.  Amounts are
    summed as Decimal; reported dollars are floats rounded to 6 decimals.  Cost object:
    {"usd": the priced sum (None when some part is unpriced and no part with tokens is
    priced -- project decision), "unknown_models": the unpriced parts' distinct
    models sorted, None first, "complete": no part unpriced}.  A model row's cost_usd is
    None when any of its parts is unpriced.  prices_override {model: {input, output,
    cache_read, cache_create_5m, cache_create_1h}} (USD per million, as RETROD_PRICES)
    prices every part of the exact model names it holds, flat: the 1h writes (as above) at
    cache_create_1h, the rest at cache_create_5m, no tier.
  - Web searches (accounting.md §2.2, §2.7): a part's server_tool_use.web_search_requests, priced apart
    as calc_price(Usage(web_searches=n)) at the request's timestamp and price context, also
    for a model RETROD_PRICES names.  A part whose web searches cannot be priced (unknown or
    null model, or a model whose price has no web-search unit) is unpriced; its tokens are
    still priced when they can be (project decision).

Public API:  compute(projects_dir, away_after_s=1800, prices_override=None)
                 -> {session_uuid: figures}
                 (figures["tokens_by_model"]: {model or None: token figures and cost_usd};
                  figures["cost"]: the session's cost object)
             compute_phases(projects_dir, session, windows, away_after_s=1800)
                 -> [figures per window]  (2.5)
             compute_phase_models(projects_dir, session, windows, prices_override=None,
                                  with_cost=False)
                 -> [{model or None: token figures and cost_usd} per window], or with
                    with_cost=True [{"tokens_by_model": ..., "cost": cost object} per window]
             subagent_phase(projects_dir, session, windows) -> {agent_id: window index | None}
             compute_plan(projects_dir, session)
                 -> {"family", "calls", "tasks": [{"name", "status", "windows": [(start, end or
                     None)]}], "tasks_never_started": [{"name", "status"}]}  (2.9; microseconds)
Needs:       the genai-prices package (0.2.x) for the cost; imported when a price is asked.
Run:         python3 tests/reference.py ~/.claude/projects
"""

from __future__ import annotations

import datetime
import decimal
import json
import pathlib
import re
import sys
from pathlib import Path

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

# accounting.md §2.1: "<uuid>" is a lower-case 8-4-4-4-12 hex UUID; other names are ignored.
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# accounting.md §2.1: timestamps are RFC 3339 strings ("Z"/"z" or an offset; no offset = UTC).
# [0-9] rather than \d so that non-ASCII digits are not accepted.
TIMESTAMP_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"  # date
    r"[Tt ]"  # separator
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})"  # time
    r"(?:\.([0-9]+))?"  # optional fraction, any number of digits
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})?"  # optional offset
)

EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()

UTC_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

# A timestamp that is missing sorts last (accounting.md §2.2 "a missing one sorts last").
MISSING_TIMESTAMP = float("inf")

# Labels for agents that have no id of their own (accounting.md §2.2 "Agent of a record").
# Any label works as long as it is not "" (the main thread) and does not start with
# "acompact" (the compaction bucket).
UNNAMED_AGENT = "<unnamed>"  # agent_progress copy without a data.agentId
INLINE_AGENT = "<inline>"  # isSidechain: true line inside a main transcript

BUCKETS = ("main", "subagents", "compaction", "total")

# The token figures of a usage and of a part (accounting.md §2.2 "Usage": the four fields, and
# the 5m/1h split of the cache writes), and its web searches (accounting.md §2.2 "Web searches": "shown per
# model (summing parts, like tokens)").
MODEL_FIELDS = ("input", "output", "cache_read", "cache_create", "cache_create_5m", "cache_create_1h",
                "web_searches")

# accounting.md §2.3: the away threshold (RETROD_AWAY_AFTER_S), default 1800 s.
DEFAULT_AWAY_AFTER_S = 1800


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def parse_timestamp(value) -> int | None:
    """RFC 3339 string -> integer microseconds since the epoch; anything else -> None.

    accounting.md §2.1: "Timestamps are RFC 3339 strings: YYYY-MM-DD; T, t or a space; hh:mm:ss;
    an optional . and digits (those past the sixth are dropped); then Z, z, ±hh:mm or nothing
    (UTC). A value that is not a real instant (month 13, hour 24, second 60), or of any other
    form, is absent."
    """
    if not isinstance(value, str):
        return None
    m = TIMESTAMP_RE.fullmatch(value)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction = m.group(7) or ""
    offset = m.group(8)
    # Validate the calendar date (month range, days in month, year >= 1).
    try:
        date = datetime.date(year, month, day)
    except ValueError:
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    offset_seconds = 0
    if offset is not None and offset not in ("Z", "z"):
        sign = 1 if offset[0] == "+" else -1
        off_h = int(offset[1:3])
        off_m = int(offset[4:6])
        if off_h > 23 or off_m > 59:
            return None
        offset_seconds = sign * (off_h * 3600 + off_m * 60)
    micros = int((fraction + "000000")[:6])
    days = date.toordinal() - EPOCH_ORDINAL
    seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_seconds
    return seconds * 1_000_000 + micros


def seconds(total_microseconds: int) -> float:
    # accounting.md §2.3: "Seconds are reported with millisecond precision."
    return round(total_microseconds / 1_000_000, 3)


def non_empty_string(value) -> bool:
    return isinstance(value, str) and value != ""


def token_count(value) -> int:
    # accounting.md §2.2: "A value that is not a non-negative integer (bool and float
    # included) counts as 0."  type(...) is int excludes bool.
    if type(value) is int and value >= 0:
        return value
    return 0


def utf8_length(text: str) -> int:
    # accounting.md §2.4: UTF-8 length; "A lone surrogate counts 3 bytes."
    return len(text.encode("utf-8", "surrogatepass"))


def get_dict(obj, key) -> dict | None:
    """obj[key] if obj is a dict and obj[key] is a dict, else None (wrong type = absent)."""
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if isinstance(value, dict):
        return value
    return None


def content_blocks(line: dict) -> list[dict]:
    """The dict elements of line.message.content when it is a list, else []."""
    message = get_dict(line, "message")
    if message is None:
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _reject_constant(name):
    # NaN / Infinity / -Infinity are not JSON (RFC 8259); make json.loads fail.
    raise ValueError(f"not JSON: {name}")


def read_objects(path: Path) -> list[dict]:
    """Every complete line of the file that is a JSON object, in file order.

    accounting.md §2.1: "retrod reads only complete lines: a line ends in \\n (a \\r before it
    is ignored)" and a line that is "not a JSON object is skipped".
    """
    data = path.read_bytes()
    # "a UTF-8 byte order mark at the start of a file is ignored"
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    pieces = data.split(b"\n")
    complete_lines = pieces[:-1]  # the last piece has no "\n" after it: partial, ignored
    objects = []
    for raw in complete_lines:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        # "A line that is not valid UTF-8 (raw bytes ...) ... is skipped"; a \ud800 escape is
        # plain ASCII text, so it decodes, and json.loads accepts it.
        try:
            text = raw.decode("utf-8")
            obj = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            objects.append(obj)
    return objects


# ---------------------------------------------------------------------------
# Step 1: find the transcript files (accounting.md §2.1 "Files")
# ---------------------------------------------------------------------------


def find_files(projects_dir: Path) -> list[dict]:
    """One entry per transcript file that belongs to a session.

    Each entry: {"path", "slug", "session", "kind": "main"|"subagent", "agent_id", "lines"}.
    """
    files = []
    for slug_dir in sorted(projects_dir.iterdir()):
        if not slug_dir.is_dir():
            continue
        slug = slug_dir.name
        for entry in sorted(slug_dir.iterdir()):
            name = entry.name
            if entry.is_file() and name.endswith(".jsonl"):
                stem = name[: -len(".jsonl")]
                if UUID_RE.fullmatch(stem):
                    # <slug>/<uuid>.jsonl: main transcript of session <uuid>.
                    lines = read_objects(entry)
                    files.append(
                        {"path": entry, "slug": slug, "session": stem, "kind": "main",
                         "agent_id": "", "lines": lines, "below_root": f"{slug}/{name}"}
                    )
                elif stem.startswith("agent-") and len(stem) > len("agent-"):
                    # <slug>/agent-<id>.jsonl (Claude Code 2.0.x): subagent <id> of the
                    # session named by the first sessionId in the file that names a session;
                    # a file with none belongs to no session.
                    lines = read_objects(entry)
                    session = None
                    for line in lines:
                        session = named_session(line.get("sessionId"))
                        if session is not None:
                            break
                    if session is None:
                        continue
                    files.append(
                        {"path": entry, "slug": slug, "session": session, "kind": "subagent",
                         "agent_id": stem[len("agent-"):], "lines": lines, "below_root": f"{slug}/{name}"}
                    )
            elif entry.is_dir() and UUID_RE.fullmatch(name):
                # <slug>/<uuid>/subagents/**/agent-<id>.jsonl (any depth below subagents/).
                subagents_dir = entry / "subagents"
                if not subagents_dir.is_dir():
                    continue
                for path in sorted(subagents_dir.rglob("agent-*.jsonl")):
                    if not path.is_file():
                        continue
                    agent_id = path.name[len("agent-"): -len(".jsonl")]
                    if agent_id == "":
                        continue  # agent-.jsonl is ignored
                    files.append(
                        {"path": path, "slug": slug, "session": name, "kind": "subagent",
                         "agent_id": agent_id, "lines": read_objects(path),
                         "below_root": str(path.relative_to(projects_dir))}
                    )
    # accounting.md §2.1 unmarked fork copies are decided over every session's main transcripts: each
    # file carries the one map of which session wrote each uuid.
    writers = uuid_writers(files)
    for file in files:
        file["uuid_writer"] = writers
    return files


# ---------------------------------------------------------------------------
# Step 2: classify lines (accounting.md §2.1, last paragraph)
# ---------------------------------------------------------------------------


def named_session(session_id) -> str | None:
    """accounting.md §2.1: "The session a sessionId names is the part of the string before its first
    # ... A sessionId that is not a string, or whose part before # is empty, names no
    session."  (S#agent-x names S.)"""
    if not isinstance(session_id, str):
        return None
    head = session_id.split("#", 1)[0]
    return head if head else None


def is_copied_history(line: dict, file: dict) -> bool:
    # accounting.md §2.1: "copied history when its sessionId names another session than the file's".
    named = named_session(line.get("sessionId"))
    return named is not None and named != file["session"]


def is_sidechain_line(line: dict, file: dict) -> bool:
    # accounting.md §2.1: "sidechain when it comes from a subagent file (either layout) or
    # has isSidechain: true".
    return file["kind"] == "subagent" or line.get("isSidechain") is True


def is_marked_fork_copy(line: dict, file: dict) -> bool:
    """accounting.md §2.1 fork copy, 1. marked: a main-transcript line that is neither copied history
    nor sidechain, whose forkedFrom is an object whose sessionId names another session than
    the file's."""
    if file["kind"] != "main" or is_copied_history(line, file) or is_sidechain_line(line, file):
        return False
    forked_from = line.get("forkedFrom")
    if not isinstance(forked_from, dict):
        return False
    named = named_session(forked_from.get("sessionId"))
    return named is not None and named != file["session"]


def is_unmarked_candidate(line: dict, file: dict) -> bool:
    """accounting.md §2.1: "a main-transcript line that is neither copied history, nor sidechain, nor
    marked"."""
    return (file["kind"] == "main" and not is_copied_history(line, file)
            and not is_sidechain_line(line, file) and not is_marked_fork_copy(line, file))


def uuid_writers(files: list[dict]) -> dict[str, str]:
    """uuid -> the session that wrote it, for every non-empty string uuid of an unmarked
    candidate line of a main transcript (accounting.md §2.1 fork copy, 2. unmarked): among the
    sessions whose main transcripts hold it on such lines, the smallest
    (stamped_bg, first_ts, last_ts, session_id)."""
    kinds: dict[tuple[str, str], list] = {}  # (uuid, session) -> sessionKind of each candidate line
    span: dict[str, list[int]] = {}  # session -> timestamps of all its candidate lines
    for file in files:
        if file["kind"] != "main":
            continue
        for line in file["lines"]:
            if not is_unmarked_candidate(line, file):
                continue
            timestamp = parse_timestamp(line.get("timestamp"))
            times = span.setdefault(file["session"], [])
            if timestamp is not None:
                times.append(timestamp)
            uuid = line.get("uuid")
            if non_empty_string(uuid):
                kinds.setdefault((uuid, file["session"]), []).append(line.get("sessionKind"))
    holders: dict[str, list[tuple]] = {}
    for (uuid, session), line_kinds in kinds.items():
        stamped_bg = all(kind == "bg" for kind in line_kinds)
        times = span.get(session) or []
        # "a session with none sorts last"
        first_ts = min(times) if times else MISSING_TIMESTAMP
        last_ts = max(times) if times else MISSING_TIMESTAMP
        holders.setdefault(uuid, []).append((stamped_bg, first_ts, last_ts, session))
    return {uuid: min(tuples)[3] for uuid, tuples in holders.items()}


# accounting.md §2.1's unmarked fork copies (issue 28 item 12, part d): on, as retrod applies them; a
# test may switch them off to see what they change.
UNMARKED_FORK_COPIES = True


def is_fork_copy(line: dict, file: dict) -> bool:
    """accounting.md §2.1 fork copy: marked, or unmarked (its uuid also on an unmarked candidate line of
    another session's main transcript, and that other session wrote it)."""
    if is_marked_fork_copy(line, file):
        return True
    if not UNMARKED_FORK_COPIES or not is_unmarked_candidate(line, file):
        return False
    uuid = line.get("uuid")
    if not non_empty_string(uuid):
        return False
    return file["uuid_writer"].get(uuid, file["session"]) != file["session"]


def is_own_line(line: dict, file: dict) -> bool:
    # accounting.md §2.1: "The main transcript's own lines are its lines that are neither copied history,
    # nor fork copies, nor sidechain."
    return (
        file["kind"] == "main"
        and not is_copied_history(line, file)
        and not is_sidechain_line(line, file)
        and not is_fork_copy(line, file)
    )


# ---------------------------------------------------------------------------
# Step 3: usage records (accounting.md §2.2 "Records")
# ---------------------------------------------------------------------------


def usage_figures(usage: dict) -> dict:
    """The token fields of one usage object, sanitised (accounting.md §2.2 "Usage"), and the
    5-minute / 1-hour cache-write split ("Keep the 5m/1h split too")."""
    flat = usage.get("cache_creation_input_tokens")
    if type(flat) is int:
        # The flat field is an integer: use it (a negative one counts as 0).
        cache_create = token_count(flat)
    else:
        # "when that flat field is not an integer, the sum of
        # cache_creation.ephemeral_5m_input_tokens and ..._1h_..."
        split = get_dict(usage, "cache_creation") or {}
        cache_create = token_count(split.get("ephemeral_5m_input_tokens")) + token_count(
            split.get("ephemeral_1h_input_tokens")
        )
    split = get_dict(usage, "cache_creation") or {}
    return {
        "input": token_count(usage.get("input_tokens")),
        "output": token_count(usage.get("output_tokens")),
        "cache_read": token_count(usage.get("cache_read_input_tokens")),
        "cache_create": cache_create,
        # The split as given, whether or not the flat field was an integer.
        "cache_create_5m": token_count(split.get("ephemeral_5m_input_tokens")),
        "cache_create_1h": token_count(split.get("ephemeral_1h_input_tokens")),
        "web_searches": web_search_count(usage),
    }


def web_search_count(usage: dict) -> int:
    """accounting.md §2.2 "Web searches": "server_tool_use.web_search_requests of the part's own usage
    object ... when it is a non-negative integer (bool excluded), else 0"."""
    server_tool_use = get_dict(usage, "server_tool_use")
    if server_tool_use is None:
        return 0
    value = server_tool_use.get("web_search_requests")
    if type(value) is int and value >= 0:  # type(...) is int: not a bool
        return value
    return 0


FOUR_FIELDS = ("input", "output", "cache_read", "cache_create")


def iteration_figures(usage: dict) -> list[dict]:
    """The objects of usage.iterations, each sanitised like a usage (accounting.md §2.2 "Iterations").

    Each entry: usage_figures(object) plus "model": the object's model when it is a
    non-empty string, else None (the part then takes the message's model, later).
    Elements of the array that are not objects are skipped (reference decision: "an array
    holding at least one object" speaks of objects only).  [] when usage.iterations is not
    an array.
    """
    iterations = usage.get("iterations")
    if not isinstance(iterations, list):
        return []
    figures = []
    for element in iterations:
        if not isinstance(element, dict):
            continue
        entry = usage_figures(element)
        entry["model"] = model_of(element)
        figures.append(entry)
    return figures


def is_fast(usage: dict) -> bool:
    # accounting.md §2.7: "{"speed": "fast"} as price context when the chosen record's usage.speed
    # is "fast"" -- exactly the string "fast".
    return usage.get("speed") == "fast"


def model_of(message: dict | None) -> str | None:
    """message.model when it is a non-empty string; None = the record names no model."""
    model = message.get("model") if isinstance(message, dict) else None
    return model if non_empty_string(model) else None


def cache_miss_reason(message: dict | None) -> str | None:
    """accounting.md §2.8 "Claude Code's own reason": message.diagnostics.cache_miss_reason, a
    string, or an object whose "type" is a string.  Reference decision: an empty string is
    no reason (no other string field of a transcript counts when empty)."""
    diagnostics = get_dict(message, "diagnostics")
    if diagnostics is None:
        return None
    reason = diagnostics.get("cache_miss_reason")
    if isinstance(reason, dict):
        reason = reason.get("type")
    return reason if non_empty_string(reason) else None


def first_key(*candidates) -> str | None:
    # accounting.md §2.2 "Key": the first of message.id, requestId, uuid that is a non-empty string.
    for candidate in candidates:
        if non_empty_string(candidate):
            return candidate
    return None


def has_tool_use(message_holder: dict) -> bool:
    """Whether message_holder.message.content holds a tool_use block.

    message_holder is a line, or the embedded message of an agent_progress line.
    """
    return any(block.get("type") == "tool_use" for block in content_blocks(message_holder))


def place_rank(line: dict, file: dict) -> tuple[str, int]:
    """(the file's path below the projects root, the line's index): accounting.md §2.2's tie-break of
    records whose usage tuples tie (the index orders lines as their numbers do)."""
    numbers = file.get("line_numbers")
    if numbers is None:
        numbers = file["line_numbers"] = {id(object_): n for n, object_ in enumerate(file["lines"])}
    return (file["below_root"], numbers[id(line)])


def records_of_line(line: dict, file: dict) -> list[dict]:
    """The usage records (0 or 1) that one line contributes."""
    records = []

    # (a) "every assistant line whose message.usage is an object"
    if line.get("type") == "assistant":
        message = get_dict(line, "message")
        usage = get_dict(message, "usage")
        if usage is not None:
            sidechain = is_sidechain_line(line, file)
            # accounting.md §2.2 "Agent": "" for the main transcript's non-sidechain lines; the
            # file's subagent id for subagent files; inline isSidechain threads never "".
            if file["kind"] == "subagent":
                agent = file["agent_id"]
            elif sidechain:
                agent = INLINE_AGENT
            else:
                agent = ""
            records.append(
                {
                    "key": first_key(message.get("id"), line.get("requestId"), line.get("uuid")),
                    "usage": usage_figures(usage),
                    "is_sidechain": sidechain,
                    "is_foreign": is_copied_history(line, file) or is_fork_copy(line, file),
                    "timestamp": parse_timestamp(line.get("timestamp")),
                    "session": file["session"],
                    "agent": agent,
                    "from_agent_progress": False,
                    # accounting.md §2.5 turns: a tool_use block in message.content.
                    "has_tool_use": has_tool_use(line),
                    "model": model_of(message),
                    "iterations": iteration_figures(usage),
                    "fast": is_fast(usage),
                    "reason": cache_miss_reason(message),
                    "place_rank": place_rank(line, file),
                }
            )

    # (b) "every progress line with data.type == agent_progress whose
    # data.message.type == assistant and whose data.message.message.usage is an object"
    if line.get("type") == "progress":
        data = get_dict(line, "data")
        if data is not None and data.get("type") == "agent_progress":
            embedded = get_dict(data, "message")  # the embedded record
            if embedded is not None and embedded.get("type") == "assistant":
                inner_message = get_dict(embedded, "message")
                usage = get_dict(inner_message, "usage")
                if usage is not None:
                    # Agent: data.agentId when a non-empty string, else an unnamed subagent.
                    agent_id = data.get("agentId")
                    agent = agent_id if non_empty_string(agent_id) else UNNAMED_AGENT
                    # is_foreign: judged by the embedded message's sessionId, else the
                    # progress line's.
                    if named_session(embedded.get("sessionId")) is not None:
                        foreign = named_session(embedded["sessionId"]) != file["session"]
                    else:
                        foreign = is_copied_history(line, file)
                    # "a progress line that is a fork copy makes its embedded record foreign"
                    foreign = foreign or is_fork_copy(line, file)
                    # Timestamp: the embedded message's, else the progress line's.
                    timestamp = parse_timestamp(embedded.get("timestamp"))
                    if timestamp is None:
                        timestamp = parse_timestamp(line.get("timestamp"))
                    records.append(
                        {
                            # Key fields are those of the record, i.e. the embedded one.
                            "key": first_key(
                                inner_message.get("id"), embedded.get("requestId"), embedded.get("uuid")
                            ),
                            "usage": usage_figures(usage),
                            "is_sidechain": True,  # an agent_progress copy is a sidechain record
                            "is_foreign": foreign,
                            "timestamp": timestamp,
                            "session": file["session"],
                            "agent": agent,
                            "from_agent_progress": True,
                            # The record's message.content is the embedded one.
                            "has_tool_use": has_tool_use(embedded),
                            # data.message.message.model: the embedded record's own.
                            "model": model_of(inner_message),
                            "iterations": iteration_figures(usage),
                            "fast": is_fast(usage),
                            "reason": cache_miss_reason(inner_message),
                            "place_rank": place_rank(line, file),
                        }
                    )
    return records


# ---------------------------------------------------------------------------
# Step 4: requests (accounting.md §2.2 "Key", "Usage", "Attribution")
# ---------------------------------------------------------------------------


def usage_rank(record: dict) -> tuple:
    # accounting.md §2.2: the record with the LARGEST
    # (not is_sidechain, output_tokens, input_tokens, cache_creation, cache_read).
    u = record["usage"]
    return (not record["is_sidechain"], u["output"], u["input"], u["cache_create"], u["cache_read"])


def attribution_rank(record: dict) -> tuple:
    # accounting.md §2.2: the record with the SMALLEST
    # (is_sidechain, is_foreign, timestamp, session_uuid, agent); missing timestamp last.
    timestamp = record["timestamp"] if record["timestamp"] is not None else MISSING_TIMESTAMP
    # "In the agent position the unnamed and the inline threads sort after every named agent
    # (compaction agents included)."
    thread = record["agent"] in (UNNAMED_AGENT, INLINE_AGENT)
    return (record["is_sidechain"], record["is_foreign"], timestamp, record["session"], thread, record["agent"])


def build_requests(all_records: list[dict]) -> list[dict]:
    """Group records into requests.

    Each request: {"usage", "parts", "model", "fast", "session", "agent", "timestamp",
    "has_tool_use"}.  "usage" = the sums of its parts' figures (accounting.md §2.2 "Iterations");
    "model" is the message's model of the usage-winning record (kept for readers; tokens
    by model go by part); "fast" whether that record's usage.speed is "fast" (accounting.md §2.7).
    """
    groups: dict[str, list[dict]] = {}
    keyless: list[list[dict]] = []
    for record in all_records:
        if record["key"] is None:
            keyless.append([record])  # "a record with none of them is a request of its own"
        else:
            groups.setdefault(record["key"], []).append(record)  # the key is global

    requests = []
    for records in list(groups.values()) + keyless:
        usage_record = usage_winner(records)
        owner_record = min(records, key=attribution_rank)
        # accounting.md §2.2: "Timestamp of a request = the earliest timestamp of its records";
        # None when no record has one.
        timestamps = [r["timestamp"] for r in records if r["timestamp"] is not None]
        parts = parts_of(usage_record)
        # "the request's tokens are those sums": buckets, totals and phases use the parts' sums.
        usage = dict.fromkeys(MODEL_FIELDS, 0)
        for part in parts:
            for field in MODEL_FIELDS:
                usage[field] += part[field]
        requests.append(
            {
                "usage": usage,
                "parts": parts,
                "session": owner_record["session"],
                "agent": owner_record["agent"],
                "timestamp": min(timestamps) if timestamps else None,
                # A tool_use block in message.content of ANY of its records.
                "has_tool_use": any(r["has_tool_use"] for r in records),
                "model": usage_record["model"],
                "fast": usage_record["fast"],
                # accounting.md §2.8: the key orders elements of one timestamp; a request without one
                # sorts after the keyed ones, by its file's path, then line number.
                "key": records[0]["key"],
                "place": (str(records[0].get("path", "")), records[0].get("line", 0)),
                "reason": usage_record["reason"],
            }
        )
    return requests


def parts_of(record: dict) -> list[dict]:
    """The parts of the request whose usage-winning record this is (accounting.md §2.2 "Iterations").

    "when the chosen record's usage.iterations is an array holding at least one object, and
    for each of the four fields the sum over those objects is at least the top-level value,
    the request's tokens are those sums, and each object is a part of the request with its
    own model (its model when a non-empty string, else the message's) and its own 5m/1h
    split.  Otherwise the request is one part: the top-level usage and the message's model."
    Each part: {"model", input, output, cache_read, cache_create, cache_create_5m, cache_create_1h}.
    """
    iterations = record["iterations"]
    top = record["usage"]
    if iterations:
        covers_top_level = True
        for field in FOUR_FIELDS:
            total = 0
            for iteration in iterations:
                total += iteration[field]
            if total < top[field]:
                covers_top_level = False
        if covers_top_level:
            parts = []
            for iteration in iterations:
                part = {field: iteration[field] for field in MODEL_FIELDS}
                part["model"] = iteration["model"] if iteration["model"] is not None else record["model"]
                parts.append(part)
            return parts
    part = {field: top[field] for field in MODEL_FIELDS}
    part["model"] = record["model"]
    return [part]


def usage_winner(records: list[dict]) -> dict:
    """The record whose usage counts ("the chosen record"); its model is the message's model.

    accounting.md §2.2: the record with the largest usage tuple; "Records whose tuples tie: the first by
    the path of its file below the projects root (code-point), then line number." Nothing a
    record holds (its split, model, iterations, speed, reason) breaks a tie.
    """
    best = max(usage_rank(r) for r in records)
    return min((r for r in records if usage_rank(r) == best), key=lambda r: r["place_rank"])


def bucket_of(agent: str) -> str:
    # accounting.md §2.2 "Buckets": main (agent ""), compaction (id starts with acompact),
    # subagents (every other agent).
    if agent == "":
        return "main"
    if agent.startswith("acompact"):
        return "compaction"
    return "subagents"


# ---------------------------------------------------------------------------
# Step 5: per-session figures from the main transcript (accounting.md §2.3 and §2.4)
# ---------------------------------------------------------------------------


def has_tool_result(line: dict) -> bool:
    return any(block.get("type") == "tool_result" for block in content_blocks(line))


def main_timeline(main_files: list[dict]) -> list[tuple[dict, dict]]:
    """(line, file) for every COUNTED line of a session's main transcripts, in timeline order.

    accounting.md §2.3: "A session whose main transcript exists (or existed) at more than one path --
    a project folder copied or moved -- has one timeline: its main transcripts in the order
    of their project folders' names (code-point), each in file order. Over that order (one
    path or several), an own line whose uuid is a non-empty string is dropped when an earlier
    own line, of any type and with or without a timestamp, had the same uuid."
    Lines without such a uuid always count.  Reference decision: two main files in
    the same folder name (impossible on one machine) are ordered by their full path.
    """
    ordered = sorted(main_files, key=lambda file: (file["slug"], str(file["path"])))
    seen_uuids = set()
    counted = []
    for file in ordered:
        for line in file["lines"]:
            uuid = line.get("uuid")
            if non_empty_string(uuid) and is_own_line(line, file):
                if uuid in seen_uuids:
                    continue  # met before: counted there
                seen_uuids.add(uuid)
            counted.append((line, file))
    return counted


def own_events(main_files: list[dict]) -> list[tuple[int, dict]]:
    """accounting.md §2.3: events = the counted own user and assistant lines that have a timestamp,
    in timeline order."""
    events = []
    for line, file in main_timeline(main_files):
        if line.get("type") not in ("user", "assistant"):
            continue
        if not is_own_line(line, file):
            continue
        timestamp = parse_timestamp(line.get("timestamp"))
        if timestamp is None:
            continue
        events.append((timestamp, line))
    return events


def gap_class(line: dict, gap_us: int, away_after_s=DEFAULT_AWAY_AFTER_S) -> str:
    """accounting.md §2.3: the class of the gap of gap_us microseconds that ends at this event."""
    if line["type"] == "assistant":
        return "claude"
    if has_tool_result(line):
        return "tool"
    if line.get("isCompactSummary") is True:
        return "claude"  # compaction time
    # "human ... unless the gap is longer than the away threshold: then the whole
    # gap is away".  Longer means strictly longer; a gap of exactly the threshold
    # is human.
    if gap_us > away_after_s * 1_000_000:
        return "away"
    return "human"


def classified_gaps(
    session_files: list[dict], away_after_s=DEFAULT_AWAY_AFTER_S
) -> list[tuple[int, int, str]]:
    """accounting.md §2.3 gaps as (H, t_i, class), only those with t_i > H.

    H = the latest timestamp among the events before event i (the high-water mark), over
    the session's one timeline: it runs across its main files, never restarting per file
    (a session without a main event: its subagent timeline, in its order).
    When t_i <= H nothing is added.
    """
    gaps = []
    high_water = None  # the latest timestamp among the events seen so far
    for time, line in session_events(session_files):
        if high_water is not None and time > high_water:
            gaps.append((high_water, time, gap_class(line, time - high_water, away_after_s)))
        if high_water is None or time > high_water:
            high_water = time
    return gaps


def embedded_message(line: dict) -> dict | None:
    """The message an agent_progress line embeds (data.message), when it is an object."""
    if line.get("type") != "progress":
        return None
    data = get_dict(line, "data")
    if data is None or data.get("type") != "agent_progress":
        return None
    return get_dict(data, "message")


def subagent_timeline(session_files: list[dict]) -> list[tuple[int, dict]]:
    """accounting.md §2.3 "Sessions without a main event": (timestamp, line or embedded message) of the
    session's subagent timeline, in its order, a uuid counted once at its first place.

    Its lines: the user and assistant lines that have a timestamp in its subagent files (both
    layouts, compaction agents included), the isSidechain: true ones of its main transcripts,
    and the user/assistant messages embedded in agent_progress lines of any of its transcripts
    (timestamp: the embedded message's, else the progress line's); never copied history or
    fork copies.  Order: timestamp, the file's path below the projects root (code-point), line
    number, the line itself before its embedded message.
    """
    placed = []
    for file in session_files:
        for number, line in enumerate(file["lines"]):
            if line.get("type") in ("user", "assistant") and is_sidechain_line(line, file) \
                    and not is_copied_history(line, file):
                timestamp = parse_timestamp(line.get("timestamp"))
                if timestamp is not None:
                    placed.append(((timestamp, file["below_root"], number, 0), line.get("uuid"), line))
            embedded = embedded_message(line)
            if embedded is None or embedded.get("type") not in ("user", "assistant"):
                continue
            # copied history of an agent_progress copy: the embedded sessionId, else the line's
            named = named_session(embedded.get("sessionId"))
            if named is None:
                named = named_session(line.get("sessionId"))
            if named is not None and named != file["session"]:
                continue
            if is_fork_copy(line, file):
                continue
            timestamp = parse_timestamp(embedded.get("timestamp"))
            if timestamp is None:
                timestamp = parse_timestamp(line.get("timestamp"))
            if timestamp is not None:
                placed.append(((timestamp, file["below_root"], number, 1), embedded.get("uuid"), embedded))
    placed.sort(key=lambda item: item[0])
    seen = set()
    events = []
    for position, uuid, message in placed:
        if non_empty_string(uuid):
            if uuid in seen:
                continue
            seen.add(uuid)
        events.append((position[0], message))
    return events


def session_events(session_files: list[dict]) -> list[tuple[int, dict]]:
    """accounting.md §2.3: the main events when there is one, else the subagent timeline."""
    main_files = [f for f in session_files if f["kind"] == "main"]
    return own_events(main_files) or subagent_timeline(session_files)


def session_span(session_files: list[dict]) -> tuple[int | None, int | None]:
    """accounting.md §2.3 "The session's start and end": the earliest and the latest timestamp of its
    events (main events when it has any, else its subagent timeline); (None, None): undated."""
    times = [time for time, _ in session_events(session_files)]
    return (min(times), max(times)) if times else (None, None)


def time_figures(session_files: list[dict], away_after_s=DEFAULT_AWAY_AFTER_S) -> dict:
    """accounting.md §2.3: classify the gaps of the session's events (main, else subagent timeline)."""
    totals = {"claude": 0, "tool": 0, "human": 0, "away": 0}
    for gap_start, gap_end, kind in classified_gaps(session_files, away_after_s):
        totals[kind] += gap_end - gap_start
    start, end = session_span(session_files)
    # wall = end - start (0 when undated)
    wall = end - start if start is not None else 0
    return {
        "wall_s": seconds(wall),
        "claude_s": seconds(totals["claude"]),
        "tool_s": seconds(totals["tool"]),
        "human_s": seconds(totals["human"]),
        "away_s": seconds(totals["away"]),
    }


def tool_result_size(block: dict) -> int:
    # accounting.md §2.4 tool_result_bytes: content string -> its UTF-8 length; content list ->
    # the string "text" of its elements with type == "text"; anything else -> 0.
    content = block.get("content")
    if isinstance(content, str):
        return utf8_length(content)
    if isinstance(content, list):
        size = 0
        for element in content:
            if isinstance(element, dict) and element.get("type") == "text":
                text = element.get("text")
                if isinstance(text, str):
                    size += utf8_length(text)
        return size
    return 0


def tool_result_bytes_of(line: dict) -> int:
    # accounting.md §2.4 tool_result_bytes: over the tool_result blocks of one user line.
    size = 0
    for block in content_blocks(line):
        if block.get("type") == "tool_result":
            size += tool_result_size(block)
    return size


def main_transcript_figures(main_files: list[dict]) -> dict:
    compactions = 0
    tool_call_ids = set()
    tool_result_bytes = 0
    # accounting.md §2.3: "The same holds for the per-line figures of §2.4, compactions and
    # tool_result_bytes" -- they count the counted lines of the one timeline only.
    for line, file in main_timeline(main_files):
        if not is_own_line(line, file):
            continue
        line_type = line.get("type")
        # compactions: own system lines with subtype == "compact_boundary".
        if line_type == "system" and line.get("subtype") == "compact_boundary":
            compactions += 1
        # tool_result_bytes: tool_result blocks of own user lines.
        if line_type == "user":
            tool_result_bytes += tool_result_bytes_of(line)
    # tool_calls: distinct non-empty string ids of tool_use blocks of own assistant lines
    # (timestamp not required).  Distinct ids already count a copied line once; reference
    # decision: every own line of every main file is looked at, as accounting.md §2.4 says, since
    # accounting.md §2.3 names only compactions and tool_result_bytes as per-line figures.
    for file in main_files:
        for line in file["lines"]:
            if not is_own_line(line, file) or line.get("type") != "assistant":
                continue
            for block in content_blocks(line):
                if block.get("type") == "tool_use" and non_empty_string(block.get("id")):
                    tool_call_ids.add(block["id"])
    return {
        "compactions": compactions,
        "tool_calls": len(tool_call_ids),
        "tool_result_bytes": tool_result_bytes,
    }


def listed_subagents(session_files: list[dict]) -> list[str]:
    # accounting.md §2.4 "Subagents listed": ids of its subagent files (both layouts, any
    # content, not acompact*) and the named agents of its agent_progress copies that
    # are not copied history.  Inline threads and unnamed agents are not listed.
    listed = set()
    for file in session_files:
        if file["kind"] == "subagent" and not file["agent_id"].startswith("acompact"):
            listed.add(file["agent_id"])
        for line in file["lines"]:
            for record in records_of_line(line, file):
                if not record["from_agent_progress"]:
                    continue
                if record["agent"] == UNNAMED_AGENT or record["is_foreign"]:
                    continue
                if record["agent"].startswith("acompact"):
                    continue  # compaction agents are never listed (accounting.md §2.1 table)
                listed.add(record["agent"])
    return sorted(listed)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# Step 6: estimated cost (accounting.md §2.7)
# ---------------------------------------------------------------------------


def part_tokens(part: dict) -> int:
    # The part's tokens: the four fields (the 5m/1h split is a split of cache_create).
    return part["input"] + part["output"] + part["cache_read"] + part["cache_create"]


def as_datetime(timestamp: int | None) -> datetime.datetime | None:
    """Integer microseconds since the epoch -> an aware UTC datetime; None stays None."""
    if timestamp is None:
        return None
    return UTC_EPOCH + datetime.timedelta(microseconds=timestamp)


def package_price(part: dict, timestamp: int | None, fast: bool) -> decimal.Decimal | None:
    """What genai-prices prices one part at; None when it cannot (unknown model).

    accounting.md §2.7: "provider anthropic, the part's model, at its request's timestamp (prices
    change over time), with {"speed": "fast"} as price context when the chosen record's
    usage.speed is "fast"; input tokens = input + cache read + cache create, cache writes
    split 5m/1h."  The package prices the 5-minute writes as cache_write_tokens minus
    cache_write_1h_tokens.  Reference decision: the 1h part is min(1h split, cache_create),
    since the split as given may exceed the flat field and the package refuses that.
    Reference decision: a request with no timestamp is priced at the current time
    (genai_request_timestamp=None).
    Long-context tiers: the package looks at this Usage's input_tokens, i.e. one part of
    one request -- "Tiers that depend on a request's own size ... apply per request, never
    to a sum."
    """
    # Imported here so that modules that only need the line helpers (reference_tools)
    # do not need the package.
    from genai_prices import Usage, calc_price

    usage = Usage(
        input_tokens=part["input"] + part["cache_read"] + part["cache_create"],
        output_tokens=part["output"],
        cache_read_tokens=part["cache_read"],
        cache_write_tokens=part["cache_create"],
        cache_write_1h_tokens=writes_of(part)[1],
    )
    try:
        calculation = calc_price(
            usage,
            part["model"],
            provider_id="anthropic",
            genai_request_timestamp=as_datetime(timestamp),
            price_context={"speed": "fast"} if fast else None,
        )
    except LookupError:
        return None  # "A part with tokens that it cannot price (unknown model ...) is unpriced"
    return calculation.total_price


def override_price(part: dict, rates: dict) -> decimal.Decimal:
    """accounting.md §2.7: "RETROD_PRICES (flat per-million prices by exact model name)
    overrides the package's token prices for the models it names."  rates: {input, output, cache_read, cache_create_5m,
    cache_create_1h} in USD per million tokens.  The 1h writes (writes_of: "When a part's 5m
    and 1h writes do not add up to its cache writes, all of its cache writes count as 5m") at
    cache_create_1h; the rest of cache_create at cache_create_5m.
    """
    def rate(name: str) -> decimal.Decimal:
        return decimal.Decimal(str(rates[name]))  # str(): 0.3 is "0.3", not a binary fraction

    five_minutes, one_hour = writes_of(part)
    total = (
        part["input"] * rate("input")
        + part["output"] * rate("output")
        + part["cache_read"] * rate("cache_read")
        + five_minutes * rate("cache_create_5m")
        + one_hour * rate("cache_create_1h")
    )
    return total / 1_000_000


def web_search_price(part: dict, timestamp: int | None, fast: bool) -> decimal.Decimal | None:
    """accounting.md §2.7: a part's web searches "as the package's own web-search unit
    (Usage(web_searches=n), priced per 1,000: $10 on Anthropic's list)", at the request's
    timestamp and price context, whatever RETROD_PRICES says ("keeps the package's web-search
    price").  0 without web searches; None when the package cannot price them: an unknown or
    null model, or (project decision, docs/decisions.md) a model whose price has no
    web-search unit (the package would price them at 0 silently)."""
    from genai_prices import Usage, calc_price

    if part["web_searches"] == 0:
        return decimal.Decimal(0)
    if part["model"] is None:
        return None
    try:
        calculation = calc_price(
            Usage(web_searches=part["web_searches"]),
            part["model"],
            provider_id="anthropic",
            genai_request_timestamp=as_datetime(timestamp),
            price_context={"speed": "fast"} if fast else None,
        )
    except LookupError:
        return None
    if calculation.model_price.web_searches_kcount is None:
        return None
    return calculation.total_price


def part_costs(part: dict, request: dict, prices_override: dict | None) -> tuple:
    """(its tokens' cost, its web searches' cost) in USD, each None when it cannot be priced
    (accounting.md §2.7: "A part with tokens or web searches that the package cannot price ...
    is unpriced").

    Reference decisions (project decisions): a part with no tokens at all costs 0 for its
    tokens, whatever its model (e.g. <synthetic> entries); a part whose model is None
    with tokens is unpriced ("null model ... its model is listed, never guessed"); an
    override names exact model names, so it is looked up by the part's model as is.
    """
    overrides = prices_override or {}
    searches = web_search_price(part, request["timestamp"], request["fast"])
    if part["model"] is not None and part["model"] in overrides:
        return override_price(part, overrides[part["model"]]), searches
    if part_tokens(part) == 0:
        return decimal.Decimal(0), searches
    if part["model"] is None:
        return None, searches
    return package_price(part, request["timestamp"], request["fast"]), searches


def part_cost(part: dict, request: dict, prices_override: dict | None) -> tuple[decimal.Decimal, bool]:
    """The cost of one part in USD, what of it could be priced, and whether the part is
    unpriced (some of its tokens or web searches could not be priced: accounting.md §2.7).  Project
    decision (docs/decisions.md): a known model's tokens are priced even when its web
    searches are not."""
    tokens, searches = part_costs(part, request, prices_override)
    cost = (tokens or decimal.Decimal(0)) + (searches or decimal.Decimal(0))
    return cost, tokens is None or searches is None


def part_is_priced(part: dict, request: dict, prices_override: dict | None) -> bool:
    """Something of the part was priced: tokens with a price, or web searches with one
    (project decision: "usd" is None only when nothing was)."""
    tokens, searches = part_costs(part, request, prices_override)
    return (tokens is not None and part_tokens(part) > 0) or (searches is not None and part["web_searches"] > 0)


def usd(amount: decimal.Decimal) -> float:
    # Reference decision: dollars are reported as a float rounded to 6 decimals.
    return float(round(amount, 6))


def cost_of(requests: list[dict], prices_override: dict | None = None) -> dict:
    """accounting.md §2.7: "a session's cost sums what could be priced and says whether it is
    complete."  {"usd": the priced parts' sum (None when some part is unpriced and none is
    priced), "unknown_models": the unpriced parts' models, sorted (None first),
    "complete": no part unpriced}.  With no part at all: usd 0.0, complete."""
    priced_sum = decimal.Decimal(0)
    priced_parts = 0
    unknown = set()
    for request in requests:
        for part in request["parts"]:
            cost, unpriced = part_cost(part, request, prices_override)
            if unpriced:
                unknown.add(part["model"])
            priced_sum += cost
            # project decision: a part with no tokens and no web searches is not "priced"
            if part_is_priced(part, request, prices_override):
                priced_parts += 1
    unknown_models = sorted(model for model in unknown if model is not None)
    if None in unknown:
        unknown_models.insert(0, None)
    return {
        "usd": None if unknown and priced_parts == 0 else usd(priced_sum),
        "unknown_models": unknown_models,
        "complete": not unknown,
    }


def tokens_by_model(requests: list[dict], prices_override: dict | None = None) -> dict:
    """{model (None: named none): {requests, each token figure summed, cost_usd}} of these requests.

    accounting.md §2.2: "Tokens by model sum parts": each part adds its tokens to its own model's
    row, and a row's "requests" counts the parts of that model (a request refused by one
    model and answered by another counts once under each).
    cost_usd: the sum of its parts' costs (accounting.md §2.7); reference decision: None when any
    of its parts is unpriced (a part sum would pass for the model's cost).
    """
    by_model: dict = {}
    costs: dict = {}  # model -> Decimal sum, or None once a part is unpriced
    for request in requests:
        for part in request["parts"]:
            model = part["model"]
            if model not in by_model:
                by_model[model] = dict.fromkeys(("requests", *MODEL_FIELDS), 0)
                costs[model] = decimal.Decimal(0)
            figures = by_model[model]
            figures["requests"] += 1
            for field in MODEL_FIELDS:
                figures[field] += part[field]
            cost, unpriced = part_cost(part, request, prices_override)
            if unpriced or costs[model] is None:
                costs[model] = None
            else:
                costs[model] += cost
    for model, figures in by_model.items():
        figures["cost_usd"] = None if costs[model] is None else usd(costs[model])
    return by_model


def empty_tokens() -> dict:
    return {
        bucket: {"input": 0, "output": 0, "cache_read": 0, "cache_create": 0}
        for bucket in BUCKETS
    }


def compute(
    projects_dir: pathlib.Path, away_after_s=DEFAULT_AWAY_AFTER_S, prices_override: dict | None = None
) -> dict[str, dict]:
    """Map session uuid -> figures for every session that exists per accounting.md §2.1.

    away_after_s: the away threshold of accounting.md §2.3 (RETROD_AWAY_AFTER_S).
    prices_override: {model: {input, output, cache_read, cache_create_5m, cache_create_1h}}
    in USD per million tokens, as RETROD_PRICES (accounting.md §2.7).
    """
    projects_dir = Path(projects_dir)
    files = find_files(projects_dir)

    # accounting.md §2.1: "A session exists as soon as one of its transcripts (.jsonl) exists."
    files_by_session: dict[str, list[dict]] = {}
    for file in files:
        files_by_session.setdefault(file["session"], []).append(file)

    # accounting.md §2.2: records from every file of every session; the key is global.
    all_records = []
    for file in files:
        for line in file["lines"]:
            all_records.extend(records_of_line(line, file))
    requests = build_requests(all_records)

    result = {}
    for session, session_files in sorted(files_by_session.items()):
        main_files = [f for f in session_files if f["kind"] == "main"]

        # accounting.md §2.1: "A session's project folder is the <slug> of its main transcript,
        # else the smallest <slug> (code-point order) holding its files."
        if main_files:
            project_slug = min(f["slug"] for f in main_files)
        else:
            project_slug = min(f["slug"] for f in session_files)

        tokens = empty_tokens()
        request_count = 0
        for request in requests:
            if request["session"] != session:
                continue
            request_count += 1
            for bucket in (bucket_of(request["agent"]), "total"):
                for field in ("input", "output", "cache_read", "cache_create"):
                    tokens[bucket][field] += request["usage"][field]

        summary = {}
        summary.update(time_figures(session_files, away_after_s))
        summary["requests"] = request_count
        # accounting.md §2.2: "A request's web searches are the sum over its parts; they are shown ...
        # per session."
        summary["web_searches"] = sum(part["web_searches"] for request in requests
                                      if request["session"] == session for part in request["parts"])
        summary.update(main_transcript_figures(main_files))
        summary["tokens"] = tokens

        session_requests = [r for r in requests if r["session"] == session]
        start, end = session_span(session_files)
        result[session] = {
            "project_slug": project_slug,
            "start_us": start,  # accounting.md §2.3: None when undated
            "end_us": end,
            "summary": summary,
            "subagents": listed_subagents(session_files),
            "tokens_by_model": tokens_by_model(session_requests, prices_override),
            "cost": cost_of(session_requests, prices_override),
        }
    return result


# ---------------------------------------------------------------------------
# Phases (accounting.md §2.5)
# ---------------------------------------------------------------------------
#
# A phase window is [start, end): start <= t < end, on integer microseconds.
# Windows are handled one by one and independently (they may overlap or leave
# gaps); the figures of one window never depend on the other windows.

def to_microseconds(moment: datetime.datetime) -> int:
    """Timezone-aware datetime -> integer microseconds since the epoch (exact)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"phase window bound must be timezone-aware: {moment!r}")
    return (moment - UTC_EPOCH) // datetime.timedelta(microseconds=1)


def in_window(timestamp: int | None, start: int, end: int) -> bool:
    # A missing timestamp is in no window.
    return timestamp is not None and start <= timestamp < end


def overlap(gap_start: int, gap_end: int, start: int, end: int) -> int:
    """Length of [gap_start, gap_end] intersected with [start, end), in microseconds."""
    return max(0, min(gap_end, end) - max(gap_start, start))


def timed_tool_result_bytes(main_files: list[dict]) -> list[tuple[int | None, int]]:
    """(timestamp, tool_result bytes) of each counted own user line of the one timeline."""
    sizes = []
    for line, file in main_timeline(main_files):
        if line.get("type") != "user" or not is_own_line(line, file):
            continue
        sizes.append((parse_timestamp(line.get("timestamp")), tool_result_bytes_of(line)))
    return sizes


def load(projects_dir: Path, session: str) -> tuple[list[dict], list[dict]]:
    """(the session's files, every request of the whole projects dir)."""
    files = find_files(Path(projects_dir))
    all_records = []
    for file in files:
        for line in file["lines"]:
            all_records.extend(records_of_line(line, file))
    requests = build_requests(all_records)  # global dedup and attribution, as in compute()
    session_files = [f for f in files if f["session"] == session]
    return session_files, requests


def compute_phases(
    projects_dir: Path,
    session: str,
    windows: list[tuple[datetime.datetime, datetime.datetime]],
    away_after_s=DEFAULT_AWAY_AFTER_S,
) -> list[dict]:
    """Per phase window [start, end) (accounting.md §2.5), the figures of that session, in the order given."""
    session_files, requests = load(projects_dir, session)
    main_files = [f for f in session_files if f["kind"] == "main"]
    session_requests = [r for r in requests if r["session"] == session]
    gaps = classified_gaps(session_files, away_after_s)
    user_line_sizes = timed_tool_result_bytes(main_files)

    results = []
    for window_start, window_end in windows:
        start = to_microseconds(window_start)
        end = to_microseconds(window_end)

        # Tokens and turns: the session's requests (all buckets) whose timestamp
        # (earliest of its records) is in the window.
        tokens = {"input": 0, "output": 0, "cache_read": 0, "cache_create": 0}
        request_count = 0
        tool_turns = 0
        for request in session_requests:
            if not in_window(request["timestamp"], start, end):
                continue
            request_count += 1
            if request["has_tool_use"]:
                tool_turns += 1
            for field in tokens:
                tokens[field] += request["usage"][field]

        # Times: the overlap of each classified gap with the window.
        times = {"claude": 0, "tool": 0, "human": 0, "away": 0}
        for gap_start, gap_end, kind in gaps:
            times[kind] += overlap(gap_start, gap_end, start, end)

        # tool_result bytes of own user lines stamped inside the window.
        result_bytes = 0
        for timestamp, size in user_line_sizes:
            if in_window(timestamp, start, end):
                result_bytes += size

        results.append(
            {
                "tokens": tokens,
                "requests": request_count,
                "tool_turns": tool_turns,
                "text_turns": request_count - tool_turns,
                "claude_s": seconds(times["claude"]),
                "tool_s": seconds(times["tool"]),
                "human_s": seconds(times["human"]),
                "away_s": seconds(times["away"]),
                "tool_result_bytes": result_bytes,
            }
        )
    return results


def compute_phase_models(
    projects_dir: Path,
    session: str,
    windows: list[tuple[datetime.datetime, datetime.datetime]],
    prices_override: dict | None = None,
    with_cost: bool = False,
) -> list[dict]:
    """Per phase window [start, end), the tokens by model (with cost_usd) of the session's
    requests (all buckets) whose timestamp falls in it (accounting.md §2.5, split by model; 2.7).

    with_cost=False: [{model or None: figures} per window], as before.
    with_cost=True: [{"tokens_by_model": {...}, "cost": cost object of the window} per window].
    """
    _, requests = load(projects_dir, session)
    session_requests = [r for r in requests if r["session"] == session]
    results = []
    for window_start, window_end in windows:
        start, end = to_microseconds(window_start), to_microseconds(window_end)
        in_it = [r for r in session_requests if in_window(r["timestamp"], start, end)]
        by_model = tokens_by_model(in_it, prices_override)
        if with_cost:
            results.append({"tokens_by_model": by_model, "cost": cost_of(in_it, prices_override)})
        else:
            results.append(by_model)
    return results


def subagent_earliest_timestamps(session_files: list[dict]) -> dict[str, int | None]:
    """Listed subagent id -> earliest timestamp of its records and lines (accounting.md §2.4).

    Its lines: every line (any type) of its subagent file(s) of this session.
    Its records: the usage records (accounting.md §2.2) of this session's files whose agent is
    the id and that are not copied history -- in practice the agent_progress copies
    with data.agentId == id (their timestamp: the embedded message's, else the
    progress line's).  None when nothing has a timestamp.
    """
    earliest: dict[str, int | None] = dict.fromkeys(listed_subagents(session_files))

    def consider(agent: str, timestamp: int | None) -> None:
        if agent not in earliest or timestamp is None:
            return
        if earliest[agent] is None or timestamp < earliest[agent]:
            earliest[agent] = timestamp

    for file in session_files:
        if file["kind"] == "subagent":
            for line in file["lines"]:
                consider(file["agent_id"], parse_timestamp(line.get("timestamp")))
        for line in file["lines"]:
            for record in records_of_line(line, file):
                if not record["is_foreign"]:
                    consider(record["agent"], record["timestamp"])
    return earliest


def subagent_phase(
    projects_dir: Path, session: str, windows: list[tuple[datetime.datetime, datetime.datetime]]
) -> dict[str, int | None]:
    """Listed subagent id -> index of the window holding its earliest timestamp, else None.

    accounting.md §2.5: "A subagent belongs to the phase that contains its earliest timestamp."
    When windows overlap, the first window (in the order given) that contains it wins.
    """
    session_files, _ = load(projects_dir, session)
    bounds = [(to_microseconds(a), to_microseconds(b)) for a, b in windows]
    phase_of: dict[str, int | None] = {}
    for agent, earliest in sorted(subagent_earliest_timestamps(session_files).items()):
        phase_of[agent] = None
        for index, (start, end) in enumerate(bounds):
            if in_window(earliest, start, end):
                phase_of[agent] = index
                break
    return phase_of


# ---------------------------------------------------------------------------
# accounting.md §2.9: tasks from Claude's own plan
# ---------------------------------------------------------------------------
#
# Written from 2.9's text alone.  Reference decisions where it leaves a choice:
#   - "an id counted once": among the own lines of the session's main transcripts, the first
#     occurrence in 2.3's order (project folder name, then file order, then block order) is the
#     call; it counts only when that line has a timestamp.
#   - The result: the first tool_result block with that id in any user line of the call's file
#     (2.6); that line's toolUseResult speaks for it.
#   - A TodoWrite item's status that is not a string is "pending" like any other.
#   - Strings are compared as decoded (the daemon keeps them as PostgreSQL text: a NUL becomes
#     U+FFFD there; the tests use none).

PLAN_NAMES = {"TodoWrite": "todo", "TaskCreate": "task", "TaskUpdate": "task"}


def plan_calls(main_files: list[dict]) -> list[dict]:
    """The session's plan calls of agent "" in 2.9's order, each with what decides whether it counts."""
    seen = set()
    found = []
    for file in sorted(main_files, key=lambda f: (f["slug"], str(f["path"]))):
        results = {}  # tool_use_id -> (block, line): the first in the file
        for line in file["lines"]:
            if line.get("type") == "user":
                for block in content_blocks(line):
                    if block.get("type") == "tool_result" and non_empty_string(block.get("tool_use_id")):
                        results.setdefault(block["tool_use_id"], (block, line))
        for line_no, line in enumerate(file["lines"]):
            if line.get("type") != "assistant" or not is_own_line(line, file):
                continue
            for block_no, block in enumerate(content_blocks(line)):
                if block.get("type") != "tool_use" or not non_empty_string(block.get("id")):
                    continue
                if block["id"] in seen:
                    continue
                seen.add(block["id"])
                if block.get("name") not in PLAN_NAMES:
                    continue
                timestamp = parse_timestamp(line.get("timestamp"))
                if timestamp is None:
                    continue
                found.append({"ts": timestamp, "order": (timestamp, file["slug"], line_no, block_no),
                              "name": block["name"], "input": block.get("input"),
                              "result": results.get(block["id"])})
    found.sort(key=lambda call: call["order"])
    return found


def created_task_id(result) -> str | None:
    if result is None:
        return None
    block, line = result
    outcome = line.get("toolUseResult")
    if isinstance(outcome, dict) and isinstance(outcome.get("task"), dict):
        task_id = outcome["task"].get("id")
        if non_empty_string(task_id):
            return task_id
    content = block.get("content")
    text = None
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        for element in content:
            if isinstance(element, dict) and element.get("type") == "text":
                text = element.get("text")
                break
    if not isinstance(text, str):
        return None
    match = re.match(r"Task #(\S+) created successfully", text)
    return match.group(1) if match else None


def plan_call_counts(call: dict) -> bool:
    result = call["result"]
    if result is not None:
        block, line = result
        if block.get("is_error") is True:
            return False
        outcome = line.get("toolUseResult")
        if isinstance(outcome, dict) and outcome.get("success") is False:
            return False
    given = call["input"] if isinstance(call["input"], dict) else {}
    if call["name"] == "TodoWrite":
        return isinstance(given.get("todos"), list)
    if call["name"] == "TaskUpdate":
        return non_empty_string(given.get("taskId"))
    return created_task_id(result) is not None


def compute_plan(projects_dir: Path, session: str) -> dict:
    session_files, _ = load(projects_dir, session)
    main_files = [f for f in session_files if f["kind"] == "main"]
    counting = [c for c in plan_calls(main_files) if plan_call_counts(c)]
    if not counting:
        return {"family": None, "calls": 0, "tasks": [], "tasks_never_started": []}
    family = PLAN_NAMES[counting[0]["name"]]
    counting = [c for c in counting if PLAN_NAMES[c["name"]] == family]

    names = {}  # task key -> name; dict order = plan order
    status = {}
    last_list_status = {}  # todo: key -> status in the last list holding it
    current = None
    changes = []  # (time, key or None): the current task from that time on
    last_list = []
    for call in counting:
        given = call["input"]
        if family == "todo":
            listed = []
            for item in given["todos"]:
                if not isinstance(item, dict) or not non_empty_string(item.get("content")):
                    continue
                content = item["content"]
                if content in listed:
                    continue
                listed.append(content)
                item_status = item.get("status")
                if item_status not in ("pending", "in_progress", "completed"):
                    item_status = "pending"
                if content not in names:
                    names[content] = content
                status[content] = item_status
                last_list_status[content] = item_status
            last_list = listed
            candidates = [c for c in listed if status[c] == "in_progress"]
        else:
            subject = given.get("subject") if isinstance(given, dict) else None
            subject = subject if non_empty_string(subject) else None
            if call["name"] == "TaskCreate":
                key = created_task_id(call["result"])
                if key not in names:
                    names[key] = subject or f"#{key}"
                    status[key] = "pending"
                else:
                    status[key] = "pending"
                    if subject:
                        names[key] = subject
            else:
                key = given["taskId"]
                if key not in names:
                    names[key] = subject or f"#{key}"
                    status[key] = "pending"
                if subject:
                    names[key] = subject
                if given.get("status") in ("pending", "in_progress", "completed", "deleted"):
                    status[key] = given["status"]
            candidates = [k for k in names if status[k] == "in_progress"]
        if current not in candidates:
            current = candidates[0] if candidates else None
            changes.append((call["ts"], current))

    windows = {key: [] for key in names}
    for i, (start, key) in enumerate(changes):
        if key is None:
            continue
        end = changes[i + 1][0] if i + 1 < len(changes) else None
        if end is not None and end == start:
            continue  # a window whose end equals its start is dropped
        if windows[key] and windows[key][-1][1] == start:
            windows[key][-1] = (windows[key][-1][0], end)  # one ends as the next starts: one window
        else:
            windows[key].append((start, end))

    if family == "todo":
        for key in names:
            if key not in last_list and last_list_status[key] != "completed":
                status[key] = "deleted"
    started = sorted((k for k in names if windows[k]), key=lambda k: windows[k][0][0])
    return {
        "family": family,
        "calls": len(counting),
        "tasks": [{"name": names[k], "status": status[k], "windows": windows[k]} for k in started],
        "tasks_never_started": [{"name": names[k], "status": status[k]} for k in names if not windows[k]],
    }



# ---------------------------------------------------------------------------
# Prompt-cache misses and their cost (accounting.md §2.8)
# ---------------------------------------------------------------------------
#
# Written from accounting.md §2.8's text alone.  Reference decisions where the text leaves a choice:
#   - a keyless request (accounting.md §2.2 "a request of its own") is placed by its file's path
#     (here: the absolute path, the same root for all, so the order below the root) and the
#     index of its line among the file's JSON-object lines (the same order as line numbers);
#   - "no model" is None, a value of its own: None vs a model is a model change;
#   - pause_s is reported to the millisecond, like every other seconds figure (2.3);
#   - costliest ties: earlier element first, then stream agent, then key (never file order).

CAUSES = ("compaction", "model", "expired", "invalidated")
FIVE_MINUTES_S = 300
ONE_HOUR_S = 3600
MISS_MIN_REWRITTEN = 2000


def records_with_places(files: list[dict]) -> list[dict]:
    """Every record of every file, each with its file's path and its line's index."""
    records = []
    for file in files:
        for index, line in enumerate(file["lines"]):
            for record in records_of_line(line, file):
                record["path"] = file["path"]
                record["line"] = index
                records.append(record)
    return records


def writes_of(part: dict) -> tuple[int, int]:
    """(5m, 1h) writes of a part: "when they do not add up to its cache_create, all of its
    cache_create counts as 5m (for lifetime and price alike)"."""
    if part["cache_create_5m"] + part["cache_create_1h"] != part["cache_create"]:
        return part["cache_create"], 0
    return part["cache_create_5m"], part["cache_create_1h"]


def stream_elements(requests: list[dict], session: str, agent: str) -> list[dict]:
    """The elements of one stream in order: the parts of its requests that have a timestamp,
    only those whose model is the model of the request's last part, and only those with
    cache_read + cache_create > 0.  Order: request timestamp, then key (code-point), a keyless
    request after the keyed ones of its timestamp, by (path, line); then place in iterations."""
    elements = []
    for request in requests:
        if request["session"] != session or request["agent"] != agent or request["timestamp"] is None:
            continue
        last_model = request["parts"][-1]["model"]
        for place, part in enumerate(request["parts"]):
            if part["model"] != last_model:
                continue
            if part["cache_read"] + part["cache_create"] <= 0:
                continue
            keyless = request["key"] is None
            order = (request["timestamp"], keyless, request["key"] or "", request["place"] if keyless else ("", 0),
                     place)
            elements.append({"order": order, "part": part, "request": request, "agent": agent})
    elements.sort(key=lambda element: element["order"])
    return elements


def prefix_of(element: dict) -> int:
    return element["part"]["cache_read"] + element["part"]["cache_create"]


def lifetime_after(elements: list[dict], index: int) -> int:
    """The lifetime in force after elements[index]: that of the latest element up to it
    (included) with cache_create > 0: 3600 s when it wrote 1h tokens and no 5m tokens, else
    300 s (also when none wrote yet)."""
    for element in reversed(elements[: index + 1]):
        if element["part"]["cache_create"] > 0:
            five, hour = writes_of(element["part"])
            return ONE_HOUR_S if hour > 0 and five == 0 else FIVE_MINUTES_S
    return FIVE_MINUTES_S


def boundaries_of(session_files: list[dict], agent: str) -> list[int]:
    """Timestamps of the compact_boundary system lines in a stream's own transcripts: for the
    main stream, every main transcript of the session, its isSidechain lines excepted (copied
    history included); for an agent, its own file(s), every line."""
    times = []
    for file in session_files:
        if agent == "":
            if file["kind"] != "main":
                continue
        elif file["kind"] != "subagent" or file["agent_id"] != agent:
            continue
        for line in file["lines"]:
            if line.get("type") != "system" or line.get("subtype") != "compact_boundary":
                continue
            if agent == "" and line.get("isSidechain") is True:
                continue
            timestamp = parse_timestamp(line.get("timestamp"))
            if timestamp is not None:
                times.append(timestamp)
    return times


def part_price(part: dict, model, timestamp, fast: bool, prices_override: dict | None):
    """A part's price as 2.7 says, or None when it cannot be priced."""
    overrides = prices_override or {}
    if model is not None and model in overrides:
        return override_price(part, overrides[model])
    if model is None:
        return None
    return package_price({**part, "model": model}, timestamp, fast)


def extra_cost(element: dict, rewritten: int, prices_override: dict | None) -> decimal.Decimal:
    """cost(e) - cost(e'), e' = e with the rewritten tokens read instead of written; r1 from
    the 1h writes first.  A miss whose model cannot be priced costs 0 extra."""
    part = element["part"]
    five, hour = writes_of(part)
    r1 = min(rewritten, hour)
    r5 = rewritten - r1
    e = {**part, "cache_create_5m": five, "cache_create_1h": hour}
    e_prime = {**e, "cache_read": part["cache_read"] + rewritten, "cache_create": part["cache_create"] - rewritten,
               "cache_create_5m": five - r5, "cache_create_1h": hour - r1}
    request = element["request"]
    cost_e = part_price(e, part["model"], request["timestamp"], request["fast"], prices_override)
    cost_e_prime = part_price(e_prime, part["model"], request["timestamp"], request["fast"], prices_override)
    if cost_e is None or cost_e_prime is None:
        return decimal.Decimal(0)
    return cost_e - cost_e_prime


def stream_misses(elements: list[dict], boundaries: list[int], prices_override: dict | None) -> list[dict]:
    misses = []
    for index in range(1, len(elements)):
        e, p = elements[index], elements[index - 1]
        lost = prefix_of(p) - e["part"]["cache_read"]
        rewritten = min(e["part"]["cache_create"], lost) if lost > 0 else 0
        if not (rewritten >= MISS_MIN_REWRITTEN and 20 * e["part"]["cache_read"] < 19 * prefix_of(p)):
            continue
        t_e, t_p = e["request"]["timestamp"], p["request"]["timestamp"]
        if any(t_p < t <= t_e for t in boundaries):
            cause = "compaction"
        elif e["part"]["model"] != p["part"]["model"]:
            cause = "model"
        elif t_e - t_p > lifetime_after(elements, index - 1) * 1_000_000:
            cause = "expired"
        else:
            cause = "invalidated"
        misses.append({
            "at_us": t_e,
            "agent": e["agent"],
            "cause": cause,
            "reason": e["request"]["reason"],
            "rewritten": rewritten,
            "extra": extra_cost(e, rewritten, prices_override),
            "pause_s": seconds(t_e - t_p),
            "prefix_before": prefix_of(p),
            "order": e["order"],
        })
    return misses


def cache_figures(requests: list[dict], misses: list[dict]) -> dict:
    """The figures of a scope: its requests (all parts) and its misses."""
    read = sum(r["usage"]["cache_read"] for r in requests)
    create = sum(r["usage"]["cache_create"] for r in requests)
    inputs = sum(r["usage"]["input"] for r in requests)
    whole = inputs + read + create
    by_cause = {}
    for cause in CAUSES:
        these = [m for m in misses if m["cause"] == cause]
        by_cause[cause] = {"count": len(these), "rewritten": sum(m["rewritten"] for m in these),
                           "extra": sum((m["extra"] for m in these), decimal.Decimal(0))}
    waste = sum((by_cause[c]["extra"] for c in ("model", "expired", "invalidated")), decimal.Decimal(0))
    return {
        "read": read, "create": create, "hit_ratio": read / whole if whole else None,
        "misses": {c: {"count": f["count"], "rewritten": f["rewritten"], "extra_usd": usd(f["extra"])}
                   for c, f in by_cause.items()},
        "waste_usd": usd(waste),
        "waste": waste,  # unrounded, for sums over sessions
    }


def live_state(elements: list[dict], now_us: int, prices_override: dict | None) -> dict:
    """accounting.md §2.8 "Live state" of a session, from its main stream's elements."""
    if not elements:
        return {"state": "none"}
    last = elements[-1]
    ttl = lifetime_after(elements, len(elements) - 1)
    age = max(0, now_us - last["request"]["timestamp"])
    warm = age <= ttl * 1_000_000
    prefix = prefix_of(last)
    written = {"input": 0, "output": 0, "cache_read": 0, "cache_create": prefix,
               "cache_create_5m": 0 if ttl == ONE_HOUR_S else prefix,
               "cache_create_1h": prefix if ttl == ONE_HOUR_S else 0}
    read = {"input": 0, "output": 0, "cache_read": prefix, "cache_create": 0, "cache_create_5m": 0,
            "cache_create_1h": 0}
    model, fast = last["part"]["model"], last["request"]["fast"]
    cost_written = part_price(written, model, now_us, fast, prices_override)
    cost_read = part_price(read, model, now_us, fast, prices_override)
    rewrite = None if cost_written is None or cost_read is None else usd(cost_written - cost_read)
    return {"state": "warm" if warm else "cold", "ttl_s": ttl,
            "seconds_left": seconds(ttl * 1_000_000 - age) if warm else 0,
            "prefix_tokens": prefix, "rewrite_usd": rewrite, "last_request_us": last["request"]["timestamp"]}


def compute_cache(projects_dir: Path, now_us: int | None = None, prices_override: dict | None = None,
                  windows: dict | None = None) -> dict[str, dict]:
    """session -> {"summary": figures, "subagents": {agent: figures}, "phases": [figures per
    window], "misses": [every miss, in order], "costliest": [the ten largest], "live",
    "streams", "elements"}.  windows: session -> [(start, end) aware datetimes] (2.5)."""
    files = find_files(Path(projects_dir))
    requests = build_requests(records_with_places(files))
    files_by_session: dict[str, list[dict]] = {}
    for file in files:
        files_by_session.setdefault(file["session"], []).append(file)
    sessions = set(files_by_session) | {r["session"] for r in requests}
    result = {}
    for session in sorted(sessions):
        session_files = files_by_session.get(session, [])
        mine = [r for r in requests if r["session"] == session]
        streams = sorted({r["agent"] for r in mine if r["agent"] not in (INLINE_AGENT, UNNAMED_AGENT)})
        misses, elements_count, main_elements, with_elements = [], 0, [], 0
        for agent in streams:
            elements = stream_elements(mine, session, agent)
            elements_count += len(elements)
            with_elements += bool(elements)
            if agent == "":
                main_elements = elements
            misses += stream_misses(elements, boundaries_of(session_files, agent), prices_override)
        misses.sort(key=lambda m: (m["at_us"], m["agent"], m["order"]))
        costliest = sorted(misses, key=lambda m: (-m["extra"], m["at_us"], m["agent"], m["order"]))[:10]
        listed = listed_subagents(session_files)
        phases = []
        for start, end in (windows or {}).get(session, []):
            a, b = to_microseconds(start), to_microseconds(end)
            phases.append(cache_figures([r for r in mine if in_window(r["timestamp"], a, b)],
                                        [m for m in misses if a <= m["at_us"] < b]))
        result[session] = {
            "summary": cache_figures(mine, misses),
            "subagents": {agent: cache_figures([r for r in mine if r["agent"] == agent],
                                               [m for m in misses if m["agent"] == agent]) for agent in listed},
            "phases": phases,
            "misses": misses,
            "costliest": costliest,
            "live": live_state(main_elements, now_us, prices_override) if now_us is not None else None,
            "streams": with_elements,  # streams with at least one element
            "elements": elements_count,
        }
    return result

if __name__ == "__main__":
    # Not sort_keys: a model row keyed None (named no model) cannot be sorted with strings;
    # json writes that key as "null".  Sessions come out sorted already.
    print(json.dumps(compute(Path(sys.argv[1])), indent=1))


# ---------------------------------------------------------------------------------------------
# Lessons and whether they work (accounting.md §2.10), from per-session reports the reference produced
# ---------------------------------------------------------------------------------------------

LESSON_PATTERNS = ("sibling_error", "error_retry", "persisted_output_read", "post_write_read", "duplicate",
                   "re_read", "expired", "invalidated", "model")
LESSON_CACHE = ("expired", "invalidated", "model")
LESSON_WHAT = {
    "sibling_error": "a call cancelled because a call made beside it failed",
    "error_retry": "a failed call followed by another call of the same tool",
    "persisted_output_read": "a Read of a tool result too large to show, saved to a file",
    "post_write_read": "a Read of a file just written",
    "duplicate": "a call repeating an earlier one with the same input, nothing written between",
    "re_read": "a Read of a file already read, not written since",
    "expired": "the prompt cache expired in a pause and was written again",
    "invalidated": "the prompt cache was written again after the start of the conversation changed",
    "model": "the prompt cache was written again after a switch of model",
}


def lesson_session(uuid: str, report: dict, tool_use: dict, cache: dict) -> dict:
    """One session as 2.10 reads it: its start (2.3, microseconds; None undated), requests,
    tool_use (calls, productive, signals), cache misses by cause, and its calls (for examples)."""
    return {"uuid": uuid, "start": report["start_us"], "requests": report["summary"]["requests"],
            "calls": tool_use["summary"]["calls"], "productive": tool_use["summary"]["productive"],
            "signals": tool_use["summary"]["signals"],
            "misses": {c: cache["summary"]["misses"][c] for c in LESSON_CACHE} if cache else {},
            "call_list": tool_use["calls"]}


def _l_count(x: str, s: dict) -> int:
    if x == "<lesson>":
        return s["calls"] - s["productive"]
    if x in LESSON_CACHE:
        return s["misses"][x]["count"]
    return s["signals"][x]


def _l_base(x: str, s: dict) -> int:
    return s["requests"] if x in LESSON_CACHE else s["calls"]


def _l_small(x: str, group: list[dict]) -> bool:
    return len(group) < 3 or sum(_l_base(x, s) for s in group) < 100


def _l_status(x: str, before: list[dict], after: list[dict]) -> str:
    if _l_small(x, before) or _l_small(x, after):
        return "too early"
    c_b, b_b = sum(_l_count(x, s) for s in before), sum(_l_base(x, s) for s in before)
    c_a, b_a = sum(_l_count(x, s) for s in after), sum(_l_base(x, s) for s in after)
    if c_a > 0 and c_a * b_b >= c_b * b_a:
        return "not working"
    if c_b >= 5 and 2 * c_a * b_b <= c_b * b_a:
        return "working"
    return "unclear"


def _l_side(x: str, group: list[dict]) -> dict:
    c, b = sum(_l_count(x, s) for s in group), sum(_l_base(x, s) for s in group)
    out = {"sessions": len(group), "count": c, "base": b, "rate": None if b == 0 else 100 * c / b}
    if x in LESSON_CACHE:
        out["extra_usd"] = (None if not group else
                            round(sum(s["misses"][x]["extra_usd"] for s in group) / len(group), 6))
    return out


def _l_effect(x: str, project: list[dict], member: list[dict], before_p, before_m) -> tuple:
    """(before, baseline, after, status, back) with `before_p(s)` / `before_m(s)`: whether s is
    ordered before the moment (the project's side / the member's side)."""
    counted_p = [s for s in project if _l_base(x, s) > 0]
    before = [s for s in counted_p if before_p(s)][-10:]
    baseline = "project"
    if _l_small(x, before):
        before = [s for s in member if _l_base(x, s) > 0 and before_m(s)][-10:]
        baseline = "all projects"
    a = [s for s in counted_p if not before_p(s)]
    after = a[-10:]
    status = _l_status(x, before, after)
    back = status == "not working" and any(_l_status(x, before, a[:k][-10:]) == "working" for k in range(1, len(a)))
    return before, baseline, after, status, back


def _l_key(s: dict) -> tuple:
    return (s["start"], s["uuid"])


def _l_iso(us: int) -> str:
    return as_datetime(us).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _l_shown(text) -> str:
    """accounting.md §2.10 "Stored text is data", rules 1 and 2."""
    import unicodedata

    text = "".join(" " if c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") else c
                   for c in ("" if text is None else str(text)))
    text = " ".join(text.split(" "))
    while "  " in text:
        text = text.replace("  ", " ")
    text = text.strip(" ")
    return text if len(text) <= 200 else text[:199] + "…"


def _l_example(x: str, before: list[dict], after: list[dict]):
    if sum(_l_count(x, s) for s in before) == 0 and sum(_l_count(x, s) for s in after) == 0:
        return None
    chosen = after if sum(_l_count(x, s) for s in after) > 0 else before
    hit = [s for s in chosen if _l_count(x, s) > 0]
    if x in LESSON_CACHE:
        best = hit[0]
        for s in hit[1:]:
            if (s["misses"][x]["extra_usd"], _l_key(s)) > (best["misses"][x]["extra_usd"], _l_key(best)):
                best = s
        return best["uuid"]
    texts: dict[str, int] = {}
    for s in hit:
        for call in s["call_list"]:
            if call["signal"] != x:
                continue
            text = call["path"] if call["path"] is not None else f"{call['name']} {call['input'][:60]}"
            texts[text] = texts.get(text, 0) + 1
    most = max(texts.values())
    return _l_shown(sorted(t for t, n in texts.items() if n == most)[0])


def lessons(member: list[dict], project_uuids: set[str], given: dict[str, set[str]],
            phases: list[dict]) -> dict:
    """`retrod lessons`' JSON but `project`: member = every session of the member (lesson_session
    dicts, undated ones included: left out here); given: session -> the patterns any stored brief
    for it named; phases: the member's phases as {session, task, phase, verdict, started_at,
    ended_at (datetimes), lessons_learned, seconds (claude + tool + human)}."""
    member = sorted((s for s in member if s["start"] is not None), key=_l_key)
    project = [s for s in member if s["uuid"] in project_uuids]
    rows = []
    for x in LESSON_PATTERNS:
        given_x = [s for s in project if x in given.get(s["uuid"], set())]
        if not given_x:
            continue
        g = given_x[0]
        g_star = next(s for s in member if x in given.get(s["uuid"], set()))
        before, baseline, after, status, back = _l_effect(
            x, project, member, lambda s, g=g: _l_key(s) < _l_key(g), lambda s, g=g_star: _l_key(s) < _l_key(g))
        rows.append({"pattern": x, "family": "cache" if x in LESSON_CACHE else "signal", "what": LESSON_WHAT[x],
                     "example": _l_example(x, before, after),
                     "first_given": {"session": g["uuid"], "started_at": _l_iso(g["start"])},
                     "sessions_given": len(given_x), "baseline": baseline,
                     "before": _l_side(x, before), "after": _l_side(x, after), "status": status, "back": back})
    order = ("not working", "too early", "unclear", "working")
    rows.sort(key=lambda r: (order.index(r["status"]), LESSON_PATTERNS.index(r["pattern"])))

    dated = {s["uuid"] for s in project}
    found: dict[str, list[dict]] = {}
    for p in phases:
        text = " ".join((p["lessons_learned"] or "").split()).lower()
        if p["session"] in dated and text:
            found.setdefault(text, []).append(p)

    def moment(p: dict) -> int:
        return to_microseconds(p["ended_at"] or p["started_at"])

    lesson_rows = []
    for text, logged in found.items():
        first = min(logged, key=lambda p: (moment(p), p["session"], p["started_at"], p["task"], p["phase"],
                                           p["lessons_learned"]))
        m = moment(first)
        before, baseline, after, status, back = _l_effect(
            "<lesson>", project, member, lambda s, m=m: s["start"] < m, lambda s, m=m: s["start"] < m)

        def share(group: list[dict]) -> float | None:
            mine = [p for p in phases if p["session"] in {s["uuid"] for s in group}]
            total = sum(p["seconds"] for p in mine)
            waste = sum(p["seconds"] for p in mine if p["verdict"] in ("avoidable_waste", "exploratory_waste"))
            return waste / total if total else None

        lesson_rows.append((m, text, {
            "lesson": _l_shown(first["lessons_learned"]),
            "logged": {"session": first["session"], "task": _l_shown(first["task"]),
                       "phase": _l_shown(first["phase"]), "at": _l_iso(m)},
            "baseline": baseline, "before": _l_side("<lesson>", before), "after": _l_side("<lesson>", after),
            "status": status, "back": back,
            "waste_phase_share": {"before": share(before), "after": share(after)}}))
    lesson_rows.sort(key=lambda r: (-r[0], r[1]))
    return {"answer": lessons_answer(rows), "patterns": rows, "lessons": [r for _, _, r in lesson_rows]}


def lessons_answer(rows: list[dict]) -> str:
    if not rows:
        return "retrod has named no pattern in this project's briefs yet"
    w = len([r for r in rows if r["status"] == "working"])
    j = len([r for r in rows if r["status"] != "too early"])
    t = len([r for r in rows if r["status"] == "too early"])
    b = len([r for r in rows if r["back"]])
    a = len([r for r in rows if r["status"] != "too early" and r["baseline"] == "all projects"])
    if j == 0:
        return f"{t} {'pattern' if t == 1 else 'patterns'} named, too early to tell"
    out = f"{w} of {j} {'pattern' if j == 1 else 'patterns'} fell by half or more since retrod started naming them"
    out += f"; {b} came back" if b else ""
    out += f"; {t} too early to tell" if t else ""
    out += f"; {a} judged against all projects" if a else ""
    return out
