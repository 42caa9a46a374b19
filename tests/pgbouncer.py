"""Debian's PgBouncer in front of the test PostgreSQL server, on a free loopback port."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from tests.http_server import free_port

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def available() -> bool:
    return Path(BINARY).is_file()


class Bouncer:
    """PgBouncer in `pool_mode` (transaction by default) before the server `server_url`
    names, with `pool_size` server connections per database; started when made."""

    def __init__(self, server_url: str, *, pool_mode: str = "transaction", pool_size: int = 4):
        server = urlsplit(server_url)
        self.user = server.username or "postgres"
        self.port = free_port()
        # PgBouncer refuses to run as root: as root it runs as postgres, so its files
        # live where that user can read and write them
        self.home = Path(tempfile.mkdtemp(prefix="pgbouncer-", dir="/tmp"))
        self.home.chmod(0o777)
        users = self.home / "users.txt"
        users.write_text(f'"{self.user}" ""\n')
        config = self.home / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={server.hostname or '127.0.0.1'} port={server.port or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {users}\npool_mode = {pool_mode}\n"
            f"default_pool_size = {pool_size}\nmax_client_conn = 500\n"
            # a test's database is dropped after it: its idle server connections go soon
            "server_idle_timeout = 5\n"
            "ignore_startup_parameters = extra_float_digits\n"
            f"logfile = {self.home / 'pgbouncer.log'}\n"
        )
        for path in (users, config):
            path.chmod(0o644)
        command = [BINARY, str(config)]
        if os.geteuid() == 0:
            # setpriv execs pgbouncer itself (runuser would stand between), so stop() ends it
            command = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *command]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.process.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                said = self.process.stderr.read().decode()
                self.process.stderr.close()
                raise RuntimeError(f"pgbouncer exited: {said}")
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError("pgbouncer did not start")

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()
        shutil.rmtree(self.home, ignore_errors=True)
