"""Race worktrees: one git worktree per raced arm, made from the user's current state, removed whole.

A race worktree is a linked ``git worktree`` of the user's repository, under acr's data directory (never inside
the project), detached at the user's HEAD. Its files and its index are the checkpoint's tree: HEAD plus the
user's staged, unstaged and untracked (non-ignored) work, exactly as a sequential attempt would find them; so an
agent's ``git status`` there shows the user's uncommitted work as staged. Ignored files git does not carry (a
``.env``) are copied in when they match a ``race_copy`` glob.

The user's ``.git/config``, refs, index and HEAD are never written: the worktree's own HEAD and index live in
``.git/worktrees/<name>/``, which :func:`remove` deletes with the worktree (``git worktree prune``). The objects
it needs (the checkpoint's tree) are copied into the repository's object store, where git's own gc prunes them.

Where it can, a lane is not a checkout but a copy-on-write overlay of the user's repository
(:mod:`acr_cli.workspace.overlay`): made in no time whatever the project's size, with the user's ignored files
and index as they are; ``race_lanes`` (auto, overlay, worktree) chooses, and auto falls back to worktrees where
overlays cannot be mounted (the overlay module says when).

The winner's change (:func:`final_tree`, :func:`apply`) is carried back as trees, not as a patch: every path
that differs between the base tree and the winner's final tree is written from the final tree (bytes, mode,
symlink) or deleted, so binary files, deletions and mode changes come across exactly.
"""

from __future__ import annotations

import fnmatch
import os
import secrets
import shutil
import stat
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from acr_cli.errors import WorkspaceError
from acr_cli.workspace import overlay, refs
from acr_cli.workspace.checkpoint import Checkpoint
from acr_cli.workspace.core import Workspace
from acr_cli.workspace.git import Git, alternate
from acr_cli.workspace.snapshot import ATTEMPT_FILE_MAX, nul_join
from acr_cli.workspace.store import Store

PREFIX = "acr-race-"  # every race worktree's folder name starts with it (and its admin folder's)


@dataclass(frozen=True)
class RaceTree:
    """One race worktree: where its files are (``root``), its admin folder in the repository (``git_dir``)."""

    root: Path
    git_dir: Path
    base: str  # the tree it was made from (the checkpoint's)
    cow: Path | None = None  # an overlay lane's folder of its upper and work layers (None: a worktree)

    @property
    def alternates(self) -> dict[str, str]:
        """Environment that lets the user's repository read this lane's objects (an overlay lane keeps its
        own; a worktree shares the repository's)."""
        return {"GIT_ALTERNATE_OBJECT_DIRECTORIES": alternate(self.git_dir / "objects")} if self.cow else {}

    def git(self, common_dir: Path) -> Git:
        """The guarded git runner for this lane (a worktree: the repository's object store; an overlay: its
        own), with no acr store."""
        return Git(self.root, self.git_dir, self.git_dir if self.cow else common_dir)


def races_dir(ws: Workspace) -> Path:
    """Where this repository's race worktrees are made: inside its folder of acr's checkpoint store."""
    return ws.store.dir / "race"


def create(ws: Workspace, cp: Checkpoint, slot: int, copy: tuple[str, ...] = ()) -> RaceTree:
    """A worktree for race slot ``slot`` holding exactly the checkpoint's tree (see the module docstring); the
    ignored files of the user's work tree matching a ``copy`` glob are copied in. Needs a commit (HEAD)."""
    return create_all(ws, cp, [slot], copy, "worktree")[0][0]


def create_all(ws: Workspace, cp: Checkpoint, slots: list[int], copy: tuple[str, ...] = (),
               lanes: str = "auto") -> tuple[list[RaceTree], str | None]:
    """One lane per slot (:func:`create`): overlays when ``lanes`` and this machine allow (the overlay module),
    else worktrees, registered one after the other, their files written side by side (writing a large tree
    is most of the cost). Also returns why the lanes are not overlays (None: they are)."""
    if cp.head is None:
        raise WorkspaceError("a race needs a commit to start its worktrees from", hint="commit once, then race")
    parent = races_dir(ws)
    parent.mkdir(parents=True, exist_ok=True)
    ws.publish()  # the checkpoint's tree into the repository's objects: a worktree is made from it, and the
    # winner's change is read against it
    why = lane_problem(ws, lanes)
    if why is None:
        try:
            return _overlays(ws, cp, slots, parent), None
        except overlay.OverlayError as e:
            if lanes == "overlay":
                raise WorkspaceError(f"race_lanes = \"overlay\": {e.strerror or e}",
                                     hint='set race_lanes = "auto" to race in worktrees here') from None
            why = str(e.strerror or e)
    elif lanes == "overlay":
        raise WorkspaceError(f"race_lanes = \"overlay\": {why}", hint='set race_lanes = "auto" to race in '
                                                                      "worktrees here")
    return _worktrees(ws, cp, slots, parent, copy), why


def lane_problem(ws: Workspace, lanes: str = "auto") -> str | None:
    """Why this repository's race lanes would not be overlays (None: they would, if the kernel agrees)."""
    why = overlay.problem(ws.root, ws.git_dir, ws.common_dir, lanes)
    if why is None and _inside_repo(races_dir(ws), ws.root):
        why = "acr's data directory is inside the repository"
    if why is None and not overlay.nameable(races_dir(ws)):
        why = f"acr's data directory's path holds a character an overlay mount cannot name ({races_dir(ws)})"
    return why


def _inside_repo(path: Path, root: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def _overlays(ws: Workspace, cp: Checkpoint, slots: list[int], parent: Path) -> list[RaceTree]:
    """Overlay lanes of the user's repository, mounted in acr's own namespace (entered here, once)."""
    overlay.enter()
    made: list[RaceTree] = []
    try:
        for slot in slots:
            root = parent / f"{PREFIX}{secrets.token_hex(4)}-{slot}"
            cow = root.with_name(root.name + ".cow")
            made.append(RaceTree(root, root / ".git", cp.tree, cow))
            overlay.mount(ws.root, cow / "upper", cow / "work", root)
    except overlay.OverlayError:
        remove_all(ws, made)
        raise
    return made


def _worktrees(ws: Workspace, cp: Checkpoint, slots: list[int], parent: Path,
               copy: tuple[str, ...]) -> list[RaceTree]:
    """Worktree lanes: registered one after the other, their files written side by side."""
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


def final_tree(tree: RaceTree, common_dir: Path) -> tuple[str, list[str]]:
    """The lane's files as a tree, and the lane's :func:`oversized` files, left out of it as ignored files are.
    Read with a copy of the lane's own index so that files git already checked out are not read again; the
    tree's new objects go to the user's repository (``common_dir``), where :func:`apply` reads them (with the
    lane's own objects, for an overlay lane). The copy keeps the index's modification time: git trusts an
    entry's size and time only when the file is older than the index, so a same-size edit made in the second
    the lane was written is still read (a fresh time would hide it, and the winner's change with it)."""
    g = tree.git(common_dir)
    fd, idx = tempfile.mkstemp(prefix="acr-race-index-")
    os.close(fd)
    try:
        index = tree.git_dir / "index"
        if index.exists():
            shutil.copy2(index, idx)
        else:
            os.unlink(idx)
        env = {"GIT_INDEX_FILE": idx, **tree.alternates}
        if tree.cow is not None:
            env["GIT_OBJECT_DIRECTORY"] = str(common_dir / "objects")
        if not index.exists():
            g("read-tree", tree.base, env=env)
        huge = oversized(tree, g, env)
        g("add", "-A", "--ignore-errors", "--", ".", *(f":(exclude,literal){p}" for p in huge), env=env, check=False)
        return g("write-tree", env=env).decode().strip(), huge
    finally:
        if os.path.exists(idx):
            os.unlink(idx)


def oversized(tree: RaceTree, g: Git, env: dict) -> list[str]:
    """The lane's new or changed files over a sequential attempt's budget of one file (``truncate -s 2T``): never
    read back (hashing them would stop the race for hours), so the winner's change leaves them out, as it
    leaves out ignored files; :func:`final_tree` keeps the base's version of such a path."""
    raw = g("ls-files", "-z", "--others", "--modified", "--exclude-standard", env=env, check=False)
    out = []
    for path in sorted(set(raw.decode("utf-8", "surrogateescape").split("\0")) - {""}):
        try:
            st = os.lstat(tree.root / path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size > ATTEMPT_FILE_MAX:
            out.append(path)
    return out


def changed_paths(ws: Workspace, base: str, final: str, env: dict | None = None) -> list[tuple[str, str]]:
    """(status, path) for every path that differs between two trees: A, M, T or D (``env``: a lane's
    :attr:`RaceTree.alternates`, where the final tree's objects may be)."""
    raw = ws.git("diff-tree", "-r", "-z", "--no-renames", "--name-status", base, final, env=env,
                 repo_objects=True)
    parts = raw.decode("utf-8", "surrogateescape").split("\0")
    return [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2) if parts[i]]


def main_changed(ws: Workspace, cp: Checkpoint) -> list[str]:
    """The paths of the user's work tree that differ from the checkpoint (ignored files aside): what an arm
    wrote outside its worktree, when nothing else may touch the work tree during a race."""
    return [path for _, path in ws.changes(cp)]


def apply(ws: Workspace, base: str, final: str, alternates: dict | None = None,
          lane: Path | None = None) -> list[tuple[str, str]]:
    """Write the change from ``base`` to ``final`` into the user's work tree: added and changed paths from
    ``final`` (their bytes, mode, symlink), deleted paths removed (and folders they leave empty). The user's
    index is not touched, as a sequential attempt that passes leaves it. ``alternates``: the winning lane's
    :attr:`RaceTree.alternates`. ``lane``: the winning lane's root, whose files are copied as they are (the
    bytes the arm wrote: git's checkout would convert them by the repository's attributes, ``eol=crlf``,
    ``ident``); a path it cannot copy is checked out from ``final``. Returns what changed."""
    changes = changed_paths(ws, base, final, alternates)
    writes = [p for s, p in changes if s != "D"]
    for status, path in changes:
        target = ws.root / path
        if status == "D" or status == "T":
            _remove(ws.root, target)
    if lane is not None:
        writes = [p for p in writes if not _copy_file(lane / p, ws.root / p)]
    if writes:
        fd, idx = tempfile.mkstemp(prefix="acr-race-apply-")
        os.close(fd)
        os.unlink(idx)
        try:
            env = {"GIT_INDEX_FILE": idx, **(alternates or {})}
            ws.git("read-tree", final, env=env, repo_objects=True)
            ws.git("checkout-index", "-f", "-z", "--stdin", env=env, input=nul_join(writes), repo_objects=True)
        finally:
            if os.path.exists(idx):
                os.unlink(idx)
    return changes


def _copy_file(src: Path, dest: Path) -> bool:
    """Make ``dest`` a copy of the lane's file or symlink ``src`` (bytes and mode); False when ``src`` is
    neither (a nested repository's folder) or cannot be read."""
    try:
        st = os.lstat(src)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        old = os.lstat(dest) if os.path.lexists(dest) else None
        if old is not None and stat.S_ISDIR(old.st_mode):
            shutil.rmtree(dest)
        elif old is not None and (stat.S_ISLNK(old.st_mode) or stat.S_ISLNK(st.st_mode)):
            dest.unlink()  # (never written through: a symlink of the user's may point anywhere)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dest)
            return True
        shutil.copyfile(src, dest)
        os.chmod(dest, _mode(st.st_mode, old.st_mode if old is not None and stat.S_ISREG(old.st_mode) else None))
        return True
    except OSError:
        return False


def _mode(lane: int, user: int | None) -> int:
    """The mode of a file written from the lane: a file of the user's keeps its permissions, only its executable
    bits follow the lane's (all git carries; a worktree lane's files have git's modes); a new file the lane's."""
    if user is None:
        return stat.S_IMODE(lane)
    user = stat.S_IMODE(user)
    return user | ((user & 0o444) >> 2) if lane & stat.S_IXUSR else user & ~0o111


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
    """Remove these lanes (:func:`remove`), their files side by side: an overlay is unmounted and its layers
    deleted (the user's files under it are untouched), a worktree deleted and unregistered."""
    def gone(tree: RaceTree) -> None:
        if tree.cow is not None:
            overlay.unmount(tree.root)
            overlay.remove(tree.cow)
            _rmdir(tree.root)
            return
        shutil.rmtree(tree.root, ignore_errors=True)
        shutil.rmtree(tree.git_dir, ignore_errors=True)

    end_lane_processes([tree.root for tree in made])
    with ThreadPoolExecutor(max_workers=len(made) or 1) as pool:
        list(pool.map(gone, made))
    if any(tree.cow is None for tree in made):
        ws.git("worktree", "prune", check=False)


def end_lane_processes(roots: list[Path]) -> list[int]:
    """End the processes still working in these lanes (their working or root directory in one): a daemon an
    arm started that left its session and cleared its environment is out of the reaper's sight, but not out of
    its lane; it would outlive acr (and keep an overlay lane's namespace alive). Returns the ones that would
    not end."""
    from acr_cli.process import marked

    lanes = tuple(os.path.realpath(root) for root in roots)
    if not lanes or not os.path.isdir("/proc/self"):
        return []
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        for link in ("cwd", "root"):
            try:
                where = os.readlink(f"/proc/{pid}/{link}")
            except OSError:
                continue
            if any(where == lane or where.startswith(lane + os.sep) for lane in lanes):
                found.append(int(pid))
                break
    return marked.kill_pids(found, grace=1.0) if found else []


def _rmdir(path: Path) -> None:
    """Remove an overlay's mount point, once unmounted (it is an empty folder); never what a mount shows."""
    if os.path.ismount(path):
        return
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError:  # not empty: a folder of that name written while no overlay was mounted there
        shutil.rmtree(path, ignore_errors=True)


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
    """Race lanes of this repository still on disk (a race that was killed): worktrees, overlay mount points
    and overlay layers."""
    parent = races_dir(ws)
    return sorted(p for p in parent.glob(f"{PREFIX}*") if p.is_dir()) if parent.is_dir() else []


def drop_checkpoints(ws: Workspace, stores: list[Store]) -> None:
    """Drop the checkpoints left in these lanes' stores, with their keep-alive refs (a worktree lane's are the
    repository's): an arm whose attempt ended abnormally leaves its own, which nothing can recover once the
    lane is gone. What the arms' rollbacks kept stays in acr's store."""
    for store in stores:
        for name in store.names():
            refs.drop_keep_alive(ws.git, name)
            store.delete(name)


def _drop_orphaned_keep_alive(ws: Workspace) -> None:
    """Drop the keep-alive refs no checkpoint in acr's store names: an arm killed between writing its
    checkpoint's ref and saving the checkpoint leaves one (a worktree lane's refs are the repository's)."""
    from acr_cli.workspace.gc import live_checkpoints

    live = live_checkpoints(ws.store.dir.parent)
    raw = ws.git("for-each-ref", "--format=%(refname)", refs.KEEP_REFS, repo_objects=True)
    for ref in raw.decode("utf-8", "surrogateescape").split():
        name = ref[len(refs.KEEP_REFS):]
        if name not in live:
            refs.drop_keep_alive(ws.git, name)


def remove_leftovers(ws: Workspace) -> int:
    """Remove what a killed race left (``acr recover``, and the next race): its worktrees and git's registration
    of them, its overlays' layers, and its arms' checkpoints with their keep-alive refs (what those arms'
    rollbacks kept stays in acr's store). How many lanes went."""
    stores = lane_stores(ws)
    drop_checkpoints(ws, stores)
    found = leftovers(ws)
    if stores or found:
        _drop_orphaned_keep_alive(ws)
    lanes = 0
    for root in found:
        if root.name.endswith(".cow"):
            overlay.remove(root)
            continue
        lanes += 1
        overlay.unmount(root)
        if (root / ".git").is_file():
            try:
                remove(ws, RaceTree(root, _admin_dir(ws, root), ""))
                continue
            except (OSError, WorkspaceError):
                pass
        _rmdir(root)
    ws.git("worktree", "prune", check=False)
    return lanes
