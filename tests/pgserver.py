"""A throw-away PostgreSQL server for the tests and bench/perf.py: its own cluster in a temporary
directory, listening only on a Unix socket there, stopped (and its files removed) at the end.

The binaries are the ones ``pg_config --bindir`` names (Debian's ``postgresql-15`` puts them in
``/usr/lib/postgresql/15/bin``). ``initdb`` and ``postgres`` refuse to run as root, so as root the
cluster belongs to the ``postgres`` user and its processes run as that user. Two roles: ``acr``
(the superuser, no password) and ``alice`` (password ``s3cret-pw``, checked with SCRAM), so the tests
can see a password travel through a URL, ``PGPASSWORD`` and ``.pgpass``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

PASSWORD_USER, PASSWORD = "alice", "s3cret-pw"


def bindir() -> Path | None:
    """Where the server binaries are, or None (no server installed here)."""
    for candidate in _candidates():
        if (candidate / "initdb").exists() and (candidate / "postgres").exists():
            return candidate
    return None


def _candidates() -> list[Path]:
    out = []
    try:
        out.append(Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                       check=True).stdout.strip()))
    except (OSError, subprocess.CalledProcessError):
        pass
    out += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    return out


def why_not() -> str | None:
    """Why no server can be started here (None: one can)."""
    if bindir() is None:
        return ("no PostgreSQL server binaries (initdb, postgres) found by `pg_config --bindir` or in "
                "/usr/lib/postgresql/*/bin: install Debian's postgresql package")
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server as"
    return None


class Server:
    def __init__(self) -> None:
        self.bin = bindir()
        self.root = Path(tempfile.mkdtemp(prefix="acr-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root
        self.user = None
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            self.user = "postgres"
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.proc: subprocess.Popen | None = None
        self._n = 0

    def _run(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), user=self.user, capture_output=True, text=True, check=True, **kw)

    def start(self) -> "Server":
        """Create the cluster (the first time) and start the server; ``pause()`` then ``start()`` restarts it."""
        first = not self.data.exists()
        if first:
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "acr", "--auth=trust", "-E", "UTF8",
                      "--locale=C", "--no-sync")
            (self.data / "pg_hba.conf").write_text(
                f"local all {PASSWORD_USER} scram-sha-256\nlocal all all trust\n")
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-k", str(self.socket_dir), "-c", "listen_addresses=",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=200", "-c", "shared_buffers=128MB"],
            user=self.user, stdout=subprocess.DEVNULL, stderr=open(self.root / "server.log", "w"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready = subprocess.run([str(self.bin / "pg_isready"), "-h", str(self.socket_dir), "-U", "acr", "-q"])
            if ready.returncode == 0:
                break
            if self.proc.poll() is not None:
                raise RuntimeError("PostgreSQL did not start:\n" + (self.root / "server.log").read_text()[-2000:])
            time.sleep(0.1)
        else:
            raise RuntimeError("PostgreSQL did not become ready in 30 s")
        if first:
            self.sql("postgres", f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")
        return self

    def sql(self, db: str, statement: str) -> str:
        return subprocess.run([str(self.bin / "psql"), "-h", str(self.socket_dir), "-U", "acr", "-d", db, "-XAtq",
                               "-v", "ON_ERROR_STOP=1", "-c", statement],
                              capture_output=True, text=True, check=True).stdout

    def url(self, db: str, user: str = "acr", password: str | None = None) -> str:
        auth = f"{user}:{password}" if password else user
        return f"postgresql://{auth}@/{db}?host={self.socket_dir}"

    def new_database(self, owner: str = "acr") -> str:
        """A new, empty database; returns its name."""
        self._n += 1
        name = f"t{os.getpid()}_{self._n}"
        self.sql("postgres", f"CREATE DATABASE {name} OWNER {owner}")
        return name

    def pause(self) -> None:
        """Stop the server, keeping its data (``start()`` brings it back): a server that is away."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(2)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(2)  # "fast" shutdown: SIGTERM ("smart") would wait for the clients
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
