"""Snapshots of the work tree as git trees, and what a tree cannot say about it.

* The work tree (tracked changes and untracked, non-ignored files) is written as a tree through a
  temporary index seeded from the user's (only changed files are re-hashed); the user's index,
  branch and files are not touched. After an attempt the seed is the checkpoint's copy of the
  user's index, never the index the attempt left (``: > .git/index`` must not stop a rollback).
  Files marked skip-worktree or assume-unchanged are read from disk; a sparse checkout's absent
  files stay as committed.
* What git is asked to hash is listed first (``ls-files``: files whose stat changed, untracked
  files, nested repositories), so that after an attempt a file it made or grew past the budget
  (``truncate -s 2T data.bin``) is left out rather than read, a path git refuses (``git~1``, an
  NTFS alias of ``.git``) or cannot read is named exactly, even when it holds a newline, and a
  file whose attributes git cannot apply (a planted ``working-tree-encoding``) is hashed as its
  bytes, without attributes.
* Ignored files (a ``.env``, local settings, small data) go in a second tree: every ignored entry
  as git lists it, smallest first, within ``IGNORED_MAX_BYTES`` and ``IGNORED_MAX_FILES``; a
  directory is kept whole or not at all.
* What a tree does not record: the exact bytes of files git would convert (a filter, an ``eol``,
  ``working-tree-encoding`` or ``ident`` attribute; acr's git runs no filter, so these are written
  back byte for byte), permission bits git would not write back, and the directories inside
  untracked ones.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import NamedTuple

from acr_cli.errors import WorkspaceError
from acr_cli.workspace.git import Git

IGNORED_MAX_BYTES = 64 * 2**20  # hashing this much takes well under a second per checkpoint
IGNORED_MAX_FILES = 5000  # a dependency tree is larger: it is reinstalled, not restored
UNTRACKED_DIRS_MAX = 2000  # directories listed inside untracked ones per checkpoint (~10 ms at most)
# What a failed attempt made is hashed only within a budget: a file it made or changed over ATTEMPT_FILE_MAX,
# or beyond ATTEMPT_MAX_BYTES of them all (largest last), is left out of every snapshot and deleted by the
# rollback (`truncate -s 2T data.bin` made a rollback hash 2 TB; 48 GB made one attempt a 16-minute run).
ATTEMPT_FILE_MAX = 256 * 2**20
ATTEMPT_MAX_BYTES = 1 * 2**30
LARGE_MIN = 2**20  # a checkpoint notes the changed or untracked files this large (see Snapshot.large)
PATHSPECS_MAX = 300  # more paths to hash than this: git add walks the whole tree instead of matching each one
GITLINK = "160000"  # the mode of a nested repository (submodule) in a tree
CONVERTING = ("filter", "eol", "working-tree-encoding", "ident")  # attributes that make git change a file's bytes


class Snapshot(NamedTuple):
    tree: str
    sparse_absent: frozenset[str]  # files a sparse checkout leaves off disk
    unreadable: tuple[str, ...] = ()  # paths git could not read or refuses, left out (see Snapshots.take)
    oversized: tuple[tuple[str, int], ...] = ()  # (path, size): over the attempt's budget, left out
    nested: tuple[str, ...] = ()  # nested repositories (untracked directories holding one), born or not
    large: dict[str, list] = {}  # path -> signature of the changed or untracked files >= LARGE_MIN


class After(NamedTuple):
    """What a snapshot taken after an attempt reads from its checkpoint: the user's index (the seed, with
    the mtime it had: git's racy-entry check needs it) and the large files that were there already."""

    index: bytes | None
    index_mtime: int | None
    large: dict[str, list]


class Snapshots:
    """``private``: paths inside the work tree that are acr's own (its data directory when the project
    holds it, e.g. a dotfiles repository in ``$HOME``): never snapshotted, so never rolled back."""

    def __init__(self, git: Git, tmp_dir: Path, private: tuple[str, ...] = ()):
        self.git = git
        self.root = git.root
        self.tmp_dir = tmp_dir
        self.private = private
        self._sparse_flag: list[str] | None = None
        self._file_mode: bool | None = None
        self._links: dict[str, dict[str, str]] = {}

    # ------------------------------------------------------------------ the work tree

    def temp_index(self, seed: bool, after: After | None = None) -> str:
        """A temporary index in acr's own folder (never in ``.git``, which the attempt may have made
        read-only), seeded when ``seed``: from ``after`` (the checkpoint's copy of the user's index), else
        from the user's index if it can be read as a file."""
        self.tmp_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, path = tempfile.mkstemp(prefix="acr-index-", dir=self.tmp_dir)
        os.close(fd)
        os.unlink(path)  # git wants to create it; a missing file is an empty index
        real = self.git.git_dir / "index"
        if seed and after is not None:
            if after.index is not None:
                Path(path).write_bytes(after.index)
                # its own mtime (an older checkpoint kept none: 1 s, so every entry is racy and re-read)
                stamp = after.index_mtime if after.index_mtime is not None else 10**9
                os.utime(path, ns=(stamp, stamp))
        elif seed and real.is_file() and not real.is_symlink():
            try:
                # copy2 keeps the mtime: git's racy-entry check then works as on the real index
                shutil.copy2(real, path)  # reuse its stat cache: only changed files are re-hashed
            except OSError:
                pass  # unreadable: every file is hashed instead
        return path

    def tree(self, sparse_absent: frozenset[str] | None = None, unreadable_ok: bool = True,
             after: After | None = None) -> str:
        """The work tree as a tree, after an attempt. ``sparse_absent``: the checkpoint's files a sparse
        checkout left off disk (only those stay "as committed" while absent; see :meth:`_list`)."""
        return self.take(sparse_absent, unreadable_ok, after).tree

    def take(self, sparse_absent: frozenset[str] | None = None, unreadable_ok: bool = False,
             after: After | None = None) -> "Snapshot":
        """The tree, the files a sparse checkout leaves off disk now, and the paths git could not read.

        What git must hash is listed first: files whose stat differs from the seed, untracked files,
        nested repositories and submodules; only those are given to ``git add``. A nested repository
        without a commit cannot be added: it is left out of every snapshot, so a rollback never rewrites
        it either (one that appeared is in ``nested``, for the rollback to move aside).

        With ``after`` (a snapshot after an attempt): seeded from the checkpoint's copy of the user's
        index; the files the attempt made or changed over the budget are left out, unread (tracked
        ones then read as deleted), and listed in ``oversized``; a path git cannot read (a FIFO or socket
        where a file was, a file made unreadable) or refuses (``git~1``) is left out too and listed in
        ``unreadable``: the tree then says it is gone, and the rollback puts the checkpoint's back (or
        removes it, when it is new); a file whose attributes git cannot apply (a planted
        ``working-tree-encoding``) is hashed as its bytes. Before an attempt (``unreadable_ok`` False)
        such a path stops the checkpoint with git's message: it is the user's, and cannot be kept."""
        idx = self.temp_index(seed=True, after=after)
        try:
            env = {"GIT_INDEX_FILE": idx}
            absent, files, nested, gitlinks = self._list(env, sparse_absent)
            large, repositories = self._inspect(files)
            if repositories:  # a tracked file the attempt replaced by a repository (`git init` or a clone there)
                files = [f for f in files if f not in repositories]
                nested += repositories
            oversized = over_budget(large, after.large) if after is not None else []
            if oversized:
                out = {p for p, _ in oversized}
                files = [f for f in files if f not in out]
                self.git("update-index", "-z", "--force-remove", "--stdin", env=env,
                         input=nul_join(sorted(out)))  # a tracked one reads as deleted, never as unchanged
            unreadable = self._add(env, files, nested + gitlinks, unreadable_ok, {p for p, _ in oversized})
            tree = self.git("write-tree", env=env).decode().strip()
            return Snapshot(tree, absent, tuple(unreadable), tuple(oversized), tuple(nested),
                            {p: sig for p, (_, sig) in large.items()})
        finally:
            unlink_index(idx)

    def _inspect(self, files: list[str]) -> tuple[dict[str, tuple[int, list]], list[str]]:
        """(path -> (size, signature) of the regular files among ``files`` of at least ``LARGE_MIN`` bytes, the
        paths among them that are now a folder holding a repository)."""
        out, repositories = {}, []
        for f in files:
            try:
                st = os.lstat(os.path.join(self.root, f))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                if st.st_size >= LARGE_MIN:
                    out[f] = (st.st_size, [st.st_size, st.st_mtime_ns, st.st_ino])
            elif stat.S_ISDIR(st.st_mode) and os.path.lexists(os.path.join(self.root, f, ".git")):
                repositories.append(f)
        return out, repositories

    def _add(self, env: dict, files: list[str], nested: list[str], lenient: bool, leave: set[str]) -> list[str]:
        """Hash ``files`` and the ``nested`` repositories into the index ``env`` names (``leave``: paths not to
        hash); returns the paths left out as unreadable or refused (only when ``lenient``, after an attempt:
        before one, git's message stops the checkpoint).

        A path git names in its refusal is matched exactly against the list (a name may hold a newline or a
        quote). After an attempt, a file git cannot convert (its attributes: a planted
        ``working-tree-encoding``, an encoding git does not know) is hashed as it is on disk, with no
        attribute read; so is every file when git dies naming none."""
        adding = _Adding(files, nested)
        if files and self._update(env, files):  # the usual case: plain files, which git takes without a word
            adding.files = []
        while True:
            todo = adding.todo()
            if not todo:
                break
            try:
                self._git_add(env, todo, leave | adding.left_to_git())
                break
            except WorkspaceError as e:
                self._refused(env, e, todo, adding, lenient)
        unreadable = adding.unreadable
        if adding.raw:
            unreadable += self._add_raw(env, adding.raw)
        return unreadable

    def _refused(self, env: dict, error: WorkspaceError, todo: list[str], adding: _Adding, lenient: bool) -> None:
        """Take in what ``git add`` refused, for the next try: a path it named is set aside as its verdict
        says; when it named none, every file is hashed raw (after an attempt), else its message stops the
        snapshot."""
        verdict = _refusals(error.message, todo, adding.nested)
        if not verdict:
            if not lenient or not adding.cooked():
                raise error
            adding.raw = list(adding.files)
            return
        if not lenient and any(why in ("unreadable", "convert") for why in verdict.values()):
            raise error
        drop = adding.take(verdict)
        if drop:  # tracked ones must not keep the seeded entry: they read as deleted
            self.git("update-index", "-z", "--force-remove", "--stdin", env=env, input=nul_join(drop))

    def _update(self, env: dict, files: list[str]) -> bool:
        """Hash ``files`` with ``update-index``, which walks nothing (``git add`` with pathspecs still reads every
        folder): True when git took them all without a word. On any complaint (a name it refuses, a file it
        cannot read or convert, a folder where a file was) the index is as it was, and :meth:`_add` asks
        ``git add``, whose messages name each path."""
        said: list[bytes] = []
        before = Path(env["GIT_INDEX_FILE"])
        kept = before.read_bytes() if before.exists() else None
        stamp = before.stat().st_mtime_ns if kept is not None else None
        ok = True
        try:
            self.git("update-index", "--add", "--remove", "--replace", "-z", "--stdin", env=env,
                     input=nul_join(files), said=said)
        except WorkspaceError:
            ok = False
        if ok and not any(said):
            return True
        if kept is None:
            before.unlink(missing_ok=True)
        else:  # (its mtime too: git's racy check reads it)
            before.write_bytes(kept)
            os.utime(before, ns=(stamp, stamp))
        return False

    def _git_add(self, env: dict, paths: list[str], leave: set[str]) -> None:
        """``git add -A`` of exactly ``paths`` (or of everything but ``leave``, when they are many: matching
        each against thousands of literal pathspecs would cost more than git's own walk)."""
        if len(paths) <= PATHSPECS_MAX:
            specs = [f":(literal){p}" for p in paths]
        else:
            specs = [".", *(f":(exclude,literal){p}" for p in sorted(leave) + list(self.private))]
        self.git("add", "-A", *self._sparse(), "--pathspec-from-file=-", "--pathspec-file-nul", env=env,
                 input=nul_join(specs))

    def _add_raw(self, env: dict, paths: list[str]) -> list[str]:
        """Put ``paths`` in the index as their bytes on disk, with no attribute, filter or conversion (git's
        ``hash-object --no-filters``); returns those that could not be read."""
        regular, links, gone, bad = [], {}, [], []
        for p in paths:
            try:
                st = os.lstat(self.root / p)
            except FileNotFoundError:
                gone.append(p)
                continue
            except OSError:
                bad.append(p)
                continue
            if stat.S_ISREG(st.st_mode):
                regular.append((p, "100755" if st.st_mode & stat.S_IXUSR else "100644"))
            elif stat.S_ISLNK(st.st_mode):
                links[p] = os.fsencode(os.readlink(self.root / p))
            elif stat.S_ISDIR(st.st_mode):
                gone.append(p)  # a directory where a file was: its files are listed themselves
            else:
                bad.append(p)
        lines = []
        if regular:
            try:
                out = self.git("hash-object", "-w", "--no-filters", "--stdin-paths",
                               input=b"".join(c_quote(p) + b"\n" for p, _ in regular))
                lines += [f"{mode} {blob}\t{p}" for (p, mode), blob in zip(regular, out.decode().split())]
            except WorkspaceError:  # one of them cannot be read: each on its own
                for p, mode in regular:
                    try:
                        blob = self.git("hash-object", "-w", "--no-filters", "--stdin-paths",
                                        input=c_quote(p) + b"\n").decode().strip()
                        lines.append(f"{mode} {blob}\t{p}")
                    except WorkspaceError:
                        bad.append(p)
        for p, target in links.items():
            blob = self.git("hash-object", "-w", "--no-filters", "--stdin", input=target).decode().strip()
            lines.append(f"120000 {blob}\t{p}")
        if gone or bad:
            self.git("update-index", "-z", "--force-remove", "--stdin", env=env, input=nul_join(gone + bad))
        if lines:
            self.git("update-index", "--add", "--replace", "-z", "--index-info", env=env, input=nul_join(lines))
        return bad

    def _sparse(self) -> list[str]:
        """``--sparse`` in a sparse checkout: git add refuses files outside the cone without it."""
        if self._sparse_flag is None:
            on = self.git("config", "--bool", "--get", "core.sparseCheckout", check=False).strip() == b"true"
            self._sparse_flag = ["--sparse"] if on else []
        return self._sparse_flag

    def _list(self, env: dict, sparse_absent: frozenset[str] | None
              ) -> tuple[frozenset[str], list[str], list[str], list[str]]:
        """What git must hash, in one ``ls-files``: (the files a sparse checkout leaves off disk, the files to
        hash, the nested repositories in untracked folders, the submodules the index holds). Files to hash:
        those whose stat differs from the index, untracked ones, and those the index tells git not to read.

        ``skip-worktree`` and ``assume-unchanged`` (a local config edited on purpose) tell git not to
        read a file, so a snapshot would hold the committed version and a rollback would lose the
        user's: those bits are cleared. A skip-worktree file missing from disk is a sparse checkout's:
        at the checkpoint (``sparse_absent`` None) it stays as committed, and all such files are
        returned; later, only those listed stay, any other missing one was deleted. A submodule is
        always added: a new commit checked out in one is no change of stat."""
        modes = ["-s"] if _may_hold_gitlinks(Path(env["GIT_INDEX_FILE"]), self.git.git_dir) else []
        raw = self.git("ls-files", "-z", "-v", *modes, "-c", "-m", "-o", "--exclude-standard", "--", ".",
                       *(f":(exclude,literal){p}" for p in self.private), env=env)
        listing = _Listing.read(raw, bool(modes), self.root)
        deleted = [] if sparse_absent is None else [p for p in listing.skip_gone if p not in sparse_absent]
        # one flag per call: git applies only the last of several to --stdin paths
        for paths, flag in ((listing.skip_here, "--no-skip-worktree"), (listing.assumed, "--no-assume-unchanged"),
                            (deleted, "--force-remove")):
            if paths:
                self.git("update-index", "-z", flag, "--stdin", env=env, input=nul_join(paths))
        files = list(dict.fromkeys(listing.files + listing.skip_here + listing.assumed))
        gitlinks = [g for g in dict.fromkeys(listing.gitlinks) if g not in listing.nested]
        return frozenset(listing.skip_gone), files, listing.nested, gitlinks

    def tree_files(self, tree: str) -> list[str]:
        listed = self.git("ls-tree", "-r", "-z", "--name-only", tree).decode("utf-8", "surrogateescape")
        return [e for e in listed.split("\0") if e]

    def files(self) -> list[str]:
        """Every file a snapshot holds (tracked and untracked, not ignored)."""
        raw = self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return sorted({f for f in raw.decode("utf-8", "surrogateescape").split("\0") if f})

    # ------------------------------------------------------------------ what a tree does not record

    def modes(self, files: list[str]) -> dict[str, int]:
        """Permission bits git would not write back: a file is checked out 0666 or 0777 less the umask, so
        a ``chmod 600 .env`` (or any mode, with core.fileMode off) is kept here (path -> mode)."""
        umask = current_umask()
        if self._file_mode is None:
            self._file_mode = self.git("config", "--bool", "--get", "core.fileMode", check=False).strip() != b"false"
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

    def dir_modes(self, files: list[str], dirs: frozenset[str]) -> dict[str, int]:
        """Permission bits of the directories holding ``files`` and of ``dirs`` that a directory made now
        would not get (``0777`` less the umask): a ``chmod 700 private`` is kept here (path -> mode)."""
        plain = 0o777 & ~current_umask()
        out = {}
        for d in folders(files) | set(dirs):
            while d and d not in out:
                try:
                    st = os.lstat(self.root / d)
                except OSError:
                    break
                if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) != plain:
                    out[d] = stat.S_IMODE(st.st_mode)
                else:
                    out.setdefault(d, -1)  # seen, plain: its parents may still differ
                d = os.path.dirname(d)
        return {d: m for d, m in out.items() if m >= 0}

    def repositories_in(self, dirs: set[str]) -> list[str]:
        """Those of ``dirs`` (the folders holding the files, see :func:`folders`) and their parents that hold a
        ``.git``: a repository git's trees do not show (``git init src`` where ``src`` holds tracked files; its
        ``core.fsmonitor`` would run on the user's next ``git status`` there). One ``lstat`` per folder."""
        every: set[str] = set()
        for d in dirs:
            while d and d not in every:
                every.add(d)
                d = d.rpartition("/")[0]
        return sorted(d for d in every if os.path.lexists(os.path.join(self.root, d, ".git")))

    def unpopulated_submodules(self) -> tuple[str, ...]:
        """The paths .gitmodules declares that are not checked out: an empty folder, or none at all (only
        those: a folder that holds anything is not a submodule's to empty again after the attempt)."""
        if not (self.root / ".gitmodules").is_file():
            return ()
        out = self.git("config", "-z", "-f", str(self.root / ".gitmodules"), "--get-regexp", r"^submodule\..*\.path$",
                       check=False).decode("utf-8", "surrogateescape")
        paths = [e.split("\n", 1)[1] for e in out.split("\0") if "\n" in e]
        found = []
        for p in paths:
            if not p or ".." in p.split("/") or p.startswith("/"):
                continue
            where = self.root / p
            try:
                empty = not os.path.lexists(where) or (where.is_dir() and not where.is_symlink()
                                                       and not any(where.iterdir()))
            except OSError:  # unreadable: not ours to empty
                empty = False
            if empty:
                found.append(p)
        return tuple(found)

    def raw_copies(self, files: list[str]) -> dict[str, str]:
        """Exact bytes of the files git would convert, as blobs (path -> blob id).

        A checkpoint tree holds what the user's index holds for an unchanged file: with a clean filter
        (nbstripout drops a notebook's outputs, LFS stores a pointer), an ``eol`` attribute, a
        ``working-tree-encoding`` (a UTF-16BE file would come back as git writes UTF-16: little-endian) or
        ``ident`` (``$Id$`` expanded) that is not the user's bytes, and acr's git runs no filter on the way
        back. So these files are kept as they are on disk. Line endings under a plain ``text`` attribute
        follow git's normalisation."""
        files = [f for f in files if "\n" not in f]
        if not files or not (any(f.rsplit("/", 1)[-1] == ".gitattributes" for f in files)
                             or (self.git.common_dir / "info" / "attributes").exists() or self._global_attributes()):
            return {}
        out = self.git("check-attr", "-z", "--stdin", *CONVERTING, input=nul_join(files))
        parts = out.decode("utf-8", "surrogateescape").split("\0")
        converted = sorted({parts[i] for i in range(0, len(parts) - 2, 3)
                            if parts[i + 2] not in ("unspecified", "unset")})
        converted = [p for p in converted if (self.root / p).is_file() and not (self.root / p).is_symlink()]
        if not converted:
            return {}
        blobs = self.git("hash-object", "-w", "--no-filters", "--stdin-paths",
                         input="\n".join(converted).encode("utf-8", "surrogateescape") + b"\n")
        return dict(zip(converted, blobs.decode().split()))

    def _global_attributes(self) -> bool:
        configured = self.git("config", "--get", "core.attributesFile", check=False).decode().strip()
        xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "git" / "attributes"
        return (Path(configured).expanduser() if configured else xdg).is_file()

    # ------------------------------------------------------------------ ignored files

    def ignored_tree(self, entries: tuple[str, ...], seed: tuple[bytes, int] | None = None,
                     leave: tuple[str, ...] = ()) -> tuple[str, tuple[bytes, int]]:
        """The tree of the given ignored entries as they are now (missing ones are absent). ``leave``: files
        not to read (over the attempt's budget, :meth:`oversized_ignored`): they read as absent.

        Also returns the index it was written through (content, mtime): seeding the next
        snapshot with it lets git re-hash only the files whose stat changed."""
        idx = self.temp_index(seed=False)
        try:
            env = {"GIT_INDEX_FILE": idx, "GIT_LITERAL_PATHSPECS": "1"}
            if seed is not None:
                Path(idx).write_bytes(seed[0])
                os.utime(idx, ns=(seed[1], seed[1]))
            paths = [e.rstrip("/") for e in entries]
            gone = [p for p in paths if not os.path.lexists(self.root / p) or p in leave]
            present = [p for p in paths if p not in gone]
            if gone and seed is not None:
                # (-f: a file left unread, over the budget, is still on disk; only this index changes)
                self.git("rm", "-r", "-q", "-f", "--cached", "--ignore-unmatch", "--pathspec-from-file=-",
                         "--pathspec-file-nul", env=env, input=nul_join(gone))
            if leave and seed is not None:
                self.git("update-index", "-z", "--force-remove", "--stdin", env=env, input=nul_join(list(leave)))
            if present:  # a file git cannot read is left out (best effort), never a reason to stop a run
                specs = [f":(literal){p}" for p in present] + [f":(exclude,literal){p}" for p in leave]
                self.git("add", "-A", "-f", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul",
                         env={"GIT_INDEX_FILE": idx}, input=nul_join(specs), check=False)
            if seed is not None:  # a seeded entry git could not re-read (a FIFO where .env was) reads as gone
                listed = self.git("ls-files", "-z", env=env).decode("utf-8", "surrogateescape").split("\0")
                stale = [p for p in listed if p and not _plain(self.root / p)]
                if stale:
                    self.git("update-index", "-z", "--force-remove", "--stdin", env=env, input=nul_join(stale))
            tree = self.git("write-tree", env=env).decode().strip()
            return tree, (Path(idx).read_bytes(), os.stat(idx).st_mtime_ns)
        finally:
            unlink_index(idx)

    def oversized_ignored(self, entries: tuple[str, ...]) -> list[tuple[str, int]]:
        """(path, size) of the files in the kept ignored ``entries`` over ``IGNORED_MAX_BYTES``: no file was that
        large when they were kept, so the attempt made it so (``truncate -s 2T .env``); never to be read."""
        out = []
        for e in entries:
            top = self.root / e.rstrip("/")
            if top.is_dir() and not top.is_symlink():
                walked = ((os.path.join(parent, n) for n in names) for parent, _, names in os.walk(top))
                found = [p for batch in walked for p in batch]
            else:
                found = [str(top)]
            for f in found:
                try:
                    st = os.lstat(f)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_size > IGNORED_MAX_BYTES:
                    out.append((os.path.relpath(f, self.root), st.st_size))
        return out

    def ignored_listing(self, after: "After | None" = None) -> list[str]:
        """The ignored entries now (directories end in /), as ``git ls-files --directory`` lists them. ``after``
        (after an attempt): read through the checkpoint's copy of the user's index, never the attempt's (an
        emptied ``.git/index`` would stop git)."""
        if after is None:
            raw = self.git("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
        else:
            idx = self.temp_index(seed=True, after=after)
            try:
                raw = self.git("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory",
                               env={"GIT_INDEX_FILE": idx})
            finally:
                unlink_index(idx)
        listed = sorted(e for e in raw.decode("utf-8", errors="surrogateescape").split("\0") if e)
        # an untracked directory that only holds ignored files is listed beside them: keep the files
        return [e for i, e in enumerate(listed)
                if not (e.endswith("/") and i + 1 < len(listed) and listed[i + 1].startswith(e))]

    def without(self, tree: str, entries: tuple[str, ...], base: str) -> str:
        """``tree`` less its files at or under ``entries`` (directories end in /) that ``base`` does not
        hold: an attempt's tree without what was ignored before it (a ``.env`` it un-ignored)."""
        if not entries:
            return tree
        dirs = tuple(e for e in entries if e.endswith("/"))
        files = {e for e in entries if not e.endswith("/")}
        drop = [f for f in self.tree_files(tree) if f in files or f.startswith(dirs)]
        if drop:
            held = set(self.tree_files(base))
            drop = [f for f in drop if f not in held]
        if not drop:
            return tree
        idx = self.temp_index(seed=False)
        try:
            env = {"GIT_INDEX_FILE": idx}
            self.git("read-tree", tree, env=env)
            self.git("update-index", "-z", "--force-remove", "--stdin", env=env, input=nul_join(drop))
            return self.git("write-tree", env=env).decode().strip()
        finally:
            unlink_index(idx)

    def ignored_entries(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(kept, over budget): the ignored entries, smallest first, while the budget lasts."""
        entries = self.ignored_listing()
        sized = []
        over = []
        for e in entries:
            if any((e.rstrip("/") + "/").startswith(p + "/") or p.startswith(e) for p in self.private):
                over.append(e)  # acr's own files, or a directory holding them: not the attempt's to undo
                continue
            n, size = measure(self.root / e.rstrip("/"), IGNORED_MAX_FILES, IGNORED_MAX_BYTES)
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

    def untracked_dirs(self, over: tuple[str, ...] = ()) -> tuple[frozenset[str], tuple[str, ...]]:
        """Every directory inside the untracked (or ignored) directories git lists, and the listed
        directories not walked: ignored ones over the checkpoint's budget (``over``, which a
        rollback leaves alone anyway) and ones too large to walk within this budget."""
        listed = self.git("ls-files", "-z", "--others", "--directory").decode("utf-8", errors="surrogateescape")
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

    # ------------------------------------------------------------------ outside the project

    def outside_links(self, tree: str) -> dict[str, str]:
        """Symbolic links in ``tree`` whose target is outside the work tree: path -> resolved target.
        A write through one changes a file no checkpoint holds (read once per tree: a rolled-back
        attempt leaves the same tree for the next)."""
        if tree in self._links:
            return self._links[tree]
        out = {}
        listed = self.git("ls-tree", "-r", "-z", tree).decode("utf-8", "surrogateescape")
        real_root = os.path.realpath(self.root)
        for entry in filter(None, listed.split("\0")):
            if not entry.startswith("120000 "):
                continue
            path = entry.split("\t", 1)[1]
            target = os.path.realpath(self.root / path)
            if os.path.commonpath([real_root, target]) != real_root:
                out[path] = target
        self._links = {tree: out}
        return out

    # ------------------------------------------------------------------ comparing trees

    def diff(self, old: str, new: str) -> list[tuple[str, str]]:
        """(status, path) of the paths that differ, nested repositories aside."""
        return [(status, path) for status, path, nested in self.raw_diff(old, new) if not nested]

    def _no_index(self) -> dict[str, str]:
        """For a command that compares trees alone: git reads the index all the same (``diff-tree`` does), and
        the one the attempt left may be damaged (``: > .git/index``). A missing file is an empty index."""
        return {"GIT_INDEX_FILE": str(self.tmp_dir / "acr-no-index")}

    def numstat(self, old: str, new: str) -> list[tuple[str, int | None, int | None]]:
        """(path, lines added, lines deleted; None for a binary file) per path that differs."""
        if old == new:
            return []
        raw = self.git("diff-tree", "-r", "-z", "--no-renames", "--numstat", old, new, env=self._no_index())
        out = []
        for item in raw.decode("utf-8", errors="surrogateescape").split("\0"):
            if item.count("\t") >= 2:
                added, deleted, path = item.split("\t", 2)
                out.append((path, None if added == "-" else int(added), None if deleted == "-" else int(deleted)))
        return out

    def raw_diff(self, old: str, new: str) -> list[tuple[str, str, bool]]:
        """(status, path, is a nested repository) for every path that differs between two trees."""
        if old == new:
            return []
        raw = self.git("diff-tree", "-r", "-z", "--no-renames", "--raw", old, new, env=self._no_index())
        parts = raw.decode("utf-8", errors="surrogateescape").split("\0")
        out = []
        for i in range(0, len(parts) - 1, 2):  # ":<old mode> <new mode> <old sha> <new sha> <status>", path
            old_mode, new_mode, _, _, status = parts[i].lstrip(":").split(" ")
            out.append((status[0], parts[i + 1], GITLINK in (old_mode, new_mode)))
        return out


# What git add says of a path it will not take (LC_ALL=C), the path quoted as it prints it.
_UNREADABLE = ("error: {}: can only add regular files", 'error: open("{}"): ', "error: unable to index file '{}'",
               "error: read error while indexing {}\n", "error: invalid path '{}'", "error: unable to add '{}' to index")
_GONE = "fatal: pathspec ':(literal){}' did not match any files"  # it went between the listing and git add
_UNBORN = ("error: '{}/' does not have a commit checked out", "error: '{}' does not have a commit checked out")


class _Listing:
    """The entries of ``ls-files -z -v [-s] -c -m -o`` sorted by what a snapshot does with them."""

    def __init__(self) -> None:
        self.files: list[str] = []  # stat changed, gone, unmerged, or untracked: to hash
        self.nested: list[str] = []  # untracked folders holding a repository
        self.gitlinks: list[str] = []  # submodules the index holds
        self.skip_here: list[str] = []  # skip-worktree, on disk
        self.skip_gone: list[str] = []  # skip-worktree, off disk (a sparse checkout's, or deleted)
        self.assumed: list[str] = []  # assume-unchanged

    @classmethod
    def read(cls, raw: bytes, modes: bool, root: Path) -> _Listing:
        """``modes``: the listing has each entry's mode (``-s``), which tells a submodule."""
        listing = cls()
        for e in raw.decode("utf-8", "surrogateescape").split("\0"):
            tag = e[:2]
            if tag == "H " and not (modes and e.startswith(GITLINK, 2)):  # (nearly every entry: nothing to do)
                continue
            if tag == "? ":  # untracked: "? path" (a nested repository's ends in /)
                (listing.nested.append(e[2:-1]) if e.endswith("/") else listing.files.append(e[2:]))
                continue
            path = e.partition("\t")[2] if modes else e[2:]
            if path:
                listing._tracked(tag, path, modes and e.startswith(GITLINK, 2), root)
        return listing

    def _tracked(self, tag: str, path: str, gitlink: bool, root: Path) -> None:
        if tag == "C ":  # its stat changed (or it is gone, or unmerged)
            self.files.append(path)
        elif gitlink:
            self.gitlinks.append(path)
        elif tag in ("S ", "s "):
            (self.skip_here if os.path.lexists(root / path) else self.skip_gone).append(path)
        elif tag[:1].islower():
            self.assumed.append(path)


class _Adding:
    """What :meth:`Snapshots._add` still has to hash, through the tries of ``git add``."""

    def __init__(self, files: list[str], nested: list[str]) -> None:
        self.files, self.nested = files, nested
        self.unreadable: list[str] = []  # left out: git cannot read or refuses them
        self.raw: list[str] = []  # hashed as their bytes on disk, with no attribute
        self.skipped: set[str] = set()  # nested repositories without a commit, paths gone meanwhile

    def cooked(self) -> list[str]:
        """The files still to go through git's attributes."""
        return [f for f in self.files if f not in self.raw]

    def todo(self) -> list[str]:
        return self.cooked() + [n for n in self.nested if n not in self.skipped]

    def left_to_git(self) -> set[str]:
        """Paths ``git add`` is not to take (when it walks the whole tree)."""
        return self.skipped | set(self.raw) | set(self.unreadable)

    def take(self, verdict: dict[str, str]) -> list[str]:
        """Set each refused path aside as its verdict says; returns the paths whose index entry must go."""
        for path, why in verdict.items():
            if why in ("unborn", "gone"):
                self.skipped.add(path)
            elif why == "convert":
                self.raw.append(path)
            else:
                self.unreadable.append(path)
                self.files = [f for f in self.files if f != path]
        return [p for p, why in verdict.items() if why in ("unreadable", "gone") and p not in self.nested]


def _refusals(message: str, paths: list[str], nested: list[str]) -> dict[str, str]:
    """Which of ``paths`` git's message names, and how: "unborn" (a nested repository without a commit),
    "gone" (removed since it was listed), "unreadable" (a FIFO, an unreadable file, a name git refuses:
    ``git~1``), or "convert" (named otherwise: its attributes could not be applied). Matched exactly, never
    parsed out of the message: a name may hold a newline or a quote."""
    message += "\n"
    out: dict[str, str] = {}
    for p in paths:
        if p in nested and any(form.format(p) in message for form in _UNBORN):
            out[p] = "unborn"
        elif _GONE.format(p) in message:
            out[p] = "gone"
        elif any(form.format(p) in message for form in _UNREADABLE):
            out[p] = "unreadable"
        elif f"'{p}'" in message or f'"{p}"' in message:
            out[p] = "convert"
    return out


def over_budget(large: dict[str, tuple[int, list]], before: dict[str, list]) -> list[tuple[str, int]]:
    """(path, size) of the files an attempt made or changed (``large`` now, less those ``before`` holds with the
    same signature) that are over ``ATTEMPT_FILE_MAX``, or beyond ``ATTEMPT_MAX_BYTES`` of them all, smallest
    kept first."""
    made = sorted((size, p) for p, (size, sig) in large.items() if before.get(p) != sig)
    out, total = [], 0
    for size, p in made:
        total += size
        if size > ATTEMPT_FILE_MAX or total > ATTEMPT_MAX_BYTES:
            out.append((p, size))
    return out


def c_quote(path: str) -> bytes:
    """``path`` as a line git's ``--stdin-paths`` reads back (C-quoted when it must be)."""
    raw = path.encode("utf-8", "surrogateescape")
    if not any(b in raw for b in (b"\n", b'"', b"\\", b"\r")) and not raw.startswith(b'"'):
        return raw
    out = bytearray(b'"')
    for b in raw:
        if b in (0x22, 0x5C):
            out += b"\\" + bytes([b])
        elif b < 0x20 or b == 0x7F:
            out += b"\\%03o" % b
        else:
            out.append(b)
    return bytes(out + b'"')


def _may_hold_gitlinks(index: Path, git_dir: Path) -> bool:
    """Whether the index may hold a submodule (a gitlink): only then does a listing need every entry's mode
    (``ls-files -s`` formats 2,000 object names for a 2,000-file project). A gitlink entry's 32-bit mode field
    is ``00 00 e0 00``: an index without those bytes anywhere holds none. A split index (``core.splitIndex``)
    keeps most entries in a shared file: assumed to."""
    try:
        data = index.read_bytes()
    except OSError:
        return False  # none: an empty index
    return b"\x00\x00\xe0\x00" in data or any(git_dir.glob("sharedindex.*"))


def folders(files: list[str]) -> set[str]:
    """The folders that hold ``files`` ("" for the top)."""
    return {f.rpartition("/")[0] for f in files}


def _plain(path: Path) -> bool:
    """A regular file or a symlink, as git can keep it."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def current_umask() -> int:
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


def measure(path: Path, max_files: int, max_bytes: int) -> tuple[int | None, int]:
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


def nul_join(paths: list[str]) -> bytes:
    return "\0".join(paths).encode("utf-8", errors="surrogateescape") + b"\0"


def unlink_index(idx: str) -> None:
    for p in (idx, idx + ".lock"):
        if os.path.exists(p):
            os.unlink(p)
