"""Every path acr uses, resolved in one place.

* ``ACR_HOME`` set: everything lives under it (``config/``, ``data/``, ``cache/``).
* otherwise the platform's user directories from platformdirs
  (on Linux ``~/.config/acr``, ``~/.local/share/acr``, ``~/.cache/acr``).

The memory database, first found: a command's ``--memory PATH|URL``, ``ACR_MEMORY``, a
``postgresql://`` URL as ``memory`` in the project's ``.acr.toml``, ``memory = "..."`` in
``config.toml`` (a path relative to the config directory, or a URL), else ``<data>/memory.sqlite``.
A URL names a team's shared memory on PostgreSQL (acr_cli.memory.team); acr then also keeps
``<data>/memory.sqlite`` as the local memory every run records into first. Attempt logs go to
``<data>/logs``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

APP = "acr"


@dataclass(frozen=True)
class Paths:
    config_dir: Path
    data_dir: Path
    cache_dir: Path
    source: str  # "ACR_HOME" or "platformdirs": shown by `acr doctor`

    @classmethod
    def from_env(cls) -> "Paths":
        home = os.environ.get("ACR_HOME")
        if home:
            root = Path(home).expanduser()
            return cls(root / "config", root / "data", root / "cache", "ACR_HOME")
        import platformdirs

        return cls(
            Path(platformdirs.user_config_dir(APP)),
            Path(platformdirs.user_data_dir(APP)),
            Path(platformdirs.user_cache_dir(APP)),
            "platformdirs",
        )

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def profiles_dir(self) -> Path:
        return self.config_dir / "profiles"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    def remove_logs(self, task_ids) -> int:
        """Remove these tasks' attempt logs (a forgotten task leaves nothing behind); how many folders went.
        Only folders directly inside the logs directory: an id never reaches outside it."""
        import shutil

        logs = self.logs_dir.resolve()
        n = 0
        for tid in task_ids:
            target = (logs / tid).resolve()
            if target.parent == logs and target.is_dir():
                shutil.rmtree(target, ignore_errors=True)
                n += 1
        return n

    @property
    def bench_cache(self) -> Path:
        return self.cache_dir / "coderouterbench"

    @property
    def crash_log(self) -> Path:
        return self.data_dir / "crash.log"

    @property
    def local_memory(self) -> Path:
        """The default memory file; with a shared memory, the local one runs record into first."""
        return self.data_dir / "memory.sqlite"

    def memory_choice(self, override: str | os.PathLike | None = None,
                      project: Path | None = None) -> "MemoryLocation":
        """The memory in effect, and what named it: ``--memory``, ``ACR_MEMORY``, the project's ``.acr.toml``
        (a URL only), config.toml, or ``default``. ``project``: where the command works (default: the
        current directory)."""
        if override:
            return MemoryLocation.named(override, "--memory")
        env = os.environ.get("ACR_MEMORY")
        if env:
            return MemoryLocation.named(env, "ACR_MEMORY")
        from_project = self._project_memory(project or Path.cwd())
        if from_project is not None:
            return from_project
        from acr_cli.config import read_toml

        configured = read_toml(self.config_file).get("memory")
        if configured:
            return MemoryLocation.named(configured, str(self.config_file), relative_to=self.config_dir)
        return MemoryLocation(self.local_memory, source="default")

    def _project_memory(self, project: Path) -> "MemoryLocation | None":
        """The server a trusted project file names as ``memory`` (an untrusted one is told about, not used)."""
        from acr_cli.config import find_project_file, read_toml

        project_file = find_project_file(project)
        if project_file is None:
            return None
        named = read_toml(project_file).get("memory")
        if not is_url(named):
            return None
        from acr_cli import trust

        if trust.is_trusted(project_file, self.data_dir):
            return MemoryLocation(None, named, str(project_file), from_project=True)
        from acr_cli.memory.postgres import masked

        trust.tell(project_file, {"memory": f"memory = {masked(named)!r} ({trust.NEVER['memory']})"})
        return None

    def local_copy(self, location: "MemoryLocation") -> Path:
        """The local file a team's memory at ``location`` records into first and copies the server into: the
        personal memory for a server the user named, a file of the server's own for one a project named."""
        if location.from_project:
            import hashlib

            return self.data_dir / "teams" / f"{hashlib.sha256(location.label.encode()).hexdigest()[:16]}.sqlite"
        return self.local_memory

    def memory_path(self, override: str | os.PathLike | None = None, project: Path | None = None) -> "MemoryLocation":
        return self.memory_choice(override, project)


@dataclass(frozen=True)
class MemoryLocation:
    """Where the memory is, and what named it (``source``): a SQLite file (``path``) or a team's PostgreSQL
    server (``url``). A URL may hold a password: ``label``, ``str()`` and ``repr()`` show it masked."""

    path: Path | None
    url: str | None = field(default=None, repr=False)
    source: str = "default"
    from_project: bool = False  # a (trusted) project file named the server, not the user

    @classmethod
    def named(cls, value: str | os.PathLike, source: str, relative_to: Path | None = None) -> "MemoryLocation":
        """``value`` as a user gave it: a ``postgresql://`` URL is a server, anything else a file (``~``
        expanded; relative to ``relative_to`` when given, else to the current directory)."""
        text = str(value)
        if is_url(text):
            return cls(None, text, source)
        path = Path(text).expanduser()
        return cls(path if relative_to is None or path.is_absolute() else relative_to / path, None, source)

    @property
    def is_server(self) -> bool:
        return self.url is not None

    @property
    def label(self) -> str:
        """How acr names it to people: the file, or the URL with its password masked."""
        if self.url is None:
            return str(self.path)
        from acr_cli.memory.postgres import masked

        return masked(self.url)

    @property
    def target(self) -> Path | str:
        """What to open: the file, or the URL (a :class:`ProjectURL` when a project file named it)."""
        if self.url is None:
            return self.path
        return ProjectURL(self.url) if self.from_project else self.url

    def exists(self) -> bool:
        """Whether there is a memory here yet (a server's is there once its URL is given)."""
        return self.is_server or self.path.exists()

    def __str__(self) -> str:
        return self.label


class ProjectURL(str):
    """A memory server's URL that a (trusted) project file named, not the user: its connection may not be
    redirected by libpq options, and it is never offered ``PGPASSWORD`` (acr_cli.memory.postgres); its
    local copy is a file of its own, never the personal memory (:meth:`Paths.local_copy`)."""


def is_url(value: object) -> bool:
    """A ``postgresql://`` (or ``postgres://``) URL: a team's shared memory."""
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def memory_exists(location: MemoryLocation) -> bool:
    """Whether there is a memory at ``location`` yet (a server's is there once its URL is given)."""
    return location.exists()
