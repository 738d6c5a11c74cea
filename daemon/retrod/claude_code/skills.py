"""The Claude Code skills shipped with retrod, and installing them."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

from ..basics.errors import UserError
from ..basics.redact import mask_password
from ..mcp import EXTRA, INSTALL_HINT, sdk_installed

COMMAND = "{retrod}"  # in the shipped text: replaced by the command of the retrod that installs them


class SkillsError(UserError, ValueError):
    """A skill cannot be installed as asked."""


def default_dir() -> Path:
    config_dirs = [d.strip() for d in os.environ.get("CLAUDE_CONFIG_DIR", "").split(",") if d.strip()]
    base = Path(config_dirs[0]).expanduser() if config_dirs else Path.home() / ".claude"
    return base / "skills"


def command() -> str:
    """This retrod, by absolute path: Claude Code's shell need not have it on PATH (a virtualenv)."""
    return shlex.join(command_argv())


def command_argv() -> list[str]:
    from ..service.install import ServiceError, retrod_executable

    try:
        return [str(retrod_executable())]
    except ServiceError:  # not installed as a command (e.g. run from a checkout)
        return [sys.executable, "-m", "retrod"]


def settings_env() -> dict[str, str]:
    """This shell's RETROD_* settings, folders made absolute: what a retrod that Claude Code
    starts (the MCP server, a hook) needs, since Claude Code's environment may lack them."""
    from ..service.install import service_environment

    return {k: _absolute(k, v) for k, v in service_environment().items() if k.startswith("RETROD_")}


def mcp_add_argv() -> list[str]:
    """`claude mcp add` for `retrod mcp`: user scope, since the skills are the user's too (the
    default scope is the current project only), with this shell's RETROD_* settings."""
    settings = [f"--env={k}={v}" for k, v in settings_env().items()]
    return ["claude", "mcp", "add", "--scope", "user", *settings, "retrod", "--", *command_argv(), "mcp"]


_PATH_SETTINGS = ("RETROD_DATA_DIR", "RETROD_REPORTS_DIR", "RETROD_PRICES")


def _absolute(name: str, value: str) -> str:
    """A path setting as an absolute path: Claude Code starts the server in each project's folder."""
    if name == "RETROD_PROJECTS_DIR":
        return ",".join(str(Path(p.strip()).expanduser().absolute()) for p in value.split(",") if p.strip())
    return str(Path(value).expanduser().absolute()) if name in _PATH_SETTINGS and value else value


def register_mcp(run: bool) -> list[str]:
    """The line that registers `retrod mcp` with Claude Code; run it when `run` (install has
    checked that the extra is there)."""
    argv = mcp_add_argv()
    shown = shlex.join(mask_password(arg) for arg in argv)  # masked one by one: quoting hides a password from the mask
    if not run:
        first = "" if sdk_installed() else f" install the extra ({EXTRA}), then"
        return [f"to let Claude Code use retrod's MCP tools (the skills prefer them),{first} run:", f"  {shown}"]
    if shutil.which("claude") is None:
        raise SkillsError(f"`claude` is not on PATH; run this where it is: {shown}")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        problem = mask_password(" ".join((done.stderr or done.stdout).split())) or f"exit {done.returncode}"
        raise SkillsError(f"`claude mcp add` failed: {problem}")
    return [f"registered with Claude Code: {shown}"]


def _check_sdk() -> None:
    """A server registered without the extra exits at once, each time Claude Code starts it."""
    if not sdk_installed():
        raise SkillsError(f"{INSTALL_HINT}, then run this again; nothing was installed or registered")


def shipped(retrod: str) -> dict[str, str]:
    """skill name -> SKILL.md text, calling `retrod`."""
    folder = files("retrod.claude_code") / "skills"
    return {d.name: (d / "SKILL.md").read_text(encoding="utf-8").replace(COMMAND, retrod)
            for d in folder.iterdir() if d.is_dir() and (d / "SKILL.md").is_file()}


def install(target: Path, force: bool = False, mcp: bool = False) -> list[str]:
    """Copy each skill to `target/<name>/SKILL.md`; a copy the user changed is kept unless `force`.
    Then the line that registers `retrod mcp`, run when `mcp`, and the one that installs the
    status line (the phases the skills log show there); the last line names this retrod."""
    if mcp:
        _check_sdk()  # before anything is written: all or nothing
    retrod = command()
    skills = {target / name / "SKILL.md": text for name, text in sorted(shipped(retrod).items())}
    current = {path: path.read_text(encoding="utf-8") if path.exists() else None for path in skills}
    edited = [path for path, text in skills.items() if current[path] not in (None, text)]
    if edited and not force:  # checked before writing anything: all or nothing
        raise SkillsError(f"{edited[0]} differs from retrod's copy (edited, or installed by another retrod?);"
                          " use --force to overwrite")
    done = []
    for path, text in skills.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        done.append(f"{'unchanged' if current[path] == text else 'installed'}: {path}")
    statusline = ["to see the session's cost, open phase, efficiency and today's cost under Claude's prompt, run:",
                  f"  {retrod} statusline install"]
    return done + register_mcp(run=mcp) + statusline + [f"the skills run {retrod}"]
