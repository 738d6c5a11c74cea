"""`retrod service install|uninstall|status`: the systemd user unit (Linux) or launchd agent (macOS).

The templates are the files in the repository's `systemd/` folder (shipped in the wheel as
`retrod/units`); installing fills in the absolute path of this retrod and the RETROD_* settings
of the installing shell, since a service does not inherit them.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from ..basics.redact import mask_password

UNIT = "retrod.service"
AGENT = "dev.retrod.daemon"


class ServiceError(RuntimeError):
    """The service cannot be installed or queried here; the message says why."""


def units_dir() -> Path:
    packaged = files("retrod") / "units"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "systemd"


def retrod_executable() -> Path:
    beside = Path(sys.executable).parent / "retrod"
    found = beside if beside.is_file() else (Path(p) if (p := shutil.which("retrod")) else None)
    if found is None:
        raise ServiceError("cannot find the `retrod` executable; install retrod (e.g. pip install .) first")
    return found.absolute()


def service_environment() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("RETROD_") or k == "CLAUDE_CONFIG_DIR"}


def render_unit(exe: Path, env_file: Path | None) -> str:
    """The unit; its settings (a database password among them, perhaps) live in `env_file`,
    owner-only, since a unit file is world-readable."""
    lines = []
    for line in (units_dir() / UNIT).read_text().splitlines():
        if line.startswith("ExecStart="):
            line = f"ExecStart={_quote(str(exe))} run"
        lines.append(line)
        if line.startswith("Environment=PYTHONUNBUFFERED") and env_file is not None:
            # One path, no quotes; no "-": a missing file must fail the start, not start the
            # service quietly on the default database.
            lines.append(f"EnvironmentFile={str(env_file).replace('%', '%%')}")
    return "\n".join(lines) + "\n"


def render_env(env: dict[str, str]) -> str:
    """A systemd EnvironmentFile: one `KEY="value"` a line."""
    lines = []
    for key, value in env.items():
        if "\n" in value or "\r" in value:
            raise ServiceError(f"{key} holds a line break, which a service's environment cannot carry")
        try:
            value.encode()
        except UnicodeEncodeError:  # os.environ keeps undecodable bytes as lone surrogates
            raise ServiceError(f"{key} holds bytes that are not UTF-8; set it again in UTF-8") from None
        escaped = "".join("\\" + c if c in '\\"$`' else c for c in value)  # as a shell reads it too
        lines.append(f'{key}="{escaped}"')
    return "".join(line + "\n" for line in lines)


def _quote(text: str) -> str:
    """systemd quoting: double quotes, with backslash, quote and % escaped."""
    if all(c.isalnum() or c in "/._-=:,+@" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


def render_plist(exe: Path, env: dict[str, str], home: Path) -> bytes:
    plist = plistlib.loads((units_dir() / f"{AGENT}.plist").read_bytes())
    plist["ProgramArguments"][0] = str(exe)
    log = str(home / "Library" / "Logs" / "retrod" / "retrod.basics.log")
    plist["StandardOutPath"] = plist["StandardErrorPath"] = log
    plist["EnvironmentVariables"].update(env)
    return plistlib.dumps(plist)


@dataclass(frozen=True)
class Plan:
    path: Path
    content: bytes
    commands: list[list[str]]
    env_path: Path | None = None  # the settings, owner-only (a unit file is world-readable)
    env_content: bytes = b""


def plan(platform: str = sys.platform, home: Path | None = None) -> Plan:
    home = home or Path.home()
    exe, env = retrod_executable(), service_environment()
    if platform == "darwin":
        path = home / "Library" / "LaunchAgents" / f"{AGENT}.plist"
        domain = f"gui/{os.getuid()}"
        return Plan(path, render_plist(exe, env, home),
                    [["launchctl", "bootout", f"{domain}/{AGENT}"], ["launchctl", "bootstrap", domain, str(path)]])
    if platform.startswith("linux"):
        config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        path = config / "systemd" / "user" / UNIT
        env_path = config / "retrod" / "service.env"
        return Plan(path, render_unit(exe, env_path).encode(),
                    [["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", UNIT]],
                    env_path, render_env(env).encode())
    raise ServiceError(f"no service manager support for {platform}; run `retrod run` yourself")


def install(dry_run: bool) -> list[str]:
    p = plan()
    if dry_run:
        env = [f"# {p.env_path} (owner-only)", mask_password(p.env_content.decode())] if p.env_path else []
        return [f"# {p.path}", mask_password(p.content.decode()), *env,
                *(f"# then: {' '.join(c)}" for c in p.commands)]
    if p.path.suffix == ".service" and (reason := user_manager_missing()) is not None:
        raise ServiceError(f"{no_user_manager(reason)}: {NO_USER_MANAGER_FIX}; nothing was installed")
    # each file or folder written and what it held before (None: it was not there), to undo
    written: list[tuple[Path, bytes | None]] = []
    enabling = False
    try:
        done = _write_files(p, written)
        for i, command in enumerate(p.commands):
            enabling = enabling or command[2:3] == ["enable"]
            result = _run(command)
            # launchctl bootout of an agent that is not loaded fails; that is fine before bootstrap.
            if result.returncode != 0 and not (command[:2] == ["launchctl", "bootout"] and i == 0):
                raise ServiceError(f"{' '.join(command)} failed: {_one_line(result.stderr) or result.returncode}; "
                                   "nothing was installed")
            done.append(f"ran {' '.join(command)}")
    except BaseException:
        if enabling and not any(path == p.path and before is not None for path, before in written):
            # `enable --now` that failed at its start has linked the unit into default.target.wants
            # already: else the next login starts what was not installed. A unit that was there
            # before may be an earlier install's, enabled by it: left as it was.
            with contextlib.suppress(ServiceError):
                _run(["systemctl", "--user", "disable", UNIT])
        for path, before in reversed(written):  # nothing half-installed left behind
            if path.is_dir():
                with contextlib.suppress(OSError):  # something else put there meanwhile: kept
                    path.rmdir()
            elif before is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(before)
        if written and p.path.suffix == ".service":
            _run(["systemctl", "--user", "daemon-reload"])  # it may have read the unit already
        raise
    return done


def _write_files(p: Plan, written: list[tuple[Path, bytes | None]]) -> list[str]:
    def folder(path: Path, mode: int = 0o777) -> None:
        for made in reversed([path, *path.parents]):
            if not made.exists():
                made.mkdir(mode=mode)
                written.append((made, None))

    def before(path: Path) -> None:
        written.append((path, path.read_bytes() if path.is_file() else None))

    folder(p.path.parent)
    before(p.path)
    if p.path.suffix == ".plist":
        folder(Path.home() / "Library" / "Logs" / "retrod")
        _write_private(p.path, p.content)  # it carries the settings itself
    else:
        p.path.write_bytes(p.content)
    done = [f"wrote {p.path}"]
    if p.env_path is not None:
        folder(p.env_path.parent, mode=0o700)
        before(p.env_path)
        _write_private(p.env_path, p.env_content)
        done.append(f"wrote {p.env_path} (owner-only: the settings, a database password among them)")
    return done


def uninstall(dry_run: bool) -> list[str]:
    p = plan()
    if p.path.suffix == ".plist":
        commands = [["launchctl", "bootout", f"gui/{os.getuid()}/{AGENT}"]]
    else:
        commands = [["systemctl", "--user", "disable", "--now", UNIT]]
    if dry_run:
        return [*(f"would run {' '.join(c)}" for c in commands), f"would remove {p.path}"]
    done = []
    for command in commands:
        result = _run(command)  # not loaded is fine: the goal is "not running"; said as it is
        done.append(f"ran {' '.join(command)}" if result.returncode == 0
                    else f"{' '.join(command)} failed: {_one_line(result.stderr) or result.returncode}")
    for path in (p.path, p.env_path):
        if path is not None and path.exists():
            path.unlink()
            done.append(f"removed {path}")
    if p.path.suffix == ".service":
        _run(["systemctl", "--user", "daemon-reload"])
    return done


# What to do where no systemd user instance runs (no login session: ssh without lingering, su, a
# container): one that runs without a login, or no service at all.
NO_USER_MANAGER_FIX = (f"let one run without a login (loginctl enable-linger {getpass.getuser()}, then log in "
                       "again), or run `retrod run` under your own supervisor")


def user_manager_missing() -> str | None:
    """Why no systemd user instance answers here (systemctl's own line), or None when one does:
    the service would be written for nothing."""
    result = _run(["systemctl", "--user", "show-environment"])
    return None if result.returncode == 0 else _one_line(result.stderr) or f"systemctl exit {result.returncode}"


def no_user_manager(reason: str) -> str:
    """How `service install` and `doctor` say it."""
    return f"no systemd user instance answers here ({reason})"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def not_installed(path: Path) -> str:
    """How `service status` and `doctor` say it."""
    return f"not installed ({path} does not exist)"


def status() -> str:
    p = plan()
    if not p.path.exists():
        return not_installed(p.path)
    command = (["launchctl", "print", f"gui/{os.getuid()}/{AGENT}"] if p.path.suffix == ".plist"
               else ["systemctl", "--user", "is-active", UNIT])
    result = _run(command)
    state = result.stdout.strip().splitlines()[0] if result.stdout.strip() else f"unknown ({result.stderr.strip()})"
    return f"installed at {p.path}; {' '.join(command)}: {state}"


def _write_private(path: Path, content: bytes) -> None:
    """Owner-only from the first byte, and also when an older install left it readable."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, content)
    finally:
        os.close(fd)


def _run(command: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise ServiceError(f"{command[0]} not found: is this system's service manager running?") from None
