"""Synthetic sessions made of real lines: a real transcript repeated with fresh ids and later times.

Each repetition rewrites every id (so requests stay distinct) and shifts every timestamp by the
span of the source, so the result reads like one long session of the same shape.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude-projects"
SOURCE = FIXTURES / "-home-USER-projects-spotter-worktrees-spotter-gqc" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
_TS = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"')
_IDS = re.compile(r'"((?:msg|req|toolu)_[A-Za-z0-9]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"')


def _shift(match: re.Match, delta: timedelta) -> str:
    ts = datetime.fromisoformat(match.group(1).replace("Z", "+00:00")) + delta
    return '"' + ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + 'Z"'


def _renamed(ident: str, session: str, rep: int) -> str:
    """A fresh id per repetition (the session's own uuid stays)."""
    if ident == session:
        return f'"{ident}"'
    return f'"{ident}{rep}"' if "-" in ident else f'"{ident}x{rep}"'


def write_session(dest: Path, session: str, target_bytes: int, source: Path = SOURCE) -> Path:
    """`dest/<slug>/<session>.jsonl` of about `target_bytes`; returns its path."""
    lines = source.read_bytes().decode().splitlines(keepends=True)
    original = source.stem
    stamps = [datetime.fromisoformat(m.replace("Z", "+00:00")) for m in _TS.findall("".join(lines))]
    span = max(stamps) - min(stamps) + timedelta(minutes=1)
    path = dest / "-bench-project" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with path.open("w") as out:
        rep = 0
        while written < target_bytes:
            delta = span * rep
            for line in lines:
                line = line.replace(original, session)
                if rep:
                    line = _IDS.sub(lambda m, rep=rep: _renamed(m.group(1), session, rep), line)
                    line = _TS.sub(lambda m, delta=delta: _shift(m, delta), line)
                out.write(line)
                written += len(line.encode())
                if written >= target_bytes:
                    break
            rep += 1
    return path


if __name__ == "__main__":
    import sys

    p = write_session(Path(sys.argv[1]), "11111111-2222-4333-8444-555555555555", int(float(sys.argv[2])))
    print(p, p.stat().st_size, json.dumps(sum(1 for _ in p.open())))
