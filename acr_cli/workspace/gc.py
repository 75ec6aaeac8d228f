"""What acr leaves behind to be safe, pruned once it is old: ``acr gc``, and now and then after a run.

A passing attempt that changed your ignored files saves your versions in ``.git/acr/put-aside/<task>-<n>/``;
what an attempt did to branches, tags, the stash and HEAD is kept under ``refs/acr/put-aside/<task>-<n>/``;
the work tree before a kept attempt that changed your uncommitted work under ``refs/acr/before/<task>-<n>``;
a failed attempt's work in acr's store (``<data>/checkpoints/<worktree>/attempts``, :mod:`.kept`). Each is
there so that a person can take something back, and nobody does after weeks: they only grow.

**The age: 30 days** (:data:`DEFAULT_AGE_DAYS`). What is kept is what a person notices missing; that
happens within a working cycle (a sprint, a holiday: two or three weeks), and 30 days is what git itself
gives unreachable work (``gc.reflogExpireUnreachable``) before its own gc may take it.

How old an item is: the UTC time in its name (``<task>`` is ``YYYYMMDD-HHMMSS-...``, when the task began);
without one, a folder's modification time, a ref's object's date, a kept attempt's commit date.

Never pruned: anything of a checkpoint still in acr's store, of any worktree (a killed run's, which
``acr recover`` needs: its keep-alive ref ``refs/acr/keep/<name>``, the put-aside folders and refs of that name, and the
checkpoint's own files and objects, which this module never touches), and ``refs/acr/checkpoints/*``
(a killed run's checkpoint in the layout of acr before its store: only a person can recover it).

After a run, :func:`maybe_prune` prunes with the default age at most once a day per work tree (a stamp file
in the worktree's store folder): a few git commands, skipped on the other runs of the day.
"""

from __future__ import annotations

import calendar
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from acr_cli.errors import WorkspaceError, printable

DEFAULT_AGE_DAYS = 30
AUTO_EVERY_S = 24 * 3600  # the automatic prune after a run: at most once a day per work tree
PRUNED_REFS = ("refs/acr/put-aside/", "refs/acr/before/", "refs/acr/keep/", "refs/acr/attempts/")
_STAMP = re.compile(r"^(\d{8})-(\d{6})(?:-|$)")
_STAMP_FILE = "last-gc"


@dataclass
class Pruned:
    """What a prune removed (or, dry, would remove), and what it left for a pending recovery."""

    older_than_days: float
    dry_run: bool = False
    folders: list[str] = field(default_factory=list)  # .git/acr/put-aside/<name>
    refs: list[str] = field(default_factory=list)  # refs/acr/...
    attempts: list[str] = field(default_factory=list)  # kept failed attempts, by name (race lanes' too)
    lane_stores: int = 0  # stores of race lanes that are gone and keep nothing more, removed whole
    left_for_recovery: list[str] = field(default_factory=list)  # live checkpoints whose items were left

    @property
    def count(self) -> int:
        return len(self.folders) + len(self.refs) + len(self.attempts)

    def to_json(self) -> dict:
        return {"older_than_days": self.older_than_days, "dry_run": self.dry_run, "put_aside_folders": self.folders,
                "refs": self.refs, "kept_attempts": self.attempts, "left_for_recovery": self.left_for_recovery,
                "race_lane_stores": self.lane_stores}

    def line(self) -> str:
        """One line for people: what went (or would go)."""
        verb = "would remove" if self.dry_run else "removed"
        parts = [f"{len(self.folders)} put-aside folder(s)", f"{len(self.refs)} ref(s) under refs/acr",
                 f"{len(self.attempts)} kept failed attempt(s)"] + (
                    [f"{self.lane_stores} finished race lane store(s)"] if self.lane_stores else [])
        return f"{verb} {', '.join(parts)} older than {self.older_than_days:g} days"


def name_time(name: str) -> float | None:
    """The UTC time a ``<task>-<n>`` name begins with (a task id's), as a Unix time; None without one."""
    m = _STAMP.match(name)
    if not m:
        return None
    try:
        return float(calendar.timegm(time.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S")))
    except ValueError:
        return None


def prune(ws, older_than_days: float = DEFAULT_AGE_DAYS, dry_run: bool = False, now: float | None = None) -> Pruned:
    """Remove from ``ws`` (a locked :class:`~acr_cli.workspace.Workspace`) what acr kept longer ago than
    ``older_than_days``: put-aside folders, refs under :data:`PRUNED_REFS`, kept failed attempts. ``dry_run``:
    only say what would go."""
    now = time.time() if now is None else now
    cutoff = now - older_than_days * 86400
    out = Pruned(older_than_days, dry_run)
    live = set(ws.interrupted_checkpoints()) | live_checkpoints(ws.store.dir.parent)

    def needed(name: str) -> bool:  # a live checkpoint's own, or one of its "-2" put-aside folders
        hit = next((c for c in live if name == c or name.startswith(c + "-")), None)
        if hit and hit not in out.left_for_recovery:
            out.left_for_recovery.append(hit)
        return hit is not None

    out.folders = _old_folders(ws.common_dir / "acr" / "put-aside", cutoff, needed)
    out.refs = _old_refs(ws, cutoff, needed)
    out.attempts = [n for stamp, n in ws.kept._listing() if stamp < cutoff]
    lanes = _old_lane_attempts(ws, cutoff)
    out.attempts += [n for _, names in lanes for n in names]
    if not dry_run:
        for folder in out.folders:
            shutil.rmtree(ws.common_dir / "acr" / "put-aside" / folder, ignore_errors=True)
        if out.refs:
            lines = "".join(f"delete {r}\n" for r in out.refs).encode("utf-8", "surrogateescape")
            ws.git("update-ref", "--stdin", input=lines, repo_objects=True)
        mine = [n for n in out.attempts if all(n not in names for _, names in lanes)]
        if mine:
            ws.kept.prune(keep=0, names=mine)
        out.lane_stores = _prune_lanes(lanes)
    else:
        out.lane_stores = sum(1 for store, names in lanes if _gone_with(store, names))
    return out


def _old_lane_attempts(ws, cutoff: float) -> list[tuple[object, list[str]]]:
    """The stores of this repository's finished race lanes (each arm checkpoints its lane in a store of its
    own, where a losing arm's work is kept) with their kept attempts older than ``cutoff``."""
    from acr_cli.workspace import race
    from acr_cli.workspace.kept import Kept

    out = []
    for store in race.lane_stores(ws):
        if store.names() or Path(store.root).exists():  # a lane still there, or a checkpoint recover needs
            continue
        kept = Kept(store.dir / "attempts")
        out.append((store, [n for stamp, n in kept._listing() if stamp < cutoff]))
    return out


def _gone_with(store, names: list[str]) -> bool:
    """Whether a lane's store keeps nothing once ``names`` are pruned."""
    from acr_cli.workspace.kept import Kept

    return len(Kept(store.dir / "attempts")._listing()) == len(names)


def _prune_lanes(lanes) -> int:
    """Prune the lanes' old kept attempts; remove a lane's store whole once it keeps nothing. How many went."""
    from acr_cli.workspace.kept import Kept

    gone = 0
    for store, names in lanes:
        if _gone_with(store, names):
            shutil.rmtree(store.dir, ignore_errors=True)
            gone += 1
        elif names:
            Kept(store.dir / "attempts").prune(keep=0, names=names)
    return gone


def live_checkpoints(base: Path) -> set[str]:
    """The checkpoints in every worktree's store: the refs under refs/acr and the put-aside folder are the
    repository's, shared by its linked worktrees, and another worktree's killed run may need them."""
    try:
        return {f.stem for store in base.iterdir() if store.is_dir() for f in store.glob("*.json")}
    except OSError:
        return set()


def _old_folders(base: Path, cutoff: float, needed) -> list[str]:
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for e in entries:
        if not e.is_dir(follow_symlinks=False) or needed(e.name):
            continue
        stamp = name_time(e.name)
        if stamp is None:
            stamp = e.stat(follow_symlinks=False).st_mtime
        if stamp < cutoff:
            out.append(e.name)
    return out


def _old_refs(ws, cutoff: float, needed) -> list[str]:
    raw = ws.git("for-each-ref", "--format=%(refname)%00%(creatordate:unix)", *PRUNED_REFS, repo_objects=True)
    out = []
    for line in raw.decode("utf-8", "surrogateescape").split("\n"):
        if not line:
            continue
        ref, _, date = line.partition("\0")
        prefix = next(p for p in PRUNED_REFS if ref.startswith(p))
        name = ref[len(prefix):].split("/", 1)[0]
        if needed(name):
            continue
        stamp = name_time(name)
        if stamp is None:
            stamp = float(date) if date.strip().isdigit() else 0.0  # no date (a blob): as old as can be
        if stamp < cutoff:
            out.append(ref)
    return out


def maybe_prune(ws, now: float | None = None) -> Pruned | None:
    """The automatic prune after a run (the default age), when the last one here is a day old or more;
    None when it was not due. Never raises: a prune that fails is tried again the next day."""
    now = time.time() if now is None else now
    stamp = ws.store.dir / _STAMP_FILE
    try:
        if now - stamp.stat().st_mtime < AUTO_EVERY_S:
            return None
    except OSError:
        pass
    try:
        ws.store.prepare()
        stamp.touch()
        os.utime(stamp, (now, now))
        return prune(ws, now=now)
    except (WorkspaceError, OSError):
        return None


def describe(p: Pruned) -> list[str]:
    """The names a prune removed, for ``acr gc`` to list (escaped: a name may hold any byte)."""
    return ([f".git/acr/put-aside/{printable(f)}" for f in p.folders] + [printable(r) for r in p.refs]
            + [f"kept attempt {printable(a)}" for a in p.attempts])
