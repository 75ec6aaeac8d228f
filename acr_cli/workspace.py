"""Checkpoint a git work tree before an attempt and roll it back after a failed one.

How it stays safe for the user's own work:

* A checkpoint is a git *tree* of the whole work tree as it is (tracked
  changes and untracked, non-ignored files), written through a temporary index
  (``GIT_INDEX_FILE``): the user's index, branch and files are not touched.
  While the attempt runs it is also kept as a commit under
  ``refs/acr/checkpoints/`` (HEAD as its parent, the branch in its message, the
  index as a blob beside it), so ``acr recover`` can finish the rollback if acr
  itself is killed.
* Rollback compares the checkpoint with the work tree now and rewrites only
  the paths the attempt changed: files it added are deleted, files it changed
  or deleted are written back from the checkpoint. Files it did not touch are
  never rewritten, so the user's uncommitted edits stay byte for byte.
* If the attempt moved HEAD or the branch (a commit, a checkout) or changed
  the index, those are put back too. After the rollback acr re-checks that the
  tree equals the checkpoint and raises if it does not.

* Files that ``.gitignore`` hides (a ``.env``, local settings, small data) are
  kept too, in a second tree: every ignored file or directory as git lists it
  (``ls-files --others --ignored --directory``), smallest first, while the
  total stays within ``IGNORED_MAX_BYTES`` and ``IGNORED_MAX_FILES``. A
  directory is kept whole or not at all, so a rollback never leaves half of
  one (a ``node_modules`` or ``.venv`` over the budget is left as the attempt
  made it, and the log names it). Rollback restores kept entries the attempt
  changed or deleted, and removes files it added inside a kept directory; new
  ignored entries (caches, build output) are left in place.
* Git records files, not directories, so a checkpoint also lists the
  directories inside untracked ones (up to ``UNTRACKED_DIRS_MAX``; a larger one
  is opaque). A directory that did not exist then and that the rollback left
  empty is removed; the user's own directories, even empty ones, stay.

* Also kept: the exact bytes of files git converts (``<ref>-exact``), and
  permission bits git does not record and ``.git/info/exclude`` (in the
  checkpoint commit's message). Files marked
  skip-worktree or assume-unchanged are snapshotted from disk. A path a rollback
  must not touch does not stop it: the others are put back, then it says which.

* Branches and tags the attempt deleted are recreated, and stash entries it
  dropped (``git stash pop``, ``drop``, ``clear``) are stored again, on top of
  any it added; one that cannot come back (its name is taken now) is put aside
  under ``refs/acr/put-aside/``. Nothing else about refs other than HEAD's is
  undone: a branch the attempt created or moved stays (the old tip is in its
  reflog), since another work tree of the same repository may have done it.

Not covered: ignored entries over that budget and nested repositories
(submodules, clones inside the tree): rollback never deletes or rewrites one,
it leaves them as the attempt made them and the attempt's log names them. A
merge, rebase, cherry-pick, revert or bisect in progress is refused up front. Line-ending conversion is switched off for acr's own git calls.
One ``acr run`` per work tree at a time (a lock file in ``.git`` enforces it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from acr_cli.errors import WorkspaceError, printable

IGNORED_MAX_BYTES = 64 * 2**20  # hashing this much takes well under a second per checkpoint
IGNORED_MAX_FILES = 5000  # a dependency tree is larger: it is reinstalled, not restored
UNTRACKED_DIRS_MAX = 2000  # directories listed inside untracked ones per checkpoint (~10 ms at most)
NO_GIT_HINT = "rollback needs git: run `git init && git add -A && git commit -m init` first, or pass --no-rollback"
_GIT_CFG = ["-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.quotepath=false"]
CHECKPOINT_REFS = "refs/acr/checkpoints/"
ATTEMPT_REFS = "refs/acr/attempts/"  # failed attempts' trees, as they were before their rollback
ATTEMPTS_KEPT = 50
# beside a checkpoint ref: kept ignored files, the index, exact bytes, branches, tags and stash entries
SIDE_REFS = ("-ignored", "-index", "-exact", "-state")
KEPT_REFS = ("refs/heads", "refs/tags", "refs/stash")  # what a checkpoint lists (see Workspace._refs)
PUT_ASIDE_REFS = "refs/acr/put-aside/"  # refs and stash entries a rollback could not put back where they were
KEEP_ALIVE_MAX = 5000  # commits of branches, tags and stash entries a checkpoint keeps from a gc (its parents)
_UNBORN_NESTED = re.compile(r"error: '(.+)/' does not have a commit checked out$", re.M)
GITLINK = "160000"  # the mode of a nested repository (submodule) in a tree
# git's own state files of an operation in progress: a rollback could not bring them back
IN_PROGRESS = {"MERGE_HEAD": "a merge", "CHERRY_PICK_HEAD": "a cherry-pick", "REVERT_HEAD": "a revert",
               "rebase-merge": "a rebase", "rebase-apply": "a rebase or `git am`",
               "sequencer": "a cherry-pick or revert of several commits", "BISECT_LOG": "a bisect"}


@dataclass(frozen=True)
class Checkpoint:
    tree: str
    head: str | None  # commit HEAD pointed to, None in an empty repository
    branch: str | None  # refs/heads/... when HEAD was symbolic
    index: bytes | None  # the user's index file, byte for byte
    ref: str | None = None  # refs/acr/... holding the pre-run checkpoint
    ignored_tree: str | None = None  # the kept ignored entries, as a tree
    ignored: tuple[str, ...] = ()  # which ignored entries are kept (directories end in /)
    unprotected: tuple[str, ...] = ()  # ignored entries over the budget: not kept
    ignored_index: tuple[bytes, int] | None = field(default=None, repr=False)  # seeds later snapshots
    raw: dict[str, str] = field(default_factory=dict, repr=False)  # path -> blob of its exact bytes (see _raw_copies)
    # Directories no tree records (git tracks files): those inside untracked directories, and
    # ``opaque`` ones too large to list, where a rollback removes no directory. With the trees'
    # own, every directory there was, so a rollback can remove the ones the attempt created.
    # None (a checkpoint loaded by `acr recover`): directories are left alone.
    untracked_dirs: frozenset[str] | None = field(default=None, repr=False)
    opaque_dirs: tuple[str, ...] = field(default=(), repr=False)
    exclude: bytes | None = field(default=None, repr=False)  # .git/info/exclude, ignore rules outside the tree
    exclude_kept: bool = field(default=False, repr=False)  # False (`acr recover`): leave that file alone
    modes: dict[str, int] | None = field(default=None, repr=False)  # see Workspace._modes; None: not known
    sparse_absent: frozenset[str] | None = field(default=None, repr=False)  # see Workspace._unhide
    refs: dict[str, str] | None = field(default=None, repr=False)  # branches and tags (name -> object); None: not known
    stash: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # stash entries, newest first: (commit, message)


class Workspace:
    def __init__(self, root: Path, git_dir: Path):
        self.root = root
        self.git_dir = git_dir
        self._lock_fd: int | None = None
        self._ignored_seed: tuple[tuple[str, ...], tuple[bytes, int]] | None = None  # last checkpoint's
        self._sparse_flag: list[str] | None = None
        self._git_paths: dict[str, Path] = {}
        self._file_mode: bool | None = None  # core.fileMode (git records the exec bit)
        self._left: list[str] = []  # paths the current restore could not undo (see restore)
        self.refs_put_back: list[str] = []  # what the last restore recreated: refs, "stash: <message>"
        self.refs_put_aside: list[str] = []  # ... and what it could not, and where that went instead

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, project: Path) -> "Workspace":
        if shutil.which("git") is None:
            raise WorkspaceError("git is not installed", hint=NO_GIT_HINT)
        r = subprocess.run(["git", "-C", str(project), "rev-parse", "--show-toplevel", "--absolute-git-dir"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise WorkspaceError(f"{project} is not inside a git repository", hint=NO_GIT_HINT)
        top, git_dir = r.stdout.splitlines()[:2]
        return cls(Path(top), Path(git_dir))

    def lock(self) -> None:
        """Refuse a second concurrent ``acr run`` in the same work tree."""
        import fcntl

        fd = os.open(self.git_dir / "acr-run.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkspaceError(
                f"another `acr run` is working in {self.root}",
                hint="wait for it, or use a separate `git worktree` for parallel runs",
            ) from None
        self._lock_fd = fd

    def ensure_no_operation_in_progress(self) -> None:
        """Refuse to start while a merge, rebase, cherry-pick, revert or bisect is under way: an attempt that
        commits, aborts or resets it would end git's operation state, and a rollback cannot restore that."""
        for name, what in IN_PROGRESS.items():
            if (self.git_dir / name).exists():
                raise WorkspaceError(f"{what} is in progress in {self.root}",
                                     hint="finish or abort it first (see `git status`), or pass --no-rollback")

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ git plumbing

    def _git(self, *args: str, env: dict | None = None, input: bytes | None = None, check: bool = True) -> bytes:
        full_env = dict(os.environ, LC_ALL="C")  # messages acr reads are git's English ones
        full_env.update(env or {})
        r = subprocess.run(["git", *_GIT_CFG, "-C", str(self.root), *args], capture_output=True, env=full_env,
                           input=input, stdin=None if input is not None else subprocess.DEVNULL)
        if r.returncode != 0 and check:
            msg = r.stderr.decode(errors="replace").strip()
            raise WorkspaceError(f"git {args[0]} failed: {msg}")
        return r.stdout

    def _temp_index(self, seed: bool) -> str:
        fd, path = tempfile.mkstemp(prefix="acr-index-", dir=self.git_dir)
        os.close(fd)
        os.unlink(path)  # git wants to create it; a missing file is an empty index
        real = self.git_dir / "index"
        if seed and real.exists():
            # copy2 keeps the mtime: git's racy-entry check then works as on the real index
            shutil.copy2(real, path)  # reuse its stat cache: only changed files are re-hashed
        return path

    def _snapshot_tree(self, sparse_absent: frozenset[str] | None = None) -> str:
        """The work tree as a tree. ``sparse_absent``: the checkpoint's files a sparse checkout left off disk
        (only those stay "as committed" while absent; see :meth:`_unhide`)."""
        return self._snapshot(sparse_absent)[0]

    def _snapshot(self, sparse_absent: frozenset[str] | None = None) -> tuple[str, frozenset[str]]:
        """(tree, the files a sparse checkout leaves off disk now): see :meth:`_snapshot_tree`."""
        idx = self._temp_index(seed=True)
        try:
            env = {"GIT_INDEX_FILE": idx}
            absent = self._unhide(env, sparse_absent)
            # A nested repository without a commit cannot be added (git stops at the first one): such a
            # directory is left out of every snapshot, so a rollback never touches it either.
            skip: list[str] = []
            while True:
                try:
                    self._git("add", "-A", *self._sparse(), "--", ".", *(f":(exclude,literal){p}" for p in skip),
                              env=env)
                    break
                except WorkspaceError as e:
                    found = [p for p in _UNBORN_NESTED.findall(e.message) if p not in skip]
                    if not found:
                        raise
                    skip += found
            return self._git("write-tree", env=env).decode().strip(), absent
        finally:
            _unlink_index(idx)

    def _sparse(self) -> list[str]:
        """``--sparse`` in a sparse checkout: git add refuses files outside the cone without it (and a
        file there, the user's or the agent's, would then stop the snapshot)."""
        if self._sparse_flag is None:
            on = self._git("config", "--bool", "--get", "core.sparseCheckout", check=False).strip() == b"true"
            self._sparse_flag = ["--sparse"] if on else []
        return self._sparse_flag

    def _unhide(self, env: dict, sparse_absent: frozenset[str] | None) -> frozenset[str]:
        """Make the snapshot's own index read every file on disk, whatever bits the user's index has.

        ``skip-worktree`` and ``assume-unchanged`` (a local config edited on purpose) tell git not to
        read a file, so a snapshot would hold the committed version and a rollback would lose the
        user's: those bits are cleared. A skip-worktree file missing from disk is a sparse checkout's:
        at the checkpoint (``sparse_absent`` None) it stays as committed, and all such files are
        returned; later, only those listed stay, any other missing one was deleted."""
        listed = self._git("ls-files", "-v", "-z", env=env).decode("utf-8", "surrogateescape").split("\0")
        skip_here, skip_gone, assumed = [], [], []
        for e in listed:
            if len(e) < 3:
                continue
            tag, path = e[0], e[2:]
            if tag in "Ss":
                (skip_here if os.path.lexists(self.root / path) else skip_gone).append(path)
            elif tag.islower():
                assumed.append(path)
        deleted = [] if sparse_absent is None else [p for p in skip_gone if p not in sparse_absent]
        # one flag per call: git applies only the last of several to --stdin paths
        for paths, flag in ((skip_here, "--no-skip-worktree"), (assumed, "--no-assume-unchanged"),
                            (deleted, "--force-remove")):
            if paths:
                self._git("update-index", "-z", flag, "--stdin", env=env, input=_nul_join(paths))
        return frozenset(skip_gone)

    def _tree_files(self, tree: str) -> list[str]:
        listed = self._git("ls-tree", "-r", "-z", "--name-only", tree).decode("utf-8", "surrogateescape")
        return [e for e in listed.split("\0") if e]

    def _files(self) -> list[str]:
        """Every file a snapshot holds (tracked and untracked, not ignored)."""
        raw = self._git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return sorted({f for f in raw.decode("utf-8", "surrogateescape").split("\0") if f})

    def _umask(self) -> int:
        """The process's umask, read without setting it (``os.umask`` would, for a moment, for every thread)."""
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
        except OSError:
            pass
        mask = os.umask(0o022)
        os.umask(mask)
        return mask

    def _modes(self, files: list[str]) -> dict[str, int]:
        """Permission bits git would not write back: a file is checked out 0666 or 0777 less the umask, so
        a ``chmod 600 .env`` (or any mode, with core.fileMode off) is kept here (path -> mode)."""
        umask = self._umask()
        if self._file_mode is None:
            self._file_mode = self._git("config", "--bool", "--get", "core.fileMode", check=False).strip() != b"false"
        plain = {0o666 & ~umask, 0o777 & ~umask} if self._file_mode else {0o666 & ~umask}  # git writes these
        out = {}
        for f in files:
            try:
                st = os.lstat(self.root / f)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) not in plain:
                out[f] = stat.S_IMODE(st.st_mode)
        return out

    def _raw_copies(self, files: list[str]) -> dict[str, str]:
        """Exact bytes of the files git converts on the way in and out, as blobs (path -> blob id).

        A checkpoint tree holds what ``git add`` makes of a file: with a clean filter (nbstripout drops a
        notebook's outputs) or an ``eol`` attribute that is not the user's bytes, and writing it back
        would lose them. LFS files are left to LFS, whose round trip is exact; so are line endings under
        a plain ``text`` attribute (git's normalisation)."""
        files = [f for f in files if "\n" not in f]
        if not files or not (any(f.rsplit("/", 1)[-1] == ".gitattributes" for f in files)
                             or self._git_path("info/attributes").exists() or self._global_attributes()):
            return {}
        out = self._git("check-attr", "-z", "--stdin", "filter", "eol", input=_nul_join(files))
        parts = out.decode("utf-8", "surrogateescape").split("\0")
        converted = sorted({parts[i] for i in range(0, len(parts) - 2, 3)
                            if parts[i + 2] not in ("unspecified", "unset", "lfs")})
        converted = [p for p in converted if (self.root / p).is_file() and not (self.root / p).is_symlink()]
        if not converted:
            return {}
        blobs = self._git("hash-object", "-w", "--no-filters", "--stdin-paths",
                          input="\n".join(converted).encode("utf-8", "surrogateescape") + b"\n")
        return dict(zip(converted, blobs.decode().split()))

    def _global_attributes(self) -> bool:
        configured = self._git("config", "--get", "core.attributesFile", check=False).decode().strip()
        xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "git" / "attributes"
        return (Path(configured).expanduser() if configured else xdg).is_file()

    def _ignored_snapshot(self, entries: tuple[str, ...],
                          seed: tuple[bytes, int] | None = None) -> tuple[str, tuple[bytes, int]]:
        """The tree of the given ignored entries as they are now (missing ones are absent).

        Also returns the index it was written through (content, mtime): seeding the next
        snapshot with it lets git re-hash only the files whose stat changed. The mtime is
        kept so that git's racy-entry check works as on a real index.
        """
        idx = self._temp_index(seed=False)
        try:
            env = {"GIT_INDEX_FILE": idx, "GIT_LITERAL_PATHSPECS": "1"}
            if seed is not None:
                Path(idx).write_bytes(seed[0])
                os.utime(idx, ns=(seed[1], seed[1]))
            paths = [e.rstrip("/") for e in entries]
            gone = [p for p in paths if not os.path.lexists(self.root / p)]
            present = [p for p in paths if p not in gone]
            if gone and seed is not None:
                self._git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--pathspec-from-file=-",
                          "--pathspec-file-nul", env=env, input=_nul_join(gone))
            if present:  # a file git cannot read is left out (best effort), never a reason to stop a run
                self._git("add", "-A", "-f", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul",
                          env=env, input=_nul_join(present), check=False)
            tree = self._git("write-tree", env=env).decode().strip()
            return tree, (Path(idx).read_bytes(), os.stat(idx).st_mtime_ns)
        finally:
            _unlink_index(idx)

    def _ignored_entries(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(kept, over budget): the ignored entries, smallest first, while the budget lasts."""
        raw = self._git("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
        listed = sorted(e for e in raw.decode("utf-8", errors="surrogateescape").split("\0") if e)
        # an untracked directory that only holds ignored files is listed beside them (sorted: right
        # before them): keep the files
        entries = [e for i, e in enumerate(listed)
                   if not (e.endswith("/") and i + 1 < len(listed) and listed[i + 1].startswith(e))]
        sized = []
        over = []
        for e in entries:
            n, size = _measure(self.root / e.rstrip("/"), IGNORED_MAX_FILES, IGNORED_MAX_BYTES)
            (over if n is None else sized).append(e if n is None else (size, n, e))
        kept: list[str] = []
        files = total = 0
        for size, n, e in sorted(sized):
            if files + n <= IGNORED_MAX_FILES and total + size <= IGNORED_MAX_BYTES:
                kept.append(e)
                files, total = files + n, total + size
            else:
                over.append(e)
        return tuple(sorted(kept)), tuple(sorted(over))

    def _head(self) -> tuple[str | None, str | None]:
        try:
            head = self._git("rev-parse", "--verify", "-q", "HEAD").decode().strip() or None
        except WorkspaceError:
            head = None
        try:
            branch = self._git("symbolic-ref", "-q", "HEAD").decode().strip() or None
        except WorkspaceError:
            branch = None
        return head, branch

    def _refs(self) -> tuple[dict[str, str], tuple[tuple[str, str], ...], list[str]]:
        """(branches and tags: name -> object, stash entries newest first: (commit, message), the
        commits all of them point to). Symbolic refs are left out: they follow their target."""
        fmt = "%(refname)%00%(objectname)%00%(objecttype)%00%(*objectname)%00%(*objecttype)%00%(symref)"
        listed = self._git("for-each-ref", f"--format={fmt}", *KEPT_REFS).decode("utf-8", "surrogateescape")
        refs, commits = {}, []
        for line in listed.splitlines():
            name, obj, kind, peeled, peeled_kind, symref = line.split("\0")
            if symref:
                continue
            refs[name] = obj
            if kind == "commit" or peeled_kind == "commit":
                commits.append(obj if kind == "commit" else peeled)
        stash: tuple[tuple[str, str], ...] = ()
        if refs.pop("refs/stash", None):
            log = self._git("log", "-g", "-z", "--format=%H%x00%gs", "refs/stash", "--", check=False)
            parts = log.decode("utf-8", "surrogateescape").split("\0")
            stash = tuple((parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2))
        return refs, stash, [sha for sha, _ in stash] + commits

    def _git_path(self, name: str) -> Path:
        """A file of the repository as git finds it (a linked worktree shares the main one's ``info/``)."""
        found = self._git_paths.get(name)
        if found is None:
            found = self._git_paths[name] = self.root / self._git("rev-parse", "--git-path", name).decode().strip()
        return found

    def _read_exclude(self) -> bytes | None:
        try:
            return self._git_path("info/exclude").read_bytes()
        except FileNotFoundError:
            return None

    def _write_exclude(self, data: bytes | None) -> None:
        path = self._git_path("info/exclude")
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data)

    def _read_index(self) -> bytes | None:
        try:
            return (self.git_dir / "index").read_bytes()
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------------ public API

    def checkpoint(self, keep_as: str | None = None) -> Checkpoint:
        exclude = self._read_exclude()
        tree, sparse_absent = self._snapshot()
        head, branch = self._head()
        refs, stash, commits = self._refs()
        index = self._read_index()
        kept, over = self._ignored_entries()
        ignored_tree = ignored_index = None
        if kept:
            last = self._ignored_seed
            ignored_tree, ignored_index = self._ignored_snapshot(kept, last[1] if last and last[0] == kept else None)
            self._ignored_seed = (kept, ignored_index)
        untracked_dirs, opaque = self._untracked_dirs(over)
        files = self._files()
        kept_files = self._tree_files(ignored_tree) if ignored_tree else []
        raw, modes = self._raw_copies(files), self._modes(files + kept_files)
        cp = Checkpoint(tree, head, branch, index, f"{CHECKPOINT_REFS}{keep_as}" if keep_as else None, ignored_tree,
                        kept, over, ignored_index, raw, untracked_dirs, opaque, exclude, exclude_kept=True,
                        modes=modes, sparse_absent=sparse_absent, refs=refs, stash=stash)
        if cp.ref:
            self._keep(cp, commits)
        return cp

    def _keep(self, cp: Checkpoint, commits: list[str]) -> None:
        """Keep everything a rollback needs in git, so `acr recover` can finish it if acr dies: the tree
        (a commit under ``cp.ref``), HEAD (its first parent), the branch, the permission bits and
        ``info/exclude`` (its message), the index (a blob under ``<ref>-index``), the kept ignored files
        (``<ref>-ignored``, restorable by hand too: ``git restore --source=<ref>-ignored -- PATH``), the
        exact-bytes blobs (the tree of ``<ref>-exact``), and the lists: branches, tags, stash entries and
        the files a sparse checkout leaves out (a blob under ``<ref>-state``). ``commits`` (what the
        branches, tags and stash entries point to) are the commit's other parents, up to
        ``KEEP_ALIVE_MAX``: so a gc during the attempt cannot prune a branch or stash entry it deleted."""
        ref, tree, head, branch, index, raw = cp.ref, cp.tree, cp.head, cp.branch, cp.index, cp.raw
        assert ref is not None
        updates = {}
        meta = {"head": head, "modes": cp.modes,
                "exclude": None if cp.exclude is None else cp.exclude.decode("latin-1")}
        message = (f"acr checkpoint {ref[len(CHECKPOINT_REFS):]}\n\nbranch: {branch or '-'}\n"
                   f"meta: {json.dumps(meta, ensure_ascii=True)}\n")  # on stdin: larger than an argument may be
        if index is not None:
            updates[ref + "-index"] = self._git("hash-object", "-w", "--stdin", input=index).decode().strip()
            message += f"index: {updates[ref + '-index']}\n"
        if cp.refs or cp.stash or cp.sparse_absent:  # a blob, not the message: the same lists are stored once
            state = {"refs": cp.refs, "stash": [list(e) for e in cp.stash],
                     "sparse_absent": sorted(cp.sparse_absent or ())}
            updates[ref + "-state"] = self._git("hash-object", "-w", "--stdin",
                                                input=json.dumps(state, ensure_ascii=True).encode()).decode().strip()
        alive = [c for c in dict.fromkeys(commits) if c != head][:KEEP_ALIVE_MAX]
        parents = [x for c in ([head] if head else []) + alive for x in ("-p", c)]
        updates[ref] = self._git("commit-tree", tree, *parents, "-F", "-", env=_ident(),
                                 input=message.encode()).decode().strip()
        if cp.ignored_tree:
            updates[ref + "-ignored"] = self._git("commit-tree", cp.ignored_tree, "-m", "acr ignored files",
                                                  env=_ident()).decode().strip()
        if raw:
            idx = self._temp_index(seed=False)
            try:
                env = {"GIT_INDEX_FILE": idx}
                info = "".join(f"100644 {blob}\t{path}\0" for path, blob in raw.items())
                self._git("update-index", "-z", "--index-info", env=env, input=info.encode("utf-8", "surrogateescape"))
                exact_tree = self._git("write-tree", env=env).decode().strip()
            finally:
                _unlink_index(idx)
            updates[ref + "-exact"] = self._git("commit-tree", exact_tree, "-m", "acr exact bytes",
                                                env=_ident()).decode().strip()
        self._git("update-ref", "--stdin", input="".join(f"update {r} {v}\n" for r, v in updates.items()).encode())

    def _untracked_dirs(self, over: tuple[str, ...] = ()) -> tuple[frozenset[str], tuple[str, ...]]:
        """Every directory inside the untracked (or ignored) directories git lists, and the listed
        directories not walked: ignored ones over the checkpoint's budget (``over``, which a
        rollback leaves alone anyway) and ones too large to walk within this budget."""
        listed = self._git("ls-files", "-z", "--others", "--directory").decode("utf-8", errors="surrogateescape")
        found: set[str] = set()
        opaque: list[str] = [e for e in over if e.endswith("/")]
        budget = UNTRACKED_DIRS_MAX
        for top in sorted((e.rstrip("/") for e in listed.split("\0") if e.endswith("/")), key=len):
            if any((top + "/").startswith(o) for o in opaque):
                continue
            if any(o.startswith(top + "/") for o in opaque):  # it holds an opaque one
                opaque.append(top + "/")
                continue
            inside = [top]
            for parent, subdirs, _ in os.walk(self.root / top):
                subdirs[:] = [d for d in subdirs if d != ".git"]  # a nested repository's own
                rel = os.path.relpath(parent, self.root)
                inside += [os.path.join(rel, d) for d in subdirs]
                if len(inside) > budget:
                    break
            if len(inside) > budget:
                opaque.append(top + "/")
            else:
                found.update(inside)
                budget -= len(inside)
        return frozenset(found), tuple(opaque)

    def has_ref(self, ref: str) -> bool:
        return bool(self._git("rev-parse", "--verify", "-q", ref, check=False).strip())

    def save_current(self, ref: str) -> str:
        """Keep the work tree as it is now (untracked files too) as a commit under ``ref``; returns ``ref``."""
        head, _ = self._head()
        parents = ["-p", head] if head else []
        commit = self._git("commit-tree", self._snapshot_tree(), *parents, "-m", f"acr: saved before {ref}",
                           env=_ident()).decode().strip()
        self._git("update-ref", ref, commit)
        return ref

    def prune_attempts(self, keep: int = ATTEMPTS_KEPT) -> int:
        """Delete all but the newest ``keep`` attempt refs; returns how many were deleted."""
        raw = self._git("for-each-ref", "--sort=-committerdate", "--format=%(refname)", ATTEMPT_REFS).decode()
        old = raw.split()[keep:]
        if old:
            self._git("update-ref", "--stdin", input="".join(f"delete {r}\n" for r in old).encode())
        return len(old)

    def interrupted_checkpoints(self) -> list[str]:
        """Checkpoints an ``acr run`` that died left behind (call while holding :meth:`lock`): oldest first."""
        raw = self._git("for-each-ref", "--sort=committerdate", "--format=%(refname)", CHECKPOINT_REFS).decode()
        return [r for r in raw.split() if not r.endswith(SIDE_REFS)]

    def load_checkpoint(self, ref: str) -> Checkpoint:
        """The checkpoint kept under ``ref``, as :meth:`checkpoint` returned it (enough to :meth:`restore`)."""
        commit = self._git("rev-parse", "--verify", ref + "^{commit}").decode().strip()
        tree = self._git("rev-parse", commit + "^{tree}").decode().strip()
        body = self._git("log", "-1", "--format=%B", commit).decode()
        meta = dict(line.split(": ", 1) for line in body.splitlines() if ": " in line)
        parent = self._git("rev-parse", "--verify", "-q", commit + "^", check=False).decode().strip() or None
        index = None
        if meta.get("index"):
            index = self._git("cat-file", "blob", meta["index"])
        branch = meta.get("branch")
        ignored_tree = self._git("rev-parse", "--verify", "-q", ref + "-ignored^{tree}", check=False).decode().strip()
        ignored: tuple[str, ...] = ()
        if ignored_tree:  # every kept file (files the attempt added inside kept directories stay)
            ignored = tuple(self._tree_files(ignored_tree))
        raw: dict[str, str] = {}
        exact = self._git("rev-parse", "--verify", "-q", ref + "-exact^{commit}", check=False).decode().strip()
        if exact:
            listed = self._git("ls-tree", "-r", "-z", exact).decode("utf-8", "surrogateescape")
            for entry in filter(None, listed.split("\0")):  # "<mode> blob <sha>\t<path>"
                info, path = entry.split("\t", 1)
                raw[path] = info.split()[2]
        extra = json.loads(meta["meta"]) if "meta" in meta else {}  # older checkpoints: none, leave those be
        modes = {k: int(v) for k, v in extra["modes"].items()} if "modes" in extra else None
        exclude, exclude_kept = extra.get("exclude"), "exclude" in extra
        parent = extra.get("head", parent)  # its other parents keep branches and stash entries alive
        state: dict = {"refs": None, "stash": (), "sparse_absent": None}
        if "head" in extra:  # written by a version that keeps these lists: none stored means empty ones
            state = {"refs": {}, "stash": (), "sparse_absent": ()}
            state.update(json.loads(self._git("cat-file", "blob", ref + "-state", check=False) or b"{}"))
        return Checkpoint(tree, parent, None if branch in (None, "-") else branch, index, ref,
                          ignored_tree or None, ignored, raw=raw, modes=modes,
                          exclude=None if exclude is None else exclude.encode("latin-1"), exclude_kept=exclude_kept,
                          refs=state["refs"], stash=tuple(tuple(e) for e in state["stash"]),
                          sparse_absent=None if state["sparse_absent"] is None else frozenset(state["sparse_absent"]))

    def changes(self, cp: Checkpoint) -> list[tuple[str, str]]:
        """(status, path) for every path that differs from the checkpoint (A/M/D/T); ignored files aside."""
        self._require_repository()
        return self._diff(cp.tree, self._snapshot_tree(cp.sparse_absent))

    def _require_repository(self) -> None:
        """After an attempt: stop with what to do if it removed the repository (``rm -rf .git``), whose
        objects held the checkpoint too."""
        if (self.git_dir / "HEAD").is_file() and os.path.lexists(self.root / ".git"):
            return
        raise WorkspaceError(
            f"the attempt removed the git repository of {self.root} (its .git), and the checkpoint with it: "
            "nothing could be rolled back, the files are as the attempt left them",
            hint="put .git back from a backup or a fresh `git clone` of your remote, then review the "
                 "changes with `git status`; acr stopped this task")

    def restore(self, cp: Checkpoint, keep_as: str | None = None) -> int:
        """Undo everything since ``cp``; returns how many paths were put back.

        ``keep_as``: first keep the tree as it is (the failed attempt's work, and anything else that
        changed meanwhile, e.g. a file the user saved during the attempt) as a commit under
        ``refs/acr/attempts/<keep_as>``, so the rollback itself never loses anything."""
        self._left, self.refs_put_back, self.refs_put_aside = [], [], []
        self._require_repository()
        now = self._snapshot_tree(cp.sparse_absent)
        if keep_as and now != cp.tree:
            parents = ["-p", cp.head] if cp.head else []
            commit = self._git("commit-tree", now, *parents, "-m", f"acr: attempt {keep_as} before its rollback",
                               env=_ident()).decode().strip()
            self._git("update-ref", f"{ATTEMPT_REFS}{keep_as}", commit)
        changed = self._undo_list(cp, now)
        # The ignore rules first (a .gitignore changed, deleted or added, and .git/info/exclude), so that
        # files ignored before the attempt do not look added, and get removed, because a rule changed.
        rules = [c for c in changed if os.path.basename(c[1]) == ".gitignore"]
        exclude_changed = cp.exclude_kept and self._read_exclude() != cp.exclude
        if exclude_changed:
            self._write_exclude(cp.exclude)
        if rules or exclude_changed:
            self._put_back(cp.tree, rules, cp.raw, cp.modes)
            changed = rules + [c for c in self._undo_list(cp, self._snapshot_tree(cp.sparse_absent)) if c not in rules]
        self._put_back(cp.tree, [c for c in changed if c not in rules], cp.raw, cp.modes)
        self._restore_deleted_refs(cp)
        self._restore_refs(cp)
        if self._read_index() != cp.index:
            self._write_index(cp.index)
        ignored_changed: list[tuple[str, str]] = []
        if cp.ignored_tree:
            now, seed = self._ignored_snapshot(cp.ignored, cp.ignored_index)
            ignored_changed = self._diff(cp.ignored_tree, now)
            self._put_back(cp.ignored_tree, ignored_changed, modes=cp.modes)
        for path, mode in (cp.modes or {}).items():  # a mode-only change (chmod 644 .env) is no diff to git
            try:
                st = os.lstat(self.root / path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != mode:
                os.chmod(self.root / path, mode)
        where = f" (saved as {cp.ref})" if cp.ref else ""
        if self._left:
            raise WorkspaceError(
                f"the rollback could not undo {len(self._left)} change(s), left as the attempt made them: "
                + "; ".join(self._left) + "; every other path is back as it was",
                hint="move those aside (or make them writable), then run `acr recover` to finish the rollback"
                     if cp.ref else f"move those aside, then restore them with `git checkout {cp.tree} -- PATH`")
        if self._diff(cp.tree, self._snapshot_tree(cp.sparse_absent)):
            raise WorkspaceError(
                f"could not restore the work tree to its checkpoint{where}",
                hint=f"inspect with `git diff {cp.tree}`; restore by hand with `git checkout {cp.ref or cp.tree} -- .`",
            )
        if cp.ignored_tree and self._ignored_snapshot(cp.ignored, seed)[0] != cp.ignored_tree:
            source = f"{cp.ref}-ignored" if cp.ref else cp.ignored_tree
            raise WorkspaceError(
                f"could not restore the ignored files to their checkpoint{where}",
                hint=f"list them with `git ls-tree -r --name-only {source}`; restore one with "
                     f"`git restore --source={source} --worktree -- PATH`",
            )
        self._remove_created_dirs(cp, [p for st, p in changed + ignored_changed if st == "A"])
        return len(changed) + len(ignored_changed)

    def _undo_list(self, cp: Checkpoint, now: str) -> list[tuple[str, str]]:
        """What differs from the checkpoint; a file the attempt created where a sparse checkout had none
        counts as added (it goes, rather than be replaced by the committed version)."""
        sparse = cp.sparse_absent or frozenset()
        return [("A" if path in sparse else status, path) for status, path in self._diff(cp.tree, now)]

    def _remove_created_dirs(self, cp: Checkpoint, removed: list[str]) -> None:
        """Remove the directories left empty by removing ``removed`` (files the attempt added) that
        did not exist at the checkpoint; a directory the user had, even an empty one, stays."""
        if cp.untracked_dirs is None or not removed:
            return
        existed = set(cp.untracked_dirs)
        for tree in filter(None, (cp.tree, cp.ignored_tree)):  # -d: the trees' directories only
            listed = self._git("ls-tree", "-r", "-d", "-z", "--name-only", tree)
            existed.update(e for e in listed.decode("utf-8", errors="surrogateescape").split("\0") if e)
        for path in sorted(removed, key=lambda p: -p.count("/")):  # deepest first
            d = os.path.dirname(path)
            while d and d not in existed and not any((d + "/").startswith(o) for o in cp.opaque_dirs):
                try:
                    os.rmdir(self.root / d)  # only ever an empty directory
                except OSError:
                    break
                d = os.path.dirname(d)

    def _diff(self, old: str, new: str) -> list[tuple[str, str]]:
        """(status, path) of the paths that differ, nested repositories aside (see :meth:`nested_changes`)."""
        return [(status, path) for status, path, nested in self._raw_diff(old, new) if not nested]

    def _raw_diff(self, old: str, new: str) -> list[tuple[str, str, bool]]:
        """(status, path, is a nested repository) for every path that differs between two trees."""
        if old == new:
            return []
        raw = self._git("diff-tree", "-r", "-z", "--no-renames", "--raw", old, new)
        parts = raw.decode("utf-8", errors="surrogateescape").split("\0")
        out = []
        for i in range(0, len(parts) - 1, 2):  # ":<old mode> <new mode> <old sha> <new sha> <status>", path
            old_mode, new_mode, _, _, status = parts[i].lstrip(":").split(" ")
            out.append((status[0], parts[i + 1], GITLINK in (old_mode, new_mode)))
        return out

    def nested_changes(self, cp: Checkpoint) -> list[str]:
        """Nested repositories (submodules, clones inside the tree) the attempt changed: rollback leaves them
        alone, since their history and files are not in the checkpoint."""
        return [path for _, path, nested in self._raw_diff(cp.tree, self._snapshot_tree(cp.sparse_absent))
                if nested]

    def _put_back(self, tree: str, changed: list[tuple[str, str]], raw: dict[str, str] | None = None,
                  modes: dict[str, int] | None = None) -> None:
        """Make the listed paths as they are in ``tree``: added ones go, the others are rewritten
        (with their exact bytes from ``raw`` where git would convert them, and their permission bits
        from ``modes`` where git would not write those)."""
        to_write: list[str] = []
        for status, path in changed:
            target = self.root / path
            try:
                if status == "A" or (status == "T" and (target.exists() or target.is_symlink())):
                    _remove(target)
                if status != "A":
                    if target.is_dir() and not target.is_symlink():  # a directory stands where a file was
                        _rmtree_unless_repository(target)
                    to_write.append(path)
            except (WorkspaceError, OSError) as e:  # the rest is still put back; restore() says what was not
                self._left.append(f"{path} ({e.message if isinstance(e, WorkspaceError) else e.strerror or e})")
        if not to_write:
            return
        idx = self._temp_index(seed=False)
        umask = self._umask()
        os.umask(0o077)  # a file written back is nobody else's to read until its own mode is set below
        try:
            env = {"GIT_INDEX_FILE": idx}
            self._git("read-tree", tree, env=env)
            try:
                self._git("checkout-index", "-f", "-z", "--stdin", env=env, input=_nul_join(to_write))
            except WorkspaceError:  # a path git cannot write (a read-only directory): the others one by one
                for path in list(to_write):
                    try:
                        self._git("checkout-index", "-f", "-z", "--stdin", env=env, input=_nul_join([path]))
                    except WorkspaceError as e:
                        self._left.append(f"{path} ({e.message.splitlines()[-1]})")
                        to_write.remove(path)
            for path in to_write:
                if raw and path in raw and (self.root / path).is_file():
                    (self.root / path).write_bytes(self._git("cat-file", "blob", raw[path]))
        finally:
            os.umask(umask)
            _unlink_index(idx)
        for path in to_write:
            st = os.lstat(self.root / path)
            if stat.S_ISREG(st.st_mode):  # a symlink's mode is its target's: never chmod through one
                default = (0o777 if st.st_mode & stat.S_IXUSR else 0o666) & ~umask  # what git would have written
                os.chmod(self.root / path, modes.get(path, default) if modes else default)

    def drop(self, cp: Checkpoint) -> None:
        if cp.ref:  # one call: deleting a ref that is not there is no error
            self._git("update-ref", "--stdin", check=False,
                      input="".join(f"delete {r}\n" for r in [cp.ref, *(cp.ref + side for side in SIDE_REFS)]).encode())

    def _restore_refs(self, cp: Checkpoint) -> None:
        head, branch = self._head()
        if cp.head is None and cp.branch and head is not None:  # an empty repository the attempt committed to
            self._git("update-ref", "-d", cp.branch)
        if branch != cp.branch:
            if cp.branch:
                self._git("symbolic-ref", "HEAD", cp.branch)
            elif cp.head:
                self._git("update-ref", "--no-deref", "HEAD", cp.head)
        if cp.head and self._head()[0] != cp.head:
            self._git("update-ref", cp.branch or "HEAD", cp.head)

    def _restore_deleted_refs(self, cp: Checkpoint) -> None:
        """Recreate the branches and tags the attempt deleted and store again the stash entries it dropped.

        Only what went missing comes back: a ref that now points elsewhere, or one that is new, may be
        another work tree's doing (they share refs), and it loses nothing where it is. Dropped stash
        entries are stored on top of the list as it is now, oldest first, so a ``git stash pop`` or
        ``clear`` leaves the list exactly as it was. What cannot come back where it was (the attempt
        made ``a/b`` where branch ``a`` was) is put aside under ``PUT_ASIDE_REFS``; none of it stops
        the rollback."""
        if cp.refs is None:
            return
        refs, stash, _ = self._refs()
        missing = {r: v for r, v in cp.refs.items() if r not in refs and r != cp.branch}
        if missing:
            lines = "".join(f"create {r} {v}\n" for r, v in missing.items()).encode("utf-8", "surrogateescape")
            if self._git_ok("update-ref", "--stdin", input=lines):
                self.refs_put_back += [printable(r) for r in missing]
            else:  # one at a time: a name taken now must not keep the others from coming back
                for r, v in missing.items():
                    if self._git_ok("update-ref", r, v, ""):  # "": only if it does not exist
                        self.refs_put_back.append(printable(r))
                    else:
                        self._put_aside(PUT_ASIDE_REFS + r[len("refs/"):], v, printable(r))
        present = {sha for sha, _ in stash}
        for sha, msg in reversed([e for e in cp.stash if e[0] not in present]):
            if self._git_ok("stash", "store", "-m", msg, sha, env=_ident()):
                self.refs_put_back.append(f"stash: {printable(msg)}")
            else:
                self._put_aside(f"{PUT_ASIDE_REFS}stash/{sha}", sha, f"stash: {printable(msg)}")

    def _put_aside(self, ref: str, obj: str, what: str) -> None:
        if self._git_ok("update-ref", ref, obj):
            self.refs_put_aside.append(f"{what} (could not come back where it was; kept as {printable(ref)})")
        else:
            self.refs_put_aside.append(f"{what} (could not come back: its objects are gone, pruned meanwhile)")

    def _git_ok(self, *args: str, env: dict | None = None, input: bytes | None = None) -> bool:
        """Run git; False where it refuses (or cannot even start, e.g. an argument over the kernel's limit)."""
        try:
            self._git(*args, env=env, input=input)
            return True
        except (WorkspaceError, OSError):
            return False

    def _write_index(self, data: bytes | None) -> None:
        real = self.git_dir / "index"
        if data is None:
            real.unlink(missing_ok=True)
            return
        tmp = real.with_name(f"index.acr-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, real)


def _measure(path: Path, max_files: int, max_bytes: int) -> tuple[int | None, int]:
    """(files, bytes) under ``path``; (None, _) once over a limit or when it holds a repository."""
    if not path.is_dir() or path.is_symlink():
        try:
            return 1, path.lstat().st_size
        except OSError:
            return None, 0
    files = size = 0
    for top, dirs, names in os.walk(path):
        if ".git" in dirs or ".git" in names:
            return None, size  # a nested repository: its history is not ours to snapshot
        for name in names:
            try:
                size += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                continue
            files += 1
            if files > max_files or size > max_bytes:
                return None, size
    return files, size


def _nul_join(paths: list[str]) -> bytes:
    return "\0".join(paths).encode("utf-8", errors="surrogateescape") + b"\0"


def _unlink_index(idx: str) -> None:
    for p in (idx, idx + ".lock"):
        if os.path.exists(p):
            os.unlink(p)


def _remove(target: Path) -> None:
    # Directories the attempt created and left empty go afterwards (Workspace._remove_created_dirs).
    if target.is_dir() and not target.is_symlink():
        _rmtree_unless_repository(target)
    else:
        target.unlink(missing_ok=True)


def _rmtree_unless_repository(target: Path) -> None:
    """Remove a directory the attempt put where a file belongs, but never one that holds a repository:
    its history and unpushed work cannot come back from a checkpoint."""
    for top, dirs, names in os.walk(target):
        if ".git" in dirs or ".git" in names:
            raise WorkspaceError("a directory holding a git repository, which a rollback never deletes")
    shutil.rmtree(target)


def _ident() -> dict[str, str]:
    stamp = str(int(time.time()))
    return {"GIT_AUTHOR_NAME": "acr", "GIT_AUTHOR_EMAIL": "acr@localhost", "GIT_COMMITTER_NAME": "acr",
            "GIT_COMMITTER_EMAIL": "acr@localhost", "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
