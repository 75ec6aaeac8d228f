"""Checkpoint a git work tree before an attempt and roll it back after a failed one.

How it stays safe for the user's own work:

* A checkpoint is a git *tree* of the whole work tree as it is (tracked
  changes and untracked, non-ignored files), written through a temporary index
  (``GIT_INDEX_FILE``): the user's index, branch and files are not touched.
  The pre-run checkpoint is also kept as a commit under ``refs/acr/`` while the
  run lasts, so it can be recovered by hand if acr itself dies.
* Rollback compares the checkpoint with the work tree now and rewrites only
  the paths the attempt changed: files it added are deleted, files it changed
  or deleted are written back from the checkpoint. Files it did not touch are
  never rewritten, so the user's uncommitted edits stay byte for byte.
* If the attempt moved HEAD or the branch (a commit, a checkout) or changed
  the index, those are put back too. After the rollback acr re-checks that the
  tree equals the checkpoint and raises if it does not.

Not covered: ignored files (neither saved nor restored) and the contents of
submodules. Line-ending conversion is switched off for acr's own git calls.
One ``acr run`` per work tree at a time (a lock file in ``.git`` enforces it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from acr_cli.errors import WorkspaceError

NO_GIT_HINT = "rollback needs git: run `git init && git add -A && git commit -m init` first, or pass --no-rollback"
_GIT_CFG = ["-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.quotepath=false"]


@dataclass(frozen=True)
class Checkpoint:
    tree: str
    head: str | None  # commit HEAD pointed to, None in an empty repository
    branch: str | None  # refs/heads/... when HEAD was symbolic
    index: bytes | None  # the user's index file, byte for byte
    ref: str | None = None  # refs/acr/... holding the pre-run checkpoint


class Workspace:
    def __init__(self, root: Path, git_dir: Path):
        self.root = root
        self.git_dir = git_dir
        self._lock_fd: int | None = None

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

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ git plumbing

    def _git(self, *args: str, env: dict | None = None, input: bytes | None = None) -> bytes:
        full_env = dict(os.environ)
        full_env.update(env or {})
        r = subprocess.run(["git", *_GIT_CFG, "-C", str(self.root), *args], capture_output=True, env=full_env,
                           input=input, stdin=None if input is not None else subprocess.DEVNULL)
        if r.returncode != 0:
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

    def _snapshot_tree(self) -> str:
        idx = self._temp_index(seed=True)
        try:
            env = {"GIT_INDEX_FILE": idx}
            self._git("add", "-A", "--", ".", env=env)
            return self._git("write-tree", env=env).decode().strip()
        finally:
            for p in (idx, idx + ".lock"):
                if os.path.exists(p):
                    os.unlink(p)

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

    def _read_index(self) -> bytes | None:
        try:
            return (self.git_dir / "index").read_bytes()
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------------ public API

    def checkpoint(self, keep_as: str | None = None) -> Checkpoint:
        tree = self._snapshot_tree()
        head, branch = self._head()
        ref = None
        if keep_as:
            parents = ["-p", head] if head else []
            commit = self._git("commit-tree", tree, *parents, "-m", f"acr checkpoint {keep_as}",
                               env=_ident()).decode().strip()
            ref = f"refs/acr/checkpoints/{keep_as}"
            self._git("update-ref", ref, commit)
        return Checkpoint(tree, head, branch, self._read_index(), ref)

    def changes(self, cp: Checkpoint) -> list[tuple[str, str]]:
        """(status, path) for every path that differs from the checkpoint (A/M/D/T)."""
        now = self._snapshot_tree()
        if now == cp.tree:
            return []
        raw = self._git("diff-tree", "-r", "-z", "--no-renames", "--name-status", cp.tree, now)
        parts = raw.decode("utf-8", errors="surrogateescape").split("\0")
        return [(parts[i][0], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]

    def restore(self, cp: Checkpoint) -> int:
        """Undo everything since ``cp``; returns how many paths were put back."""
        changed = self.changes(cp)
        to_write: list[str] = []
        for status, path in changed:
            target = self.root / path
            if status == "A":
                _remove(target)
            else:
                if status == "T" and (target.exists() or target.is_symlink()):
                    _remove(target)
                to_write.append(path)
        if to_write:
            idx = self._temp_index(seed=False)
            try:
                env = {"GIT_INDEX_FILE": idx}
                self._git("read-tree", cp.tree, env=env)
                for path in to_write:  # a directory may stand where a file was
                    target = self.root / path
                    if target.is_dir() and not target.is_symlink():
                        shutil.rmtree(target)
                self._git("checkout-index", "-f", "-z", "--stdin", env=env,
                          input="\0".join(to_write).encode("utf-8", errors="surrogateescape") + b"\0")
            finally:
                for p in (idx, idx + ".lock"):
                    if os.path.exists(p):
                        os.unlink(p)
        self._restore_refs(cp)
        if self._read_index() != cp.index:
            self._write_index(cp.index)
        if self._snapshot_tree() != cp.tree:
            where = f" (saved as {cp.ref})" if cp.ref else ""
            raise WorkspaceError(
                f"could not restore the work tree to its checkpoint{where}",
                hint=f"inspect with `git diff {cp.tree}`; restore by hand with `git checkout {cp.ref or cp.tree} -- .`",
            )
        return len(changed)

    def drop(self, cp: Checkpoint) -> None:
        if cp.ref:
            try:
                self._git("update-ref", "-d", cp.ref)
            except WorkspaceError:
                pass

    def _restore_refs(self, cp: Checkpoint) -> None:
        head, branch = self._head()
        if branch != cp.branch:
            if cp.branch:
                self._git("symbolic-ref", "HEAD", cp.branch)
            elif cp.head:
                self._git("update-ref", "--no-deref", "HEAD", cp.head)
        if cp.head and self._head()[0] != cp.head:
            self._git("update-ref", cp.branch or "HEAD", cp.head)

    def _write_index(self, data: bytes | None) -> None:
        real = self.git_dir / "index"
        if data is None:
            real.unlink(missing_ok=True)
            return
        tmp = real.with_name(f"index.acr-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, real)


def _remove(target: Path) -> None:
    # Directories the attempt created are left in place (possibly empty): git does not
    # track directories, so acr cannot tell them from the user's own empty ones.
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)


def _ident() -> dict[str, str]:
    stamp = str(int(time.time()))
    return {"GIT_AUTHOR_NAME": "acr", "GIT_AUTHOR_EMAIL": "acr@localhost", "GIT_COMMITTER_NAME": "acr",
            "GIT_COMMITTER_EMAIL": "acr@localhost", "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
