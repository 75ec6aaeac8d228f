"""Race worktrees: one git worktree per raced arm, made from the user's current state, removed whole.

A race worktree is a linked ``git worktree`` of the user's repository, under acr's data directory (never inside
the project), detached at the user's HEAD. Its files and its index are the checkpoint's tree: HEAD plus the
user's staged, unstaged and untracked (non-ignored) work, exactly as a sequential attempt would find them; so an
agent's ``git status`` there shows the user's uncommitted work as staged. Ignored files git does not carry (a
``.env``) are copied in when they match a ``race_copy`` glob.

The user's ``.git/config``, refs, index and HEAD are never written: the worktree's own HEAD and index live in
``.git/worktrees/<name>/``, which :func:`remove` deletes with the worktree (``git worktree prune``). The objects
it needs (the checkpoint's tree) are copied into the repository's object store, where git's own gc prunes them.

The winner's change (:func:`final_tree`, :func:`apply`) is carried back as trees, not as a patch: every path
that differs between the base tree and the winner's final tree is written from the final tree (bytes, mode,
symlink) or deleted, so binary files, deletions and mode changes come across exactly.
"""

from __future__ import annotations

import fnmatch
import os
import secrets
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from acr_cli.errors import WorkspaceError
from acr_cli.workspace import refs
from acr_cli.workspace.checkpoint import Checkpoint
from acr_cli.workspace.core import Workspace
from acr_cli.workspace.git import Git
from acr_cli.workspace.snapshot import nul_join
from acr_cli.workspace.store import Store

PREFIX = "acr-race-"  # every race worktree's folder name starts with it (and its admin folder's)


@dataclass(frozen=True)
class RaceTree:
    """One race worktree: where its files are (``root``), its admin folder in the repository (``git_dir``)."""

    root: Path
    git_dir: Path
    base: str  # the tree it was made from (the checkpoint's)

    def git(self, common_dir: Path) -> Git:
        """The guarded git runner for this worktree (the repository's object store, no acr store)."""
        return Git(self.root, self.git_dir, common_dir)


def races_dir(ws: Workspace) -> Path:
    """Where this repository's race worktrees are made: inside its folder of acr's checkpoint store."""
    return ws.store.dir / "race"


def create(ws: Workspace, cp: Checkpoint, slot: int, copy: tuple[str, ...] = ()) -> RaceTree:
    """A worktree for race slot ``slot`` holding exactly the checkpoint's tree (see the module docstring); the
    ignored files of the user's work tree matching a ``copy`` glob are copied in. Needs a commit (HEAD)."""
    return create_all(ws, cp, [slot], copy)[0]


def create_all(ws: Workspace, cp: Checkpoint, slots: list[int], copy: tuple[str, ...] = ()) -> list[RaceTree]:
    """One worktree per slot (:func:`create`): registered one after the other, their files written side by
    side (writing a large tree is most of the cost)."""
    if cp.head is None:
        raise WorkspaceError("a race needs a commit to start its worktrees from", hint="commit once, then race")
    ws.publish()  # the checkpoint's tree into the repository's objects, where the worktree reads it
    parent = races_dir(ws)
    parent.mkdir(parents=True, exist_ok=True)
    made = []
    for slot in slots:
        root = parent / f"{PREFIX}{secrets.token_hex(4)}-{slot}"
        ws.git("worktree", "add", "--detach", "--no-checkout", str(root), cp.head)
        made.append(RaceTree(root, _admin_dir(ws, root), cp.tree))
    with ThreadPoolExecutor(max_workers=len(made) or 1) as pool:
        list(pool.map(lambda tree: _fill(ws, tree, copy), made))
    return made


def _fill(ws: Workspace, tree: RaceTree, copy: tuple[str, ...]) -> None:
    """Write the worktree's files and index: the base tree, then the ignored files ``copy`` names."""
    g = tree.git(ws.common_dir)
    g("read-tree", tree.base)
    g("checkout-index", "-a", "-f", "-u")
    _copy_ignored(ws.root, tree.root, copy)


def _admin_dir(ws: Workspace, root: Path) -> Path:
    """The ``.git/worktrees/<name>`` folder of the worktree at ``root`` (named in its ``.git`` file)."""
    text = (root / ".git").read_text().strip()
    if not text.startswith("gitdir:"):
        raise WorkspaceError(f"{root}/.git is not a linked worktree's")
    return Path(text.split(":", 1)[1].strip())


def _copy_ignored(src: Path, dest: Path, globs: tuple[str, ...]) -> list[str]:
    """Copy the files under ``src`` whose relative path (or name) matches one of ``globs`` into ``dest``, when
    ``dest`` has no such file (git carried it); ``.git`` folders are never looked into. Returns what was copied."""
    if not globs:
        return []
    copied = []
    for parent, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            rel = Path(parent, name).relative_to(src).as_posix()
            if not any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(name, g) for g in globs):
                continue
            target = dest / rel
            if target.exists() or target.is_symlink():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(parent, name), target, follow_symlinks=False)
            copied.append(rel)
    return copied


def final_tree(tree: RaceTree, common_dir: Path) -> str:
    """The worktree's files as a tree (ignored files aside), read with a copy of its own index so that files
    git already checked out are not read again. The copy keeps the index's modification time: git trusts an
    entry's size and time only when the file is older than the index, so a same-size edit made in the second
    the worktree was written is still read (a fresh time would hide it, and the winner's change with it)."""
    g = tree.git(common_dir)
    fd, idx = tempfile.mkstemp(prefix="acr-race-index-")
    os.close(fd)
    try:
        index = tree.git_dir / "index"
        if index.exists():
            shutil.copy2(index, idx)
        else:
            os.unlink(idx)
        env = {"GIT_INDEX_FILE": idx}
        if not index.exists():
            g("read-tree", tree.base, env=env)
        g("add", "-A", "--ignore-errors", env=env, check=False)
        return g("write-tree", env=env).decode().strip()
    finally:
        if os.path.exists(idx):
            os.unlink(idx)


def changed_paths(ws: Workspace, base: str, final: str) -> list[tuple[str, str]]:
    """(status, path) for every path that differs between two trees: A, M, T or D."""
    raw = ws.git("diff-tree", "-r", "-z", "--no-renames", "--name-status", base, final, repo_objects=True)
    parts = raw.decode("utf-8", "surrogateescape").split("\0")
    return [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i]]


def main_changed(ws: Workspace, cp: Checkpoint) -> list[str]:
    """The paths of the user's work tree that differ from the checkpoint (ignored files aside): what an arm
    wrote outside its worktree, when nothing else may touch the work tree during a race."""
    return [path for _, path in ws.changes(cp)]


def apply(ws: Workspace, base: str, final: str) -> list[tuple[str, str]]:
    """Write the change from ``base`` to ``final`` into the user's work tree: added and changed paths from
    ``final`` (their bytes, mode, symlink), deleted paths removed (and folders they leave empty). The user's
    index is not touched, as a sequential attempt that passes leaves it. Returns what changed."""
    changes = changed_paths(ws, base, final)
    writes = [p for s, p in changes if s != "D"]
    for status, path in changes:
        target = ws.root / path
        if status == "D" or status == "T":
            _remove(ws.root, target)
    if writes:
        fd, idx = tempfile.mkstemp(prefix="acr-race-apply-")
        os.close(fd)
        os.unlink(idx)
        try:
            env = {"GIT_INDEX_FILE": idx}
            ws.git("read-tree", final, env=env, repo_objects=True)
            ws.git("checkout-index", "-f", "-z", "--stdin", env=env, input=nul_join(writes), repo_objects=True)
        finally:
            if os.path.exists(idx):
                os.unlink(idx)
    return changes


def _remove(root: Path, target: Path) -> None:
    """Remove a file (or a folder a file replaces) and the folders it leaves empty, up to ``root``."""
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    parent = target.parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def remove(ws: Workspace, tree: RaceTree) -> None:
    """Remove the worktree whole: its files, its admin folder, and git's registration of it."""
    remove_all(ws, [tree])


def remove_all(ws: Workspace, made: list[RaceTree]) -> None:
    """Remove these worktrees (:func:`remove`), their files side by side."""
    def gone(tree: RaceTree) -> None:
        shutil.rmtree(tree.root, ignore_errors=True)
        shutil.rmtree(tree.git_dir, ignore_errors=True)

    with ThreadPoolExecutor(max_workers=len(made) or 1) as pool:
        list(pool.map(gone, made))
    ws.git("worktree", "prune", check=False)


def lane_stores(ws: Workspace) -> list[Store]:
    """The checkpoint stores of this repository's race worktrees (each arm's attempt checkpoints its worktree
    in a store of its own), found by the worktree each names."""
    parent = str(races_dir(ws)) + os.sep
    found = []
    for folder in ws.store.dir.parent.iterdir() if ws.store.dir.parent.is_dir() else ():
        try:
            root, git_dir = (folder / "worktree").read_text().splitlines()[:2]
        except (OSError, ValueError):
            continue
        if root.startswith(parent):
            found.append(Store(ws.store.dir.parent, Path(root), Path(git_dir)))
    return found


def survivors(ws: Workspace) -> list[tuple[int, str]]:
    """Processes of a killed race's arms still alive (found by their attempts' markers): (pid, command)."""
    from acr_cli import process

    out = []
    for store in lane_stores(ws):
        for name in store.names():
            try:
                marker = store.load(name)[0].get("marker")
            except WorkspaceError:
                continue
            out += process.find_marked(marker) if marker else []
    return out


def leftovers(ws: Workspace) -> list[Path]:
    """Race worktrees of this repository still on disk (a race that was killed)."""
    parent = races_dir(ws)
    return sorted(p for p in parent.glob(f"{PREFIX}*") if p.is_dir()) if parent.is_dir() else []


def remove_leftovers(ws: Workspace) -> int:
    """Remove what a killed race left (``acr recover``, and the next race): its worktrees and git's registration
    of them, and its arms' checkpoints with their keep-alive refs (what those arms' rollbacks kept stays in
    acr's store). How many worktrees went."""
    for store in lane_stores(ws):
        for name in store.names():
            refs.drop_keep_alive(ws.git, name)
            store.delete(name)
    found = leftovers(ws)
    for root in found:
        try:
            tree = RaceTree(root, _admin_dir(ws, root), "")
        except (OSError, WorkspaceError):
            shutil.rmtree(root, ignore_errors=True)
            continue
        remove(ws, tree)
    ws.git("worktree", "prune", check=False)
    return len(found)
