"""Undo everything an attempt did since its checkpoint, in an order nothing it planted can subvert.

1. The control files (``.git/config``, hooks, ``info/``) go back first, with plain file writes: no
   git command runs while the attempt's configuration is in place.
2. Lock files the attempt left (``index.lock``, ``refs/heads/main.lock``) are removed: every process
   of the attempt has ended, so they are stale, and they would break the rollback and the user's
   next commit. So are the caches of the object store it wrote (a commit-graph), and the user's
   index is written back: nothing after this reads the attempt's.
3. Work trees the attempt added (``git worktree add``) and repositories it made in the work tree
   (``git init``, a clone) are moved aside, to ``.git/acr/put-aside/<name>/``; files it made over the
   budget (``truncate -s 2T``) are deleted unread.
4. The paths that differ from the checkpoint are kept, redacted, in acr's store of kept attempts
   (:mod:`.kept`: never in the repository, where a push could carry them), then only those paths are
   rewritten: ignore and attribute rules first (so files ignored before do not look added, and no
   attribute of the attempt's applies to the user's files), then the rest; files git converts get
   their exact bytes, permission bits come back.
5. Deleted branches, tags and stash entries, HEAD and its branch, the index, the kept ignored
   files; then the tree is compared with the checkpoint again, and directories the attempt
   created and left empty go.

A path it must not touch (a repository the attempt made where a file was) or cannot write does
not stop it: every other path is put back, then :class:`~acr_cli.errors.WorkspaceError` names it.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from acr_cli.errors import WorkspaceError
from acr_cli.workspace import control, refs
from acr_cli.workspace.checkpoint import Checkpoint
from acr_cli.workspace.snapshot import (
    ATTEMPT_FILE_MAX,
    ATTEMPT_MAX_BYTES,
    Snapshot,
    Snapshots,
    current_umask,
    folders,
    nul_join,
    unlink_index,
)

RULES = (".gitignore", ".gitattributes")  # put back before the rest (see restore)


@dataclass
class RestoreReport:
    """What a rollback did, for the attempt's log, the run's output and ``--json``."""

    paths: int = 0  # paths of the work tree put back
    saved_as: str | None = None  # where the attempt's work is kept, redacted (acr_cli.workspace.kept), if it changed any
    not_kept: list[str] = field(default_factory=list)  # paths that changed and could not be kept: "<path> (why)"
    refs_put_back: list[str] = field(default_factory=list)  # refs recreated, "stash: <message>"
    refs_put_aside: list[str] = field(default_factory=list)  # ... and what could not come back where it was
    refs_taken: list[str] = field(default_factory=list)  # branches, tags, stash entries it made or moved, kept aside
    git_state: list[str] = field(default_factory=list)  # control files put back ("changed .git/config")
    stale_locks: list[str] = field(default_factory=list)  # lock files the attempt left, removed
    nested: list[str] = field(default_factory=list)  # nested repositories it changed, left alone
    outside: list[str] = field(default_factory=list)  # files outside the project changed through a symlink
    removed_ignored: list[str] = field(default_factory=list)  # new ignored entries, moved out of the work tree
    ignored_left: list[str] = field(default_factory=list)  # ... and those that could not be: "<path> (why)"
    put_aside: Path | None = None  # where they went (<git dir>/acr/put-aside/<checkpoint>)
    unpopulated: list[str] = field(default_factory=list)  # submodules the attempt checked out, emptied again
    oversized: list[str] = field(default_factory=list)  # "<path> (<size>)": files over the budget, deleted unread
    oversized_kept: bool = False  # ... moved aside instead (acr recover: they may be the user's since)
    repositories: list[str] = field(default_factory=list)  # repositories and work trees it made, moved aside
    caches: list[str] = field(default_factory=list)  # commit-graph, multi-pack-index it wrote, removed

    def side_effects(self) -> list[str]:
        """What the attempt did besides the work tree, as the run shows it."""
        return (self.git_state + [f"removed a stale lock file {p}" for p in self.stale_locks] + self.caches
                + self.outside + self.refs_taken + self.refs_put_aside + self._moved_aside())

    def _moved_aside(self) -> list[str]:
        """What left the work tree for the put-aside folder (and what could not), for people."""
        out = []
        if self.oversized:
            done = (f"moved to {self.put_aside} (it may be yours, made since the run was killed)" if self.oversized_kept
                    else "deleted")
            out.append(f"files the attempt made or changed over the rollback's size budget ({size_text(ATTEMPT_FILE_MAX)} a "
                       f"file, {size_text(ATTEMPT_MAX_BYTES)} in all), {done} without being read, so not in its kept "
                       "tree either: " + ", ".join(self.oversized))
        out += self.repositories
        out += [f"submodule {p}, which the attempt checked out, is not checked out again (its files moved to "
                f"{self.put_aside})" for p in self.unpopulated]
        if self.removed_ignored:
            shown = self.removed_ignored[:10] + ([f"and {len(self.removed_ignored) - 10} more"]
                                                 if len(self.removed_ignored) > 10 else [])
            out.append(f"ignored files that appeared during the attempt, moved out of the work tree to "
                       f"{self.put_aside} (acr never deletes them; remove what you do not need): " + ", ".join(shown))
        if self.ignored_left:
            out.append("ignored files that appeared during the attempt and could not be moved out of the work "
                       "tree: " + ", ".join(self.ignored_left))
        return out

    def lines(self) -> list[str]:
        """The report for people (the attempt's log)."""
        out = []
        if self.git_state:
            out.append("put back the repository's own files the attempt changed: " + ", ".join(self.git_state))
        if self.stale_locks:
            out.append("removed lock files the attempt left: " + ", ".join(self.stale_locks))
        out += self.caches
        out += self._moved_aside()
        if self.not_kept:
            out.append("changed files not kept with the attempt's work: " + ", ".join(self.not_kept))
        if self.refs_put_back:
            out.append("put back what the attempt deleted: " + ", ".join(self.refs_put_back))
        out += self.refs_put_aside
        out += self.refs_taken
        out += self.outside
        if self.nested:
            out.append("nested repositories the attempt changed, left as they are (a rollback never "
                       "rewrites one): " + ", ".join(self.nested))
        return out


def restore(snap: Snapshots, cp: Checkpoint, keep, publish, recovering: bool = False) -> RestoreReport:
    """``keep``: called with the tree as the attempt left it (less what was ignored before it), before any path is
    rewritten; returns (where it kept the work, paths it could not keep). ``publish``: copies acr's objects into
    the repository (the index and refs may need staged and stashed work the attempt pruned). ``recovering``
    (``acr recover``): files over the attempt's budget are moved aside, not deleted (they may be the user's).

    In order: the repository's own files and index; what the attempt made that git does not track as files
    (worktrees, oversized files, nested repositories); the attempt's work kept; tracked and untracked files;
    refs and HEAD; ignored files and modes; a check that all is back; then what appeared around it."""
    report = RestoreReport()
    left: list[str] = []  # what could not be undone, for the error
    aside = Aside(snap.git.common_dir, cp.name)
    after = cp.after()
    _restore_git_state(snap, cp, report)
    now = _clear_untracked_kinds(snap, cp, report, aside, recovering)
    if keep is not None and now.tree != cp.tree:
        _keep_work(snap, cp, now.tree, keep, report)
    changed = _restore_files(snap, cp, now, left)
    publish(loose=False)  # staged and stashed work the attempt may have pruned: the index and refs need it
    _restore_refs_and_head(snap.git, cp, report, left)
    ignored_changed, seed, huge = _restore_ignored(snap, cp, report, aside, recovering, left)
    _restore_modes(snap.root, cp.modes)
    if left:
        raise WorkspaceError(
            f"the rollback could not undo {len(left)} change(s), left as the attempt made them: "
            + "; ".join(left) + "; every other path is back as it was",
            hint="move those aside (or make them writable), then run `acr recover` to finish the rollback")
    final = _check_restored(snap, cp, after, seed, huge)
    _remove_what_appeared(snap, cp, report, aside, [p for st, p in changed + ignored_changed if st == "A"])
    report.paths = len(changed) + len(ignored_changed)
    report.outside = cp.outside_changes()
    report.nested = [path for _, path, nested in final if nested]
    return report


def restore_repository(snap: Snapshots, cp: Checkpoint, publish) -> RestoreReport:
    """Put the repository's own files, index, refs and HEAD back as ``cp`` has them, leaving the work tree's
    files as they are: after a race in worktree lanes, whose arms write the user's refs and ``.git/config``
    (they share them) and restore them each to its own checkpoint, taken at its own time, so that one arm's
    checkpoint can hold, and bring back, what another arm already wrote."""
    report = RestoreReport()
    left: list[str] = []
    _restore_git_state(snap, cp, report)
    publish(loose=False)
    _restore_refs_and_head(snap.git, cp, report, left)
    if left:
        raise WorkspaceError("the race could not put back " + "; ".join(left),
                             hint="run `acr recover` to finish the rollback")
    return report


def _restore_git_state(snap: Snapshots, cp: Checkpoint, report: RestoreReport) -> None:
    """The repository's own files (config, hooks...), lock files and caches the attempt left, and the index
    (first: nothing after this reads an index the attempt wrote, say with ``: > .git/index``)."""
    git = snap.git
    require_repository(git.git_dir, snap.root, cp.dotgit)
    report.git_state = control.restore(control.bases(snap.root, git.git_dir, git.common_dir), cp.control)
    report.stale_locks = remove_new_locks(git.git_dir, git.common_dir, cp.locks)
    if cp.caches is not None:
        report.caches = control.remove_new_caches(git.common_dir, cp.caches)
    if _read_index(git.git_dir) != cp.index:
        _write_index(git.git_dir, cp.index)


def _clear_untracked_kinds(snap: Snapshots, cp: Checkpoint, report: RestoreReport, aside: "Aside",
                           recovering: bool):
    """Remove the worktrees, files over the budget and nested repositories the attempt made (moved aside when
    they may be the user's); returns the work tree's snapshot after that."""
    after = cp.after()
    report.repositories = remove_new_worktrees(snap, cp, aside)
    now = snap.take(cp.sparse_absent, unreadable_ok=True, after=after)
    if now.oversized:
        report.oversized, report.oversized_kept = remove_oversized(snap, now.oversized, aside if recovering else None)
    moved = remove_new_repositories(snap, cp, now.nested, aside)
    if moved:
        report.repositories += moved
        now = snap.take(cp.sparse_absent, unreadable_ok=True, after=after)
    return now


def _keep_work(snap: Snapshots, cp: Checkpoint, tree: str, keep, report: RestoreReport) -> None:
    """Keep the attempt's work with ``keep``; never the files that were ignored before the attempt (a .env it
    un-ignored: the user's own, which the rollback puts back). Keeping a copy never stops the rollback."""
    try:
        report.saved_as, report.not_kept = keep(snap.without(tree, cp.ignored + cp.unprotected, cp.tree))
    except (WorkspaceError, OSError) as e:
        report.refs_put_aside.append(f"the attempt's work could not be kept ({_message(e)})")


def _restore_files(snap: Snapshots, cp: Checkpoint, now, left: list[str]) -> list[tuple[str, str]]:
    """Put every path the attempt changed back; returns the changes undone.

    The rules first: ignore rules (a .gitignore changed, deleted or added), so that files ignored before the
    attempt do not look added, and get removed, because a rule changed; attributes (a planted
    ``* working-tree-encoding=UTF-16`` or ``* text``), so that the rest is read and written with the user's."""
    changed = _undo_list(snap, cp, now)
    rules = [c for c in changed if os.path.basename(c[1]) in RULES]
    if rules:
        _put_back(snap, cp.tree, rules, cp.raw, cp.modes, left)
        again = snap.take(cp.sparse_absent, unreadable_ok=True, after=cp.after())
        changed = rules + [c for c in _undo_list(snap, cp, again) if c not in rules]
    _put_back(snap, cp.tree, [c for c in changed if c not in rules], cp.raw, cp.modes, left)
    return changed


def _restore_refs_and_head(git, cp: Checkpoint, report: RestoreReport, left: list[str]) -> None:
    """Branches, tags, the stash list, replace refs and HEAD as they were, then the index again."""
    back, set_aside, report.refs_taken = refs.restore_refs(git, cp.refs, cp.stash, cp.branch, cp.name,
                                                           cp.worktrees, cp.symbolic)
    report.refs_put_back, report.refs_put_aside = back, report.refs_put_aside + set_aside
    report.git_state += refs.restore_replace_refs(git, cp.replace)
    try:
        refs.restore_head(git, cp.head, cp.branch)
    except WorkspaceError as e:  # e.g. its commit was pruned: the index and ignored files still come back
        left.append(f"HEAD ({_message(e)})")
    if _read_index(git.git_dir) != cp.index:
        _write_index(git.git_dir, cp.index)


def _restore_ignored(snap: Snapshots, cp: Checkpoint, report: RestoreReport, aside: "Aside", recovering: bool,
                     left: list[str]):
    """The ignored files the checkpoint kept, as they were; those grown over the budget (``truncate -s 2T
    .env``) are never read but removed (moved aside when recovering). Returns (the changes undone, the seed
    of the ignored files' index, the oversized ones)."""
    if not cp.ignored_tree:
        return [], None, []
    huge = snap.oversized_ignored(cp.ignored)
    if huge:
        gone, _ = remove_oversized(snap, huge, aside if recovering else None)
        report.oversized += gone
        report.oversized_kept = recovering
    now_ignored, seed = snap.ignored_tree(cp.ignored, cp.ignored_index, leave=tuple(p for p, _ in huge))
    changed = snap.diff(cp.ignored_tree, now_ignored)
    _put_back(snap, cp.ignored_tree, changed, None, cp.modes, left)
    return changed, seed, huge


def _restore_modes(root: Path, modes: dict[str, int]) -> None:
    """Each kept file's mode: a mode-only change (chmod 644 .env) is no diff to git."""
    for path, mode in modes.items():
        try:
            st = os.lstat(root / path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != mode:
            os.chmod(root / path, mode)


def _check_restored(snap: Snapshots, cp: Checkpoint, after, seed, huge) -> list:
    """Raise unless the work tree and the ignored files match the checkpoint; returns the remaining difference
    (nested repositories only, which a rollback never rewrites)."""
    final = snap.raw_diff(cp.tree, snap.tree(cp.sparse_absent, after=after))
    if any(not nested for _, _, nested in final):
        raise WorkspaceError(f"could not restore the work tree to its checkpoint {cp.name}",
                             hint="run `acr recover` to try again; `acr recover --list` shows the checkpoint")
    if cp.ignored_tree and snap.ignored_tree(cp.ignored, seed, leave=tuple(
            p for p, _ in snap.oversized_ignored(cp.ignored) if huge))[0] != cp.ignored_tree:
        raise WorkspaceError(f"could not restore the ignored files to their checkpoint {cp.name}",
                             hint="run `acr recover` to try again")
    return final


def _remove_what_appeared(snap: Snapshots, cp: Checkpoint, report: RestoreReport, aside: "Aside",
                          added: list[str]) -> None:
    """Directories the attempt made (emptied above), directory modes, then the ``.git`` folders, ignored
    entries and populated submodules that appeared, moved aside."""
    _remove_created_dirs(snap, cp, added)
    dirs = folders(snap.files())
    _restore_dirs(snap, cp, dirs)  # first: a directory the attempt made read-only cannot keep its files in place
    try:
        report.repositories += remove_new_dot_gits(snap, cp, dirs, aside)
        report.removed_ignored, report.ignored_left = remove_new_ignored(snap, cp, aside)
        report.unpopulated = unpopulate_submodules(snap, cp, aside)
    except OSError as e:  # (the put-aside folder itself could not be made): said, never a half-done rollback
        report.ignored_left.append(f"the ignored files that appeared during the attempt ({_message(e)})")
    report.put_aside = aside.made
    _remove_created_dirs(snap, cp, [e.rstrip("/") for e in report.removed_ignored])


def remove_new_ignored(snap: Snapshots, cp: Checkpoint, aside: "Aside") -> tuple[list[str], list[str]]:
    """Move every ignored entry that appeared since the checkpoint out of the work tree, into
    ``<git dir>/acr/put-aside/<checkpoint>/``: a ``__pycache__`` of planted bytecode, an ``.envrc``, a
    ``.venv`` must not run later, whatever their size. Moved, never deleted, and never pruned: one may
    be the user's (saved while the attempt ran, or before an ``acr recover``). A rename, so a whole
    ``node_modules`` costs nothing; across file systems, a copy then a removal.

    Left in place: entries holding one that was there at the checkpoint (kept ones are put back
    elsewhere; those over the budget stay as the attempt left them) and acr's own files. Returns what
    was moved and what could not be (``"<path> (why)"``)."""
    before = set(cp.ignored) | set(cp.unprotected)
    # every folder that holds (or is) an entry that was there: O(depth) lookups, not a scan of ``before``
    holding = {e.rstrip("/") for e in before if e.endswith("/")}
    above: set[str] = set()
    for e in before:
        parts = e.rstrip("/").split("/")
        above.update("/".join(parts[:i]) for i in range(1, len(parts)))
    private = snap.private
    new: list[str] = []
    for e in snap.ignored_listing():
        path = e.rstrip("/")
        parts = path.split("/")
        if (e in before or path in above or any("/".join(parts[:i]) in holding for i in range(1, len(parts)))
                or any(path == p or path.startswith(p + "/") or p.startswith(path + "/") for p in private)):
            continue
        new.append(e)
    if not new:
        return [], []
    moved: list[str] = []
    left: list[str] = []
    for e in new:
        why = _move_aside(snap.root / e.rstrip("/"), aside.folder / e.rstrip("/"))
        (left if why else moved).append(f"{e} ({why})" if why else e)
    return moved, left


def _move_aside(source: Path, target: Path) -> str | None:
    """Move ``source`` (a file, a link or a whole folder) to ``target``: a rename, or across file systems a
    copy then a removal. None when done, else why not."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # (os.rename first; copies only when that cannot work)
        control.unfrozen(lambda src, dst: shutil.move(str(src), str(dst)), source, target)
    except OSError as err:
        return f"could not move it aside: {err.strerror or err}"
    return None


def unpopulate_submodules(snap: Snapshots, cp: Checkpoint, aside: "Aside") -> list[str]:
    """Submodules that were not checked out at the checkpoint and are now (``git submodule update --init``)
    go back to an empty folder, their files moved aside: checked out, a submodule's repository (made by the
    attempt, its config and hooks the attempt's) runs its ``core.fsmonitor`` on the user's next
    ``git status`` in the project. The repository under ``.git/modules`` stays (control.py)."""
    done = []
    for path in cp.unpopulated:
        folder = snap.root / path
        if (os.path.realpath(folder) != os.path.join(os.path.realpath(snap.root), path)  # no link on the way
                or not folder.is_dir() or not os.path.lexists(folder / ".git")):
            continue
        module = _module_repository(folder, snap.git.common_dir)  # read before its .git file moves
        if _move_aside(folder, aside.folder / path) is None:
            folder.mkdir()
            done.append(path)
            # a repository made for it during the attempt (none was there: the folder was empty) goes too,
            # or the user's next `git submodule update` would reuse it, and run what the attempt planted
            rel = os.path.relpath(module, os.path.realpath(snap.git.common_dir / "modules")) if module else None
            if module is not None and f"{control.MODULES}/{rel}" not in cp.control.entries:
                _move_aside(module, aside.folder / ".git-modules" / rel)
    return done


def _module_repository(folder: Path, common_dir: Path) -> Path | None:
    """The repository under ``.git/modules`` a checked-out submodule folder's ``.git`` file names, if any."""
    try:
        text = (folder / ".git").read_text(errors="replace")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(os.path.realpath(folder / text[len("gitdir:"):].strip()))
    modules = Path(os.path.realpath(common_dir / "modules"))
    return target if modules in target.parents and target.is_dir() else None


def _put_aside_folder(common_dir: Path, name: str) -> Path:
    """A new folder ``<git common dir>/acr/put-aside/<name>`` (``<name>-2``... when taken), in the common
    directory: a linked worktree's own one goes with ``git worktree remove``. What the attempt may have
    planted on the way (a symlink at ``acr`` or ``put-aside`` that would lead the files elsewhere, a
    folder made read-only) is undone first: that part of the git directory is acr's alone."""
    folder = common_dir
    for part in ("acr", "put-aside"):
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        folder.mkdir(exist_ok=True)
        if stat.S_IMODE(folder.stat().st_mode) & 0o700 != 0o700:
            os.chmod(folder, stat.S_IMODE(folder.stat().st_mode) | 0o700)
    aside, n = folder / name, 1
    while os.path.lexists(aside):
        n += 1
        aside = folder / f"{name}-{n}"
    aside.mkdir()
    return aside


class Aside:
    """The put-aside folder of one rollback, made when first needed (:func:`_put_aside_folder`)."""

    def __init__(self, common_dir: Path, name: str):
        self.common_dir, self.name = common_dir, name
        self.made: Path | None = None

    @property
    def folder(self) -> Path:
        if self.made is None:
            self.made = _put_aside_folder(self.common_dir, self.name)
        return self.made


def remove_oversized(snap: Snapshots, oversized: tuple[tuple[str, int], ...],
                     aside: "Aside | None") -> tuple[list[str], bool]:
    """Delete (or, given ``aside``, move there) the files over the attempt's budget, which no snapshot read.
    Returns them as "<path> (<size>)", and whether they were moved rather than deleted."""
    out = []
    for path, size in oversized:
        target = snap.root / path
        if not _inside_tree(snap.root, path) or _is_repository_itself(snap.root, path):
            why = "left: reached through a symlink, or the repository itself under another name"
        elif aside is not None:
            why = _move_aside(target, aside.folder / path)
        else:
            try:
                control.unfrozen(os.unlink, target)
                why = None
            except FileNotFoundError:
                why = None
            except OSError as e:
                why = f"could not delete it: {e.strerror or e}"
        out.append(f"{path} ({size_text(size)}{'; ' + why if why else ''})")
    return out, aside is not None


def remove_new_worktrees(snap: Snapshots, cp: Checkpoint, aside: "Aside") -> list[str]:
    """Linked work trees the attempt added (``git worktree add ../x``, or inside the project): the work tree
    and its ``.git/worktrees/<name>`` are moved aside (the work tree may hold work; the other worktree's
    HEAD, config and hooks would otherwise stay live). A work tree is moved only when its ``.git`` file
    names that very folder, and never when it holds the project or the repository; else only the admin
    folder goes, which leaves it inert. Before any snapshot: one inside the project is a nested repository."""
    before = cp.worktree_dirs if cp.worktree_dirs is not None else cp.worktrees
    if before is None:  # a checkpoint from before acr recorded them
        return []
    common = snap.git.common_dir
    found = [common / "worktrees" / n for n in worktree_dirs(common) if n not in before]
    out = [_remove_worktree(snap, cp, aside, admin) for admin in found if _is_other_admin(snap, admin)]
    if found and not [n for n in before if n]:  # the folder git made for the first one, empty again
        try:
            (common / "worktrees").rmdir()
        except OSError:
            pass
    return out


def _is_other_admin(snap: Snapshots, admin: Path) -> bool:
    """A real ``.git/worktrees/<name>`` folder, not the one of the work tree acr runs in."""
    return admin.is_dir() and not admin.is_symlink() and admin.resolve() != snap.git.git_dir.resolve()


def _remove_worktree(snap: Snapshots, cp: Checkpoint, aside: "Aside", admin: Path) -> str:
    """Move one added work tree (when it may be moved) and its admin folder aside; what was done, for the
    rollback's report."""
    tree = _worktree_of(admin)
    where = _move_worktree(tree, snap.root, snap.git.common_dir, aside.folder / "worktrees" / admin.name)
    target = aside.folder / ".git-worktrees" / admin.name
    why = _move_aside(admin, target)
    if tree is not None and tree.is_relative_to(snap.root):
        _remove_created_dirs(snap, cp, [os.path.relpath(tree, snap.root)])
    return (f"a work tree the attempt added ({where}); its {admin} "
            + (f"moved to {target}" if why is None else f"stays ({why})"))


def _move_worktree(tree: Path | None, root: Path, common: Path, target: Path) -> str:
    """Move the work tree ``tree`` to ``target`` when :func:`_may_move` allows; where it is now, in words."""
    if tree is None:
        return "its folder is gone"
    if not _may_move(tree, root, common):
        return f"{tree}, left where it is (it holds the project or its repository)"
    why = _move_aside(tree, target)
    return f"{tree}, moved to {target}" if why is None else f"{tree} ({why})"


def worktree_dirs(common: Path) -> tuple[str, ...]:
    """The names of the folders under ``.git/worktrees`` (one per linked work tree)."""
    try:
        return tuple(sorted(e.name for e in os.scandir(common / "worktrees") if e.is_dir(follow_symlinks=False)))
    except OSError:
        return ()


def _worktree_of(admin: Path) -> Path | None:
    """The work tree a ``.git/worktrees/<name>`` folder belongs to, when its ``.git`` file names it back."""
    try:
        dotgit = Path((admin / "gitdir").read_text(errors="surrogateescape").strip())
        text = dotgit.read_text(errors="surrogateescape")
    except OSError:
        return None
    if not dotgit.is_absolute() or dotgit.name != ".git" or not text.startswith("gitdir:"):
        return None
    named = Path(os.path.realpath(dotgit.parent / text[len("gitdir:"):].strip()))
    return dotgit.parent if named == Path(os.path.realpath(admin)) else None


def _may_move(tree: Path, root: Path, common: Path) -> bool:
    """Not the project, not a folder holding it or the repository, not inside the repository."""
    real = Path(os.path.realpath(tree))
    if tree.is_symlink() or not real.is_dir():
        return False
    project, repository = Path(os.path.realpath(root)), Path(os.path.realpath(common))
    return not (real in (project, repository) or real in project.parents or real in repository.parents
                or repository in real.parents)


def remove_new_repositories(snap: Snapshots, cp: Checkpoint, nested: tuple[str, ...], aside: "Aside") -> list[str]:
    """Repositories the attempt made in untracked folders (``git init x``, a clone, without a commit or with
    one): moved aside whole when their folder is new, else only their ``.git`` (the folder's files are then
    rolled back as any). Their config and hooks are the attempt's: a ``core.fsmonitor`` there would run on
    the user's next ``git status`` in it. Those there at the checkpoint are never touched."""
    if cp.nested is None:
        return []
    new = [p for p in nested if p not in set(cp.nested)]
    out = []
    for path in new:
        if not _inside_tree(snap.root, path):
            continue
        existed = path in cp.untracked_dirs or path in cp.dir_modes or _tree_holds_dir(snap, cp.tree, path)
        source = snap.root / path / ".git" if existed else snap.root / path
        target = aside.folder / path / (".git" if existed else "")
        why = _move_aside(source, target)
        what = f"{path}/.git" if existed else f"{path}/"
        out.append(f"a repository the attempt made at {what}, " + (f"moved to {target}" if why is None else why))
        if why is None and not existed:
            _remove_created_dirs(snap, cp, [path])
    return out


def remove_new_dot_gits(snap: Snapshots, cp: Checkpoint, dirs: set[str], aside: "Aside") -> list[str]:
    """A ``.git`` the attempt made in a folder of the user's files (``git init src`` where ``src`` holds tracked
    files: git's trees never show it) is moved aside; those there at the checkpoint stay."""
    if cp.nested is None:
        return []
    out = []
    for d in snap.repositories_in(dirs):
        if d in cp.nested or not _inside_tree(snap.root, d):
            continue
        target = aside.folder / d / ".git"
        why = _move_aside(snap.root / d / ".git", target)
        out.append(f"a repository the attempt made at {d}/.git, " + (f"moved to {target}" if why is None else why))
    return out


def _tree_holds_dir(snap: Snapshots, tree: str, path: str) -> bool:
    out = snap.git("ls-tree", "-z", tree, "--", path, check=False).decode("utf-8", "surrogateescape")
    return any(e.split("\t", 1)[0].split(" ")[1:2] == ["tree"] for e in out.split("\0") if "\t" in e)


def _inside_tree(root: Path, path: str) -> bool:
    """``path`` is reached from ``root`` through no symlink (its real folder is where it should be)."""
    parent = os.path.dirname(path)
    return os.path.realpath(root / parent) == os.path.normpath(os.path.join(os.path.realpath(root), parent))


def _is_repository_itself(root: Path, path: str) -> bool:
    """Whether ``path`` or a folder on its way is the repository's ``.git`` under another name (``git~1``, the
    NTFS 8.3 alias of ``.git``; ``.GIT`` on a file system that ignores case): never a thing to remove."""
    try:
        dotgit = os.lstat(root / ".git")
    except OSError:
        return False
    parts = Path(path).parts
    for i in range(1, len(parts) + 1):
        try:
            st = os.lstat(root.joinpath(*parts[:i]))
        except OSError:
            return False
        if (st.st_dev, st.st_ino) == (dotgit.st_dev, dotgit.st_ino):
            return True
    return False


def size_text(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}".replace(".0 ", " ")
        n /= 1024
    return str(n)


def dotgit_identity(root: Path) -> list | None:
    """What the work tree's ``.git`` is: a directory (with its device and inode) or a file (a linked
    worktree's pointer, whose content the control files keep)."""
    try:
        st = os.lstat(root / ".git")
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return ["dir", st.st_dev, st.st_ino]
    return ["file"] if stat.S_ISREG(st.st_mode) else ["other"]


def require_repository(git_dir: Path, root: Path, expected: list | None = None) -> None:
    """After an attempt: stop, touching nothing, if it removed the repository (``rm -rf .git``) or moved
    or replaced it (``mv .git .git2 && ln -s .git2 .git``: a snapshot would then read the repository's
    own files as the attempt's, and a rollback delete them)."""
    now = dotgit_identity(root)
    if not (git_dir / "HEAD").exists() or now is None:
        raise WorkspaceError(
            f"the attempt removed the git repository of {root} (its .git): nothing could be rolled back, "
            "the files are as the attempt left them",
            hint="put .git back from a backup or a fresh `git clone` of your remote, then review the "
                 "changes with `git status`; acr stopped this task")
    if expected is not None and now != expected:
        raise WorkspaceError(
            f"the attempt moved or replaced the git repository of {root} ({root / '.git'} is now "
            f"{'a symlink or another kind of file' if now[0] != expected[0] else 'another directory'}): "
            "nothing was rolled back, so nothing of it could be deleted",
            hint="put the original .git back in place (`ls -la` shows what the attempt left), then run "
                 "`acr recover`")


def git_locks(git_dir: Path, common_dir: Path) -> frozenset[str]:
    """Git's lock files there are now (``index.lock``, ``HEAD.lock``, ``refs/heads/main.lock``...;
    a directory of that name locks as well)."""
    found = set()
    for d in dict.fromkeys([git_dir, common_dir]):
        try:
            found.update(str(d / e.name) for e in os.scandir(d) if e.name.endswith(".lock"))
        except OSError:
            pass
        for top, dirs, names in os.walk(d / "refs"):
            found.update(os.path.join(top, n) for n in names + dirs if n.endswith(".lock"))
    return frozenset(found)


def remove_new_locks(git_dir: Path, common_dir: Path, before: frozenset[str]) -> list[str]:
    out = []
    for p in sorted(git_locks(git_dir, common_dir) - before):
        if Path(p).name.startswith("acr-"):  # acr's own (the run lock, a temporary index)
            continue
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
            out.append(p)
        except OSError:
            pass
    return out


def _message(e: Exception) -> str:
    return e.message if isinstance(e, WorkspaceError) else (getattr(e, "strerror", None) or str(e))


def _undo_list(snap: Snapshots, cp: Checkpoint, now: Snapshot) -> list[tuple[str, str]]:
    """What differs from the checkpoint; a file the attempt created where a sparse checkout had none
    counts as added (it goes, rather than be replaced by the committed version), and so does a path
    git could not read (a FIFO, an unreadable file) that is not the checkpoint's."""
    out = [("A" if path in cp.sparse_absent else status, path) for status, path in snap.diff(cp.tree, now.tree)]
    listed = {path for _, path in out}
    return out + [("A", path) for path in now.unreadable if path not in listed]


def _restore_dirs(snap: Snapshots, cp: Checkpoint, folders_now: set[str]) -> None:
    """Directories the user had and git does not record come back: empty ones the attempt removed
    (``rmdir``), and every directory's permission bits, the default ones too (a ``chmod 777 src``; a
    ``chmod 555`` that would keep the rollback from moving what the attempt planted in it). Never
    through a symbolic link: only a directory whose real path is where it should be is touched."""
    real_root = os.path.realpath(snap.root)

    def ours(d: str) -> bool:
        return os.path.realpath(snap.root / d) == os.path.normpath(os.path.join(real_root, d))

    plain = 0o777 & ~current_umask()
    for d in sorted(cp.untracked_dirs, key=lambda p: p.count("/")):
        p = snap.root / d
        if (not os.path.lexists(p) and not any((d + "/").startswith(o) for o in cp.opaque_dirs)
                and ours(os.path.dirname(d) or ".")):
            try:
                p.mkdir(parents=True)
                os.chmod(p, cp.dir_modes.get(d, plain))
            except OSError:
                continue
    dirs = folders_now | set(cp.untracked_dirs) | set(cp.dir_modes)
    for d in sorted(dirs - {""}):
        want = cp.dir_modes.get(d, plain)
        try:
            st = os.lstat(snap.root / d)
            if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) != want and ours(d):
                os.chmod(snap.root / d, want)
        except OSError:
            continue


def _remove_created_dirs(snap: Snapshots, cp: Checkpoint, removed: list[str]) -> None:
    """Remove the directories left empty by removing ``removed`` (files the attempt added) that
    did not exist at the checkpoint; a directory the user had, even an empty one, stays."""
    if not removed:
        return
    existed = set(cp.untracked_dirs)
    for tree in filter(None, (cp.tree, cp.ignored_tree)):  # -d: the trees' directories only
        listed = snap.git("ls-tree", "-r", "-d", "-z", "--name-only", tree)
        existed.update(e for e in listed.decode("utf-8", errors="surrogateescape").split("\0") if e)
    for path in sorted(removed, key=lambda p: -p.count("/")):  # deepest first
        d = os.path.dirname(path)
        while d and d not in existed and not any((d + "/").startswith(o) for o in cp.opaque_dirs):
            try:
                os.rmdir(snap.root / d)  # only ever an empty directory
            except OSError:
                break
            d = os.path.dirname(d)


def _put_back(snap: Snapshots, tree: str, changed: list[tuple[str, str]], raw: dict[str, str] | None,
              modes: dict[str, int], left: list[str]) -> None:
    """Make the listed paths as they are in ``tree``: added ones go, the others are rewritten (with
    their exact bytes from ``raw`` where git would convert them, and their permission bits from
    ``modes`` where git would not write those). What cannot be done is appended to ``left``."""
    to_write = _clear_paths(snap.root, changed, left)
    if not to_write:
        return
    umask = current_umask()
    _make_parents(snap.root, to_write)
    _checkout(snap, tree, to_write, raw, left)
    _set_modes(snap.root, to_write, modes, umask)


def _clear_paths(root: Path, changed: list[tuple[str, str]], left: list[str]) -> list[str]:
    """Remove what the attempt added, and whatever stands where a file is to be written back (a directory,
    a FIFO, a symlink swapped for a file); returns the paths to write back. The rest is still done when one
    fails (``left`` says which; restore() reports them)."""
    to_write: list[str] = []
    for status, path in changed:
        target = root / path
        try:
            if status == "A" or (status == "T" and (target.exists() or target.is_symlink())):
                _remove(target, root)
            if status != "A":
                if target.is_dir() and not target.is_symlink():  # a directory stands where a file was
                    _rmtree_unless_repository(target)
                elif os.path.lexists(target) and not (target.is_file() or target.is_symlink()):
                    target.unlink()  # a FIFO or socket where a file was
                to_write.append(path)
        except (WorkspaceError, OSError) as e:
            left.append(f"{path} ({e.message if isinstance(e, WorkspaceError) else e.strerror or e})")
    return to_write


def _make_parents(root: Path, to_write: list[str]) -> None:
    """The directories files go back into, with the user's usual mode (not 0700); a directory swapped for a
    symlink is replaced, never written through. A failure is left for checkout-index to say."""
    for path in to_write:
        parent = os.path.dirname(path)
        if parent and (os.path.islink(root / parent) or not os.path.isdir(root / parent)):
            try:
                _replace_links_on_the_way(root, parent)
                os.makedirs(root / parent, exist_ok=True)
            except OSError:
                pass


def _checkout(snap: Snapshots, tree: str, to_write: list[str], raw: dict[str, str] | None,
              left: list[str]) -> None:
    """Write ``to_write`` from ``tree`` through a temporary index, then the exact bytes of those in ``raw``;
    a path that cannot be written is dropped from ``to_write`` and added to ``left``."""
    git, root = snap.git, snap.root
    idx = snap.temp_index(seed=False)
    umask = os.umask(0o077)  # a file written back is nobody else's to read until its own mode is set
    try:
        env = {"GIT_INDEX_FILE": idx}
        git("read-tree", tree, env=env)
        try:
            git("checkout-index", "-f", "-z", "--stdin", env=env, input=nul_join(to_write))
        except WorkspaceError:  # a path git cannot write (a read-only directory): the others one by one
            _checkout_each(snap, env, to_write, left)
        for path in to_write:
            if raw and path in raw and (root / path).is_file():
                (root / path).write_bytes(git("cat-file", "blob", raw[path]))
    finally:
        os.umask(umask)
        unlink_index(idx)


def _checkout_each(snap: Snapshots, env: dict[str, str], to_write: list[str], left: list[str]) -> None:
    """checkout-index one path at a time; one made immutable (chattr +i, as root) is unfrozen and tried again."""
    git, root = snap.git, snap.root
    for path in list(to_write):
        try:
            git("checkout-index", "-f", "-z", "--stdin", env=env, input=nul_join([path]))
        except WorkspaceError as e:
            if control.unfreeze(root / path) | control.unfreeze((root / path).parent) and git.ok(
                    "checkout-index", "-f", "-z", "--stdin", env=env, input=nul_join([path])):
                continue
            left.append(f"{path} ({e.message.splitlines()[-1]})")
            to_write.remove(path)


def _set_modes(root: Path, written: list[str], modes: dict[str, int], umask: int) -> None:
    """Each written file's mode: the checkpoint's, else what git would have written under ``umask``; a
    symlink's mode is its target's, so never chmod through one."""
    for path in written:
        st = os.lstat(root / path)
        if stat.S_ISREG(st.st_mode):
            default = (0o777 if st.st_mode & stat.S_IXUSR else 0o666) & ~umask
            os.chmod(root / path, modes.get(path, default))


def _replace_links_on_the_way(root: Path, parent: str) -> None:
    """Remove symlinks (and files) standing where the directories of ``parent`` belong; the
    checkpoint's own symlinks are never on such a way (git writes no file under one)."""
    d = root
    for part in Path(parent).parts:
        d = d / part
        if os.path.islink(d) or (os.path.lexists(d) and not os.path.isdir(d)):
            d.unlink()
        if not os.path.lexists(d):
            return


def _read_index(git_dir: Path) -> bytes | None:
    try:
        return (git_dir / "index").read_bytes()
    except FileNotFoundError:
        return None


def index_mtime(git_dir: Path) -> int | None:
    try:
        return os.stat(git_dir / "index").st_mtime_ns
    except OSError:
        return None


def _write_index(git_dir: Path, data: bytes | None) -> None:
    real = git_dir / "index"
    if data is None:
        real.unlink(missing_ok=True)
        return
    tmp = real.with_name(f"index.acr-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, real)


def _remove(target: Path, root: Path) -> None:
    # Directories the attempt created and left empty go afterwards (_remove_created_dirs).
    if _is_repository_itself(root, os.path.relpath(target, root)):
        raise WorkspaceError("the repository's own .git under another name, which a rollback never removes")
    if target.is_dir() and not target.is_symlink():
        _rmtree_unless_repository(target)
    else:
        control.unfrozen(lambda p: p.unlink(missing_ok=True), target)


def _rmtree_unless_repository(target: Path) -> None:
    """Remove a directory the attempt put where a file belongs, but never one that holds a repository:
    its history and unpushed work cannot come back from a checkpoint."""
    for top, dirs, names in os.walk(target):
        if ".git" in dirs or ".git" in names:
            raise WorkspaceError("a directory holding a git repository, which a rollback never deletes")
    shutil.rmtree(target)
