"""A PostgreSQL primary and a streaming standby of its own, from Debian's server
binaries, on free loopback ports in temporary directories: for failover and
read-replica tests. As root, the servers run as the `postgres` user."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.http_server import free_port


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


BIN = _bin_dir()


def available() -> bool:
    return BIN is not None and shutil.which("setpriv") is not None


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *command]


def _run(*command: str) -> None:
    assert BIN is not None
    done = subprocess.run(
        _as_postgres([str(BIN / command[0]), *command[1:]]),
        capture_output=True,
        text=True,
        check=False,
        cwd="/tmp",
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed: {done.stdout}{done.stderr}")


class Node:
    """One server: its data directory, port, and the means to start and stop it."""

    def __init__(self, home: Path, name: str) -> None:
        self.name = name
        self.data = home / name
        self.port = free_port()
        self.log = home / f"{name}.log"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        _run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "120", "start")

    def stop(self, mode: str = "fast") -> None:
        _run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "120", "stop")

    def promote(self) -> None:
        _run("pg_ctl", "-D", str(self.data), "-w", "-t", "120", "promote")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def query(self, sql: str) -> list[tuple[object, ...]]:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []


class Pair:
    """A primary and its standby, streaming; `synchronous` makes every commit wait for
    the standby to have flushed it (`synchronous_standby_names`)."""

    def __init__(self, *, synchronous: bool = True) -> None:
        if BIN is None:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
        self.home = Path(tempfile.mkdtemp(prefix="pg-pair-", dir="/tmp"))
        self.home.chmod(0o777)
        self.primary = Node(self.home, "primary")
        self.standby = Node(self.home, "standby")
        _run("initdb", "-D", str(self.primary.data), "-U", "postgres", "-A", "trust", "--no-sync")
        settings = [
            f"port = {self.primary.port}",
            "listen_addresses = '127.0.0.1'",
            "unix_socket_directories = ''",
            "wal_level = replica",
            "max_wal_senders = 4",
            "max_connections = 60",
            "fsync = off",  # the tests kill servers, not machines: no disk flush needed
            "autovacuum = off",
            "wal_keep_size = '256MB'",
        ]
        if synchronous:
            settings.append("synchronous_standby_names = 'standby'")
        with (self.primary.data / "postgresql.conf").open("a") as conf:
            conf.write("\n".join(settings) + "\n")
        with (self.primary.data / "pg_hba.conf").open("a") as hba:
            hba.write("host replication postgres 127.0.0.1/32 trust\n")
        self.primary.start()
        _run(
            "pg_basebackup",
            "-D",
            str(self.standby.data),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary.port),
            "-U",
            "postgres",
            "-X",
            "stream",
            "-R",  # standby.signal and primary_conninfo
            "--no-sync",
        )
        with (self.standby.data / "postgresql.auto.conf").open("a") as conf:
            conf.write(
                f"port = {self.standby.port}\n"
                f"primary_conninfo = 'host=127.0.0.1 port={self.primary.port}"
                " user=postgres application_name=standby'\n"
                "synchronous_standby_names = ''\n"
                "hot_standby = on\n"
            )
        self.standby.start()
        self.wait_streaming()

    def wait_streaming(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.primary.query("SELECT state FROM pg_stat_replication")
            if rows and rows[0][0] == "streaming":
                return
            time.sleep(0.1)
        raise RuntimeError("the standby did not start streaming")

    @property
    def url(self) -> str:
        """Both servers; libpq connects to whichever accepts writes."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def fail_over(self) -> None:
        """The primary dies (no shutdown checkpoint, connections cut) and the standby
        takes over."""
        self.primary.stop("immediate")
        self.standby.promote()

    def close(self) -> None:
        for node in (self.standby, self.primary):
            if node.running():
                with contextlib.suppress(RuntimeError):
                    node.stop("immediate")
        shutil.rmtree(self.home, ignore_errors=True)
