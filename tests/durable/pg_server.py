"""A throwaway PostgreSQL server on a free loopback port, for the durable-storage tests.

``initdb`` + ``postgres`` from Debian's package (``/usr/lib/postgresql/<v>/bin``), in a
temporary directory owned by the ``postgres`` system user when the tests run as root
(PostgreSQL refuses to run as root). Readiness is waited for with a deadline; each test
gets a fresh database.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

START_DEADLINE = 60.0


def binaries() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``, if PostgreSQL is installed."""
    root = Path("/usr/lib/postgresql")
    for version in sorted(root.glob("*"), reverse=True) if root.is_dir() else []:
        if (version / "bin" / "initdb").exists() and (version / "bin" / "postgres").exists():
            return version / "bin"
    for name in ("initdb", "postgres"):
        if shutil.which(name) is None:
            return None
    return Path(shutil.which("initdb") or "").parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Postgres:
    """A running server: ``url(db)`` is an asyncpg URL on 127.0.0.1.

    :meth:`stop` and :meth:`start` take it away and bring it back on the same port and data
    (an outage as clients see it: connections refused, open ones closed).
    """

    port: int
    user: str
    bin: Path
    run_as: list[str]
    command: list[str] = field(default_factory=list)
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait (with a deadline) until it accepts connections."""
        assert self.log_path is not None
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_DEADLINE
        while True:
            ready = subprocess.run(
                [
                    str(self.bin / "pg_isready"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    self.user,
                ],
                check=False,
                capture_output=True,
                timeout=10,
            )
            if ready.returncode == 0:
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "PostgreSQL did not become ready: "
                    + self.log_path.read_text(errors="replace")[-2000:]
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Fast shutdown (SIGINT: open sessions are ended), waited for."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def url(self, database: str) -> str:
        return f"postgresql+asyncpg://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> None:
        subprocess.run(
            [
                *self.run_as,
                str(self.bin / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                self.user,
                name,
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )


def _run_as() -> tuple[list[str], str]:
    if os.geteuid() != 0:
        return [], pwd.getpwuid(os.geteuid()).pw_name
    # setpriv execs in place, so the Popen pid is the server itself and SIGTERM reaches it.
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"], "postgres"


@contextlib.contextmanager
def running_postgres(bin_dir: Path, *, also_on: str | None = None) -> Iterator[Postgres]:
    """Start a server in a temporary directory; stop it and remove the directory after.

    ``also_on`` (an address of this host, e.g. a node's bridge) makes it listen there too and
    trust clients of that address's /16 (the node tier's pods); by default only loopback.
    """
    run_as, user = _run_as()
    base = Path(tempfile.mkdtemp(prefix="mas-pg-"))
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    if run_as:
        entry = pwd.getpwnam("postgres")
        for path in (base, sockets):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    server: Postgres | None = None
    try:
        subprocess.run(
            [
                *run_as,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                user,
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        listen = "127.0.0.1"
        if also_on is not None:
            listen = f"127.0.0.1,{also_on}"
            with open(data / "pg_hba.conf", "a") as hba:  # written by initdb, as the user
                hba.write(f"host all all {also_on}/16 trust\n")
        port = _free_port()
        command = [
            *run_as,
            str(bin_dir / "postgres"),
            "-D",
            str(data),
            "-h",
            listen,
            "-p",
            str(port),
            "-k",
            str(sockets),
            "-c",
            "fsync=off",
            "-c",
            "max_connections=200",
        ]
        server = Postgres(port, user, bin_dir, run_as, command, base / "postgres.log")
        server.start()
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
