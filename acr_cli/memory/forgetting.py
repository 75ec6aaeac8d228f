"""Forgetting tasks: from the memory chosen, from this machine's local file of a team, and their attempt logs.

A team's shared memory has its tasks forgotten from the local file too (its copy would bring them back to
routing offline), and so are this machine's runs of that server not uploaded yet; with everything, history
from before the team stays there (``--memory FILE`` forgets it). Attempt logs go once memory has let their
tasks go (never before: a locked or read-only memory keeps a task, and then its logs), unless this machine's
own memory still holds the task (forgetting it from a copy or another file leaves the logs to the memory
they serve)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from acr_cli.paths import Paths


@dataclass
class Forgotten:
    """What one forget did: tasks forgotten, stored replay runs forgotten, tasks whose logs were removed
    though no memory held them any more, and given ids found nowhere."""

    tasks: int = 0
    runs: int = 0
    orphans: int = 0
    missing: int = 0


def forget(mem, local, p: Paths, task_ids: list[str], *, everything: bool = False,
           bench: bool = False) -> Forgotten:
    """Forget ``task_ids`` (or ``everything``, or all ``bench`` replays) from ``mem`` and from ``local`` (the
    team's local file, or None), then the attempt logs of what went (not with ``bench``)."""
    found = set() if bench else set(mem.live_task_ids(None if everything else task_ids))
    here = _in_local_file(mem, local, task_ids, found, everything)
    done = Forgotten()
    if everything:
        done.tasks, done.runs = mem.forget_all()
    elif bench:
        done.tasks, done.runs = mem.forget_source_prefix("bench:")
    else:
        done.tasks = mem.forget(task_ids)
    if local is not None:
        local.forget(sorted(here))
        done.tasks += len(here - found)  # recorded here, never uploaded
    if not bench:
        done.orphans = _remove_logs(p, mem, task_ids, found | here, everything)
        done.missing = 0 if everything else len(task_ids) - done.tasks - done.orphans
    return done


def _in_local_file(mem, local, task_ids: list[str], found: set[str], everything: bool) -> set[str]:
    """The tasks to forget from the team's local file: the given ids, or with ``everything`` the server's
    tasks and this machine's runs recorded for that server."""
    if local is None:
        return set()
    if not everything:
        return set(local.live_task_ids(task_ids))
    from acr_cli.memory.team import recorded_for

    return set(local.live_task_ids(found | recorded_for(local, str(mem.path))))


def _remove_logs(p: Paths, mem, task_ids: list[str], gone: set[str], everything: bool) -> int:
    """Remove the logs of the forgotten tasks and, by id, of given tasks no longer in any memory (a run that
    went on after its task was forgotten), except those this machine's own memory still holds; return how
    many of the latter had logs."""
    strays = [] if everything else [t for t in task_ids if t not in gone]
    kept = held_by_own_memory(p, sorted(gone) + strays, mem)
    p.remove_logs([t for t in sorted(gone) if t not in kept])
    return p.remove_logs([t for t in strays if t not in kept])


def held_by_own_memory(p: Paths, task_ids: list[str], forgotten_from) -> set[str]:
    """Those of ``task_ids`` still in this machine's own memory file(s) (the default one, and the local file
    of a team), other than the memory they were forgotten from: the attempt logs in the data directory are
    theirs. A server is not asked (its tasks' logs are on the machines that ran them)."""
    if not task_ids:
        return set()
    default = p.memory_choice(None)
    team_copy = p.local_copy(default)  # the personal memory, unless a project's server has a file of its own
    own = {p.local_memory, team_copy if default.is_server else default.path}
    chosen = None if forgotten_from.shared else Path(str(forgotten_from.path))
    held: set[str] = set()
    for path in own:
        if not path.is_file() or (forgotten_from.shared and path == team_copy):
            continue  # a team's local copy was forgotten from above, on purpose
        if chosen is not None and path.resolve() == chosen.resolve():
            continue
        held |= _live_in(path, task_ids)
    return held


def _live_in(path: Path, task_ids: list[str]) -> set[str]:
    """Those of ``task_ids`` the memory file at ``path`` holds (opened read-only)."""
    from acr_cli.memory import Memory

    other = Memory.open(path, read_only=True)
    try:
        return set(other.live_task_ids(task_ids))
    finally:
        other.close()
