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
from dataclasses import dataclass
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
                      project: Path | None = None) -> tuple[Path | str, str]:
        """The memory (a file's Path, or a URL string) and what chose it: ``--memory``, ``ACR_MEMORY``,
        the project's ``.acr.toml`` (a URL only), config.toml, or ``default``. ``project``: where the
        command works (default: the current directory)."""
        if override:
            return _location(str(override)), "--memory"
        env = os.environ.get("ACR_MEMORY")
        if env:
            return _location(env), "ACR_MEMORY"
        from acr_cli.config import find_project_file, read_toml

        project_file = find_project_file(project or Path.cwd())
        if project_file is not None:
            named = read_toml(project_file).get("memory")
            if is_url(named):
                from acr_cli import trust

                if trust.is_trusted(project_file, self.data_dir):
                    return ProjectURL(named), str(project_file)
                from acr_cli.memory.postgres import masked

                trust.tell(project_file, {"memory": f"memory = {masked(named)!r} ({trust.NEVER['memory']})"})
        configured = read_toml(self.config_file).get("memory")
        if configured:
            if is_url(configured):
                return configured, str(self.config_file)
            path = Path(configured).expanduser()
            return (path if path.is_absolute() else self.config_dir / path), str(self.config_file)
        return self.local_memory, "default"

    def local_copy(self, location: Path | str) -> Path:
        """The local file a team's memory at ``location`` records into first and copies the server into: the
        personal memory for a server the user named, a file of the server's own for one a project named."""
        if isinstance(location, ProjectURL):
            import hashlib

            from acr_cli.memory.postgres import masked

            return self.data_dir / "teams" / f"{hashlib.sha256(masked(location).encode()).hexdigest()[:16]}.sqlite"
        return self.local_memory

    def memory_path(self, override: str | os.PathLike | None = None, project: Path | None = None) -> Path | str:
        return self.memory_choice(override, project)[0]


class ProjectURL(str):
    """A memory server's URL that a (trusted) project file named, not the user: its connection may not be
    redirected by libpq options, and it is never offered ``PGPASSWORD`` (acr_cli.memory.postgres); its
    local copy is a file of its own, never the personal memory (:meth:`Paths.local_copy`)."""


def is_url(value: object) -> bool:
    """A ``postgresql://`` (or ``postgres://``) URL: a team's shared memory."""
    return isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))


def memory_exists(location: Path | str) -> bool:
    """Whether there is a memory at ``location`` yet (a server's is there once its URL is given)."""
    return is_url(location) or Path(location).exists()


def _location(value: str) -> Path | str:
    return value if is_url(value) else Path(value).expanduser()
