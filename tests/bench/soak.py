"""Soak: the daemon following live sessions for a long while, at a real session's pace. Its
memory and open files must stay flat, and every line written must be in.

The daemon runs (`retrod run`, default settings) against a private cluster; this process writes
like Claude Code: `sessions` sessions at once, each appending one real line (corpus.fresh_lines)
every 1–5 s (seeded); now and then a session runs a subagent for a few lines (a new file under
`<session>/subagents/`, with its meta file), and a session that has written 50–250 lines
ends and a new one starts in its place, in a new project folder every other time. Every
`sample_s` the daemon's RSS (/proc/<pid>/status VmRSS) and open file descriptors
(/proc/<pid>/fd) are read (Linux only; PostgreSQL's processes are not counted).

Figures are taken from the end of the warm-up (the first fifth of the run, at most 5 minutes: the
daemon's imports, pools and caches fill up) to the end, with slopes fitted by least squares. At
the end, every transcript's stored offset must reach its size.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import psycopg

from corpus import FIXTURES, fresh_lines
from harness import daemon, database, rss_mb, wait_for_log

SUBAGENT_SOURCE = FIXTURES / "-home-USER-projects-spotter-worktrees-spotter-gqc" / \
    "258c7280-ae70-4798-800f-63464d01a85d" / "subagents" / "agent-a881341.jsonl"


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class _Session:
    """One live session: where its next line goes (its main transcript, or a subagent's file
    while one runs), and how many lines it has left."""

    path: Path
    lines: Iterator[str]
    left: int
    agent: Path | None = None
    agent_left: int = 0


class _Writer:
    def __init__(self, projects: Path, rng: random.Random) -> None:
        self.projects = projects
        self.rng = rng
        self.folders = count()
        self.agents = count()
        self.agent_lines = fresh_lines(str(uuid.UUID(int=rng.getrandbits(128))), SUBAGENT_SOURCE)
        self.folder = self._new_folder()
        self.lines = self.bytes = self.sessions = self.subagents = 0

    def _new_folder(self) -> Path:
        folder = self.projects / f"-soak-project-{next(self.folders)}"
        folder.mkdir(parents=True)
        return folder

    def session(self) -> _Session:
        if self.sessions and self.sessions % 2 == 0:
            self.folder = self._new_folder()
        self.sessions += 1
        name = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        return _Session(self.folder / f"{name}.jsonl", fresh_lines(name), self.rng.randint(50, 250))

    def write(self, s: _Session) -> _Session:
        """One line of session `s`; returns the session that writes next in its place."""
        if s.agent is None and self.rng.random() < 1 / 40:  # a subagent starts
            self.subagents += 1
            agent_id = f"soak{next(self.agents)}"
            folder = s.path.parent / s.path.stem / "subagents"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"agent-{agent_id}.meta.json").write_text(
                json.dumps({"agentType": "Explore", "description": f"soak agent {agent_id}"}))
            s.agent, s.agent_left = folder / f"agent-{agent_id}.jsonl", self.rng.randint(3, 15)
        if s.agent is not None:
            path, line = s.agent, next(self.agent_lines)
            s.agent_left -= 1
            if not s.agent_left:
                s.agent = None
        else:
            path, line = s.path, next(s.lines)
            s.left -= 1
        with path.open("a") as f:
            f.write(line)
        self.lines += 1
        self.bytes += len(line.encode())
        return s if s.left > 0 else self.session()


def _slope_per_hour(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) samples, per hour."""
    if len(samples) < 2:
        return 0.0
    mean_t = sum(t for t, _ in samples) / len(samples)
    mean_v = sum(v for _, v in samples) / len(samples)
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    return 3600 * sum((t - mean_t) * (v - mean_v) for t, v in samples) / var if var else 0.0


def _not_ingested(url: str, projects: Path) -> int:
    """Bytes of transcripts beyond their stored offsets."""
    sizes = {str(p): p.stat().st_size for p in projects.rglob("*.jsonl")}
    with psycopg.connect(url) as conn:
        stored = dict(conn.execute('SELECT path, "offset" FROM retrod.files').fetchall())
    return sum(size - min(size, stored.get(path, 0)) for path, size in sizes.items())


def run(scratch: Path, seconds: float, sessions: int = 4, sample_s: float = 1.0, seed: int = 7,
        url: str | None = None) -> dict:
    """The soak, `seconds` long, in `scratch/soak`; against `url` if given, else a private
    cluster of its own."""
    if url is None:
        with database(scratch, "soak") as own:
            return run(scratch, seconds, sessions, sample_s, seed, own)
    projects, data = scratch / "soak" / "projects", scratch / "soak" / "data"
    rng = random.Random(seed)
    writer = _Writer(projects, rng)
    warm_up = min(seconds / 5, 300.0)
    with daemon(url, projects, data) as process:
        wait_for_log(data / "daemon.log", "caught up", process, 120)
        start = time.monotonic()
        due = [(start + rng.uniform(0, 3), n, writer.session()) for n in range(sessions)]
        heapq.heapify(due)
        rss: list[tuple[float, float]] = []
        fds: list[tuple[float, float]] = []
        next_sample = start
        while (now := time.monotonic()) < start + seconds:
            if process.poll() is not None:
                raise RuntimeError(f"the daemon exited ({process.returncode}): "
                                   f"{(data / 'daemon.log').read_text()[-1000:]}")
            if now >= next_sample:
                rss.append((now - start, rss_mb(process.pid)))
                fds.append((now - start, open_fds(process.pid)))
                next_sample += sample_s
            at, n, session = due[0]
            if now >= at:
                heapq.heapreplace(due, (at + rng.uniform(1, 5), n, writer.write(session)))
            time.sleep(max(0.0, min(due[0][0], next_sample, start + seconds) - time.monotonic()))
        written = time.monotonic()
        while (left := _not_ingested(url, projects)) and time.monotonic() - written < 60:
            time.sleep(0.2)
        lag = time.monotonic() - written
        errors = sum(1 for line in (data / "daemon.log").read_text().splitlines()
                     if line.startswith("{") and json.loads(line).get("level") in ("error", "critical"))
    warm = [(t, v) for t, v in rss if t >= warm_up] or rss[-1:]
    warm_fds = [(t, v) for t, v in fds if t >= warm_up] or fds[-1:]
    return {
        "seconds": seconds, "sessions_at_once": sessions, "sessions": writer.sessions,
        "subagents": writer.subagents, "lines": writer.lines, "mb": writer.bytes / 1e6,
        "warm_up_s": warm_up, "samples": len(rss),
        "rss_mb_start": rss[0][1], "rss_mb_warm": warm[0][1], "rss_mb_end": rss[-1][1],
        "rss_mb_max": max(v for _, v in rss), "rss_mb_growth": rss[-1][1] - warm[0][1],
        "rss_mb_per_hour": _slope_per_hour(warm),
        "fds_start": fds[0][1], "fds_warm": warm_fds[0][1], "fds_end": fds[-1][1],
        "fds_max": max(v for _, v in fds), "fds_per_hour": _slope_per_hour(warm_fds),
        "bytes_not_ingested": left, "catch_up_after_last_write_s": lag, "errors_logged": errors,
    }


def table(r: dict) -> list[str]:
    return [("| ran | sessions (at once) | subagents | lines | RSS: warm → end (max) | RSS slope | "
            "fds: warm → end (max) | fd slope | not ingested | errors |"),
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            (f"| {r['seconds']:.0f} s | {r['sessions']} ({r['sessions_at_once']}) | {r['subagents']} | "
             f"{r['lines']:,} | "
            f"{r['rss_mb_warm']:.1f} → {r['rss_mb_end']:.1f} MB ({r['rss_mb_max']:.1f}) | "
            f"{r['rss_mb_per_hour']:+.1f} MB/h | {r['fds_warm']:.0f} → {r['fds_end']:.0f} ({r['fds_max']:.0f}) | "
            f"{r['fds_per_hour']:+.1f}/h | {r['bytes_not_ingested']} B | {r['errors_logged']} |")]
