"""Copy-on-write race lanes: the user's repository seen through an overlay mount that only acr can see.

A race lane must hold the user's repository as it is, and writing a full checkout per lane costs about as
much as the user's file system takes to create every file (seconds per 10,000 files on a slow disk). An
overlay mount costs nothing to make: the user's repository, work tree and ``.git`` both, is the read-only
lower layer; whatever a lane writes (its agent's edits, its git index, its commits) goes to the lane's own
upper folder under acr's data directory; the user's files are never written.

Where the mounts live: acr moves itself, once, into a user and mount namespace of its own (Linux
``unshare(CLONE_NEWUSER | CLONE_NEWNS)``, unprivileged where the kernel allows user namespaces), with the
user's uid and gid mapped to themselves, so files keep their owner and programs see the same user. Mounts made
there are seen by acr and by what it starts (agents, verifiers, git), by nobody else, and they disappear when
the last of those processes ends: a killed acr leaves no mount behind, only the lanes' upper folders, which
``acr recover`` and the next race remove.

A lane differs from a worktree lane (:mod:`acr_cli.workspace.race`) in what it shows, for the better: the
user's ignored files (``.env``, ``node_modules``, a virtualenv) are there without copying, and the user's index
is theirs (uncommitted work shows as unstaged, as in the user's own tree).

When a lane cannot be an overlay (:func:`problem` says why), a race uses worktrees:

* the repository must be a plain one, its ``.git`` a folder at the top of the work tree (a linked worktree's
  or a submodule's git directory lives elsewhere, and would be written through the mount);
* acr must be single-threaded when it moves (the kernel's rule for a new user namespace);
* the kernel must allow unprivileged user namespaces and overlay mounts inside them (Linux 5.11 or later),
  and acr's data directory must be on a file system overlay accepts as an upper layer (not overlay itself,
  as in some containers).

What a run gives up by moving, for the rest of the run: for a user, set-user-ID programs (``sudo``) run
without their privilege; root keeps its power over every file (every id is mapped) but not over what
belongs to the machine as a whole: binding a port below 1024, mounting, changing the network. A verifier that
needs those wants ``race_lanes = "worktree"``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import sys
import threading
from pathlib import Path

MODES = ("auto", "overlay", "worktree")  # the race_lanes setting

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_REC, _MS_PRIVATE = 0x4000, 0x40000
_MNT_DETACH = 2
_UNSAFE = (",", ":", "\\", "\n")  # characters overlay's option string cannot take in a path without escapes

_moved: str | None = None  # "" once acr is in its own namespace; else why it could not move (None: not tried)


class OverlayError(OSError):
    """An overlay lane could not be made: the message says why (the race uses worktrees)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> OverlayError:
    err = ctypes.get_errno()
    return OverlayError(err, f"{what}: {os.strerror(err)}")


def problem(root: Path, git_dir: Path, common_dir: Path, mode: str = "auto") -> str | None:
    """Why this repository's race lanes cannot be overlays here (the module docstring), or None. Does not
    move acr: a kernel that refuses is found by :func:`enter`."""
    if mode == "worktree":
        return "race_lanes is worktree"
    if not sys.platform.startswith("linux"):
        return f"overlay lanes need Linux (this is {sys.platform})"
    real = Path(os.path.realpath(root))
    if Path(os.path.realpath(git_dir)) != real / ".git" or Path(os.path.realpath(common_dir)) != real / ".git":
        return "the repository's git directory is not the .git folder of its work tree"
    if not nameable(real):
        return f"the repository's path holds a character an overlay mount cannot name ({real})"
    return _moved or None


def nameable(path: Path) -> bool:
    """Whether overlay's option string can name ``path`` as it is (no comma, colon, backslash or newline)."""
    return not any(c in str(os.path.realpath(path)) for c in _UNSAFE)


def enter() -> None:
    """Move acr into a user and mount namespace of its own, once (the module docstring); raise
    :class:`OverlayError` saying why not (and remember it: the next race does not try again)."""
    global _moved
    if _moved is not None:
        if _moved:
            raise OverlayError(_moved)
        return
    try:
        _unshare()
    except OSError as e:
        _moved = f"acr cannot make a private mount namespace here ({e.strerror or e})"
        raise OverlayError(_moved) from None
    _moved = ""


def _unshare() -> None:
    if threading.active_count() > 1:
        raise OSError(0, "other threads are running")
    uid, gid = os.geteuid(), os.getegid()
    helper = _map_every_id() if uid == 0 else None
    libc = _libc()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
        failed = _fail("unshare")
        if helper is not None:
            helper(False)
        raise failed
    if helper is None or not helper(True):  # (a helper that could not map every id: root maps itself alone)
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:  # nothing of ours leaks out
        raise _fail("mount --make-rprivate /")


def _map_every_id():
    """For root: a helper process, forked before acr moves, that stays where acr was and maps every uid and gid
    of acr's new namespace to itself (only a process with root's power outside may write such a map). So root
    keeps its power over every user's files inside; what it gives up for the run is what belongs to the
    machine as a whole (ports below 1024, mounts and network settings outside acr's own). Returns the
    function that lets the helper go (True: write the maps now), waits for it and says whether it wrote them."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the helper: no Python clean-up, no return
        code = 1
        try:
            os.close(w)
            if os.read(r, 1) == b"y":
                parent = os.getppid()
                for name in ("uid_map", "gid_map"):
                    Path(f"/proc/{parent}/{name}").write_text("0 0 4294967295")
                code = 0
        finally:
            os._exit(code)
    os.close(r)

    def release(write: bool) -> bool:
        os.write(w, b"y" if write else b"n")
        os.close(w)
        _, status = os.waitpid(pid, 0)
        return write and status == 0

    return release


def mount(lower: Path, upper: Path, work: Path, target: Path) -> None:
    """Mount ``lower`` at ``target``, copy-on-write into ``upper`` (``work``: overlay's scratch folder, on
    the same file system). Needs :func:`enter` first.

    ``userxattr``: overlay keeps its own marks (a folder made where a file of the lower layer was deleted, a
    folder deleted whole) in ``user.overlay.*`` attributes, the only ones a user namespace may write; without
    it, deleting a folder of the user's or making a folder in place of their file fails with EIO in a lane."""
    for folder in (upper, work, target):
        folder.mkdir(parents=True, exist_ok=True)
    options = f"lowerdir={os.path.realpath(lower)},upperdir={upper},workdir={work},userxattr"
    if _libc().mount(b"overlay", os.fsencode(target), b"overlay", 0, os.fsencode(options)) != 0:
        raise _fail(f"overlay mount of {lower}")


def unmount(target: Path) -> None:
    """Detach the overlay at ``target`` (nothing when none is mounted there)."""
    if os.path.ismount(target):
        _libc().umount2(os.fsencode(target), _MNT_DETACH)


def remove(path: Path) -> None:
    """Remove an upper or work folder whole: overlay leaves its scratch folders unreadable (mode 000), so each
    folder is made the owner's again before it is entered."""
    if not path.is_dir() or path.is_symlink():
        return
    for parent, dirs, _ in os.walk(path):
        for d in dirs:
            child = os.path.join(parent, d)
            if not os.path.islink(child):
                try:
                    os.chmod(child, stat.S_IRWXU)
                except OSError:
                    pass
    shutil.rmtree(path, ignore_errors=True)


def moved() -> bool:
    """Whether acr already runs in its own mount namespace (overlay lanes can be mounted at once)."""
    return _moved == ""


def probe() -> str | None:
    """Why overlay lanes cannot be mounted on this machine, or None: asked of a child process that moves into
    its own namespace and mounts an overlay in a temporary folder, the way a race would (acr itself stays where
    it is). For ``acr doctor``, ``race_lanes = "overlay"`` before a run, and the tests."""
    if not sys.platform.startswith("linux"):
        return f"overlay lanes need Linux (this is {sys.platform})"
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="acr-overlay-check-") as tmp:
        code = "import sys; from acr_cli.workspace import overlay; overlay._selftest(sys.argv[1])"
        try:
            res = subprocess.run([sys.executable, "-c", code, tmp], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"the check could not run ({e})"
        if res.returncode == 0:
            return None
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"the check ended with exit {res.returncode}"


def _selftest(folder: str) -> None:
    """The child of :func:`probe`: move, mount an overlay of a folder, write through it, check the lower
    folder is untouched. Exit 0, or the reason on stderr and exit 1."""
    base = Path(folder)
    (base / "lower").mkdir()
    (base / "lower" / "file").write_text("lower")
    try:
        enter()
        mount(base / "lower", base / "upper", base / "work", base / "mnt")
        (base / "mnt" / "file").write_text("upper")
        ok = (base / "lower" / "file").read_text() == "lower" and (base / "upper" / "file").exists()
        unmount(base / "mnt")
    except OSError as e:
        print(e.strerror or e, file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        remove(base / "work")
    if not ok:
        print("writes through the overlay reached the folder under it", file=sys.stderr)
        raise SystemExit(1)
