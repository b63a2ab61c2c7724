"""A throwaway PostgreSQL server for the tests (and the benchmarks): ``initdb`` into a temporary
directory, ``pg_ctl start`` on a free loopback port, ``pg_ctl stop`` and remove it after.

The server binaries are the system's (Debian's ``postgresql`` package puts them in
``/usr/lib/postgresql/<version>/bin``; ``$TRIO_AGENTS_PG_BIN`` names another directory).
``initdb`` and ``postgres`` refuse to run as root, so as root they run as the user
``postgres`` (Debian's package creates it; it is created here when missing), and the data
directory belongs to that user.

Imported as ``from tests.helpers.pg_server import ...``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

#: The unprivileged user the server runs as when the tests run as root.
SERVER_USER = "postgres"

INSTALL_HINT = (
    "install Debian's PostgreSQL server (apt-get install -y postgresql), or name the "
    "directory holding initdb and pg_ctl in $TRIO_AGENTS_PG_BIN"
)


def find_bindir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``, the newest version found, or ``None``."""
    given = os.environ.get("TRIO_AGENTS_PG_BIN")
    if given:
        return Path(given) if (Path(given) / "initdb").exists() else None
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        newest = max(found, key=lambda p: int(Path(p).parent.parent.name.split(".")[0]))
        return Path(newest).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: ``None`` (this process's user) unless this process is root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(SERVER_USER)


@attrs.define
class PgServer:
    """A running throwaway server; ``dsn`` reaches its ``postgres`` database as superuser."""

    bindir: Path
    root: Path
    port: int
    user: pwd.struct_passwd | None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str | Path) -> subprocess.CompletedProcess[str]:
        user = self.user
        return subprocess.run(
            [str(a) for a in argv],
            check=False,
            capture_output=True,
            text=True,
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            extra_groups=[] if user else None,
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C.UTF-8"},
        )

    def log(self) -> str:
        """The server's log so far (for a failure message)."""
        try:
            return (self.root / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server at once (``immediate``) and remove its directory."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(self.bindir / "pg_ctl", "stop", "-D", self.data, "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start_server(*, fsync: bool = True) -> PgServer:
    """Start a throwaway server and return it (``stop()`` it after).

    Args:
        fsync: whether the server syncs its commits to disk (the tests turn it off: they
            need a working database, not a durable one; the benchmarks keep it on).

    Raises:
        FileNotFoundError: no PostgreSQL server binaries are installed (says how to).
        RuntimeError: the server did not start (with its log).
    """
    bindir = find_bindir()
    if bindir is None:
        raise FileNotFoundError(f"no PostgreSQL server binaries (initdb) found; {INSTALL_HINT}")
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="trio-agents-pg-"))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    server = PgServer(bindir=bindir, root=root, port=0, user=user)
    try:
        init = server._run(
            bindir / "initdb", "-D", server.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"
        )
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{init.stdout}{init.stderr}")
        for _ in range(5):  # a port found free may be taken before the server binds it
            server.port = _free_port()
            options = (
                f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 "
                f"-c fsync={'on' if fsync else 'off'} -c max_connections=200"
            )
            started = server._run(
                bindir / "pg_ctl",
                "start",
                "-D",
                server.data,
                "-w",
                "-t",
                "60",
                "-l",
                root / "server.log",
                "-o",
                options,
            )
            if started.returncode == 0:
                return server
        raise RuntimeError(
            f"the PostgreSQL server did not start:\n{started.stdout}{started.stderr}\n"
            f"{server.log()}"
        )
    except BaseException:
        server.stop()
        raise


@contextmanager
def running_server(*, fsync: bool = True) -> Iterator[PgServer]:
    """:func:`start_server` as a context manager: stopped and removed after, also on failure."""
    server = start_server(fsync=fsync)
    try:
        yield server
    finally:
        server.stop()


def fresh_schema_dsn(dsn: str) -> str:
    """A DSN on the same database whose tables go in a new, empty schema (a fresh store)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return make_conninfo(dsn, options=f"-c search_path={schema}")
