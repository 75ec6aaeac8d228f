"""The memory: tasks, attempts and benchmark runs in one SQLite file.

Everything acr knows is derived from the ``attempts`` rows with SQL aggregates; nothing learned
is stored twice. Writers use short transactions (WAL + busy timeout), so several ``acr run``
processes can record at once. :class:`Memory` is one connection with every concern's methods:
writing (:mod:`.writes`), the reads commands and reports make (:mod:`.reads`), export and import
(:mod:`.transfer`); what routing reads is in :mod:`.aggregates`, the schema in :mod:`.db`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from acr_cli.memory import db as dbmod
from acr_cli.memory.armhealth import ArmHealthRows
from acr_cli.memory.base import new_id, now_iso
from acr_cli.memory.reads import ArmStats
from acr_cli.memory.transfer import Transfer
from acr_cli.memory.writes import TEXT_MAX, Writes

if TYPE_CHECKING:
    from acr_cli.paths import MemoryLocation

P = TypeVar("P")

__all__ = ["ArmStats", "Memory", "TEXT_MAX", "new_id", "now_iso"]


class Memory(Writes, Transfer, ArmHealthRows):
    @classmethod
    def open(cls, path: "MemoryLocation | Path | str", create: bool = True, read_only: bool = False) -> "Memory":
        """The memory at ``path``: a :class:`MemoryLocation`, a SQLite file, or a ``postgresql://`` URL (a server)."""
        from acr_cli.memory.postgres import is_url, masked
        from acr_cli.paths import MemoryLocation

        if isinstance(path, MemoryLocation):
            path = path.target
        if is_url(path):
            return cls(dbmod.connect_url(path if isinstance(path, str) else str(path)), masked(str(path)))
        return cls(dbmod.connect(path, create=create, read_only=read_only), path)

    def close(self) -> None:
        self.db.close()

    # the MemoryStore interface (acr_cli.memory.interface): one memory records, is read, and shares nothing
    @property
    def records(self) -> "Memory":
        return self

    @property
    def reads(self) -> "Memory":
        return self

    @property
    def note(self) -> str | None:
        return None

    def policy(self, make: Callable[["Memory"], P]) -> P:
        return make(self)

    def recorded(self, task_id: str) -> None:
        """Nothing to queue: the task is where it belongs."""

    def finish(self) -> dict[str, Any] | None:
        return None

    def check(self, pages: int = 5) -> None:
        """Read every page (``PRAGMA quick_check``): damage that opening the file does not notice is found
        here, raised as a MemoryFileError that names the first problems. (A server checks its own pages.)"""
        if self.shared:
            return
        try:
            problems = [r[0] for r in self.db.execute(f"PRAGMA quick_check({int(pages)})")]
        except sqlite3.DatabaseError as e:
            raise dbmod.damaged(self.path, str(e), what="is damaged") from None
        if problems != ["ok"]:
            raise dbmod.damaged(self.path, "; ".join(problems), what="is damaged")
