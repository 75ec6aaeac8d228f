"""The checkpoint: everything a failed attempt could leave behind, as it was before the attempt."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from acr_cli.workspace.control import ControlFiles


@dataclass(frozen=True)
class Checkpoint:
    name: str
    tree: str  # the work tree (tracked and untracked files), as a tree in acr's object store
    head: str | None  # commit HEAD pointed to, None in an empty repository
    branch: str | None  # refs/heads/... when HEAD was symbolic
    index: bytes | None = field(default=None, repr=False)  # the user's index file, byte for byte
    control: ControlFiles = field(default_factory=ControlFiles, repr=False)  # .git/config, hooks, info/
    ignored_tree: str | None = None  # the kept ignored entries, as a tree
    ignored: tuple[str, ...] = ()  # which ignored entries are kept (directories end in /)
    unprotected: tuple[str, ...] = ()  # ignored entries over the budget: not kept
    ignored_index: tuple[bytes, int] | None = field(default=None, repr=False)  # seeds later snapshots
    raw: dict[str, str] = field(default_factory=dict, repr=False)  # path -> blob of its exact bytes
    # Directories no tree records (git tracks files): those inside untracked directories, and
    # ``opaque`` ones too large to list, where a rollback removes no directory.
    untracked_dirs: frozenset[str] = field(default=frozenset(), repr=False)
    opaque_dirs: tuple[str, ...] = field(default=(), repr=False)
    modes: dict[str, int] = field(default_factory=dict, repr=False)  # permission bits git would not write back
    sparse_absent: frozenset[str] = field(default=frozenset(), repr=False)  # see Snapshots._list
    refs: dict[str, str] = field(default_factory=dict, repr=False)  # branches and tags: name -> object
    stash: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # newest first: (commit, message)
    locks: frozenset[str] = field(default=frozenset(), repr=False)  # git lock files there were
    outside: dict[str, list] = field(default_factory=dict, repr=False)  # see outside_signatures
    marker: str = ""  # ACR_ATTEMPT of the attempt's processes (see acr_cli.process)
    dotgit: list | None = field(default=None, repr=False)  # what the work tree's .git was (rollback.dotgit_identity)
    replace: dict[str, str] = field(default_factory=dict, repr=False)  # refs/replace/*: name -> object
    # directories' permission bits that differ from what a new one gets (a `chmod 700 private`)
    dir_modes: dict[str, int] = field(default_factory=dict, repr=False)
    # submodules declared in .gitmodules whose work tree was not checked out (no .git in it)
    unpopulated: tuple[str, ...] = ()
    # the repository's other work trees: admin name -> the branch checked out there (refs.worktree_branches);
    # None in a checkpoint written before acr recorded them
    worktrees: dict[str, str | None] | None = field(default=None, repr=False)
    # symbolic refs among branches and tags: name -> target (refs.symbolic); None in an older checkpoint
    symbolic: dict[str, str] | None = field(default=None, repr=False)
    index_mtime: int | None = field(default=None, repr=False)  # the index file's mtime (ns), for git's racy check
    # untracked or changed files of at least snapshot.LARGE_MIN bytes: path -> signature (not the attempt's)
    large: dict[str, list] = field(default_factory=dict, repr=False)
    # nested repositories git's trees do not show (without a commit, or a .git in a directory of tracked files)
    # and those in untracked directories; None in an older checkpoint (then none is moved aside)
    nested: tuple[str, ...] | None = field(default=None, repr=False)
    # git's caches of the object store (commit-graph, multi-pack-index): relative path -> signature
    caches: dict[str, list] | None = field(default=None, repr=False)
    # the folders under .git/worktrees (every linked work tree's, readable or not); None in an older checkpoint
    worktree_dirs: tuple[str, ...] | None = field(default=None, repr=False)

    def after(self):
        """What a snapshot after the attempt reads from this checkpoint (snapshot.After)."""
        from acr_cli.workspace.snapshot import After

        return After(self.index, self.index_mtime, self.large)

    def outside_changes(self) -> list[str]:
        """Files outside the project that changed through a symlink in it (no rollback restores them)."""
        out = []
        for link, (target, sig) in sorted(self.outside.items()):
            if signature(target) != sig:
                out.append(f"changed {target} outside the project, through the symlink {link} (not restored)")
        return out

    def to_json(self) -> dict:
        return {"version": 2, "name": self.name, "tree": self.tree, "head": self.head, "branch": self.branch,
                "index": self.index is not None, "control": self.control.to_json(),
                "ignored_tree": self.ignored_tree, "ignored": list(self.ignored),
                "unprotected": list(self.unprotected), "raw": self.raw,
                "untracked_dirs": sorted(self.untracked_dirs), "opaque_dirs": list(self.opaque_dirs),
                "modes": self.modes, "sparse_absent": sorted(self.sparse_absent), "refs": self.refs,
                "stash": [list(e) for e in self.stash], "locks": sorted(self.locks), "outside": self.outside,
                "marker": self.marker, "dotgit": self.dotgit, "replace": self.replace, "dir_modes": self.dir_modes,
                "unpopulated": list(self.unpopulated), "worktrees": self.worktrees,
                "symbolic": self.symbolic, "index_mtime": self.index_mtime, "large": self.large,
                "nested": None if self.nested is None else list(self.nested), "caches": self.caches,
                "worktree_dirs": None if self.worktree_dirs is None else list(self.worktree_dirs)}

    @classmethod
    def from_json(cls, obj: dict, index: bytes | None) -> "Checkpoint":
        return cls(obj["name"], obj["tree"], obj["head"], obj["branch"], index,
                   ControlFiles.from_json(obj["control"]), obj["ignored_tree"], tuple(obj["ignored"]),
                   tuple(obj["unprotected"]), None, dict(obj["raw"]), frozenset(obj["untracked_dirs"]),
                   tuple(obj["opaque_dirs"]), {k: int(v) for k, v in obj["modes"].items()},
                   frozenset(obj["sparse_absent"]), dict(obj["refs"]), tuple(tuple(e) for e in obj["stash"]),
                   frozenset(obj.get("locks", ())), dict(obj.get("outside", {})), obj.get("marker", ""),
                   obj.get("dotgit"), dict(obj.get("replace", {})),
                   {k: int(v) for k, v in obj.get("dir_modes", {}).items()}, tuple(obj.get("unpopulated", ())),
                   obj.get("worktrees"), obj.get("symbolic"), obj.get("index_mtime"), dict(obj.get("large") or {}),
                   None if obj.get("nested") is None else tuple(obj["nested"]), obj.get("caches"),
                   None if obj.get("worktree_dirs") is None else tuple(obj["worktree_dirs"]))


def signature(path: str) -> list | None:
    """What tells a file (or a directory's entries) changed: inode, size, mtime; None when it is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]
