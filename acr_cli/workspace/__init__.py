"""Checkpoint a git work tree before an attempt and undo everything a failed one did.

A checkpoint is everything a failed attempt could leave behind: the files (tracked, untracked and
small ignored ones, with exact bytes and permission bits), the index, HEAD and its branch, the
branches, tags and stash entries, and the repository's own control files (``.git/config``,
hooks, ``info/``). It is kept in acr's data directory, out of the attempt's reach, until the
attempt ends; ``acr recover`` finishes the rollback of a run that was killed.

Modules, one per part:

* :mod:`.git`: the guarded runner every git command goes through (no hooks, fsmonitor, filters,
  signing, replace objects; ``GIT_DIR``/``GIT_WORK_TREE`` pinned; a time limit).
* :mod:`.store`: where checkpoints live (one folder per worktree, its own object directory).
* :mod:`.control`: ``.git/config``, ``config.worktree``, ``hooks/``, ``info/``, byte for byte.
* :mod:`.snapshot`: the work tree and the ignored files as trees, and what a tree cannot record.
* :mod:`.refs`: HEAD, branches, tags and stash entries.
* :mod:`.kept`: where a rolled-back attempt's work is kept, redacted: a repository of acr's own, which no
  push of the project reaches.
* :mod:`.checkpoint`: the :class:`Checkpoint` record.
* :mod:`.rollback`: the rollback, in an order nothing the attempt planted can subvert.
* :mod:`.core`: :class:`Workspace` (open, lock, checkpoint, restore, drop) and
  :meth:`Workspace.attempt`, the guard around one attempt.

Nothing an attempt does to the tree stops a rollback (a name git refuses, an emptied index, a planted
attribute, a 2 TB sparse file: see :mod:`.snapshot`); repositories, work trees and object-store caches it
made are moved aside or removed (:mod:`.rollback`, :mod:`.control`).

Not covered (docs/safety.md says more): ignored entries over the budget,
nested repositories that were there before (never deleted or rewritten), writes outside the project,
committed history the attempt deletes with its reflog and prunes, an operation in progress (refused up front).
One ``acr run`` per work tree at a time (a lock file in the git directory enforces it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acr_cli.workspace.checkpoint import Checkpoint
    from acr_cli.workspace.core import NO_GIT_HINT, Guard, Workspace
    from acr_cli.workspace.rollback import RestoreReport

# loaded when first asked for: ``acr route`` names a project through :mod:`.git` alone and
# should not pay for the checkpoint machinery it never uses
_EXPORTS = {"Checkpoint": "checkpoint", "NO_GIT_HINT": "core", "Guard": "core", "Workspace": "core",
            "RestoreReport": "rollback"}
__all__ = ["NO_GIT_HINT", "Checkpoint", "Guard", "RestoreReport", "Workspace"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
