"""What a run or a command asks of its memory, wherever it is: :class:`MemoryStore`.

Two implementations: :class:`acr_cli.memory.store.Memory` (one SQLite file, or one server for commands that
work on it directly) and :class:`acr_cli.memory.team.TeamMemory` (a team's server with this machine's local
copy: it records locally first, queues uploads and routes from the local copy while the server is away).
Callers get one from :func:`acr_cli.memory.opening.open_memory` and do not ask which it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from acr_cli.memory.store import Memory

P = TypeVar("P")


@runtime_checkable
class MemoryStore(Protocol):
    @property
    def records(self) -> "Memory":
        """Where runs record their tasks and attempts, and where this machine's arm health is kept."""

    @property
    def reads(self) -> "Memory":
        """What routing reads."""

    @property
    def note(self) -> str | None:
        """What a command should say about this memory before it starts (None: nothing)."""

    def policy(self, make: Callable[["Memory"], P]) -> P:
        """The routing policy ``make`` builds on :attr:`reads`; the team's keeps routing if its server goes
        away mid-run."""

    def recorded(self, task_id: str) -> None:
        """A task was recorded into :attr:`records` (a team's queues it for upload)."""

    def finish(self) -> dict[str, Any] | None:
        """After a run: what was done with a shared memory (the team's sync), else None."""

    def close(self) -> None:
        """Close every connection."""
