"""Independent reference implementation of accounting.md §2.6 (tool calls and waste signals): a
test oracle.

Written from accounting.md §2.1, §2.2, §2.4, §2.5 and §2.6, notes on Claude Code's transcript
formats and the real fixture transcripts only, without looking at the daemon's code.  File
discovery and line reading come from tests/reference.py
(the oracle of 2.1-2.5), so that both oracles agree on which files and lines exist.  Deliberately
naive: every file is read whole, every call is kept in a plain dict, and every signal is found by
scanning the agent's earlier calls with plain loops.  Readability beats speed.

Public API
----------
tool_use(projects_dir, session, windows=None) -> dict
    {
      "summary": FIGURES,                      # every call of the session
      "agents":  {agent_id: FIGURES},          # "" = main thread; every subagent file's id
                                               #   (acompact* included) and every listed subagent
                                               #   (2.4), zeros included
      "phases":  [FIGURES per window],         # in the order given; [] without windows
      "tools":   [{"name", "calls", "failed", "rejected", "result_bytes", "median_result_bytes",
                   "result_s", "median_result_s"}, ...]   # sorted by name (code-point order)
      "calls":   [CALL, ...]                   # per agent (sorted by id), in the agent's order
    }
    FIGURES = {"calls", "productive", "efficiency",
               "signals": {"sibling_error", "error_retry", "persisted_output_read",
                           "post_write_read", "duplicate", "re_read"}}   # all six, zeros included
    CALL = {"id", "agent", "name", "input" (canonical JSON text), "path", "ts_us", "file",
            "has_result", "failed", "result_bytes", "result_ts_us", "result_us", "signal"}
    windows: [(start, end), ...], each bound either integer microseconds since the epoch or a
    timezone-aware datetime; a window is [start, end) as in 2.5.
compute_tool_use(projects_dir, windows=None) -> {session: tool_use(...)} for every session (2.1).
Run: python3 tests/reference_tools.py ~/.claude/projects

Choices where 2.6 is silent
---------------------------
(Each is a choice the implementation may follow or argue against; the tests pin them.)

C1  Scope of "an id seen more than once counts once": the session (2.6 speaks of the "Calls of a
    session").  Only qualifying occurrences are seen: a tool_use in a copied-history line, an inline
    sidechain line, an agent_progress copy or a non-assistant line is not an occurrence at all.
C2  "The file whose path sorts first": the full path as a string, compared by code points (like the
    project slug in 2.1), not pathlib's part-by-part order ("a-b/x" < "a/x" as strings because
    "-" < "/").  All files are below one projects root, so absolute and relative paths sort alike.
    With several main transcripts (one uuid in two project folders) 2.6 says "the first in 2.3's
    order": by project folder name (`-app` before `-app-v2`, though `-app-v2/S.jsonl` sorts first
    as a path), then by path.
C3  Order within an agent that has several files (agent-<id>.jsonl in both layouts, or at two depths
    below subagents/): files by path (C2), then file order, then block order.
C4  The result may come before its call in the file: 2.6 says "the first tool_result block with that
    tool_use_id in a user line of the same file", with no order condition, and so does this oracle.
    Any `user` line of that file counts (own, sidechain or copied alike): the text says "a user
    line", not "an own line".  A result only in another file (e.g. a subagent's call answered in
    the main transcript) is no result.
C5  A call without a result: failed = false (failed needs is_error true); no result bytes and no
    time; it is productive unless a signal other than 1-2 applies.  So a Write/Edit without result
    IS a write ("successful (not failed)"), and an earlier call without result counts as one "whose
    result did not fail" for `duplicate` (see A2).
C6  Name of a call: the block's `name` when it is a string, else "" (also the tools[] row name).
    Names compare exactly (error_retry, duplicate, Read, the four write tools).
C7  Input: the block's `input` (any JSON value; absent = null), serialised with
    json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False).  ensure_ascii does not
    change which inputs are equal (both forms are one-to-one); False keeps the text readable.
    Numbers compare by value: a float with an integral value is written as that integer first, so
    {"n": 1}, {"n": 1.0} and {"n": 1e0} are the same input (as in RFC 8785 and PostgreSQL jsonb);
    true is never 1.  Objects with a repeated key keep the last value (json.loads).
C8  Path: input.file_path when it is a non-empty string, else input.notebook_path when it is one,
    else none.  Paths compare as exact strings (no normalisation of "..", "//", case).  A call with
    no path names no path; a Read without path gets none of the signals 3, 4, 6.
C9  "Calls naming P" (post_write_read) = any call of the agent, any tool, whose path is P, failed
    or not.  A failed Edit of P after a Write of P is the latest call naming P and is not a write,
    so a Read after it is not a post_write_read.
C10 `duplicate`: "no write between the two" = no write of ANY path by the same agent strictly
    between the earlier call and this one (see A1).  Any earlier call qualifies, whatever its own
    signal; it suffices that one earlier same-name same-input call without failure has no write
    after it.  A repeated successful Write of the same input is a duplicate (the earlier Write is
    not between the two).
C11 `re_read`: an earlier Read of P that did not fail (a Read without result did not fail, C5) with
    no write of P strictly between.  Reads compare by path only, whatever their offset/limit.
C12 Result text for `sibling_error`: the result's `content` when a string, else each string `text`
    of its `type == "text"` elements; the phrase must occur inside one of those texts.
C13 Result size: tool_result_size of tests/reference.py (2.4 tool_result_bytes of the one block).
C14 Time from call to result: result line's timestamp - call line's timestamp, in microseconds;
    excluded when either is missing or there is no result; a result stamped before its call counts
    0 (Claude Code's clocks run backwards at times, 2.3; no such case is in the fixtures).
C15 Per tool: result_bytes = sum over calls with a result (0 when none); median_result_bytes =
    median over calls WITH a result (a call without result has no size), None when there is none;
    result_s = total time in seconds rounded to milliseconds (like 2.3); median_result_s = median
    over the calls with a time (C14), rounded the same way, None when there is none.  The median
    of an even count is the mean of the two middle values (PostgreSQL percentile_cont(0.5)), so it
    may be x.5 bytes.
C16 `efficiency` = productive / calls as an unrounded float; None (JSON null) when calls == 0.
C17 Phases: a call belongs to every window holding its timestamp (windows may overlap, 2.5); a call
    without timestamp belongs to none.  Signals are judged over the whole agent's calls, never
    per window: a window only counts the calls that fall in it.
C18 `agents`: "" when the session has a main transcript; the id of every subagent file of the
    session (acompact* included, although 2.4 never lists those); every subagent listed by 2.4
    (an agent_progress-only agent then shows zero calls).  Inline sidechain threads and unnamed
    agents add no calls and have no entry.

C19 A refusal by the person (issue 20): a failed call whose result's text (C12) contains "The user
    doesn't want to proceed with this tool use", which Claude Code writes when the user declines a
    permission prompt.  It is still failed (no write, C9-C11 unchanged) but is no tool error: never
    an `error_retry` (rule 2), and per tool it counts in `rejected`, not in `failed`.

Ambiguities noticed in 2.6
--------------------------
A1  `duplicate` says "no write between the two" while `re_read` says "no write of P".  Read literally
    (the contrast looks deliberate): any write resets duplicates — a repeated `pytest` or Grep after
    an Edit of any file is a fresh look, not waste.  This oracle follows the letter (C10).
A2  "whose result did not fail" presupposes a result; the oracle reads it as "not failed" (C5), the
    same reading as "successful (not failed)" for writes and "a Read that did not fail" for re_read.
A3  "judged within its agent" is taken to cover everything a rule looks at: the earlier call, the
    next call, and the writes between are all calls of the same agent.
A4  Per-tool figures are "per session"; 2.6 gives no per-tool figures per phase or per agent.
"""

from __future__ import annotations

import datetime
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference import (
    content_blocks,
    find_files,
    is_copied_history,
    is_own_line,
    listed_subagents,
    non_empty_string,
    parse_timestamp,
    seconds,
    to_microseconds,
    tool_result_size,
)

SIGNALS = (
    "sibling_error",
    "error_retry",
    "persisted_output_read",
    "post_write_read",
    "duplicate",
    "re_read",
)
WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
SIBLING_TEXT = "Sibling tool call errored"
REJECTED_TEXT = "The user doesn't want to proceed with this tool use"  # C19
PERSISTED_DIR = "/tool-results/"


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def _integral_floats_as_ints(value):
    """C7: 1.0 -> 1 everywhere inside value, so that numbers compare by value."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral_floats_as_ints(item) for item in value]
    return value


def canonical_input(block: dict) -> str:
    """C7: the block's input as canonical JSON (keys sorted, no whitespace)."""
    value = _integral_floats_as_ints(block.get("input"))
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_path(block: dict) -> str | None:
    """C8: input.file_path, else input.notebook_path, when a non-empty string."""
    tool_input = block.get("input")
    if not isinstance(tool_input, dict):
        return None
    for key in ("file_path", "notebook_path"):
        if non_empty_string(tool_input.get(key)):
            return tool_input[key]
    return None


def result_texts(block: dict) -> list[str]:
    """C12: the texts of a tool_result block (the same pieces that 2.4 measures)."""
    content = block.get("content")
    if isinstance(content, str):
        return [content]
    texts = []
    if isinstance(content, list):
        for element in content:
            if isinstance(element, dict) and element.get("type") == "text" \
                    and isinstance(element.get("text"), str):
                texts.append(element["text"])
    return texts


def median(values: list) -> float | int | None:
    """C15: the median; the mean of the two middle values for an even count; None when empty."""
    if not values:
        return None
    return statistics.median(values)


def path_key(file: dict) -> str:
    """C2: files sort by their path as a string, code point by code point."""
    return str(file["path"])


def as_microseconds(bound) -> int:
    if isinstance(bound, datetime.datetime):
        return to_microseconds(bound)
    return int(bound)


# ---------------------------------------------------------------------------
# Step 1: the calls of a session and their results
# ---------------------------------------------------------------------------


def call_occurrences(session_files: list[dict]) -> list[dict]:
    """Every qualifying tool_use block of the session's files (before the id deduplication).

    2.6: tool_use blocks with a non-empty string id in message.content of assistant lines of the
    main transcript's own lines and of the subagent files; agent_progress copies (progress lines)
    and copied history add no calls.
    """
    occurrences = []
    for file in session_files:
        for line_index, line in enumerate(file["lines"]):
            if line.get("type") != "assistant":
                continue
            if file["kind"] == "main":
                if not is_own_line(line, file):  # sidechain or copied history: no calls
                    continue
            elif is_copied_history(line, file):
                continue
            for block_index, block in enumerate(content_blocks(line)):
                if block.get("type") != "tool_use" or not non_empty_string(block.get("id")):
                    continue
                occurrences.append(
                    {"block": block, "line": line, "file": file,
                     "line_index": line_index, "block_index": block_index}
                )
    return occurrences


def first_results(file: dict) -> dict[str, tuple[dict, dict]]:
    """tool_use_id -> (block, line) of the FIRST tool_result block in a user line of the file (C4)."""
    results: dict[str, tuple[dict, dict]] = {}
    for line in file["lines"]:
        if line.get("type") != "user":
            continue
        for block in content_blocks(line):
            if block.get("type") != "tool_result":
                continue
            tool_use_id = block.get("tool_use_id")
            if isinstance(tool_use_id, str) and tool_use_id not in results:
                results[tool_use_id] = (block, line)
    return results


def session_calls(session_files: list[dict]) -> list[dict]:
    """The session's calls, deduplicated by id, each with its result; in agent order (C3)."""
    # "an id seen more than once counts once, where it is seen first: in the main transcript if
    # it is there (with several, the first in 2.3's order), else in the file whose path sorts
    # first, then in file order".  2.3's order: the project folders' names (code-point); two
    # main files in one folder name (impossible on one machine) by path.
    def where(occurrence):
        file = occurrence["file"]
        main = file["kind"] == "main"
        return (not main, file["slug"] if main else "", path_key(file),
                occurrence["line_index"], occurrence["block_index"])

    first_seen: dict[str, dict] = {}
    for occurrence in sorted(call_occurrences(session_files), key=where):
        first_seen.setdefault(occurrence["block"]["id"], occurrence)

    results_by_file = {path_key(f): first_results(f) for f in session_files}

    calls = []
    for call_id, occurrence in first_seen.items():
        block, line, file = occurrence["block"], occurrence["line"], occurrence["file"]
        ts_us = parse_timestamp(line.get("timestamp"))
        found = results_by_file[path_key(file)].get(call_id)
        call = {
            "id": call_id,
            "agent": "" if file["kind"] == "main" else file["agent_id"],
            "name": block["name"] if isinstance(block.get("name"), str) else "",  # C6
            "input": canonical_input(block),
            "path": call_path(block),
            "ts_us": ts_us,
            "file": path_key(file),
            "has_result": found is not None,
            "failed": False,
            "rejected": False,
            "result_bytes": None,
            "result_text": [],
            "result_ts_us": None,
            "result_us": None,
            "signal": None,
            "_order": (path_key(file), occurrence["line_index"], occurrence["block_index"]),
        }
        if found is not None:
            result_block, result_line = found
            call["failed"] = result_block.get("is_error") is True
            call["result_bytes"] = tool_result_size(result_block)
            call["result_text"] = result_texts(result_block)
            call["rejected"] = call["failed"] and any(REJECTED_TEXT in text for text in call["result_text"])  # C19
            call["result_ts_us"] = parse_timestamp(result_line.get("timestamp"))
            if ts_us is not None and call["result_ts_us"] is not None:
                call["result_us"] = max(0, call["result_ts_us"] - ts_us)  # C14
        calls.append(call)

    calls.sort(key=lambda c: (c["agent"], c["_order"]))
    return calls


# ---------------------------------------------------------------------------
# Step 2: the signals, judged within each agent
# ---------------------------------------------------------------------------


def is_write(call: dict) -> bool:
    # 2.6: "Writes = successful (not failed) calls named Write, Edit, MultiEdit, NotebookEdit."
    return call["name"] in WRITE_TOOLS and not call["failed"]


def is_read_of_a_path(call: dict) -> bool:
    return call["name"] == "Read" and call["path"] is not None


def signal_of(agent_calls: list[dict], i: int) -> str | None:
    """The first of the six signals that applies to agent_calls[i], or None (productive)."""
    call = agent_calls[i]
    earlier = agent_calls[:i]

    # 1. sibling_error: failed, and the result's text contains "Sibling tool call errored".
    if call["failed"] and any(SIBLING_TEXT in text for text in call["result_text"]):
        return "sibling_error"

    # 2. error_retry: failed, and the agent's next call has the same tool name; a refusal by the
    #    person is no tool error (C19).
    if call["failed"] and not call["rejected"] and i + 1 < len(agent_calls) \
            and agent_calls[i + 1]["name"] == call["name"]:
        return "error_retry"

    # 3. persisted_output_read: a Read whose path contains /tool-results/.
    if is_read_of_a_path(call) and PERSISTED_DIR in call["path"]:
        return "persisted_output_read"

    # 4. post_write_read: a Read of P whose latest earlier call naming P is a write of P.
    if is_read_of_a_path(call):
        naming = [c for c in earlier if c["path"] == call["path"]]
        if naming and is_write(naming[-1]):
            return "post_write_read"

    # 5. duplicate: an earlier call with the same name and input whose result did not fail, and
    #    no write (of any path, C10) between the two.
    for j, other in enumerate(earlier):
        if other["name"] != call["name"] or other["input"] != call["input"] or other["failed"]:
            continue
        between = agent_calls[j + 1 : i]
        if not any(is_write(c) for c in between):
            return "duplicate"

    # 6. re_read: a Read of P read earlier by a Read that did not fail, with no write of P between.
    if is_read_of_a_path(call):
        for j, other in enumerate(earlier):
            if not is_read_of_a_path(other) or other["path"] != call["path"] or other["failed"]:
                continue
            between = agent_calls[j + 1 : i]
            if not any(is_write(c) and c["path"] == call["path"] for c in between):
                return "re_read"

    return None


def assign_signals(calls: list[dict]) -> None:
    by_agent: dict[str, list[dict]] = {}
    for call in calls:  # already in agent order
        by_agent.setdefault(call["agent"], []).append(call)
    for agent_calls in by_agent.values():
        for i, call in enumerate(agent_calls):
            call["signal"] = signal_of(agent_calls, i)


# ---------------------------------------------------------------------------
# Step 3: the figures
# ---------------------------------------------------------------------------


def figures(calls: list[dict]) -> dict:
    signals = dict.fromkeys(SIGNALS, 0)
    for call in calls:
        if call["signal"] is not None:
            signals[call["signal"]] += 1
    productive = sum(1 for call in calls if call["signal"] is None)
    return {
        "calls": len(calls),
        "productive": productive,
        "efficiency": productive / len(calls) if calls else None,  # C16
        "signals": signals,
    }


def tool_rows(calls: list[dict]) -> list[dict]:
    rows = []
    for name in sorted({call["name"] for call in calls}):
        named = [call for call in calls if call["name"] == name]
        sizes = [call["result_bytes"] for call in named if call["has_result"]]
        times = [call["result_us"] for call in named if call["result_us"] is not None]
        median_time = median(times)
        rows.append(
            {
                "name": name,
                "calls": len(named),
                "failed": sum(1 for call in named if call["failed"] and not call["rejected"]),
                "rejected": sum(1 for call in named if call["rejected"]),
                "result_bytes": sum(sizes),
                "median_result_bytes": median(sizes),
                "result_s": seconds(sum(times)),
                "median_result_s": None if median_time is None else seconds(median_time),
            }
        )
    return rows


def _tool_use(session_files: list[dict], windows=None) -> dict:
    calls = session_calls(session_files)
    assign_signals(calls)

    agent_ids = set()  # C18
    if any(f["kind"] == "main" for f in session_files):
        agent_ids.add("")
    agent_ids.update(f["agent_id"] for f in session_files if f["kind"] == "subagent")
    agent_ids.update(listed_subagents(session_files))
    agent_ids.update(call["agent"] for call in calls)

    phases = []
    for start, end in windows or []:
        start_us, end_us = as_microseconds(start), as_microseconds(end)
        inside = [c for c in calls if c["ts_us"] is not None and start_us <= c["ts_us"] < end_us]
        phases.append(figures(inside))

    public_calls = [
        {key: value for key, value in call.items() if not key.startswith("_") and key != "result_text"}
        for call in calls
    ]
    return {
        "summary": figures(calls),
        "agents": {agent: figures([c for c in calls if c["agent"] == agent]) for agent in sorted(agent_ids)},
        "phases": phases,
        "tools": tool_rows(calls),
        "calls": public_calls,
    }


def tool_use(projects_dir: Path, session: str, windows=None) -> dict:
    """accounting.md §2.6 for one session; see the module docstring for the shape and the choices."""
    files = find_files(Path(projects_dir))
    return _tool_use([f for f in files if f["session"] == session], windows)


def compute_tool_use(projects_dir: Path, windows=None) -> dict[str, dict]:
    """tool_use(...) of every session that exists (2.1), read in one pass over the files."""
    by_session: dict[str, list[dict]] = {}
    for file in find_files(Path(projects_dir)):
        by_session.setdefault(file["session"], []).append(file)
    return {session: _tool_use(files, windows) for session, files in sorted(by_session.items())}


if __name__ == "__main__":
    print(json.dumps(compute_tool_use(Path(sys.argv[1])), indent=1, sort_keys=True))
