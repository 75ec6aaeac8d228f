"""Where a checkpoint lives while its attempt runs: acr's data directory, one folder per worktree.

``<data>/checkpoints/<worktree key>/``
  ``worktree``          the work tree and git directory it belongs to (for people)
  ``<name>.json``       one live checkpoint: everything a rollback needs but the objects
  ``<name>.index``      the user's index file, byte for byte
  ``objects/``          a git object directory: every object acr wrote for its checkpoints
                        (the snapshot of the user's files, the kept ignored files, exact bytes)

Keeping this outside ``.git`` means the attempt's own git commands cannot reach it: an attempt
that deletes ``refs/acr`` and runs ``git gc --prune=now`` no longer takes the user's uncommitted
work with it. The key is the worktree's git directory, so checkpoints belong to one worktree:
``acr recover`` and the "killed run" warning in worktree B never see worktree A's. The objects are
removed when the last checkpoint of the worktree is dropped and no ``acr run`` holds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from acr_cli.errors import WorkspaceError
from acr_cli.paths import Paths


def default_base() -> Path:
    return Paths.from_env().data_dir / "checkpoints"


class Store:
    def __init__(self, base: Path, root: Path, git_dir: Path):
        real = os.path.realpath(git_dir)
        self.key = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
        self.dir = base / self.key
        self.objects = self.dir / "objects"
        self._root, self._git_dir = root, real

    @property
    def root(self) -> Path:
        """The work tree this store checkpoints."""
        return Path(self._root)

    def prepare(self) -> None:
        """Create the folder (0700: it holds copies of the user's files)."""
        try:
            self.objects.mkdir(parents=True, exist_ok=True, mode=0o700)
            for p in (self.dir.parent, self.dir, self.objects):
                os.chmod(p, 0o700)
            (self.dir / "worktree").write_text(f"{self._root}\n{self._git_dir}\n")
        except OSError as e:
            raise WorkspaceError(f"cannot write acr's checkpoint folder {self.dir}: {e.strerror or e}",
                                 hint="make acr's data directory writable (see `acr doctor`), "
                                      "or pass --no-rollback") from None

    def names(self) -> list[str]:
        """Live checkpoints of this worktree, oldest first."""
        try:
            found = [p for p in self.dir.iterdir() if p.suffix == ".json"]
        except FileNotFoundError:
            return []
        return [p.stem for p in sorted(found, key=lambda p: (p.stat().st_mtime_ns, p.name))]

    def save(self, name: str, meta: dict, index: bytes | None) -> None:
        if index is not None:
            _write(self.dir / f"{name}.index", index)
        _write(self.dir / f"{name}.json", json.dumps(meta, ensure_ascii=True).encode())

    def load(self, name: str) -> tuple[dict, bytes | None]:
        try:
            meta = json.loads((self.dir / f"{name}.json").read_bytes())
        except (OSError, ValueError) as e:
            raise WorkspaceError(f"checkpoint {name} cannot be read: {e}",
                                 hint=f"its files are in {self.dir}; `acr recover --discard {name}` removes it"
                                 ) from None
        index = None
        if meta.get("index"):
            try:
                index = (self.dir / f"{name}.index").read_bytes()
            except OSError:
                raise WorkspaceError(f"checkpoint {name}: its copy of the index is missing",
                                     hint=f"`acr recover --discard {name}` removes it") from None
        return meta, index

    def delete(self, name: str) -> None:
        for suffix in (".json", ".index"):
            (self.dir / f"{name}{suffix}").unlink(missing_ok=True)

    def wipe_objects_if_unused(self) -> None:
        """Drop the objects once no checkpoint needs them (call while holding the worktree's lock)."""
        if not self.names() and self.objects.exists():
            shutil.rmtree(self.objects, ignore_errors=True)

    def publish(self, repo_objects: Path, loose: bool = True) -> int:
        """Copy acr's objects into the repository (those it lacks), so a ref or the index there may point
        at them: the packs (staged and stashed work, see Workspace._copy_held_objects) always, the loose
        objects (snapshots) when ``loose``."""
        n = 0
        if not self.objects.exists():
            return 0
        packs = self.objects / "pack"
        if packs.is_dir():
            for f in sorted(os.scandir(packs), key=lambda e: e.name.endswith(".idx")):  # .idx last
                dest = repo_objects / "pack" / f.name
                if f.name.endswith((".pack", ".idx")) and not dest.exists():
                    dest.parent.mkdir(exist_ok=True)
                    _link_or_copy(f.path, dest)
                    n += 1
        if not loose:
            return n
        for sub in os.scandir(self.objects):
            if len(sub.name) != 2 or not sub.is_dir():
                continue
            dest_dir = repo_objects / sub.name
            for obj in os.scandir(sub.path):
                dest = dest_dir / obj.name
                if dest.exists():
                    continue
                dest_dir.mkdir(exist_ok=True)
                _link_or_copy(obj.path, dest)
                n += 1
        return n


def _link_or_copy(src: str, dest: Path) -> None:
    """Objects never change once written: a hard link is a copy (a plain copy across file systems)."""
    tmp = dest.with_name(f"tmp_acr_{dest.name}")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dest)


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
