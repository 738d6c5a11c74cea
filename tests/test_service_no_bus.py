"""`retrod service install` where no systemd user instance answers (no login session: ssh
without lingering, su, a container): one line saying what to do, nothing left behind, and
`uninstall` and `doctor` saying the same (issue 28, item 20). A fake systemctl stands for
systemd, so that no real one is touched."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrod import health
from retrod.settings import Settings

NO_BUS = "Failed to connect to bus: No medium found"


def _fake_systemctl(tmp_path: Path, fails: str) -> tuple[dict[str, str], Path]:
    """An environment whose systemctl records what it is asked and fails `fails` (a subcommand,
    or "all") as systemd does without a user bus; and the file of its calls."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                    f'case "$2" in {"*" if fails == "all" else fails}) echo "{NO_BUS}" >&2; exit 1;; esac\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RETROD_") and k not in ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return env, calls


def _retrod(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrod", *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_install_without_a_user_instance_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    env, calls = _fake_systemctl(tmp_path, fails="all")
    done = _retrod(env, "service", "install")
    assert done.returncode == 1
    assert not (tmp_path / "config").exists()  # no unit, no settings file, no folder for them
    assert done.stderr.splitlines() == [
        (f"retrod: error: no systemd user instance answers here ({NO_BUS}): let one run without a login "
        f"(loginctl enable-linger {getpass.getuser()}, then log in again), or run `retrod run` under your own "
        "supervisor; nothing was installed")]

    done = _retrod(env, "service", "uninstall")
    assert done.returncode == 0
    assert "ran systemctl" not in done.stdout  # it did not disable anything: it says so
    assert done.stdout.splitlines() == [f"systemctl --user disable --now retrod.service failed: {NO_BUS}"]
    assert "--user disable --now retrod.service" in calls.read_text()


def test_a_step_that_fails_after_the_files_are_written_puts_them_back(tmp_path: Path) -> None:
    env, _calls = _fake_systemctl(tmp_path, fails="enable")
    unit = tmp_path / "config" / "systemd" / "user" / "retrod.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Unit]\n# an earlier install\n")
    done = _retrod(env, "service", "install")
    assert done.returncode == 1
    assert unit.read_text() == "[Unit]\n# an earlier install\n"
    assert not (tmp_path / "config" / "retrod").exists()  # the settings file and the folder made for it
    assert done.stderr.splitlines() == [
        f"retrod: error: systemctl --user enable --now retrod.service failed: {NO_BUS}; nothing was installed"]


def test_an_enable_that_fails_at_the_start_is_disabled_before_the_files_go(tmp_path: Path) -> None:
    """`systemctl --user enable --now` links the unit into default.target.wants, then fails to
    start it: the rollback must take the link back, or the next login starts a removed unit."""
    env, calls = _fake_systemctl(tmp_path, fails="none")
    wants = tmp_path / "enabled"  # stands for default.target.wants/retrod.service
    fake = Path(env["PATH"].split(":", 1)[0]) / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                    f'case "$2" in enable) touch {wants}; echo "Job for retrod.service failed." >&2; exit 1;;\n'
                    f'disable) rm -f {wants};; esac\n')
    done = _retrod(env, "service", "install")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        ("retrod: error: systemctl --user enable --now retrod.service failed: Job for retrod.service failed.; "
         "nothing was installed")]
    assert "--user disable retrod.service" in calls.read_text().splitlines()
    assert not wants.exists()
    assert not (tmp_path / "config" / "systemd" / "user" / "retrod.service").exists()


def test_doctor_does_not_suggest_a_service_that_cannot_run_here(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    env, _calls = _fake_systemctl(tmp_path, fails="all")
    for name in ("PATH", "HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setattr(sys, "platform", "linux")
    service, daemon = health.service_checks(Settings(data_dir=tmp_path / "d"))
    unit = tmp_path / "config" / "systemd" / "user" / "retrod.service"
    assert (service.level, service.detail) == (
        "warn", f"not installed ({unit} does not exist); no systemd user instance answers here ({NO_BUS})")
    assert service.fix.startswith("let one run without a login (loginctl enable-linger")
    assert (daemon.level, daemon.fix) == ("warn", "retrod run")
    assert "service install" not in health.render_doctor([service, daemon])
