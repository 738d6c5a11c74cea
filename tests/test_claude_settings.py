"""Claude Code's settings file as retrod's installs change it: other keys kept, a backup first,
never half-written, and clear errors for a file that cannot be used."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from retrod.claude_code import hooks
from retrod.claude_code import settings as claude_settings


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


# -- issue 28: the writer ---------------------------------------------------------------------------

def _add(key: str, value: object = "x"):
    def edit(data: dict) -> bool:
        data[key] = value
        return True
    return edit


def test_a_linked_settings_file_stays_a_link_and_its_target_is_replaced(tmp_path: Path) -> None:
    dotfiles, config = tmp_path / "dotfiles" / "claude", tmp_path / "claude"
    dotfiles.mkdir(parents=True)
    config.mkdir()
    target = dotfiles / "settings.json"
    target.write_text('{"model": "opus"}\n')
    target.chmod(0o640)
    path = config / "settings.json"
    path.symlink_to(Path("..") / "dotfiles" / "claude" / "settings.json")  # relative, as dotfiles managers link
    backup = claude_settings.change(path, _add("statusLine"))
    assert path.is_symlink() and str(path.readlink()) == "../dotfiles/claude/settings.json"
    assert json.loads(target.read_text()) == {"model": "opus", "statusLine": "x"}
    assert target.stat().st_mode & 0o777 == 0o640
    assert backup is not None and backup.parent == config and backup.read_text() == '{"model": "opus"}\n'
    assert sorted(p.name for p in dotfiles.iterdir()) == ["settings.json"]  # no temporary file left there
    assert claude_settings.remember(path, "statusLine", None) == config / claude_settings.REPLACED_NAME


@pytest.mark.parametrize("linked", [False, True])
def test_a_read_only_settings_file_is_refused_and_left_alone(tmp_path: Path, linked: bool) -> None:
    """Tests run as root, for whom the mode does not stop a write: the refusal is retrod's."""
    target = tmp_path / ("elsewhere.json" if linked else "settings.json")
    target.write_text('{"model": "opus"}')
    target.chmod(0o444)
    path = tmp_path / "settings.json"
    if linked:
        path.symlink_to(target)
    with pytest.raises(claude_settings.SettingsError, match="read-only") as refused:
        claude_settings.change(path, _add("statusLine"))
    assert str(path) in str(refused.value) and "0444" in str(refused.value) and "\n" not in str(refused.value)
    assert target.read_text() == '{"model": "opus"}' and target.stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == sorted(
        {"settings.json", target.name})  # no backup, no temporary file


def test_a_read_only_settings_file_that_needs_no_change_is_not_refused(tmp_path: Path) -> None:
    """`hooks install` with the entry there already, `hooks uninstall` with none: nothing is to
    be written, so the file's mode is no reason to fail (it was exit 2)."""
    path = tmp_path / "settings.json"
    hooks.install(path)
    path.chmod(0o444)
    installed = path.read_text()
    assert hooks.install(path)[0].startswith(f"already installed in {path}: ")
    assert claude_settings.change(path, lambda data: False) is None
    path.chmod(0o644)
    hooks.uninstall(path)
    path.chmod(0o444)
    assert hooks.uninstall(path) == [f"no retrod hook in {path}: nothing to remove"]
    assert path.stat().st_mode & 0o777 == 0o444 and path.read_text() != installed
    with pytest.raises(claude_settings.SettingsError, match="read-only"):  # a change still is refused
        hooks.install(path)


def test_the_temporary_file_and_the_backup_have_the_files_mode_before_any_byte(tmp_path: Path,
                                                                               monkeypatch) -> None:
    """An owner-only settings file (it may hold an API key in "env") is never copied, even for a
    moment, into a file others may read: each mode is set while the file is still empty."""
    path = tmp_path / "settings.json"
    path.write_text('{"env": {"ANTHROPIC_API_KEY": "sk-secret"}}')
    path.chmod(0o600)
    set_on: list[tuple[int, int, int]] = []  # (the file's inode, mode, its size then)
    fchmod, chmod = os.fchmod, os.chmod

    def spy_fchmod(fd: int, mode: int) -> None:
        st = os.fstat(fd)
        set_on.append((st.st_ino, mode, st.st_size))
        fchmod(fd, mode)

    def spy_chmod(target, mode: int, **kwargs) -> None:
        st = os.stat(target)
        set_on.append((st.st_ino, mode, st.st_size))
        chmod(target, mode, **kwargs)

    monkeypatch.setattr(os, "fchmod", spy_fchmod)
    monkeypatch.setattr(os, "chmod", spy_chmod)
    old_umask = os.umask(0)  # what the files are created with is all there is between them and others
    try:
        backup = claude_settings.change(path, _add("statusLine"))
    finally:
        os.umask(old_umask)
    assert backup is not None and backup.stat().st_mode & 0o777 == 0o600 and path.stat().st_mode & 0o777 == 0o600
    # the backup, and the temporary file that became the settings file, each given its mode empty
    assert {backup.stat().st_ino, path.stat().st_ino} <= {inode for inode, _, _ in set_on}
    assert [(inode, size) for inode, _, size in set_on if size] == []


def test_numbers_are_kept_as_written(tmp_path: Path) -> None:
    """1e400 read as a float is inf, and written back as Infinity, which Claude Code cannot read."""
    path = tmp_path / "settings.json"
    numbers = {"huge": "1e400", "one": "1.0", "wide": "10000000000000000000001", "tenth": "1.10", "zero": "-0",
               "exp": "1E+2", "small": "-2.5e-3"}
    path.write_text("{" + ", ".join(f'"{k}": {v}' for k, v in numbers.items()) + ', "list": [1e400, 0.10]}')
    claude_settings.change(path, _add("statusLine", {"padding": 0, "refreshInterval": 60}))
    text = path.read_text()
    for key, literal in numbers.items():
        assert f'"{key}": {literal},\n' in text
    assert "[\n    1e400,\n    0.10\n  ]" in text and "Infinity" not in text
    assert '"padding": 0,\n    "refreshInterval": 60\n' in text
    assert json.loads(text)["wide"] == 10000000000000000000001


def test_a_lone_surrogate_is_one_clear_error_and_nothing_is_left(tmp_path: Path) -> None:
    """os.environ keeps bytes that are not UTF-8 as lone surrogates: such a setting cannot go
    into a UTF-8 file."""
    path = tmp_path / "settings.json"
    path.write_text('{"model": "opus"}')
    with pytest.raises(claude_settings.SettingsError, match="surrogate") as refused:
        claude_settings.change(path, _add("statusLine", {"command": "RETROD_DATA_DIR=/tmp/\udcff retrod statusline"}))
    assert str(path) in str(refused.value) and "\n" not in str(refused.value)
    assert path.read_text() == '{"model": "opus"}'
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["settings.json"]


def test_two_installs_at_once_lose_nothing(tmp_path: Path) -> None:
    """The first holds the file between its read and its write; the second waits for it and
    changes what the first wrote (without the lock it wrote first, and the first undid it)."""
    path = tmp_path / "settings.json"
    path.write_text('{"model": "opus"}')
    inside, release = threading.Event(), threading.Event()

    def slow(data: dict) -> bool:
        inside.set()
        release.wait(30)
        data["statusLine"] = "first"
        return True

    first = threading.Thread(target=claude_settings.change, args=(path, slow))
    first.start()
    assert inside.wait(30)
    second = threading.Thread(target=claude_settings.change, args=(path, _add("hooks", "second")))
    second.start()
    second.join(1)  # long enough for the second to write, had it not waited
    release.set()
    first.join(30)
    second.join(30)
    assert json.loads(path.read_text()) == {"model": "opus", "statusLine": "first", "hooks": "second"}
    lock = tmp_path / claude_settings.LOCK_NAME
    assert lock.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("url", ["postgresql://me:s3cret@db.example/retrod", "postgresql://db/r?password=s3cret",
                                 "host=db password='s3 cret'"])
def test_a_setting_holding_a_password_is_not_carried(url: str) -> None:
    kept, notes = claude_settings.carried({"RETROD_DATA_DIR": "/d", "RETROD_DATABASE_URL": url})
    assert kept == {"RETROD_DATA_DIR": "/d"}
    assert notes == [("RETROD_DATABASE_URL is not written into the settings (it holds a password): Claude Code must"
                      " have it in its environment, or keep the password in ~/.pgpass")]
    assert claude_settings.carried({"RETROD_DATABASE_URL": "postgresql://me@db/r"}) == (
        {"RETROD_DATABASE_URL": "postgresql://me@db/r"}, [])
