"""The systemd unit and launchd agent, as shipped and as `retrod service install` writes them."""

from __future__ import annotations

import os
import plistlib
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from retrod.service import install

REPO = Path(__file__).resolve().parents[1]


def _verify(unit: Path, tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed here (.ci/run installs it)")
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    done = subprocess.run(["systemd-analyze", "verify", "--user", str(unit)], capture_output=True, text=True,
                          env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime)))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr  # unknown keys are only warnings: none allowed


def test_shipped_unit_verifies(tmp_path: Path) -> None:
    unit = tmp_path / "retrod.service"
    # verify needs the executable to exist: the shipped ExecStart points at %h/.local/bin.
    unit.write_text((REPO / "systemd" / "retrod.service").read_text().replace(
        "%h/.local/bin/retrod", sys.executable))
    _verify(unit, tmp_path)
    text = unit.read_text()
    for setting in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "KillMode=mixed"):
        assert setting in text
    assert not any(line.startswith("ProtectHome=") for line in text.splitlines())  # it would hide ~/.claude


def test_rendered_unit_reads_the_settings_from_an_owner_only_file_and_verifies(tmp_path: Path, monkeypatch) -> None:
    """A unit file is world-readable: the settings, a database password among them, are not in it."""
    monkeypatch.setenv("RETROD_DATA_DIR", "/tmp/my data/100% \"odd\"")
    monkeypatch.setenv("RETROD_DATABASE_URL", "postgresql://me:s3cr$et`x`\\@db/retrod")
    unit, env_file = tmp_path / "retrod.service", tmp_path / "my conf" / "service.env"
    unit.write_text(install.render_unit(Path(sys.executable), env_file))
    env_file.parent.mkdir()
    env_file.write_text(install.render_env(install.service_environment()))
    _verify(unit, tmp_path)
    text = unit.read_text()
    assert f"ExecStart={sys.executable} run" in text and "s3cr" not in text
    assert f"EnvironmentFile={env_file}" in text
    # what systemd reads back from the file: the values exactly
    done = subprocess.run(["bash", "-c", f"set -a; . '{env_file}'; env"], capture_output=True, text=True)
    assert "RETROD_DATA_DIR=/tmp/my data/100% \"odd\"" in done.stdout.splitlines()
    assert "RETROD_DATABASE_URL=postgresql://me:s3cr$et`x`\\@db/retrod" in done.stdout.splitlines()


def test_plist_has_the_launchd_keys(tmp_path: Path) -> None:
    shipped = plistlib.loads((REPO / "systemd" / "dev.retrod.daemon.plist").read_bytes())
    rendered = plistlib.loads(install.render_plist(Path("/opt/retrod/bin/retrod"), {"RETROD_LOG_LEVEL": "DEBUG"},
                                                   Path("/Users/ada")))
    for plist in (shipped, rendered):
        assert plist["Label"] == "dev.retrod.daemon"
        assert plist["RunAtLoad"] is True
        assert plist["KeepAlive"] == {"SuccessfulExit": False}  # restarted after a crash only
        assert plist["ProcessType"] == "Background"
        assert plist["ProgramArguments"][1:] == ["run"]
        assert all(Path(plist[k]).is_absolute() for k in ("StandardOutPath", "StandardErrorPath"))
    assert rendered["ProgramArguments"][0] == "/opt/retrod/bin/retrod"
    assert rendered["StandardErrorPath"] == "/Users/ada/Library/Logs/retrod/retrod.basics.log"
    assert rendered["EnvironmentVariables"]["RETROD_LOG_LEVEL"] == "DEBUG"


def test_install_and_uninstall_on_linux(tmp_path: Path, monkeypatch) -> None:
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"  # records what it is asked, so no real systemd is touched
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\necho active\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(sys, "platform", "linux")

    monkeypatch.setenv("RETROD_DATABASE_URL", "host=db password=s3cret")
    unit = tmp_path / "config" / "systemd" / "user" / "retrod.service"
    env_file = tmp_path / "config" / "retrod" / "service.env"
    dry = install.install(dry_run=True)
    assert dry[0] == f"# {unit}" and not unit.exists() and "s3cret" not in "\n".join(dry)
    done = install.install(dry_run=False)
    assert unit.exists() and done[0] == f"wrote {unit}"
    assert "s3cret" not in unit.read_text() and "s3cret" in env_file.read_text()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert calls.read_text().splitlines() == [
        "--user show-environment", "--user daemon-reload", "--user enable --now retrod.service"]
    assert "active" in install.status()
    install.uninstall(dry_run=False)
    assert not unit.exists() and not env_file.exists()
    assert "--user disable --now retrod.service" in calls.read_text()
    assert install.status().startswith("not installed")


def test_a_setting_that_is_not_utf8_is_one_clear_line_not_a_crash(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETROD_", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR"))}
    env.update(HOME=str(tmp_path), RETROD_HOST_ID="box-\udcff")  # the raw byte 0xff in the environment
    done = subprocess.run([sys.executable, "-m", "retrod", "service", "install", "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "retrod: error: RETROD_HOST_ID holds bytes that are not UTF-8; set it again in UTF-8"]
