"""Memory: SQLite storage of tasks, attempts and benchmark runs, and the aggregates routing reads."""

from acr_cli.memory.store import ArmStats, Memory

__all__ = ["ArmStats", "Memory"]
