"""Claude Code's settings file (`~/.claude/settings.json`, or `$CLAUDE_CONFIG_DIR/settings.json`),
as `retrod statusline install` and `retrod hooks install` change it: only their own entry, every
other key kept as it was (numbers as written), and a backup of the file written before each change.

Claude Code reads this file while it runs and other tools write it too: it is read just before
it is written and replaced whole (written beside it, then renamed), never left half-written. Two
retrod installs at once take turns (a lock beside it). A settings.json that is a link (kept in a
dotfiles folder) stays a link: its target is what is replaced. A read-only one is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..basics.errors import UserError
from ..basics.redact import mask_password

BACKUP_SUFFIX = ".retrod-backup"  # settings.json.retrod-backup-<time>: one per change
# Beside the settings file: the entries retrod's installs replaced, by key, for their uninstall
# to put back (backups are of whole files, and other tools may have changed other keys since).
REPLACED_NAME = "retrod-replaced.json"
# Beside the settings file, owner-only and empty: held across each read-change-write. Never
# removed: a lock file unlinked while another install waits on it would let a third one in.
LOCK_NAME = ".retrod-settings.lock"


class SettingsError(UserError, ValueError):
    """The settings file cannot be read or written; the message names it and says why."""


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's configuration folder: the first of CLAUDE_CONFIG_DIR's, else ~/.claude."""
    env = os.environ if env is None else env
    first = (env.get("CLAUDE_CONFIG_DIR") or "").split(",")[0].strip()
    return Path(first).expanduser() if first else Path.home() / ".claude"


def settings_file(env: Mapping[str, str] | None = None) -> Path:
    return config_dir(env) / "settings.json"


def carried(settings: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The settings an entry's command may carry in front of it, and a note for each left out: a
    value holding a password (a database URL's) is never written into settings.json, which is no
    secrets file and is copied into backups; Claude Code's own environment must carry it."""
    kept, notes = {}, []
    for name, value in settings.items():
        if mask_password(value) != value:
            notes.append(f"{name} is not written into the settings (it holds a password): Claude Code"
                         " must have it in its environment, or keep the password in ~/.pgpass")
        else:
            kept[name] = value
    return kept, notes


def retrod_arguments(entry: object) -> list[str] | None:
    """The arguments of a settings entry whose command runs some retrod (a path named `retrod`,
    or `python -m retrod`; any install of it), after the NAME=value settings before it; None:
    the entry is not retrod's."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return None
    try:
        words = shlex.split(entry["command"])
    except ValueError:
        return None
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        words.pop(0)
    if words and Path(words[0]).name == "retrod":
        return words[1:]
    return words[3:] if words[1:3] == ["-m", "retrod"] else None


def _masked(value: Any) -> Any:
    """The settings with the passwords of retrod's own commands masked: what an older retrod
    wrote into them is not copied into a backup."""
    if isinstance(value, list):
        return [_masked(v) for v in value]
    if not isinstance(value, dict):
        return value
    masked = {k: _masked(v) for k, v in value.items()}
    if retrod_arguments(value) is not None:
        masked["command"] = mask_password(value["command"])
    return masked


# -- numbers as written ----------------------------------------------------------------------------
# Python would read 1e400 as inf and write it back as Infinity, which Claude Code cannot read, and
# 1.10 as 1.1: each number keeps its text, written back as it was, and compares by its value.

class _Int(int):
    text: str

    def __new__(cls, text: str) -> _Int:
        number = super().__new__(cls, int(text))
        number.text = text
        return number


class _Float(float):
    text: str

    def __new__(cls, text: str) -> _Float:
        number = super().__new__(cls, float(text))
        number.text = text
        return number


def _parse(text: str) -> Any:
    return json.loads(text, parse_int=_Int, parse_float=_Float, parse_constant=_Float)


def _dumps(value: Any, indent: str = "") -> str:
    """JSON as json.dumps(indent=2, ensure_ascii=False) writes it, each number read kept as written."""
    inner = indent + "  "
    if isinstance(value, (_Int, _Float)):
        return value.text
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {_dumps(v, inner)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, (list, tuple)) and value:
        return "[\n" + ",\n".join(f"{inner}{_dumps(v, inner)}" for v in value) + f"\n{indent}]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _encoded(path: Path, data: dict[str, Any]) -> bytes:
    """The file's new bytes, made before anything is written: text that cannot be UTF-8 stops here."""
    text = _dumps(data) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SettingsError(f"{path}: not changed: it would hold {exc.object[exc.start:exc.end]!r}, a lone"
                            " surrogate that is not UTF-8 (a setting holding bytes that are not UTF-8?)") from None


# -- reading ---------------------------------------------------------------------------------------

def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def _loaded(path: Path, raw: bytes | None) -> dict[str, Any]:
    try:
        text = "" if raw is None else raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: cannot read it: {exc}") from None
    if not text.strip():
        return {}
    try:
        data = _parse(text)
    except ValueError as exc:
        raise SettingsError(f"{path}: not JSON ({exc}); fix it or move it away, then try again") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: not a JSON object; fix it or move it away, then try again")
    return data


def read(path: Path) -> dict[str, Any]:
    """The settings (an empty object when the file does not exist yet)."""
    return _loaded(path, _read_bytes(path))


# -- the lock --------------------------------------------------------------------------------------

_held = threading.local()  # lock file -> how deep this thread holds it (an install's change inside its lock)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock of the settings file `path`: one retrod install reads, changes and writes it
    (and retrod-replaced.json) at a time, another waits. Re-entrant within a thread."""
    lock = path.with_name(LOCK_NAME).absolute()
    depth: dict[Path, int] = _held.__dict__.setdefault("depth", {})
    if depth.get(lock):
        depth[lock] += 1
        try:
            yield
        finally:
            depth[lock] -= 1
        return
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise SettingsError(f"{lock}: cannot lock {path.name} with it: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        depth[lock] = 1
        try:
            yield
        finally:
            depth.pop(lock, None)
    finally:
        os.close(fd)  # releases the lock


# -- writing ---------------------------------------------------------------------------------------

def _target(path: Path) -> Path:
    """The file to replace: the link's target when settings.json is a link, so that it stays one."""
    return Path(os.path.realpath(path))


def _may_write(target: Path, st: os.stat_result) -> bool:
    """Whether the user meant the file to be written: its owner's write bit for its owner. The
    bits, not os.access: for root, os.access says yes to a file its owner made read-only."""
    if st.st_uid == os.geteuid():
        return bool(st.st_mode & stat.S_IWUSR)
    if os.geteuid() == 0:
        return bool(st.st_mode & 0o222)
    return os.access(target, os.W_OK)


def _existing(path: Path, target: Path) -> os.stat_result | None:
    """The target's status (None: no file yet)."""
    try:
        return target.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def _writable(path: Path, target: Path, st: os.stat_result | None) -> None:
    """A file the user made read-only is refused: asked only when something is to be written,
    so that an install already done (or an uninstall with nothing to remove) still says so."""
    if st is not None and not _may_write(target, st):
        shown = path if target == path else f"{path} (a link to {target})"
        raise SettingsError(f"{shown} is read-only (mode {stat.S_IMODE(st.st_mode):04o}): retrod changes nothing"
                            " in it; make it writable (chmod u+w) and run this again, or add the entry by hand")


def _create(path: Path, mode: int) -> int:
    """A new file of `mode` (given before any byte is written: a copy of an owner-only file is
    never readable by others, even for a moment), open for writing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, mode)
    return fd


def _write_all(fd: int, content: bytes) -> None:
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _backup(path: Path, raw: bytes, st: os.stat_result) -> Path:
    """A copy of the file before the change, beside `path`, of the file's mode and times."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    n = 0
    while True:
        backup = path.with_name(f"{path.name}{BACKUP_SUFFIX}-{stamp}{f'-{n}' if n else ''}")
        try:
            fd = _create(backup, stat.S_IMODE(st.st_mode))
        except FileExistsError:  # two changes within a second
            n += 1
            continue
        except OSError as exc:
            raise SettingsError(f"{path}: cannot back it up to {backup}: {exc.strerror or exc}") from None
        break
    try:
        _write_all(fd, raw)
        os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError as exc:
        backup.unlink(missing_ok=True)
        raise SettingsError(f"{path}: cannot back it up to {backup}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return backup


def _replace(path: Path, target: Path, content: bytes, st: os.stat_result | None) -> None:
    """Write `content` beside `target` with its mode (and owner), then rename it onto `target`."""
    temporary = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.retrod-", dir=target.parent)  # owner-only
        temporary = Path(name)
        try:
            if st is not None and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(fd, st.st_uid, st.st_gid)  # root installing for the file's owner
                except PermissionError:
                    pass
            os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o600)
            _write_all(fd, content)
        finally:
            os.close(fd)
        temporary.replace(target)
    except OSError as exc:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        raise SettingsError(f"{path}: cannot write it: {exc.strerror or exc}") from None


def _save(path: Path, data: dict[str, Any]) -> None:
    """Write the whole of `data` to `path` (no backup): retrod's own files beside the settings."""
    target = _target(path)
    st = _existing(path, target)
    _writable(path, target, st)
    _replace(path, target, _encoded(path, data), st)


def change(path: Path, edit: Callable[[dict[str, Any]], bool]) -> Path | None:
    """Apply `edit` to the settings (it returns whether it changed anything); if it did, back the
    file up and write it. Returns the backup's path (None: nothing changed, or no file before)."""
    with locked(path):
        target = _target(path)
        st = _existing(path, target)
        raw = _read_bytes(target) if st is not None else None
        data = _loaded(path, raw)
        masked = _masked(data)
        if masked != data:  # a password an older retrod wrote: the backup is the file without it
            raw = _encoded(path, masked)
        if not edit(data):
            return None
        _writable(path, target, st)
        content = _encoded(path, data)
        backup = _backup(path, raw, st) if st is not None and raw is not None else None
        _replace(path, target, content, st)
        return backup


def replaced_file(path: Path) -> Path:
    return path.with_name(REPLACED_NAME)


def remember(path: Path, key: str, value: Any) -> Path:
    """Keep `value`, the entry an install replaces at `key` of the settings file `path`, for
    its uninstall (recall); returns where it is kept."""
    kept = replaced_file(path)
    with locked(path):
        entries = read(kept)
        entries[key] = {"entry": value, "replaced_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        _save(kept, entries)
    return kept


def recall(path: Path, key: str) -> tuple[bool, Any]:
    """(whether an entry is kept for `key`, the entry): what an install replaced there."""
    entries = read(replaced_file(path))
    kept = entries.get(key)
    return (True, kept["entry"]) if isinstance(kept, dict) and "entry" in kept else (False, None)


def forget(path: Path, key: str) -> None:
    """The entry kept for `key` is put back or stale: drop it (and the file, once empty)."""
    kept = replaced_file(path)
    with locked(path):
        entries = read(kept)
        if key not in entries:
            return
        del entries[key]
        if entries:
            _save(kept, entries)
            return
        try:
            kept.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SettingsError(f"{kept}: cannot remove it: {exc.strerror or exc}") from None
