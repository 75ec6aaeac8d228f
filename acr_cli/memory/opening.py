"""Opening the memory at a :class:`acr_cli.paths.MemoryLocation`: the one place that knows what a missing
file, a read-only file and an unreachable server mean for a command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from acr_cli.errors import MemoryFileError

if TYPE_CHECKING:
    from acr_cli.memory.interface import MemoryStore
    from acr_cli.memory.store import Memory
    from acr_cli.paths import MemoryLocation


def open_memory(location: "MemoryLocation", *, create: bool = True, read_only: bool = False,
                team_copy: Path | None = None, share_prompts: bool = True,
                fallback: Path | None = None, warn: Callable[[str], None] | None = None) -> "MemoryStore":
    """The memory at ``location``.

    ``team_copy`` (runs and `acr route`): a server's location opens the team's memory
    (:class:`acr_cli.memory.team.TeamMemory`) with this local file, which records first; a server that cannot
    be reached is then no error (its :attr:`note` says so) unless it refuses the URL. ``share_prompts``: whether
    the server gets request texts and answers. A file's location ignores both.

    ``create=False``: a file that does not exist yet is an empty memory when it is the default one, and an
    error when the user named it (a typo must not silently become a new, empty memory). ``read_only``
    (commands that only read): a memory acr cannot write to is still read. ``fallback`` (views: `memory
    show`, `memory log`): while the server is away, the local copy of the team's newest tasks at this path,
    read-only, and ``warn`` is told so; a wrong URL or password is an error all the same."""
    from acr_cli.memory.store import Memory

    if location.is_server and team_copy is not None:
        from acr_cli.memory.team import open_team

        return open_team(location.target, team_copy, share_prompts=share_prompts)
    if location.is_server:
        return _open_server(location, fallback, warn)
    if not create and not location.path.exists():
        if location.source == "default":
            return Memory.open(":memory:")
        raise MemoryFileError(f"no memory at {location.path} (named by {location.source})",
                              hint="check the path; a new memory is created by the first `acr run` that uses it")
    return Memory.open(location.path, read_only=read_only)


def _open_server(location: "MemoryLocation", fallback: Path | None,
                 warn: Callable[[str], None] | None) -> "Memory":
    from acr_cli.memory.postgres import ServerUnreachable
    from acr_cli.memory.store import Memory

    try:
        return Memory.open(location)
    except ServerUnreachable as e:
        if fallback is None or not e.away:  # a wrong URL or password is for the user to fix, not to show past
            raise
        if warn is not None:
            warn(f"{e.message}; showing the local copy of the team's newest tasks and this machine's own runs")
        return Memory.open(fallback, read_only=True) if fallback.exists() else Memory.open(":memory:")
