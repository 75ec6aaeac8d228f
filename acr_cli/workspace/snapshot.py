"""Snapshots of the work tree as git trees, and what a tree cannot say about it.

* The work tree (tracked changes and untracked, non-ignored files) is written as a tree through a
  temporary index seeded from the user's (only changed files are re-hashed); the user's index,
  branch and files are not touched. Files marked skip-worktree or assume-unchanged are read from
  disk; a sparse checkout's absent files stay as committed.
* Ignored files (a ``.env``, local settings, small data) go in a second tree: every ignored entry
  as git lists it, smallest first, within ``IGNORED_MAX_BYTES`` and ``IGNORED_MAX_FILES``; a
  directory is kept whole or not at all.
* What a tree does not record: the exact bytes of files git would convert (a filter or an ``eol``
  attribute; acr's git runs no filter, so these are written back byte for byte), permission bits
  git would not write back, and the directories inside untracked ones.
"""

from __future__ import annotations

import os
import re
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
_UNBORN_NESTED = re.compile(r"error: '(.+)/' does not have a commit checked out$", re.M)
GITLINK = "160000"  # the mode of a nested repository (submodule) in a tree


class Snapshot(NamedTuple):
    tree: str
    sparse_absent: frozenset[str]  # files a sparse checkout leaves off disk
    unreadable: tuple[str, ...] = ()  # paths git could not read, left out (see Snapshots.take)


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

    def temp_index(self, seed: bool) -> str:
        """A temporary index in acr's own folder (never in ``.git``, which the attempt may have made
        read-only), seeded from the user's index when ``seed`` and it can be read as a file."""
        self.tmp_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, path = tempfile.mkstemp(prefix="acr-index-", dir=self.tmp_dir)
        os.close(fd)
        os.unlink(path)  # git wants to create it; a missing file is an empty index
        real = self.git.git_dir / "index"
        if seed and real.is_file() and not real.is_symlink():
            try:
                # copy2 keeps the mtime: git's racy-entry check then works as on the real index
                shutil.copy2(real, path)  # reuse its stat cache: only changed files are re-hashed
            except OSError:
                pass  # unreadable: every file is hashed instead
        return path

    def tree(self, sparse_absent: frozenset[str] | None = None, unreadable_ok: bool = True) -> str:
        """The work tree as a tree, after an attempt. ``sparse_absent``: the checkpoint's files a sparse
        checkout left off disk (only those stay "as committed" while absent; see :meth:`_unhide`)."""
        return self.take(sparse_absent, unreadable_ok).tree

    def take(self, sparse_absent: frozenset[str] | None = None,
             unreadable_ok: bool = False) -> "Snapshot":
        """The tree, the files a sparse checkout leaves off disk now, and the paths git could not read.

        A nested repository without a commit cannot be added (git stops at the first one): it is left
        out of every snapshot, so a rollback never touches it either. With ``unreadable_ok`` (after an
        attempt), a path git cannot read (a FIFO or socket where a file was, a file made unreadable)
        is left out too and listed in ``unreadable``: the tree then says it is gone, and the
        rollback puts the checkpoint's back (or removes it, when it is new). Before an attempt such a
        path stops the checkpoint with git's message: it is the user's, and cannot be kept."""
        idx = self.temp_index(seed=True)
        unreadable: list[str] = []
        try:
            env = {"GIT_INDEX_FILE": idx}
            absent = self._unhide(env, sparse_absent)
            skip: list[str] = []
            while True:
                try:
                    self.git("add", "-A", *self._sparse(), "--", ".",
                             *(f":(exclude,literal){p}" for p in [*skip, *self.private]), env=env)
                    break
                except WorkspaceError as e:
                    found = [p for p in _UNBORN_NESTED.findall(e.message) if p not in skip]
                    bad = [p for p in _unreadable(e.message) if p not in skip] if unreadable_ok else []
                    if not found and not bad:
                        raise
                    skip += found + bad
                    unreadable += bad
                    if bad:  # tracked ones must not keep the seeded entry: they read as deleted
                        self.git("update-index", "-z", "--force-remove", "--stdin", env=env, input=nul_join(bad))
            return Snapshot(self.git("write-tree", env=env).decode().strip(), absent, tuple(unreadable))
        finally:
            unlink_index(idx)

    def _sparse(self) -> list[str]:
        """``--sparse`` in a sparse checkout: git add refuses files outside the cone without it."""
        if self._sparse_flag is None:
            on = self.git("config", "--bool", "--get", "core.sparseCheckout", check=False).strip() == b"true"
            self._sparse_flag = ["--sparse"] if on else []
        return self._sparse_flag

    def _unhide(self, env: dict, sparse_absent: frozenset[str] | None) -> frozenset[str]:
        """Make the snapshot's own index read every file on disk, whatever bits the user's index has.

        ``skip-worktree`` and ``assume-unchanged`` (a local config edited on purpose) tell git not to
        read a file, so a snapshot would hold the committed version and a rollback would lose the
        user's: those bits are cleared. A skip-worktree file missing from disk is a sparse checkout's:
        at the checkpoint (``sparse_absent`` None) it stays as committed, and all such files are
        returned; later, only those listed stay, any other missing one was deleted."""
        listed = self.git("ls-files", "-v", "-z", env=env).decode("utf-8", "surrogateescape").split("\0")
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
                self.git("update-index", "-z", flag, "--stdin", env=env, input=nul_join(paths))
        return frozenset(skip_gone)

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
        for d in {os.path.dirname(f) for f in files} | set(dirs):
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
        (nbstripout drops a notebook's outputs, LFS stores a pointer) or an ``eol`` attribute that is not
        the user's bytes, and acr's git runs no filter on the way back. So these files are kept as they
        are on disk. Line endings under a plain ``text`` attribute follow git's normalisation."""
        files = [f for f in files if "\n" not in f]
        if not files or not (any(f.rsplit("/", 1)[-1] == ".gitattributes" for f in files)
                             or (self.git.common_dir / "info" / "attributes").exists() or self._global_attributes()):
            return {}
        out = self.git("check-attr", "-z", "--stdin", "filter", "eol", input=nul_join(files))
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

    def ignored_tree(self, entries: tuple[str, ...],
                     seed: tuple[bytes, int] | None = None) -> tuple[str, tuple[bytes, int]]:
        """The tree of the given ignored entries as they are now (missing ones are absent).

        Also returns the index it was written through (content, mtime): seeding the next
        snapshot with it lets git re-hash only the files whose stat changed."""
        idx = self.temp_index(seed=False)
        try:
            env = {"GIT_INDEX_FILE": idx, "GIT_LITERAL_PATHSPECS": "1"}
            if seed is not None:
                Path(idx).write_bytes(seed[0])
                os.utime(idx, ns=(seed[1], seed[1]))
            paths = [e.rstrip("/") for e in entries]
            gone = [p for p in paths if not os.path.lexists(self.root / p)]
            present = [p for p in paths if p not in gone]
            if gone and seed is not None:
                self.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--pathspec-from-file=-",
                         "--pathspec-file-nul", env=env, input=nul_join(gone))
            if present:  # a file git cannot read is left out (best effort), never a reason to stop a run
                self.git("add", "-A", "-f", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul",
                         env=env, input=nul_join(present), check=False)
            if seed is not None:  # a seeded entry git could not re-read (a FIFO where .env was) reads as gone
                listed = self.git("ls-files", "-z", env=env).decode("utf-8", "surrogateescape").split("\0")
                stale = [p for p in listed if p and not _plain(self.root / p)]
                if stale:
                    self.git("update-index", "-z", "--force-remove", "--stdin", env=env, input=nul_join(stale))
            tree = self.git("write-tree", env=env).decode().strip()
            return tree, (Path(idx).read_bytes(), os.stat(idx).st_mtime_ns)
        finally:
            unlink_index(idx)

    def ignored_listing(self) -> list[str]:
        """The ignored entries now (directories end in /), as ``git ls-files --directory`` lists them."""
        raw = self.git("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
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

    def numstat(self, old: str, new: str) -> list[tuple[str, int | None, int | None]]:
        """(path, lines added, lines deleted; None for a binary file) per path that differs."""
        if old == new:
            return []
        raw = self.git("diff-tree", "-r", "-z", "--no-renames", "--numstat", old, new)
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
        raw = self.git("diff-tree", "-r", "-z", "--no-renames", "--raw", old, new)
        parts = raw.decode("utf-8", errors="surrogateescape").split("\0")
        out = []
        for i in range(0, len(parts) - 1, 2):  # ":<old mode> <new mode> <old sha> <new sha> <status>", path
            old_mode, new_mode, _, _, status = parts[i].lstrip(":").split(" ")
            out.append((status[0], parts[i + 1], GITLINK in (old_mode, new_mode)))
        return out


_CANNOT_ADD = re.compile(r"error: '?(.+?)'?: can only add regular files|error: open\(\"(.+?)\"\): |"
                         r"error: unable to index file '?(.+?)'?$|error: read error while indexing (.+?)$", re.M)


def _unreadable(message: str) -> list[str]:
    """The paths git add named as ones it cannot read, from its error message."""
    return list(dict.fromkeys(next(g for g in m.groups() if g) for m in _CANNOT_ADD.finditer(message)))


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
