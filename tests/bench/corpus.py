"""Benchmark corpora made of real lines: the fixture transcripts copied with fresh ids and later
times, seeded, so runs are comparable and every entry type, line size, subagent (with its meta
file) and compaction keeps the proportions of the real files.

- write_session: one long session, a real transcript repeated (the report benchmark's ~200 MB one);
- write_tree: a ~/.claude/projects tree of copies of whole fixture project folders;
- write_many: many small transcripts (the idle benchmark's ~10,000 files);
- write_year: another heavy user's year, of another shape (25 projects, 3 models, a session most
  hours), so that the benchmark's first corpus is not the only shape measured.
"""

from __future__ import annotations

import itertools
import random
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude-projects"
SOURCE = FIXTURES / "-home-USER-projects-spotter-worktrees-spotter-gqc" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
_TS = re.compile(r'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"')
_IDS = re.compile(r'"((?:msg|req|toolu)_[A-Za-z0-9]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"')
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_API_IDS = re.compile(r'"((?:msg|req|toolu)_[A-Za-z0-9]+)"')


def _shift(match: re.Match, delta: timedelta) -> str:
    ts = datetime.fromisoformat(match.group(1).replace("Z", "+00:00")) + delta
    return '"' + ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + 'Z"'


def _renamed(ident: str, session: str, rep: int) -> str:
    """A fresh id per session and repetition (the session's own uuid stays)."""
    if ident == session:
        return f'"{ident}"'
    tag = f"{session.replace('-', '')[:8]}r{rep}"
    return f'"{ident}{tag}"' if "-" in ident else f'"{ident}x{tag}"'


def fresh_lines(session: str, source: Path = SOURCE) -> Iterator[str]:
    """The lines of a real transcript, endlessly: each repetition with fresh ids (the session's
    own uuid stays `session`) and times shifted past the previous one. The ids are the session's
    own, the first repetition's included: two sessions written from one source share no line
    uuid or message id (or accounting.md §2.1 and §2.2 would count one's lines as the other's copies)."""
    lines = source.read_bytes().decode().splitlines(keepends=True)
    original = source.stem
    stamps = [datetime.fromisoformat(m.replace("Z", "+00:00")) for m in _TS.findall("".join(lines))]
    span = max(stamps) - min(stamps) + timedelta(minutes=1)
    for rep in itertools.count():
        delta = span * rep
        for line in lines:
            line = _IDS.sub(lambda m, rep=rep: _renamed(m.group(1), session, rep), line.replace(original, session))
            if rep:
                line = _TS.sub(lambda m, delta=delta: _shift(m, delta), line)
            yield line


def write_session(dest: Path, session: str, target_bytes: int, source: Path = SOURCE) -> Path:
    """`dest/-bench-project/<session>.jsonl` of about `target_bytes`; returns its path."""
    path = dest / "-bench-project" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with path.open("w") as out:
        for line in fresh_lines(session, source):
            out.write(line)
            written += len(line.encode())
            if written >= target_bytes:
                break
    return path


def _copy(src: Path, relative: Path, dest: Path, copy: int, names: dict[str, str],
          shift: timedelta | None = None, rewrite: Callable[[str], str] | None = None) -> int:
    """One fixture file as `dest/relative`, its uuids and API ids made fresh for this copy and its
    times shifted by `shift` (default: `copy` days); `names` keeps one new uuid per old one across
    a folder; `rewrite`: what else changes in its text."""

    def new_uuid(m: re.Match) -> str:
        old = m.group(0)
        if old not in names:
            names[old] = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{old}/{copy}"))
        return names[old]

    text = src.read_bytes().decode("utf-8", "surrogateescape")
    text = _UUID.sub(new_uuid, text)
    text = _API_IDS.sub(lambda m: f'"{m.group(1)}c{copy}"', text)
    delta = timedelta(days=copy) if shift is None else shift
    text = _TS.sub(lambda m: _shift(m, delta), text)
    if rewrite is not None:
        text = rewrite(text)
    target = dest / _UUID.sub(new_uuid, str(relative))
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8", "surrogateescape")
    target.write_bytes(data)
    return len(data)


def write_tree(dest: Path, target_bytes: int, seed: int = 1) -> int:
    """A ~/.claude/projects-shaped tree of about `target_bytes`: copies of the real fixture
    project folders (every layout, entry type, line size and subagent/compaction file they have),
    picked at random with `seed`. Returns the bytes written."""
    folders = sorted(p for p in FIXTURES.iterdir() if p.is_dir())
    rng = random.Random(seed)
    written, copy = 0, 0
    while written < target_bytes:
        src = rng.choice(folders)
        names: dict[str, str] = {}
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            written += _copy(path, path.relative_to(src), dest / f"{src.name}-c{copy}", copy, names)
        copy += 1
    return written


def write_many(dest: Path, files: int, per_folder: int = 100, max_bytes: int = 20_000,
               spread_days: int | None = None) -> int:
    """`files` small real transcripts (the fixture sessions under `max_bytes`, cycled, each copy
    with fresh ids), `per_folder` to a project folder; copy n shifted by n days, or with
    `spread_days` by n modulo that many days and a few hours (a year of a heavy user's sessions).
    Returns the bytes written."""
    small = sorted(p for p in FIXTURES.glob("*/*.jsonl")
                   if _UUID.fullmatch(p.stem) and p.stat().st_size <= max_bytes)  # session files
    written = 0
    for n in range(files):
        src = small[n % len(small)]
        shift = timedelta(days=n % spread_days, hours=n % 24) if spread_days else None
        written += _copy(src, Path(src.name), dest / f"-many-{n // per_folder}", n, {}, shift)
    return written


YEAR_MODELS = ("claude-opus-4-6", "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001")
_MODEL = re.compile(r'"model":"claude-[^"]*"')
_CWD = re.compile(r'"cwd":"[^"]*"')


def write_year(dest: Path, files: int, projects: int = 25, models: tuple[str, ...] = YEAR_MODELS,
               start: datetime = datetime(2025, 1, 1, 0, 7, tzinfo=UTC), days: int = 365,
               max_bytes: int = 20_000) -> int:
    """`files` small real transcripts (the fixture sessions under `max_bytes` with a response,
    cycled, each copy with fresh ids) over `days` days from `start`, one every days ÷ files (10,000
    a year: one most hours, at every minute of the hour), in `projects` projects (folder
    `-year-k`, working folder `/year/k`), each copy's responses all of one of `models` in turn.
    Returns the bytes written."""
    small = [p for p in sorted(FIXTURES.glob("*/*.jsonl"))
             if _UUID.fullmatch(p.stem) and p.stat().st_size <= max_bytes and '"usage"' in p.read_text()]
    firsts = {p: min(datetime.fromisoformat(m.replace("Z", "+00:00")) for m in _TS.findall(p.read_text()))
              for p in small}
    step = timedelta(days=days) / files
    written = 0
    for n in range(files):
        src, project, model = small[n % len(small)], n % projects, models[n % len(models)]

        def rewrite(text: str, project: int = project, model: str = model) -> str:
            return _CWD.sub(f'"cwd":"/year/{project}"', _MODEL.sub(f'"model":"{model}"', text))

        shift = start + n * step - firsts[src]
        written += _copy(src, Path(src.name), dest / f"-year-{project}", n, {}, shift, rewrite)
    return written
