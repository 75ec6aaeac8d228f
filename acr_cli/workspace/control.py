"""The repository's own control files: ``.git/config``, ``config.worktree``, ``hooks/``, ``info/``,
the same files of every submodule's repository (``.git/modules/...``), and the state of an
operation in progress (a merge, rebase, cherry-pick, revert or bisect).

They are part of the checkpoint because an attempt can change them and the change would outlive
the rollback and run later: a hook, ``core.hooksPath``, ``core.fsmonitor``, an alias, a planted
``user.email``, a remote, ``diff.external``, ``.git/info/attributes``, a submodule's
``core.fsmonitor`` (run by the user's next ``git status`` in the superproject), a merge the attempt
started (the user's next commit would become that merge). They are kept byte for byte (mode and
symlinks too) and a rollback puts them back first, before any git command of its own, so a planted
``core.worktree`` cannot redirect it. A linked worktree's ``.git`` file is kept too. Of a
submodule's repository only those control files are read, never its objects; a submodule
repository that appeared during the attempt is left whole and named (it may be the user's own,
moved there by the attempt's ``git rm`` of the submodule, or another worktree's clone).

After a passing attempt nothing is undone: :func:`differences` lists what changed, and the run
shows it (a person reviewing the diff cannot see ``.git``).

Also here: git's caches of the object store (``objects/info/commit-graph``, ``commit-graphs/``,
``objects/info/packs``, ``multi-pack-index``), which git trusts without checking them against the
objects: one the attempt wrote or changed is removed (:func:`remove_new_caches`; git works without
them and rebuilds them), never kept; and :func:`unfreeze`, for a file the attempt made immutable
(``chattr +i``, as root) so that a rollback could not remove it.
"""

from __future__ import annotations

import base64
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILES = 2000  # a hooks directory with a vendored tool in it is larger: the rest is not kept
MAX_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Entry:
    kind: str  # "file", "dir", "link"
    mode: int = 0
    data: bytes = b""  # a file's bytes, a link's target


@dataclass(frozen=True)
class ControlFiles:
    """What the control files were: key ("<base>:<relative path>") -> entry."""

    entries: dict[str, Entry] = field(default_factory=dict)
    over_budget: tuple[str, ...] = ()  # kept only partly (more than MAX_FILES or MAX_BYTES)

    def to_json(self) -> dict:
        return {"entries": {k: [e.kind, e.mode, base64.b64encode(e.data).decode()] for k, e in self.entries.items()},
                "over_budget": list(self.over_budget)}

    @classmethod
    def from_json(cls, obj: dict) -> "ControlFiles":
        return cls({k: Entry(v[0], int(v[1]), base64.b64decode(v[2])) for k, v in obj["entries"].items()},
                   tuple(obj.get("over_budget", ())))


def bases(root: Path, git_dir: Path, common_dir: Path) -> dict[str, Path]:
    """Where the watched files live: the common directory, the worktree's own, and the work tree."""
    return {"common": common_dir, "gitdir": git_dir, "root": root}


# an operation in progress, per worktree: acr refuses to start in the middle of one, so after a
# rollback none is
OPERATION_STATE = ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "MERGE_AUTOSTASH", "AUTO_MERGE", "SQUASH_MSG",
                   "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply", "sequencer",
                   "BISECT_START", "BISECT_LOG", "BISECT_TERMS", "BISECT_NAMES", "BISECT_EXPECTED_REV",
                   "BISECT_ANCESTORS_OK", "BISECT_HEAD", "BISECT_RUN")
MODULES = "common:modules"  # submodules' repositories: only their CONTROL files are read
CONTROL = {"config", "config.worktree", "hooks", "info", "modules"}


def _watched(b: dict[str, Path]) -> list[tuple[str, Path]]:
    """(key, path) of the watched tops: files, or directories watched whole (``modules``: see ``_skip``)."""
    tops = [("common:config", b["common"] / "config"), ("common:hooks", b["common"] / "hooks"),
            ("common:info", b["common"] / "info"), ("common:shallow", b["common"] / "shallow"),
            ("common:objects/info/alternates", b["common"] / "objects" / "info" / "alternates"),
            ("gitdir:config.worktree", b["gitdir"] / "config.worktree"), ("gitdir:HEAD", b["gitdir"] / "HEAD"),
            ("gitdir:commondir", b["gitdir"] / "commondir")]  # git honours a commondir file in any git directory
    if b["gitdir"] != b["common"]:
        tops += [("gitdir:info", b["gitdir"] / "info"), ("gitdir:gitdir", b["gitdir"] / "gitdir")]
    if (b["root"] / ".git").is_file() or b["gitdir"] != b["common"]:  # a linked worktree's pointer file
        tops += [("root:.git", b["root"] / ".git")]
    tops += [(f"gitdir:{name}", b["gitdir"] / name) for name in OPERATION_STATE]
    tops += [(MODULES, b["common"] / "modules")]
    return tops


def _skip(key: str, parent: Path, name: str) -> bool:
    """Inside ``.git/modules``, a submodule repository's other contents (objects, refs, its index...) are
    neither read nor restored: only the CONTROL files of each repository found there."""
    return key == MODULES and name not in CONTROL and (parent / "HEAD").is_file()


def _read(path: Path) -> Entry | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return Entry("link", 0, os.fsencode(os.readlink(path)))
    if stat.S_ISDIR(st.st_mode):
        return Entry("dir", stat.S_IMODE(st.st_mode))
    if stat.S_ISREG(st.st_mode):
        try:
            return Entry("file", stat.S_IMODE(st.st_mode), path.read_bytes())
        except OSError:
            return None
    return None  # a FIFO or socket planted there is removed on rollback (not recorded)


def _scan(b: dict[str, Path], budget: bool = True) -> tuple[dict[str, Entry], dict[str, Path], list[str]]:
    """(entries, key -> path, tops over budget) of what is there now."""
    entries: dict[str, Entry] = {}
    paths: dict[str, Path] = {}
    over: list[str] = []
    files = size = 0
    for key, top in _watched(b):
        e = _read(top)
        paths[key] = top
        if e is None:
            if os.path.lexists(top):  # something that is neither file, dir nor link: it is not the user's
                entries[key] = Entry("other")
            continue
        entries[key] = e
        if e.kind != "dir":
            size += len(e.data)
            continue
        for parent, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not _skip(key, Path(parent), d))
            names = [n for n in names if not _skip(key, Path(parent), n)]
            for name in sorted(dirs + names):
                p = Path(parent) / name
                k = f"{key}/{p.relative_to(top).as_posix()}"
                paths[k] = p
                if budget and (files >= MAX_FILES or size >= MAX_BYTES):
                    if key not in over:
                        over.append(key)
                    continue
                sub = _read(p)
                if sub is None:
                    entries[k] = Entry("other")
                    continue
                entries[k] = sub
                files += 1
                size += len(sub.data)
    return entries, paths, over


def capture(b: dict[str, Path]) -> ControlFiles:
    entries, _, over = _scan(b)
    return ControlFiles(entries, tuple(over))


def differences(b: dict[str, Path], before: ControlFiles,
                scanned: tuple[dict[str, Entry], dict[str, Path], list[str]] | None = None) -> list[str]:
    """What changed since ``before``, for people: "added .git/hooks/pre-commit", "changed .git/config".
    ``scanned``: what ``_scan`` found now, when the caller has it already."""
    now, paths, _ = scanned or _scan(b, budget=False)
    out = []
    left: set[str] = set()
    for key in sorted(set(now) | set(before.entries)):
        if _under_budget_gap(key, before):
            continue
        repo = _new_repository(key, paths, before)
        if repo is not None:  # named once, as the repository it is
            if repo not in left:
                left.add(repo)
                out.append(f"a submodule repository not there before, left as it is: {_label(b, repo)}")
            continue
        a, c = before.entries.get(key), now.get(key)
        if a == c or (a is not None and c is not None and a.kind == c.kind == "dir" and a.mode == c.mode):
            continue
        what = "added" if a is None else "removed" if c is None else "changed"
        out.append(f"{what} {_label(b, key)}")
    return out


def _new_repository(key: str, paths: dict[str, Path], before: ControlFiles) -> str | None:
    """The key of the repository under ``.git/modules`` that holds ``key`` (or is it) when that repository
    was not there at the checkpoint, else None. Such a repository is never removed nor altered: an
    attempt's ``git rm`` of a submodule or ``git submodule absorbgitdirs`` moves the user's own submodule
    repository (unpushed commits and all) there, and another worktree may have cloned one meanwhile."""
    if key != MODULES and not key.startswith(MODULES + "/"):
        return None
    k = key
    while k != MODULES:
        p = paths.get(k)
        if p is not None and p.is_dir() and (p / "HEAD").is_file():
            return None if k in before.entries else k
        k = k.rsplit("/", 1)[0]
    p = paths.get(key)  # no repository around it: a folder between .git/modules and one (modules/libs)
    if p is not None and p.is_dir() and key not in before.entries:
        for _, _, names in os.walk(p):
            if "HEAD" in names:
                return key
    return None


def _under_budget_gap(key: str, before: ControlFiles) -> bool:
    """A path inside a top kept only partly, and not kept: nothing is known about it."""
    return any(key.startswith(top + "/") for top in before.over_budget) and key not in before.entries


def _label(b: dict[str, Path], key: str) -> str:
    base, _, rel = key.partition(":")
    if base == "root":
        return rel
    return str((b[base] / rel).relative_to(b["root"])) if _inside(b[base], b["root"]) else str(b[base] / rel)


def _inside(p: Path, root: Path) -> bool:
    try:
        p.relative_to(root)
        return True
    except ValueError:
        return False


def restore(b: dict[str, Path], before: ControlFiles) -> list[str]:
    """Put every watched file back as it was (byte for byte, mode, symlinks); returns what changed.

    Plain file operations only: no git command runs before this is done. A watched directory the
    attempt made unreadable (``chmod 000 .git/hooks``, to hide what it planted) is opened first:
    its mode comes back below."""
    for _, top in _watched(b):
        _open_up(top)
    scanned = _scan(b, budget=False)
    now, paths, _ = scanned
    changed = differences(b, before, scanned)
    # Remove what was not there (deepest first), then write what differs (shallowest first).
    for key in sorted(now, key=lambda k: -k.count("/")):
        if key in before.entries or _under_budget_gap(key, before) or _new_repository(key, paths, before):
            continue
        p = paths[key]
        e = now[key]
        if e.kind == "dir":
            _rmtree(p)
        else:
            unfrozen(_unlink, p)
    for key in sorted(before.entries, key=lambda k: k.count("/")):
        e = before.entries[key]
        p = _path_of(b, key)
        try:
            _put(p, e)
        except PermissionError:  # made immutable (chattr +i, as root), or its folder: once more, unfrozen
            if not (unfreeze(p) | unfreeze(p.parent)):
                raise
            _put(p, e)
    return changed


def _put(p: Path, e: Entry) -> None:
    """Make ``p`` the entry ``e`` (byte for byte, mode, link)."""
    cur = _read(p)
    if cur == e or e.kind == "other":
        return
    if cur is not None and (cur.kind != e.kind or e.kind == "link"):
        _rmtree(p) if cur.kind == "dir" else _unlink(p)
        cur = None
    elif cur is None and os.path.lexists(p):
        _unlink(p)
    if e.kind == "dir":
        if cur is None:
            p.mkdir(parents=True, exist_ok=True)
        os.chmod(p, e.mode)
    elif e.kind == "link":
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.fsdecode(e.data), p)
    else:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.acr-{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(e.data)
        os.chmod(tmp, e.mode)
        os.replace(tmp, p)


# git's caches of the object store, by group: a group is removed whole when any file of it changed (a
# commit-graph chain that names a graph file no longer there would be worse than none)
CACHES = {"commit-graph": ("objects/info/commit-graph", "objects/info/commit-graphs/"),
          "multi-pack-index": ("objects/pack/multi-pack-index",), "packs list": ("objects/info/packs",)}


def caches(common: Path) -> dict[str, list]:
    """The cache files there are now: relative path -> [size, mtime, inode]."""
    out: dict[str, list] = {}
    for paths in CACHES.values():
        for rel in paths:
            found = []
            if rel.endswith("/"):
                try:
                    found = [rel + e.name for e in os.scandir(common / rel)]
                except OSError:
                    pass
            elif rel == "objects/pack/multi-pack-index":  # and its .bitmap / .rev companions
                try:
                    found = [f"objects/pack/{e.name}" for e in os.scandir(common / "objects" / "pack")
                             if e.name.startswith("multi-pack-index")]
                except OSError:
                    pass
            else:
                found = [rel]
            for f in found:
                try:
                    st = os.lstat(common / f)
                except OSError:
                    continue
                out[f] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return out


def _cache_group(key: str) -> str | None:
    for what, paths in CACHES.items():
        if any(key.startswith(p) if p.endswith("/") or p.endswith("multi-pack-index") else key == p for p in paths):
            return what
    return None


def remove_new_caches(common: Path, before: dict[str, list]) -> list[str]:
    """Remove every cache group the attempt wrote or changed; returns what was removed, for people."""
    now = caches(common)
    changed = {_cache_group(k) for k in set(now) | set(before) if now.get(k) != before.get(k)}
    out = []
    for what in CACHES:
        if what not in changed:
            continue
        gone = []
        for k in sorted(k for k in now if _cache_group(k) == what):
            try:
                unfrozen(os.unlink, common / k)
                gone.append(k)
            except OSError:
                pass
        if gone:
            out.append(f"removed the {what} the attempt wrote or changed ({', '.join(gone)} in {common}; a cache "
                       "git never checks against the objects, and rebuilds)")
    return out


def unfreeze(path: Path) -> bool:
    """Clear ``path``'s immutable and append-only flags (``chattr -i -a``; Linux, as root): True when one was
    set and is cleared. A failed attempt run as root could make a file it planted impossible to remove."""
    import fcntl
    import struct

    get_flags, set_flags, frozen = 0x80086601, 0x40086602, 0x10 | 0x20  # FS_IOC_GETFLAGS/SETFLAGS; i, a
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        flags = struct.unpack("i", fcntl.ioctl(fd, get_flags, struct.pack("i", 0)))[0]
        if not flags & frozen:
            return False
        fcntl.ioctl(fd, set_flags, struct.pack("i", flags & ~frozen))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def unfrozen(op, path: Path, *args):
    """``op(path, *args)``; when refused (EPERM, EACCES), again once ``path`` or its folder is no longer
    immutable (:func:`unfreeze`)."""
    try:
        return op(path, *args)
    except PermissionError:
        if not (unfreeze(Path(path)) | unfreeze(Path(path).parent)):
            raise
        return op(path, *args)


def _open_up(p: Path) -> None:
    """Give the owner read/write/search on ``p`` and the directories under it (not through symlinks)."""
    try:
        st = os.lstat(p)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    if st.st_mode & 0o700 != 0o700:
        try:
            os.chmod(p, stat.S_IMODE(st.st_mode) | 0o700)
        except OSError:
            return
    try:
        children = list(os.scandir(p))
    except OSError:
        return
    for c in children:
        if c.is_dir(follow_symlinks=False):
            _open_up(Path(c.path))


def _path_of(b: dict[str, Path], key: str) -> Path:
    top_key, _, rel = key.partition("/")
    base, _, top_rel = top_key.partition(":")
    p = b[base] / top_rel
    return p / rel if rel else p


def _unlink(p: Path) -> None:
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass


def _rmtree(p: Path) -> None:
    import shutil

    if p.is_symlink() or not p.is_dir():
        unfrozen(_unlink, p)
    else:
        def again(op, path, _):  # an immutable file or folder inside (chattr +i, as root): unfrozen, once
            if unfreeze(Path(path)) | unfreeze(Path(path).parent):
                try:
                    op(path)
                except OSError:
                    pass

        shutil.rmtree(p, onerror=again)
