"""Which session a command means: the one place that decides "the current session".

In order, and the answer says which rule it came from:
1. `--session` (a uuid or a unique prefix; a full uuid with no transcript is refused unless the
   caller allows unknown sessions, e.g. one whose transcript is still to come);
2. `CLAUDE_CODE_SESSION_ID`, which Claude Code (>= 2.1.132) sets in its Bash tool's environment
   (refused, like a `--session`, when retrod finds no transcript of it);
3. the Claude Code process above this one: Claude Code keeps `<config>/sessions/<pid>.json`
   (`{"pid", "sessionId", "cwd", "startedAt", ...}`) while it runs;
4. the newest main transcript of the project folder of the working directory, or of its nearest
   parent that has one (Claude Code names the folder after the directory it started in).

Standard library only, and no database: the caller passes `known`, which lists the sessions
the database knows by a prefix.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .basics import invocation
from .basics.errors import UserError
from .basics.stored_text import one_line, quoted
from .transcript.discovery import UUID_RE, project_folders, session_paths

ENV_VAR = "CLAUDE_CODE_SESSION_ID"
LIVE_S = 300  # another transcript written this recently in the same folder: another open session


class SessionError(UserError, ValueError):
    """No session, or more than one, fits: the message says what to pass instead."""


@dataclass(frozen=True)
class Resolved:
    uuid: str
    rule: str  # how it was found, in words, for the user

    @property
    def explicit(self) -> bool:
        return self.rule == "--session"

    @property
    def said(self) -> str:
        """The stderr line that tells how the session was found ("" when the user named it)."""
        return "" if self.explicit else f"retrod: session {self.uuid} ({self.rule})\n"


def resolve(given: str | None, *, roots: list[Path], known: Callable[[str], Iterable[str]],
            cwd: Path | None = None, env: Mapping[str, str] | None = None, pid: int | None = None,
            config_dirs: list[Path] | None = None, allow_unknown: bool = False) -> Resolved:
    """`given`: what the user typed (None or blank: not given). `pid`: the process whose
    ancestors may be Claude Code, `cwd` and `env`: by default, those of the command (invocation.py)."""
    env = invocation.env() if env is None else env
    if given is not None and given.strip():
        return Resolved(_explicit(given.strip().lower(), roots, known, allow_unknown), "--session")
    from_env = env.get(ENV_VAR, "").strip().lower()
    if UUID_RE.fullmatch(from_env):
        if allow_unknown or _exists(from_env, roots, known):
            return Resolved(from_env, ENV_VAR)
        # Claude Code's word, but no transcript where retrod looks: guessing another would be wrong
        raise SessionError(f"{ENV_VAR} names session {from_env}, which has no transcript under"
                           f" {', '.join(map(str, roots))}; is RETROD_PROJECTS_DIR (or CLAUDE_CONFIG_DIR) right?"
                           " Add --allow-unknown if its transcript is still to come")
    dirs = config_dirs if config_dirs is not None else claude_config_dirs(roots, env)
    for ancestor, session, path in _ancestor_sessions(invocation.pid() if pid is None else pid, dirs):
        if allow_unknown or _exists(session, roots, known):
            return Resolved(session, f"Claude Code process {ancestor} ({path})")
    return _newest_in_folder(roots, cwd)


def find(prefix: str, roots: list[Path], known: Callable[[str], Iterable[str]]) -> str:
    """The one session whose uuid starts with `prefix`, in the database or on disk (a session
    the daemon has not read yet still counts)."""
    prefix = prefix.strip().lower()
    found = sorted(set(known(prefix)) | set(_on_disk(roots, prefix)))
    if not found:
        raise SessionError(f"no session matches {prefix!r}")
    if len(found) > 1:
        raise SessionError(f"{prefix!r} is ambiguous: it matches {found[0]}, {found[1]}, ...; type more of it")
    return found[0]


def claude_config_dirs(roots: list[Path], env: Mapping[str, str] | None = None) -> list[Path]:
    """Where Claude Code keeps `sessions/`: CLAUDE_CONFIG_DIR's folders, else ~/.claude and
    ~/.config/claude, and the folder above each projects root named `projects`."""
    env = invocation.env() if env is None else env
    dirs = [Path(d.strip()).expanduser() for d in env.get("CLAUDE_CONFIG_DIR", "").split(",") if d.strip()]
    if not dirs:
        dirs = [Path("~/.claude").expanduser(), Path("~/.config/claude").expanduser()]
    dirs += [root.parent for root in roots if root.name == "projects"]
    return list(dict.fromkeys(dirs))


def project_slugs(folder: Path) -> list[str]:
    """Claude Code's folder name for a working directory: every character but [A-Za-z0-9]
    becomes `-` (its sanitizePath); older versions replaced only `/` and `.` (as in the
    fixtures' `-Users-schrockn--erk-…` folders)."""
    text = str(folder)
    return list(dict.fromkeys([re.sub(r"[^A-Za-z0-9]", "-", text), re.sub(r"[/.]", "-", text)]))


# -- the rules -----------------------------------------------------------------------------

def _explicit(given: str, roots: list[Path], known: Callable[[str], Iterable[str]], allow_unknown: bool) -> str:
    if not UUID_RE.fullmatch(given):
        return find(given, roots, known)
    if allow_unknown or _exists(given, roots, known):
        return given
    raise SessionError(f"no transcript of session {given} under {', '.join(map(str, roots))} and none recorded;"
                       " check the id, or add --allow-unknown if its transcript is still to come")


def _exists(session: str, roots: list[Path], known: Callable[[str], Iterable[str]]) -> bool:
    return session in set(known(session)) or session in _on_disk(roots, session)


def _on_disk(roots: list[Path], prefix: str) -> set[str]:
    """Sessions under the roots whose uuid starts with `prefix`: a main transcript, or a session
    folder (one whose main transcript is gone may still hold subagent transcripts). A whole uuid
    is looked up by its two names in each project folder; a shorter prefix lists the folders."""
    found = set()
    for root in roots:
        if UUID_RE.fullmatch(prefix):
            paths = session_paths(root, prefix)
        else:
            paths = [Path(folder, name) for folder in project_folders(root) for name in _names(folder)
                     if name.startswith(prefix)]
        for path in paths:
            name = path.name.removesuffix(".jsonl")
            if UUID_RE.fullmatch(name) and (path.is_file() if path.suffix == ".jsonl"
                                            else _has_subagent_transcript(path)):
                found.add(name)
    return found


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _has_subagent_transcript(folder: Path) -> bool:
    return any(p.name.endswith(".jsonl") for p in (folder / "subagents").rglob("agent-?*.jsonl"))


def _ancestor_sessions(pid: int, config_dirs: list[Path]) -> Iterable[tuple[int, str, Path]]:
    """(pid, session, file) for each ancestor of `pid` that has a Claude Code session file."""
    seen = set()
    ancestor = _parent(pid)
    while ancestor is not None and ancestor >= 1 and ancestor not in seen:  # 1: Claude Code as a container's init
        seen.add(ancestor)
        for folder in config_dirs:
            path = folder / "sessions" / f"{ancestor}.json"
            session = _session_file(path, ancestor)
            if session is not None:
                yield ancestor, session, path
        ancestor = _parent(ancestor)


def _session_file(path: Path, pid: int) -> str | None:
    """The sessionId of a Claude Code session file, if it is one and is this process's: a file
    left by a crashed Claude Code whose pid was reused is older than the process."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("pid", pid) != pid:
        return None
    session = data.get("sessionId")
    if not isinstance(session, str) or not UUID_RE.fullmatch(session.lower()):
        return None
    started_ms = data.get("startedAt")
    process_start = _process_start(pid)
    # (300 s of slack: the wall clock may have stepped since; a pid is not reused that soon)
    stale = (isinstance(started_ms, (int, float)) and process_start is not None
             and started_ms / 1000 < process_start - 300)
    return None if stale else session.lower()


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except OSError:
        pass
    except (ValueError, IndexError):
        return None
    if sys.platform.startswith("linux"):
        return None
    try:  # macOS and the BSDs: no /proc
        out = subprocess.run(["ps", "-o", "ppid=", "-p", str(pid)], capture_output=True, text=True, timeout=5,
                             check=False)
        return int(out.stdout.strip()) if out.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _process_start(pid: int) -> float | None:
    """When `pid` started, in seconds since the epoch (Linux only)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def projects_above(start: Path, roots: list[Path]) -> Iterator[tuple[Path, list[Path]]]:
    """Each folder from `start` up that is a Claude Code project, nearest first, with its main
    transcripts: one whose Claude Code folder (project_slugs) under a root holds any. Claude Code
    names the folder after the directory it was started in, so a folder inside a project belongs
    to the nearest project above it (rule 4; `sessions --project` reads a path the same way)."""
    for folder in (start, *start.parents):
        transcripts = [p for root in roots for slug in project_slugs(folder)
                       for p in (root / slug).glob("*.jsonl") if UUID_RE.fullmatch(p.stem) and p.is_file()]
        if transcripts:
            yield folder, transcripts


def project_of(folder: Path, roots: list[Path]) -> Path | None:
    """The project `folder` belongs to: itself or the nearest folder above it that is one."""
    return next((project for project, _transcripts in projects_above(folder, roots)), None)


class ProjectError(SessionError):
    """A `--project` that names no project, or (for a command that serves one, `brief`) several:
    the user's mistake, answered as a session that cannot be found is."""


@dataclass(frozen=True)
class Project:
    """A project as the store knows it (accounting.md §4): its working folder (`path`, the first `cwd`
    of its sessions' main transcripts; None when they name none: then the project is its Claude
    Code folder alone) and the Claude Code folder names (`<slug>`s) its sessions are in."""

    path: str | None
    slugs: tuple[str, ...]

    @property
    def name(self) -> str:
        """Its one name on every surface: the working folder, else the folder name."""
        return self.path or self.slugs[0]


def projects_of(pairs: Iterable[tuple[str | None, str]]) -> list[Project]:
    """The projects of sessions given as (working folder or None, `<slug>`) pairs, by name."""
    slugs: dict[tuple[str | None, str], set[str]] = {}
    for path, slug in pairs:
        slugs.setdefault((path, "") if path else (None, slug), set()).add(slug)
    found = [Project(path, tuple(sorted(names))) for (path, _slug), names in slugs.items()]
    return sorted(found, key=lambda p: p.name)


@dataclass(frozen=True)
class ProjectMatch:
    """What a `--project` value matched (match_project): the projects, by name, and whether the
    value was read as a part of their names (rule 3)."""

    value: str
    projects: tuple[Project, ...]
    by_part: bool

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.projects]

    @property
    def slugs(self) -> list[str]:
        """Every Claude Code folder name the projects' sessions are in (for an index to narrow by)."""
        return sorted({slug for p in self.projects for slug in p.slugs})

    @property
    def matched(self) -> list[str] | None:
        """The JSON answers' `projects_matched`: the projects a part matched (None: not read as a part)."""
        return self.names if self.by_part else None

    @property
    def said(self) -> str:
        return matched_line(self.value, self.matched)


def matched_line(value: str | None, matched: list[str] | None) -> str:
    """The stderr line that says which projects a part took (`projects_matched`; "" when it took
    one, or the value was not read as a part)."""
    if not value or not matched or len(matched) < 2:
        return ""
    # (working folders come from transcripts: stored text, shown as data)
    return f"retrod: --project {one_line(value)} matched {len(matched)} projects: {', '.join(map(quoted, matched))}\n"


def match_project(value: str, projects: Iterable[Project], *, one: bool = False) -> ProjectMatch:
    """A `--project` (the MCP tools' `project`, the web UI's filter) as every surface reads it
    (accounting.md §4), the first rule that matches:
    1. a project's working folder, or an existing path (`~` expanded, made absolute) inside one:
       that project (the deepest folder when several hold it);
    2. a Claude Code folder name (`<slug>`): the projects of that folder;
    3. a part (case-sensitive) of the folder names or the working folders: every project it is
       a part of.
    Nothing matched, or (`one`: the command serves one project) a part that matches several,
    is a ProjectError naming them."""
    known = list(projects)
    by_path = {p.path: p for p in known if p.path}
    if value in by_path:
        return ProjectMatch(value, (by_path[value],), False)
    inside = _containing(value, by_path)
    if inside is not None:
        return ProjectMatch(value, (inside,), False)
    in_folder = tuple(p for p in known if value in p.slugs)
    if in_folder:
        return ProjectMatch(value, in_folder, False)
    parts = tuple(p for p in known if (p.path and value in p.path) or any(value in slug for slug in p.slugs))
    if not parts:
        raise ProjectError(f"--project {value!r} matches no project: give a project's folder (or a folder"
                           " inside one), its Claude Code folder name, or a part of either"
                           " (`retrod sessions` lists them)")
    if one and len(parts) > 1:
        names = ", ".join(quoted(p.name) for p in parts)
        raise ProjectError(f"--project {value!r} matches {len(parts)} projects ({names});"
                           " this command serves one: give more of its folder")
    return ProjectMatch(value, parts, True)


def _containing(value: str, by_path: Mapping[str, Project]) -> Project | None:
    """Rule 1's second half: the project whose working folder holds the existing path `value`,
    the deepest when several do; the path as typed (made absolute) and with its links resolved,
    as Claude Code may have recorded either."""
    try:
        given = invocation.absolute(Path(value).expanduser())
        if not given.exists():
            return None
        candidates = [Path(os.path.normpath(given.absolute())), given.resolve()]
    except (OSError, RuntimeError, ValueError):  # (a value no path can be: NUL, a loop of links)
        return None
    for folder in candidates:
        holding = [p for path, p in by_path.items() if folder.is_relative_to(path)]
        if holding:
            return max(holding, key=lambda p: len(Path(p.path or "").parts))
    return None


def _newest_in_folder(roots: list[Path], cwd: Path | None) -> Resolved:
    try:
        start = (cwd or invocation.cwd()).absolute()
    except OSError:  # the working directory was deleted
        raise SessionError("the working directory is gone; pass --session UUID") from None
    for folder, transcripts in projects_above(start, roots):
        times = {}
        for path in transcripts:
            try:
                times[path] = path.stat().st_mtime
            except OSError:
                continue
        if not times:
            continue
        newest = max(times, key=times.__getitem__)
        rule = f"the newest transcript of {folder}"
        live = [p for p, t in times.items() if t > time.time() - LIVE_S]
        if len(live) > 1:
            rule += (f"; {len(live)} sessions there were active in the last {LIVE_S // 60} minutes:"
                     " pass --session to choose")
        return Resolved(newest.stem, rule)
    raise SessionError(f"cannot tell which session this is: no {ENV_VAR}, no Claude Code process above this one,"
                       f" and no Claude Code transcript for {start} or a folder above it under"
                       f" {', '.join(map(str, roots))}; pass --session UUID")
