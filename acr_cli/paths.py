"""Every path acr uses, resolved in one place.

* ``ACR_HOME`` set: everything lives under it (``config/``, ``data/``, ``cache/``).
* otherwise the platform's user directories from platformdirs
  (on Linux ``~/.config/acr``, ``~/.local/share/acr``, ``~/.cache/acr``).

The memory database, first found: a command's ``--memory PATH``, ``ACR_MEMORY``,
``memory = "..."`` in ``config.toml`` (relative to the config directory), else
``<data>/memory.sqlite``. Attempt logs go to ``<data>/logs``.
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

    @property
    def bench_cache(self) -> Path:
        return self.cache_dir / "coderouterbench"

    @property
    def crash_log(self) -> Path:
        return self.data_dir / "crash.log"

    def memory_choice(self, override: str | os.PathLike | None = None) -> tuple[Path, str]:
        """The memory file and what chose it: ``--memory``, ``ACR_MEMORY``, config.toml, or ``default``."""
        if override:
            return Path(override).expanduser(), "--memory"
        env = os.environ.get("ACR_MEMORY")
        if env:
            return Path(env).expanduser(), "ACR_MEMORY"
        from acr_cli.config import read_toml

        configured = read_toml(self.config_file).get("memory")
        if configured:
            path = Path(configured).expanduser()
            return (path if path.is_absolute() else self.config_dir / path), str(self.config_file)
        return self.data_dir / "memory.sqlite", "default"

    def memory_path(self, override: str | os.PathLike | None = None) -> Path:
        return self.memory_choice(override)[0]
