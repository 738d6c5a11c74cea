"""Claude Code's settings file (`~/.claude/settings.json`, or `$CLAUDE_CONFIG_DIR/settings.json`),
as `retrod statusline install` and `retrod hooks install` change it: only their own entry, every
other key kept as it was, and a backup of the file written before each change.

Claude Code reads this file while it runs and other tools write it too: it is read just before
it is written and replaced whole (written beside it, then renamed), never left half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

BACKUP_SUFFIX = ".retrod-backup"  # settings.json.retrod-backup-<time>: one per change
# Beside the settings file: the entries retrod's installs replaced, by key, for their uninstall
# to put back (backups are of whole files, and other tools may have changed other keys since).
REPLACED_NAME = "retrod-replaced.json"


class SettingsError(ValueError):
    """The settings file cannot be read or written; the message names it and says why."""


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's configuration folder: the first of CLAUDE_CONFIG_DIR's, else ~/.claude."""
    env = os.environ if env is None else env
    first = (env.get("CLAUDE_CONFIG_DIR") or "").split(",")[0].strip()
    return Path(first).expanduser() if first else Path.home() / ".claude"


def settings_file(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / "settings.json"


def read(path: Path) -> dict[str, Any]:
    """The settings (an empty object when the file does not exist yet)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SettingsError(f"{path}: not JSON ({exc}); fix it or move it away, then try again") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: not a JSON object; fix it or move it away, then try again")
    return data


def change(path: Path, edit: Callable[[dict[str, Any]], bool]) -> Path | None:
    """Apply `edit` to the settings (it returns whether it changed anything); if it did, back the
    file up and write it. Returns the backup's path (None: nothing changed, or no file before)."""
    data = read(path)
    if not edit(data):
        return None
    backup = None
    if path.exists():
        backup = path.with_name(f"{path.name}{BACKUP_SUFFIX}-{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while backup.exists():  # two changes within a second
            backup = backup.with_name(f"{path.name}{BACKUP_SUFFIX}-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
            n += 1
        try:
            shutil.copy2(path, backup)
        except OSError as exc:
            raise SettingsError(f"{path}: cannot back it up to {backup}: {exc.strerror or exc}") from None
    _write(path, data)
    return backup


def replaced_file(path: Path) -> Path:
    return path.with_name(REPLACED_NAME)


def remember(path: Path, key: str, value: Any) -> Path:
    """Keep `value`, the entry an install replaces at `key` of the settings file `path`, for
    its uninstall (recall); returns where it is kept."""
    kept = replaced_file(path)
    entries = read(kept)
    entries[key] = {"entry": value, "replaced_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _write(kept, entries)
    return kept


def recall(path: Path, key: str) -> tuple[bool, Any]:
    """(whether an entry is kept for `key`, the entry): what an install replaced there."""
    entries = read(replaced_file(path))
    kept = entries.get(key)
    return (True, kept["entry"]) if isinstance(kept, dict) and "entry" in kept else (False, None)


def forget(path: Path, key: str) -> None:
    """The entry kept for `key` is put back or stale: drop it (and the file, once empty)."""
    kept = replaced_file(path)
    entries = read(kept)
    if key not in entries:
        return
    del entries[key]
    if entries:
        _write(kept, entries)
    else:
        try:
            kept.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SettingsError(f"{kept}: cannot remove it: {exc.strerror or exc}") from None


def _write(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    temporary = path.with_name(f".{path.name}.retrod-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
        temporary.write_text(text, encoding="utf-8")
        temporary.chmod(mode)
        temporary.replace(path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise SettingsError(f"{path}: cannot write it: {exc.strerror or exc}") from None
