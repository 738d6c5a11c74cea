"""ccusage, the tool users run today for per-session numbers.

ccusage 20.x is a native binary started by a small Node launcher; it is used here as users run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness import Measured, measure

CCUSAGE_VERSION = "20.0.24"


@dataclass(frozen=True)
class Ccusage:
    command: list[str]

    def env(self, claude_dir: Path) -> dict[str, str]:
        """ccusage reads `<CLAUDE_CONFIG_DIR>/projects`; its cache and config stay out of $HOME."""
        return dict(os.environ, CLAUDE_CONFIG_DIR=str(claude_dir), HOME=str(claude_dir))

    def sessions(self, claude_dir: Path) -> Measured:
        return measure([*self.command, "claude", "session", "--json", "--offline"], self.env(claude_dir))

    def session(self, claude_dir: Path, session: str) -> Measured:
        return measure([*self.command, "claude", "session", "--id", session, "--json", "--offline"],
                       self.env(claude_dir))

    def totals(self, claude_dir: Path) -> dict:
        out = subprocess.run([*self.command, "claude", "session", "--json", "--offline"],
                             env=self.env(claude_dir), capture_output=True, text=True, check=True)
        return json.loads(out.stdout)


def find_ccusage(scratch: Path) -> tuple[Ccusage | None, str]:
    """ccusage at the pinned version: on PATH, else installed with npm into `scratch`.
    Returns (None, why) when neither works, e.g. the registry cannot be reached."""
    on_path = shutil.which("ccusage")
    if on_path and _version([on_path]) == CCUSAGE_VERSION:
        return Ccusage([on_path]), f"ccusage {CCUSAGE_VERSION} from PATH"
    npm = shutil.which("npm")
    if npm is None:
        return None, "npm not found: install Node.js to compare with ccusage"
    prefix = scratch / "ccusage"
    try:
        done = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                               "--fetch-retries=1", "--fetch-retry-mintimeout=2000", "--fetch-retry-maxtimeout=5000",
                               "--fetch-timeout=60000",
                               f"ccusage@{CCUSAGE_VERSION}"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "npm install ccusage timed out: is the registry reachable?"
    binary = prefix / "node_modules" / ".bin" / "ccusage"
    if done.returncode != 0 or not binary.exists():
        errors = [line for line in done.stderr.splitlines() if "error" in line and "complete log" not in line]
        return None, (f"npm install ccusage@{CCUSAGE_VERSION} failed (registry unreachable?): "
                      + ("; ".join(errors[:2]) or "no error output"))
    if _version([str(binary)]) != CCUSAGE_VERSION:
        return None, f"installed ccusage does not report version {CCUSAGE_VERSION}"
    return Ccusage([str(binary)]), f"ccusage {CCUSAGE_VERSION} installed into a temporary prefix"


def _version(command: list[str]) -> str | None:
    try:
        out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().split()[-1] if out.returncode == 0 and out.stdout.strip() else None
