"""A throwaway PostgreSQL server for the tests: initdb in a temporary folder, started on a free
loopback port with its socket in that folder, stopped and removed at the end.

It runs as the ``postgres`` OS user when the tests run as root (the server refuses root). Host
connections need a password (scram-sha-256), so every URL the tests use carries one: error
messages are checked never to show it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

USER = "ctxbudget"
PASSWORD = "pw-Zq8vK3-not-for-messages"
BIN_GLOB = "/usr/lib/postgresql/*/bin"


def find_bin_folder() -> Path | None:
    """The folder of ``initdb``, ``pg_ctl`` and ``postgres``: on PATH, else the newest of
    Debian's versioned folders; None when no server is installed."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl") and shutil.which("postgres"):
        return Path(os.path.realpath(on_path)).parent
    folders = sorted(
        (Path(p) for p in glob.glob(BIN_GLOB) if (Path(p) / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return folders[-1] if folders else None


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server; :meth:`database` makes a fresh database and gives its URL."""

    bin_folder: Path
    folder: Path
    port: int
    run_as: dict[str, Any]
    durable: bool = False  # fsync and synchronous commit on, as a production server (benchmarks)

    @classmethod
    def start(cls, bin_folder: Path, *, durable: bool = False) -> PostgresServer:
        """initdb and start a server (as ``postgres`` when we are root); the tests' server skips
        fsync, a ``durable`` one (for benchmarks) keeps the server's defaults."""
        folder = Path(tempfile.mkdtemp(prefix="ctxbudget-pg-"))
        run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            run_as = {"user": "postgres", "group": "postgres"}
            shutil.chown(folder, "postgres", "postgres")
        server = cls(bin_folder=bin_folder, folder=folder, port=free_port(), run_as=run_as, durable=durable)
        try:
            server._init_and_start()
        except BaseException:
            server.stop()
            raise
        return server

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [str(self.bin_folder / tool), *args],
            check=True,
            capture_output=True,
            text=True,
            cwd=self.folder,
            timeout=120,
            **self.run_as,
        )

    def _init_and_start(self) -> None:
        pwfile = self.folder / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.run_as:
            shutil.chown(pwfile, "postgres", "postgres")
        data = str(self.folder / "data")
        self._run(
            "initdb", "-D", data, "-U", USER, "--pwfile", str(pwfile), "--auth-local=trust",
            "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", data, "-o", options, "-l", str(self.folder / "log"), "-w", "start")

    def url(self, database: str, *, password: str = PASSWORD, port: int | None = None) -> str:
        """The URL of ``database`` on this server."""
        return f"postgresql://{USER}:{password}@127.0.0.1:{port or self.port}/{database}"

    def database(self) -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url("postgres"), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        """Stop the server (immediately: its data is thrown away) and remove its folder."""
        data = self.folder / "data"
        if (data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


class Forwarder:
    """A loopback TCP forwarder to the server: closing it drops every connection through it and
    refuses new ones, as a server that went away does."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.open: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self.open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Drop every connection and stop listening."""
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
