"""Finish the rollback of an ``acr run`` that was killed mid-attempt: what ``acr recover`` does.

:func:`recover` restores (or discards) the checkpoints a killed run left in one work tree and returns a
:class:`Recovery` that the command renders, as text or JSON. It refuses, changing nothing, while a process of
the killed run is alive (unless asked to end them) and when restoring would revert work a later run kept."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acr_cli.errors import AcrError, WorkspaceError
from acr_cli.workspace.rollback import RestoreReport

if TYPE_CHECKING:
    from acr_cli.workspace.core import Workspace


@dataclass
class Recovery:
    """What a recovery found and did in the work tree at ``root``."""

    root: Path
    checkpoints: list[str]  # the interrupted checkpoints found, oldest first
    restored: str | None = None  # the checkpoint the work tree was restored from
    saved_as: str | None = None  # where acr's store keeps what the work tree held before
    discarded: list[str] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)  # the killed run's processes that were ended
    report: RestoreReport | None = None

    @property
    def dealt_with(self) -> list[str]:
        """The checkpoints dealt with (restored or discarded)."""
        return self.discarded + ([self.restored] if self.restored else [])

    @property
    def left(self) -> list[str]:
        """The checkpoints still there after a restore."""
        return [n for n in self.checkpoints if n != self.restored]

    def as_json(self) -> dict[str, Any]:
        return {"root": str(self.root), "checkpoints": self.checkpoints, "restored": self.restored,
                "saved_as": self.saved_as, "discarded": self.discarded, "killed": self.killed,
                "report": _report_json(self.report) if self.report else None}


def _report_json(report: RestoreReport) -> dict[str, Any]:
    return {"paths": report.paths, "side_effects": report.side_effects(), "stale_locks": report.stale_locks,
            "refs_put_back": report.refs_put_back, "refs_put_aside": report.refs_put_aside,
            "refs_taken": report.refs_taken, "nested": report.nested, "ignored_put_aside": report.removed_ignored,
            "ignored_left": report.ignored_left, "put_aside_in": str(report.put_aside) if report.put_aside else None}


def recover(project: Path, name: str | None = None, list_only: bool = False, discard: bool = False,
            kill: bool = False, force: bool = False) -> Recovery:
    """Restore the work tree at ``project`` from checkpoint ``name`` (default: the newest), then delete it;
    with ``discard``, delete the checkpoint(s) (all, when no name is given) and leave the tree as it is;
    with ``list_only``, only find them. ``kill`` ends the killed run's processes that are still alive;
    ``force`` restores even over work a later run kept (which is kept in acr's store first, like all the
    tree holds). Holds the work tree's lock throughout: no run is active, so every checkpoint left is an
    interrupted one."""
    ws = _open(project)
    ws.lock()
    try:
        found = ws.interrupted_checkpoints()
        chosen = _choose(ws, found, name)
        out = Recovery(ws.root, found)
        if list_only or not found:
            return out
        out.killed = _end_survivors(ws, found, kill)
        if discard:
            for n in found if name is None else [chosen]:
                ws.drop(n)
                out.discarded.append(n)
        else:
            _restore(ws, chosen, force, out)
        return out
    finally:
        ws.unlock()


def _open(project: Path) -> Workspace:
    from acr_cli.workspace import Workspace
    from acr_cli.workspace.core import NO_GIT_HINT

    try:
        return Workspace.open(project)
    except WorkspaceError as e:  # not the run's hint (--no-rollback): nothing here to recover
        if e.hint and e.hint != NO_GIT_HINT:  # a repository git refuses (another owner...): its own fix
            raise
        raise AcrError(e.message, hint="run `acr recover` in the git repository (or pass -C DIR) where the "
                       "killed `acr run` worked") from None


def _choose(ws: Workspace, found: list[str], name: str | None) -> str | None:
    """The checkpoint named (a ref name as older versions printed it is taken too), else the newest."""
    if name is None:
        return found[-1] if found else None
    name = name.rsplit("/", 1)[-1]  # refs/acr/checkpoints/<name>
    if name not in found:
        raise AcrError(f"no interrupted checkpoint {name!r} in {ws.root}",
                       hint="`acr recover --list` shows the ones there are")
    return name


def _end_survivors(ws: Workspace, found: list[str], kill: bool) -> list[int]:
    """Refuse while a process of the killed run lives (it could undo the recovery), or with ``kill`` end
    them; returns the pids ended."""
    from acr_cli import process
    from acr_cli.workspace import race

    alive = ws.survivors(found) + race.survivors(ws)  # a killed race's arms ran under markers of their own
    if alive and not kill:
        raise AcrError(
            "processes of the killed run are still alive and could undo the recovery: "
            + "; ".join(f"pid {pid} ({cmd})" for pid, cmd in alive),
            hint="end them with `acr recover --kill` (or `kill PID`), then recover")
    if not alive:
        return []
    still = process.kill_pids([pid for pid, _ in alive])
    if still:
        raise AcrError(f"could not end pid(s) {', '.join(map(str, still))}",
                       hint="end them by hand (`kill -9 PID`), then run `acr recover` again")
    return [pid for pid, _ in alive]


def _restore(ws: Workspace, chosen: str, force: bool, out: Recovery) -> None:
    """Restore from ``chosen`` and delete it; what the tree held is kept first under ``recovered/<name>``
    (``-2``, ``-3``... when a recovery that stopped half way saved one already: both are kept)."""
    later = None if force else ws.kept_since(chosen)
    if later is not None:  # restoring would revert a later run's kept work
        raise AcrError(
            f"a later `acr run` kept its work here (attempt {later[0]}, {_when(later[1])}) after checkpoint "
            f"{chosen} was taken: restoring it would revert that work; nothing was changed",
            hint=f"`acr recover --discard {chosen}` deletes the checkpoint and leaves the work tree as it "
                 "is; `acr recover --force` restores anyway (what the tree holds is kept in acr's store first)")
    cp = ws.load_checkpoint(chosen)
    saved, n = f"recovered/{cp.name}", 1
    while ws.kept.exists(saved):
        n += 1
        saved = f"recovered/{cp.name}-{n}"
    out.report = ws.restore(cp, keep_as=saved, what=f"the work tree `acr recover` found after {cp.name}",
                            recovering=True)
    out.saved_as = out.report.saved_as
    ws.drop(cp)
    out.restored = chosen
    from acr_cli.workspace import race

    race.remove_leftovers(ws)  # a killed race's worktrees and its arms' checkpoints


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))
