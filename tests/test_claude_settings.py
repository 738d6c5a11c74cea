"""Claude Code's settings file as retrod's installs change it: other keys kept, a backup first,
never half-written, and clear errors for a file that cannot be used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrod import claude_settings


def test_the_folder_is_claude_config_dir_or_home(tmp_path: Path) -> None:
    assert claude_settings.settings_file({"CLAUDE_CONFIG_DIR": f"{tmp_path}/a,{tmp_path}/b"}) == (
        tmp_path / "a" / "settings.json")
    assert claude_settings.config_dir({}) == Path.home() / ".claude"


def test_a_change_keeps_every_other_key_and_backs_the_file_up(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    before = '{"model": "opus", "env": {"A": "1"}, "permissions": {"allow": ["Bash(ls)"]}}\n'
    path.write_text(before)
    path.chmod(0o640)

    def add(data: dict) -> bool:
        data["statusLine"] = {"type": "command", "command": "x"}
        return True

    backup = claude_settings.change(path, add)
    assert backup is not None and backup.read_text() == before
    after = json.loads(path.read_text())
    assert after == {**json.loads(before), "statusLine": {"type": "command", "command": "x"}}
    assert path.stat().st_mode & 0o777 == 0o640  # its mode kept
    assert claude_settings.change(path, lambda data: False) is None  # nothing changed: no backup
    assert len(list(tmp_path.glob("settings.json.retrod-backup-*"))) == 1
    assert not list(tmp_path.glob(".settings.json.retrod-*"))  # no temporary file left


def test_a_first_change_creates_the_file(tmp_path: Path) -> None:
    path = tmp_path / "new" / "settings.json"
    assert claude_settings.change(path, lambda data: data.setdefault("hooks", {}) == {}) is None
    assert json.loads(path.read_text()) == {"hooks": {}}
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("content", "problem"), [("{not json", "not JSON"), ("[1]", "not a JSON object"),
                                                  (b"\xff\xfe", "cannot read it")])
def test_a_file_that_cannot_be_used_is_one_line_and_left_alone(tmp_path: Path, content, problem: str) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(claude_settings.SettingsError, match=problem) as refused:
        claude_settings.change(path, lambda data: True)
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)
    assert path.read_bytes() == (content if isinstance(content, bytes) else content.encode())


def test_an_entry_an_install_replaced_is_kept_beside_the_file_until_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    old = {"type": "command", "command": "~/.claude/statusline.sh", "padding": 1}
    assert claude_settings.recall(path, "statusLine") == (False, None)
    kept = claude_settings.remember(path, "statusLine", old)
    assert kept == tmp_path / claude_settings.REPLACED_NAME and not path.exists()  # the settings untouched
    claude_settings.remember(path, "hooks", None)  # nothing was there: that is kept too
    assert claude_settings.recall(path, "statusLine") == (True, old)
    assert claude_settings.recall(path, "hooks") == (True, None)
    claude_settings.forget(path, "statusLine")
    assert claude_settings.recall(path, "statusLine") == (False, None) and kept.exists()
    claude_settings.forget(path, "hooks")
    assert not kept.exists()  # empty: gone
    claude_settings.forget(path, "hooks")  # forgetting what is not kept does nothing
