"""Memory: SQLite storage of tasks, attempts and benchmark runs, and the aggregates routing reads.

``Memory`` and ``ArmStats`` are imported on first use, so a module that needs only the schema's version
(``acr --version``: ``db.SCHEMA_VERSION``) does not load the whole store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acr_cli.memory.store import ArmStats, Memory

__all__ = ["ArmStats", "Memory"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from acr_cli.memory import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
