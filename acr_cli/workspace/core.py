"""The workspace: one git work tree, its lock, its checkpoints, and the guard around an attempt."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from acr_cli import interrupts
from acr_cli.checks import Changes
from acr_cli.errors import WorkspaceError
from acr_cli.workspace import control, refs, rollback
from acr_cli.workspace.checkpoint import Checkpoint, signature
from acr_cli.workspace.git import Git, discover, ident, user_name
from acr_cli.workspace.kept import Kept
from acr_cli.workspace.rollback import RestoreReport
from acr_cli.workspace.snapshot import Snapshot, Snapshots, folders, nul_join, unlink_index
from acr_cli.workspace.store import Store, default_base

NO_GIT_HINT = "rollback needs git: run `git init && git add -A && git commit -m init` first, or pass --no-rollback"
# files looked into in the ignored directories an attempt made (a new `__pycache__/`), per attempt
NEW_IGNORED_FILES_MAX = 20000
# git's own state files of an operation in progress: a rollback could not bring them back
IN_PROGRESS = {"MERGE_HEAD": "a merge", "CHERRY_PICK_HEAD": "a cherry-pick", "REVERT_HEAD": "a revert",
               "rebase-merge": "a rebase", "rebase-apply": "a rebase or `git am`",
               "sequencer": "a cherry-pick or revert of several commits", "BISECT_LOG": "a bisect"}


class UnwritableGitDir(WorkspaceError):
    """The repository's git directory cannot be written: no lock, no checkpoint, no rollback there."""


class Workspace:
    def __init__(self, root: Path, git_dir: Path, common_dir: Path, store_base: Path | None = None):
        self.root, self.git_dir, self.common_dir = root, git_dir, common_dir
        self.store = Store(store_base or default_base(), root, git_dir)
        self.kept = Kept(self.store.dir / "attempts")  # failed attempts' work, redacted, out of every push's reach
        self.git = Git(root, git_dir, common_dir, self.store.objects)
        self.snap = Snapshots(self.git, self.store.dir, _inside(self.store.dir.parent.parent, root))
        self._lock_fd: int | None = None
        self._unnamed = 0
        self._held_key: tuple | None = None
        self._ignored_seed: tuple[tuple[str, ...], tuple[bytes, int]] | None = None  # last checkpoint's

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, project: Path, store_base: Path | None = None) -> "Workspace":
        if shutil.which("git") is None:
            raise WorkspaceError("git is not installed", hint=NO_GIT_HINT)
        try:
            found = discover(project)  # (another user's repository, a damaged one: a WorkspaceError that says so)
        except OSError as e:  # the project directory itself is gone or cannot be entered
            raise WorkspaceError(f"cannot enter {project}: {e.strerror or e}") from None
        if found is None:
            raise WorkspaceError(f"{project} is not inside a git repository", hint=NO_GIT_HINT)
        return cls(*found, store_base)

    def lock(self) -> None:
        """Refuse a second concurrent ``acr run`` in the same work tree."""
        import fcntl

        try:
            fd = os.open(self.git_dir / "acr-run.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:  # .git is read-only (its permissions, another owner, a read-only mount)
            raise self._unwritable(e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkspaceError(
                f"another `acr run` is working in {self.root}",
                hint="wait for it, or use a separate `git worktree` for parallel runs",
            ) from None
        self._lock_fd = fd

    def _unwritable(self, e: OSError) -> "UnwritableGitDir":
        import errno
        import shlex

        where = e.filename or str(self.git_dir)
        message = (f"acr cannot write to {where} ({e.strerror or e}): `acr run` keeps its lock in the "
                   f"repository's git directory, and a rollback writes there")
        if e.errno == errno.EROFS:
            return UnwritableGitDir(message, hint="the repository is on a read-only file system: run acr in a "
                                                "writable copy (git clone)")
        try:
            owner = os.stat(self.git_dir).st_uid
        except OSError:
            owner = os.geteuid()
        git_dir = shlex.quote(str(self.git_dir))
        if owner != os.geteuid():
            return UnwritableGitDir(message, hint=f"{self.git_dir} belongs to {user_name(owner)}: run acr as that "
                                                f"user, or make it yours: sudo chown -R {user_name(os.geteuid())} "
                                                f"{git_dir}")
        return UnwritableGitDir(message, hint=f"make it writable: chmod -R u+w {git_dir}")

    def unlock(self) -> None:
        if self._lock_fd is not None:
            self.store.wipe_objects_if_unused()
            os.close(self._lock_fd)
            self._lock_fd = None

    def ensure_no_operation_in_progress(self) -> None:
        """Refuse to start while a merge, rebase, cherry-pick, revert or bisect is under way: an attempt that
        commits, aborts or resets it would end git's operation state, and a rollback cannot restore that."""
        for name, what in IN_PROGRESS.items():
            if (self.git_dir / name).exists():
                raise WorkspaceError(f"{what} is in progress in {self.root}",
                                     hint="finish or abort it first (see `git status`), or pass --no-rollback")

    def stale_locks(self) -> list[str]:
        """Git lock files there are now (before a run: left by a process that died)."""
        return sorted(p for p in rollback.git_locks(self.git_dir, self.common_dir)
                      if not Path(p).name.startswith("acr-"))

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self, name: str | None = None, marker: str = "") -> Checkpoint:
        """Take a checkpoint and keep it in acr's store until :meth:`drop` (``acr recover`` finds it there)."""
        if name is None:
            self._unnamed += 1
            name = f"checkpoint-{os.getpid()}-{self._unnamed}"
        self.store.prepare()
        self.git.invalidate()
        bases = control.bases(self.root, self.git_dir, self.common_dir)
        ctl = control.capture(bases)
        shot = self.snap.take(unreadable_ok=False)
        tree, sparse_absent = shot.tree, shot.sparse_absent
        head, branch = refs.head(self.git)
        symbolic: dict[str, str] = {}
        kept_refs, stash, commits = refs.listed(self.git, symbolic)
        index, index_mtime = rollback._read_index(self.git_dir), rollback.index_mtime(self.git_dir)
        kept, over = self.snap.ignored_entries()
        ignored_tree = ignored_index = None
        if kept:
            last = self._ignored_seed
            ignored_tree, ignored_index = self.snap.ignored_tree(kept, last[1] if last and last[0] == kept else None)
            self._ignored_seed = (kept, ignored_index)
        untracked_dirs, opaque = self.snap.untracked_dirs(over)
        files = self.snap.files()
        kept_files = self.snap.tree_files(ignored_tree) if ignored_tree else []
        raw, modes = self.snap.raw_copies(files), self.snap.modes(files + kept_files)
        outside = {link: [target, signature(target)] for link, target in self.snap.outside_links(tree).items()}
        cp = Checkpoint(name, tree, head, branch, index, ctl, ignored_tree, kept, over, ignored_index, raw,
                        untracked_dirs, opaque, modes, sparse_absent, kept_refs, stash,
                        rollback.git_locks(self.git_dir, self.common_dir), outside, marker,
                        rollback.dotgit_identity(self.root), refs.replace_refs(self.git),
                        self.snap.dir_modes(files + kept_files, untracked_dirs), self.snap.unpopulated_submodules(),
                        refs.worktree_branches(self.git), symbolic, index_mtime, shot.large,
                        tuple(sorted(set(shot.nested) | set(self.snap.repositories_in(folders(files))))),
                        control.caches(self.common_dir), rollback.worktree_dirs(self.common_dir))
        refs.keep_alive(self.git, name, head, commits)
        self._copy_held_objects(head, [sha for sha, _ in stash])
        self.store.save(name, cp.to_json(), index)
        return cp

    def _copy_held_objects(self, head: str | None, stash: list[str]) -> None:
        """Copy into acr's store the objects only the user's index or stash hold (staged content, stashed
        work), so an attempt that drops them, deletes refs/acr and prunes cannot lose them either.
        Once per run while the index, HEAD and stash stay the same."""
        try:
            st = (self.git_dir / "index").stat()
            key = (st.st_ino, st.st_size, st.st_mtime_ns, head, tuple(stash))
        except OSError:
            key = (None, head, tuple(stash))
        if key == self._held_key and self.store.objects.exists():
            return
        if head:
            raw = self.git("diff-index", "--cached", "--raw", "-z", "--no-renames", head)
            fields = [f for f in raw.decode("utf-8", "surrogateescape").split("\0") if f.startswith(":")]
            blobs = [f.split()[3] for f in fields]
        else:
            raw = self.git("ls-files", "-s", "-z")
            blobs = [e.split()[1] for e in raw.decode("utf-8", "surrogateescape").split("\0") if e]
        blobs = self._not_in_store([b for b in dict.fromkeys(blobs) if set(b) != {"0"}])
        revs = self._not_in_store(stash)
        if blobs or revs:
            wanted = "\n".join(revs + blobs + (["--not", head] if head and revs else [])) + "\n"
            pack = self.git("pack-objects", "--stdout", "--revs", "-q", input=wanted.encode(), repo_objects=True)
            self.git("index-pack", "--stdin", input=pack, acr_objects_only=True)
        self._held_key = key

    def _not_in_store(self, objects: list[str]) -> list[str]:
        """Those of ``objects`` acr's own object directory does not hold."""
        if not objects or not self.store.objects.exists():
            return objects
        out = self.git("cat-file", "--batch-check", input=("\n".join(objects) + "\n").encode(),
                       acr_objects_only=True).decode()
        return [line.split()[0] for line in out.splitlines() if line.endswith(" missing")]

    def load_checkpoint(self, name: str) -> Checkpoint:
        meta, index = self.store.load(name)
        try:
            return Checkpoint.from_json(meta, index)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise WorkspaceError(f"checkpoint {name} is damaged or from another acr version ({type(e).__name__}: {e})",
                                 hint=f"its files are in {self.store.dir}; `acr recover --discard {name}` "
                                      "removes it") from None

    def survivors(self, names: list[str]) -> list[tuple[int, str]]:
        """Processes of these (interrupted) checkpoints' attempts still alive: (pid, short command line)."""
        from acr_cli import process

        return [p for marker in self.markers(names) for p in process.find_marked(marker)]

    def markers(self, names: list[str]) -> list[str]:
        """The process markers (ACR_ATTEMPT) of these checkpoints' attempts, where they can be read."""
        out = []
        for name in names:
            try:
                marker = self.store.load(name)[0].get("marker")
            except WorkspaceError:
                continue
            if marker:
                out.append(marker)
        return out

    def interrupted_checkpoints(self) -> list[str]:
        """Checkpoints of this worktree an ``acr run`` that died left behind (call while holding :meth:`lock`),
        oldest first."""
        return self.store.names()

    def note_kept(self, name: str) -> None:
        """Remember that the attempt ``name`` was kept in this work tree, and when (``<git dir>/acr-kept``): a
        checkpoint taken before it must not be restored over it (:meth:`kept_since`). In the git directory, not
        acr's data directory: a run with another ``ACR_HOME`` (or another acr install) sees the same file."""
        import json
        import time

        tmp = self.git_dir / "acr-kept.tmp"
        try:
            tmp.write_text(json.dumps({"name": name, "at": time.time()}))
            os.replace(tmp, self.git_dir / "acr-kept")
        except OSError:  # (a .git that went read-only): the work is kept all the same
            pass

    def kept_since(self, name: str) -> tuple[str, float] | None:
        """(attempt, Unix time) of a kept attempt of a later run than checkpoint ``name`` was taken in; None when
        the last attempt kept here is older (or none is known)."""
        import json

        try:
            taken = (self.store.dir / f"{name}.json").stat().st_mtime
            last = json.loads((self.git_dir / "acr-kept").read_text())
            kept, at = str(last["name"]), float(last["at"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return (kept, at) if at > taken and kept != name else None

    def drop(self, cp: Checkpoint | str) -> None:
        """Forget a checkpoint (or one by name, even one that cannot be read)."""
        name = cp if isinstance(cp, str) else cp.name
        refs.drop_keep_alive(self.git, name)
        self.store.delete(name)

    def attempt_tree(self, cp: Checkpoint) -> Snapshot:
        """The work tree as the attempt left it (ignored files aside), read against the checkpoint: its copy
        of the user's index is the seed, and files the attempt made over the budget are left out, unread."""
        rollback.require_repository(self.git_dir, self.root, cp.dotgit)
        self.git.invalidate()
        return self.snap.take(cp.sparse_absent, unreadable_ok=True, after=cp.after())

    def changes(self, cp: Checkpoint) -> list[tuple[str, str]]:
        """(status, path) for every path that differs from the checkpoint (A/M/D/T); ignored files aside."""
        return self.snap.diff(cp.tree, self.attempt_tree(cp).tree)

    def touched(self, cp: Checkpoint) -> Changes:
        """What the attempt changed since ``cp``, ignored files included as far as the checkpoint sees them:
        its kept ignored files (changed, added inside a kept directory, deleted) and entries ignored now that
        were not before (a new ``__pycache__/``, whose files are listed; one holding more than
        ``NEW_IGNORED_FILES_MAX`` files is named as not examined). Ignored entries over the checkpoint's
        budget are not looked into. What :mod:`acr_cli.checks` judges an attempt by."""
        tree = self.changes(cp)
        ignored: list[tuple[str, str]] = []
        unexamined: list[str] = []
        if cp.ignored_tree:  # a kept file grown over the attempt's budget (`truncate -s 2T .env`) is never read
            huge = tuple(p for p, _ in self.snap.oversized_ignored(cp.ignored))
            now, _ = self.snap.ignored_tree(cp.ignored, cp.ignored_index, leave=huge)
            ignored += [c for c in self.snap.diff(cp.ignored_tree, now) if c[1] not in huge]
            ignored += [("M", p) for p in huge]
        before = set(cp.ignored) | set(cp.unprotected)
        budget = NEW_IGNORED_FILES_MAX
        for entry in self.snap.ignored_listing(after=cp.after()):
            if entry in before or any((entry.rstrip("/") + "/").startswith(p + "/") or p.startswith(entry)
                                      for p in self.snap.private):
                continue
            if not entry.endswith("/"):
                ignored.append(("A", entry))
                continue
            found: list[str] = []
            for parent, subdirs, files in os.walk(self.root / entry):
                subdirs[:] = [d for d in subdirs if d != ".git"]  # a nested repository's own
                rel = Path(parent).relative_to(self.root).as_posix()
                found += [f"{rel}/{f}" for f in files]
                if len(found) > budget:
                    break
            if len(found) > budget:
                unexamined.append(entry)
            else:
                budget -= len(found)
                ignored += [("A", f) for f in found]
        return Changes(tuple(tree), tuple(ignored), tuple(unexamined))

    def diffstat(self, cp: Checkpoint, shot: Snapshot | None = None) -> list[tuple[str, int | None, int | None]]:
        """(path, lines added, lines deleted) for every path that differs from the checkpoint; None for
        a binary file. What a person reviews of a kept attempt (ignored files aside)."""
        return self.snap.numstat(cp.tree, (shot or self.attempt_tree(cp)).tree)

    def side_effects(self, cp: Checkpoint) -> list[str]:
        """What a passing attempt changed besides the work tree (kept, and not in the diff a person
        reviews): the control files (``.git/config``, hooks, ``info/``), git lock files it left, files
        outside the project it changed through a symlink, and HEAD, branches, tags and the stash list: what it
        deleted, moved or rewrote is kept under ``refs/acr/put-aside/<checkpoint>/`` (:func:`refs.kept_changes`).
        Call before :meth:`drop`: until then the checkpoint's keep-alive commit holds what the attempt deleted."""
        out = control.differences(control.bases(self.root, self.git_dir, self.common_dir), cp.control)
        new_locks = set(rollback.git_locks(self.git_dir, self.common_dir)) - set(cp.locks)
        out += [f"left a lock file {p} (no process of the attempt is alive: `rm {p}`)" for p in sorted(new_locks)
                if not Path(p).name.startswith("acr-")]
        try:
            out += refs.kept_changes(self.git, cp.refs, cp.stash, cp.head, cp.branch, cp.name,
                                     lambda: self.publish(loose=False), cp.worktrees)
        except WorkspaceError as e:  # (refs the attempt damaged): the attempt is kept all the same
            out.append(f"could not compare HEAD, branches, tags and the stash with the checkpoint: {e.message}")
        return out + cp.outside_changes()

    def keep_overwritten(self, cp: Checkpoint, changed: list[str]) -> str | None:
        """A kept attempt that changed or deleted files holding the user's uncommitted work (edits not in
        HEAD, untracked files): the work tree as it was before the attempt is kept as a commit under
        ``refs/acr/before/<checkpoint>``, so nothing of the user's is lost with the attempt kept; returns a
        line that says so (None when the attempt touched none of it)."""
        if not changed:
            return None
        head_tree = self.git("rev-parse", "-q", "--verify", f"{cp.head}^{{tree}}", check=False).decode().strip() \
            if cp.head else ""
        # no commit yet (or HEAD's gone): every file of the checkpoint counts as the user's
        uncommitted = {path for _, path in self.snap.diff(head_tree, cp.tree)} if head_tree else set(changed)
        hit = sorted(uncommitted.intersection(changed))
        if not hit:
            return None
        ref = f"{refs.BEFORE_REFS}{cp.name}"
        self.publish()
        parents = ["-p", cp.head] if cp.head and refs.exists(self.git, cp.head) else []
        commit = self.git("commit-tree", cp.tree, *parents, "-m", f"acr: the work tree before attempt {cp.name}",
                          env=ident(), repo_objects=True).decode().strip()
        self.git("update-ref", ref, commit, repo_objects=True)
        return (f"the attempt changed uncommitted work of yours ({refs.few(hit, 5)}); the work tree before it is kept as "
                f"{ref} (`git checkout {ref} -- {hit[0]}` brings a file back)")

    def keep_ignored_overwritten(self, cp: Checkpoint, agent: set[str] | None = None) -> str | None:
        """A kept attempt that changed or deleted ignored files acr had kept (a ``.env``, local settings): the
        user's versions are written to ``<git common dir>/acr/put-aside/<checkpoint>/`` (never a ref: a push
        of every ref would carry a ``.env``); returns a line that says so (None when it touched none).

        ``agent``: the ignored paths the agent itself changed, read before the verifier ran (Guard.touched).
        Only those count: what the check writes (pytest's ``.pytest_cache/v/cache/lastfailed``) is the user's
        own command at work, which the baseline did too, not the attempt's. A path both changed is the
        agent's. None: nothing ran after the agent (no verifier), so every change is the attempt's."""
        if not cp.ignored_tree:
            return None
        huge = tuple(p for p, _ in self.snap.oversized_ignored(cp.ignored))  # kept with the attempt, never read
        now, _ = self.snap.ignored_tree(cp.ignored, cp.ignored_index, leave=huge)
        hit = sorted(path for status, path in self.snap.diff(cp.ignored_tree, now)
                     if status != "A" and (agent is None or path in agent))
        if not hit:
            return None
        folder = rollback._put_aside_folder(self.common_dir, cp.name)
        idx = self.snap.temp_index(seed=False)
        old = os.umask(0o077)  # the user's secrets, readable by the user alone
        try:
            env = {"GIT_INDEX_FILE": idx}
            self.git("read-tree", cp.ignored_tree, env=env)
            self.git("checkout-index", "-f", "-z", "--stdin", f"--prefix={folder}/", env=env, input=nul_join(hit))
        finally:
            os.umask(old)
            unlink_index(idx)
        return (f"the attempt changed ignored files of yours ({refs.few(hit, 5)}); your versions are saved in {folder} "
                f"(`cp {folder}/{hit[0]} {hit[0]}` brings one back)")

    def restore(self, cp: Checkpoint, keep_as: str | None = None, what: str | None = None,
                recovering: bool = False) -> RestoreReport:
        """Undo everything since ``cp`` (see :mod:`.rollback`). ``keep_as``: first keep what the rollback
        undoes, redacted, in acr's store of kept attempts (:mod:`.kept`) under that name, so the rollback itself
        never loses anything; ``what``: how that copy describes itself. ``recovering`` (``acr recover``, maybe
        days later): files over the attempt's budget may be the user's since, and are moved aside rather than
        deleted."""
        self.git.invalidate()
        keep = None
        if keep_as:
            def keep(tree: str) -> tuple[str | None, list[str]]:
                return self.kept.keep(self.git, keep_as, cp.tree, tree, what or f"attempt {keep_as}, before its rollback")
        report = rollback.restore(self.snap, cp, keep, self.publish, recovering)
        if report.saved_as:
            try:
                listed, self.kept.listed = self.kept.listed, None  # (what this restore's keep() read)
                self.kept.prune(names=listed)
            except WorkspaceError:  # older copies left a while longer: never a failed rollback
                pass
        return report

    def restore_repository(self, cp: Checkpoint) -> RestoreReport:
        """Put back the repository's own files, index, refs and HEAD as at ``cp``; the work tree's files stay
        (:func:`rollback.restore_repository`)."""
        self.git.invalidate()
        return rollback.restore_repository(self.snap, cp, self.publish)

    def publish(self, loose: bool = True) -> None:
        """Copy acr's objects into the repository, so a ref there can point at them."""
        self.store.publish(self.common_dir / "objects", loose)

    # ------------------------------------------------------------------ one attempt

    @contextmanager
    def attempt(self, name: str, marker: str = "") -> Iterator["Guard"]:
        """Guard one attempt: checkpoint on enter (whole or not at all), then on exit keep the work if
        ``guard.passed`` was set, else roll back with signals deferred. A failed rollback is not raised:
        it is in ``guard.error`` and the checkpoint stays for ``acr recover``."""
        cp = None
        try:
            with interrupts.deferred():  # taken whole or not at all
                cp = self.checkpoint(name, marker)
        except KeyboardInterrupt:  # cancelled before the agent started: nothing to undo
            if cp is not None:
                self.drop(cp)
            raise
        guard = Guard(self, cp)
        try:
            yield guard
        except BaseException:
            guard.finish(rollback_anyway=True)
            raise
        guard.finish()


def _inside(path: Path, root: Path) -> tuple[str, ...]:
    """``path`` relative to ``root`` when it is inside (acr's data directory in a dotfiles repository)."""
    try:
        rel = Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return ()
    return (rel.as_posix(),) if str(rel) != "." else ()


@dataclass
class Guard:
    ws: Workspace
    cp: Checkpoint
    passed: bool = False
    report: RestoreReport | None = None  # set when the attempt was rolled back
    side_effects: list[str] = field(default_factory=list)  # a kept attempt's changes besides the work tree
    kept_before: str | None = None  # Workspace.keep_overwritten's line: the user's uncommitted work it changed
    error: WorkspaceError | None = None  # the rollback failed: the checkpoint stays for `acr recover`
    done: bool = False
    oversized: tuple[tuple[str, int], ...] = ()  # files the attempt made over the budget, not in its diff
    # the ignored files the agent changed, read before the verifier ran (None: not read): what the check writes
    # afterwards is not the attempt's (keep_ignored_overwritten)
    agent_ignored: set[str] | None = None

    def changes(self) -> list[tuple[str, str]]:
        return self.ws.changes(self.cp)

    def diffstat(self) -> list[tuple[str, int | None, int | None]]:
        shot = self.ws.attempt_tree(self.cp)
        self.oversized = shot.oversized
        return self.ws.diffstat(self.cp, shot)

    def touched(self) -> Changes:
        """What the attempt changed so far (Workspace.touched); call it as the agent ends, before the verifier."""
        changes = self.ws.touched(self.cp)
        self.agent_ignored = {path for _, path in changes.ignored}
        return changes

    def rollback(self) -> RestoreReport | None:
        """Roll back now (idempotent); the checkpoint is dropped once the work tree is back."""
        if self.done:
            return self.report
        self.done = True
        with interrupts.deferred():
            try:
                self.report = self.ws.restore(self.cp, keep_as=self.cp.name)
            except WorkspaceError as e:
                self.error = e
                return None
            self.ws.drop(self.cp)
        return self.report

    def abandon(self) -> None:
        """Roll nothing back and keep the checkpoint (for ``acr recover``): the repository is gone."""
        self.done = True

    def finish(self, rollback_anyway: bool = False) -> None:
        if self.done:
            return
        if self.passed and not rollback_anyway:
            self.done = True
            with interrupts.deferred():
                self.side_effects = self.ws.side_effects(self.cp)
                if self.oversized:
                    self.side_effects.append(
                        "made files over the size budget acr reads an attempt's files within, kept but not in the "
                        "diff shown: " + ", ".join(f"{p} ({rollback.size_text(n)})" for p, n in self.oversized))
                kept = [self.ws.keep_overwritten(self.cp, [path for _, path in self.changes()]),
                        self.ws.keep_ignored_overwritten(self.cp, self.agent_ignored)]
                self.kept_before = "; ".join(k for k in kept if k) or None
                self.ws.note_kept(self.cp.name)
                self.ws.drop(self.cp)
            return
        self.rollback()
