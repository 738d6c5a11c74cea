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


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_API_IDS = re.compile(r'"((?:msg|req|toolu)_[A-Za-z0-9]+)"')


def _copy_folder(src: Path, dest: Path, copy: int) -> int:
    """One fixture project folder, every uuid and API id made fresh for this copy, times shifted."""
    import uuid as uuidlib

    names: dict[str, str] = {}

    def new_uuid(m: re.Match) -> str:
        old = m.group(0)
        if old not in names:
            names[old] = str(uuidlib.uuid5(uuidlib.NAMESPACE_OID, f"{old}/{copy}"))
        return names[old]

    delta = timedelta(days=copy)
    written = 0
    for path in sorted(src.rglob("*")):
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "surrogateescape")
        text = _UUID.sub(new_uuid, text)
        text = _API_IDS.sub(lambda m: f'"{m.group(1)}c{copy}"', text)
        text = _TS.sub(lambda m: _shift(m, delta), text)
        target = dest / _UUID.sub(new_uuid, str(path.relative_to(src)))
        target.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8", "surrogateescape")
        target.write_bytes(data)
        written += len(data)
    return written


def write_tree(dest: Path, target_bytes: int, seed: int = 1) -> int:
    """A ~/.claude/projects-shaped tree of about `target_bytes`: copies of the real fixture
    project folders (every layout, entry type, line size and subagent/compaction file they have),
    picked at random with `seed`, so the proportions follow the corpus and runs are comparable."""
    import random

    folders = sorted(p for p in FIXTURES.iterdir() if p.is_dir())
    rng = random.Random(seed)
    written, copy = 0, 0
    while written < target_bytes:
        src = rng.choice(folders)
        written += _copy_folder(src, dest / f"{src.name}-c{copy}", copy)
        copy += 1
    return written
