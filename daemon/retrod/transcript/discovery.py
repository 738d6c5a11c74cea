"""Which files under a projects root matter, and what each one is (accounting.md §2.1)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .keys import indexable

if TYPE_CHECKING:  # the fold (and msgspec) only when a file is read: `retrod phase` needs UUID_RE alone
    from .fold import Source

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_AGENT_RE = re.compile(r"agent-(.+)\.jsonl")
_META_RE = re.compile(r"agent-(.+)\.meta\.json")

FileKind = Literal["main", "subagent", "agent_root", "meta", "tool_result"]


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file retrod reads: a transcript (`source` set), a subagent's meta, or a persisted tool output."""

    path: Path
    kind: FileKind
    slug: str
    session_uuid: str | None
    agent_id: str = ""
    below: str = ""  # the path below the projects root, as text

    @property
    def is_transcript(self) -> bool:
        return self.kind in ("main", "subagent", "agent_root")

    def source(self, host_id: str, session_uuid: str) -> Source:
        from .fold import Source

        if self.kind == "meta" or self.kind == "tool_result":
            raise ValueError(f"not a transcript: {self.path}")
        return Source(self.kind, self.slug, session_uuid, self.agent_id, f"{host_id}:{self.path}", self.below)


def classify(root: Path, path: Path) -> FileRef | None:
    """What `path` (below `root`) is, or None when retrod ignores it."""
    try:
        parts = path.relative_to(root).parts
        str(path).encode("utf-8")  # the database keys files by their path as text
    except (ValueError, UnicodeEncodeError):
        return None
    if len(parts) < 2:
        return None
    slug, name = parts[0], parts[-1]
    below = "/".join(parts)
    if len(parts) == 2:
        stem = name.removesuffix(".jsonl")
        if stem != name and UUID_RE.fullmatch(stem):
            return FileRef(path, "main", slug, stem, below=below)
        m = _AGENT_RE.fullmatch(name)
        return FileRef(path, "agent_root", slug, None, indexable(m.group(1)), below) if m else None
    session = parts[1]
    if not UUID_RE.fullmatch(session) or len(parts) < 4:
        return None
    area = parts[2]
    if area == "subagents":
        # (agent ids as every id: whole up to 200 bytes, as the same id read from a line is)
        m = _AGENT_RE.fullmatch(name)
        if m:
            return FileRef(path, "subagent", slug, session, indexable(m.group(1)), below)
        m = _META_RE.fullmatch(name)
        if m:
            return FileRef(path, "meta", slug, session, indexable(m.group(1)))
        return None
    if area == "tool-results" and len(parts) == 4:
        return FileRef(path, "tool_result", slug, session)
    return None


def project_folders(root: Path) -> list[str]:
    """The folders in `root` (Claude Code's project folders, or links to folders), as a glob's
    `*/` takes them; none when `root` cannot be read."""
    try:
        with os.scandir(root) as entries:
            return [entry.path for entry in entries if _is_dir(entry)]
    except OSError:
        return []


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def session_paths(root: Path, session: str) -> list[Path]:
    """`<session>.jsonl` (anything by that name) and the folder `<session>/` in each project folder
    of `root`, as `*/<session>.jsonl` and `*/<session>/` globs find them, by an access() of each
    name per folder: no exception, no Path where it is not, which is most folders. (Two globs cost
    ~4 ms of CPU over a history of ~370 project folders, this ~1.5 ms: mostly the system calls.)"""
    found = []
    transcript, subfolder = f"{os.sep}{session}.jsonl", f"{os.sep}{session}"
    for folder in project_folders(root):
        if os.access(folder + transcript, os.F_OK):
            found.append(Path(folder + transcript))
        if os.access(folder + subfolder, os.F_OK) and os.path.isdir(folder + subfolder):
            found.append(Path(folder + subfolder))
    return found


def _may_hold_files(root: Path, folder: Path) -> bool:
    """Prune the walk to the folders of accounting.md §2.1 (a session folder may hold much else)."""
    parts = folder.relative_to(root).parts
    if len(parts) <= 1:
        return True
    if not UUID_RE.fullmatch(parts[1]):
        return False
    return len(parts) == 2 or parts[2] == "subagents" or (parts[2] == "tool-results" and len(parts) == 3)


def _regular(entry: os.DirEntry) -> bool:
    """Only regular files (or links to one) are transcripts: opening a FIFO would block."""
    try:
        return entry.is_file()
    except OSError:
        return False


def walk(root: Path, start: Path | None = None) -> Iterator[FileRef]:
    """Every file under `root` (or only under its folder `start`) that retrod reads; vanishing
    folders are skipped, not fatal."""
    if start is not None and (not start.is_relative_to(root) or not _may_hold_files(root, start)):
        return
    stack = [start or root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if _may_hold_files(root, path):
                    stack.append(path)
            elif _regular(entry):
                ref = classify(root, path)
                if ref is not None:
                    yield ref
