"""Hand-made transcripts for accounting.md §2.9 (tasks from Claude's plan): calls and their results,
seconds after BASE."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
SLUG = "-home-me-proj"


def ts(seconds: float) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def at(seconds: float | None) -> datetime | None:
    return None if seconds is None else BASE + timedelta(seconds=seconds)


def session_id(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


class Transcript:
    """A main transcript built line by line: each call an assistant line (with tokens, so the
    figures have something to count), each result a user line."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.lines: list[dict] = []
        self.ids = 0

    def user(self, t: float, text: str = "go") -> Transcript:
        self.lines.append({"type": "user", "sessionId": self.session, "timestamp": ts(t),
                           "message": {"role": "user", "content": text}})
        return self

    def say(self, t: float, text: str = "ok") -> Transcript:
        self.ids += 1
        self.lines.append({"type": "assistant", "sessionId": self.session, "timestamp": ts(t),
                           "message": {"id": f"msg_{self.session[-4:]}_{self.ids}", "model": "claude-sonnet-4-5",
                                       "usage": {"input_tokens": 10, "output_tokens": 5},
                                       "content": [{"type": "text", "text": text}]}})
        return self

    def call(self, t: float, name: str, tool_input: dict, result: str | None = "ok", *, after: float = 1,
             is_error: bool = False, outcome: dict | None = None) -> Transcript:
        """A call at `t`, and its result `after` seconds later (None: no result)."""
        self.ids += 1
        tool_id = f"toolu_{self.session[-4:]}_{self.ids}"
        self.lines.append({"type": "assistant", "sessionId": self.session, "timestamp": ts(t),
                           "message": {"id": f"msg_{self.session[-4:]}_{self.ids}", "model": "claude-sonnet-4-5",
                                       "usage": {"input_tokens": 100, "output_tokens": 20},
                                       "content": [{"type": "tool_use", "id": tool_id, "name": name,
                                                    "input": tool_input}]}})
        if result is not None:
            block: dict = {"type": "tool_result", "tool_use_id": tool_id, "content": result}
            if is_error:
                block["is_error"] = True
            line = {"type": "user", "sessionId": self.session, "timestamp": ts(t + after),
                    "message": {"role": "user", "content": [block]}}
            if outcome is not None:
                line["toolUseResult"] = outcome
            self.lines.append(line)
        return self

    def todos(self, t: float, *items: tuple[str, str] | object, **kw) -> Transcript:
        """Items as (content, status); anything else goes in the list as it is."""
        todos = [{"content": i[0], "status": i[1], "activeForm": i[0]} if isinstance(i, tuple) else i for i in items]
        return self.call(t, "TodoWrite", {"todos": todos}, "Todos have been modified successfully.", **kw)

    def create(self, t: float, subject: str | None, task_id: str | None, *, in_outcome: bool = True,
               **kw) -> Transcript:
        given = {"description": "d"} if subject is None else {"subject": subject, "description": "d"}
        text = None if task_id is None else f"Task #{task_id} created successfully: {subject}"
        outcome = {"task": {"id": task_id, "subject": subject}} if in_outcome and task_id else None
        return self.call(t, "TaskCreate", given, text, outcome=outcome, **kw)

    def update(self, t: float, task_id: str, status: str | None = None, subject: str | None = None,
               **kw) -> Transcript:
        given = {"taskId": task_id}
        if status is not None:
            given["status"] = status
        if subject is not None:
            given["subject"] = subject
        kw.setdefault("outcome", {"success": True, "taskId": task_id})
        return self.call(t, "TaskUpdate", given, f"Updated task #{task_id}", **kw)

    def write(self, root: Path, slug: str = SLUG) -> Path:
        path = root / slug / f"{self.session}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines), encoding="utf-8")
        return path
