"""Where a rolled-back attempt's work is kept: a git repository of acr's own, never a ref of the project's.

``<data>/checkpoints/<worktree key>/attempts/`` (next to the checkpoints, see :mod:`.store`) is a bare
repository that acr alone writes. Each kept attempt is a branch there, ``<task>-<n>`` (``recovered/<name>``
for what ``acr recover`` found), whose commit holds only the paths the attempt changed, as it left them,
and whose parent holds the same paths as they were at the checkpoint: ``git --git-dir=<that folder> show
<task>-<n>`` shows the attempt's work as a diff, and ``git --git-dir=... show <task>-<n>:PATH`` prints a file.
A rollback rewrites only those paths, so nothing it undoes is lost.

Why not a ref in the project: a ``git push --mirror`` (or any push of every ref) publishes everything under
``refs/``, and an attempt's work may hold what it read from its environment (``env > debug-env.txt``). So:

* the work lives outside the repository (no push reaches it; the folder is 0700);
* every file kept, both sides, is redacted first (:func:`acr_cli.redact.redact`: the values of secret-named
  environment variables, token shapes, private keys, ``password=...``). Binary files too, their bytes read as
  UTF-8 with undecodable bytes kept as they are: a secret in them is masked like in text, so a binary file
  holding one may no longer open; it is a failed attempt's, kept to be looked at;
* paths are kept whole (both sides) or not at all, smallest first, while the total stays within
  :data:`BUDGET` (redacting costs 0.15 to 0.2 s a MiB here): those over it are named in the commit's message and
  the attempt's log, not kept. Files that were ignored before the attempt never are (a ``.env`` it
  un-ignored: the rollback puts the user's back anyway).

The newest :data:`KEPT` branches stay; older ones are deleted and their objects pruned at once.
``refs/acr/attempts/*`` written into projects by older acr versions are left where they are (see
docs/configuration.md for removing them).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

from acr_cli.errors import WorkspaceError, printable
from acr_cli.redact import redact
from acr_cli.workspace.git import GIT_TIMEOUT_S, SAFE_CONFIG, Git, safe_env

KEPT = 50  # kept attempts per work tree
BUDGET = 64 * 1024 * 1024  # bytes of file contents kept per attempt (both sides), smallest paths first
GITLINK = "160000"
SEP = "#"  # a kept attempt's location, as memory and --json hold it: "<repository>#<branch>"


class Kept:
    def __init__(self, path: Path):
        self.dir = path
        self.listed: list[str] | None = None  # the kept attempts, newest first, as the last keep() left them

    # ------------------------------------------------------------------ the repository

    def _git(self, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
        env = safe_env({**SAFE_CONFIG, "core.bare": "true"})
        env["GIT_DIR"] = str(self.dir)
        try:
            r = subprocess.run(["git", *args], cwd=self.dir, capture_output=True, env=env, input=input,
                               stdin=None if input is not None else subprocess.DEVNULL, timeout=GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise WorkspaceError(f"git {args[0]} in {self.dir} did not finish within {GIT_TIMEOUT_S:g}s") from None
        if r.returncode != 0 and check:
            raise WorkspaceError(f"git {args[0]} failed in {self.dir}: {r.stderr.decode(errors='replace').strip()}")
        return r.stdout

    def _prepare(self) -> None:
        if (self.dir / "HEAD").is_file():
            return
        self.dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.dir.mkdir(exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)  # copies of the user's files, redacted or not, are the user's alone
        r = subprocess.run(["git", "init", "-q", "--bare", "--template=", str(self.dir)], capture_output=True,
                           env=safe_env(), stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT_S)
        if r.returncode != 0:
            raise WorkspaceError(f"cannot make acr's store of kept attempts {self.dir}: "
                                 f"{r.stderr.decode(errors='replace').strip()}")

    def location(self, name: str) -> str:
        return f"{self.dir}{SEP}{name}"

    def exists(self, name: str) -> bool:
        return (self.dir / "HEAD").is_file() and bool(
            self._git("rev-parse", "--verify", "-q", f"refs/heads/{name}", check=False).strip())

    def names(self) -> list[str]:
        """Kept attempts, newest first."""
        return [name for _, name in self._listing()]

    def _listing(self) -> list[tuple[int, str]]:
        """(commit time, name) of every kept attempt, newest first."""
        if not (self.dir / "HEAD").is_file():
            return []
        out = self._git("for-each-ref", "--sort=-committerdate", "--format=%(committerdate:unix) %(refname)",
                        "refs/heads/")
        rows = (line.split(" ", 1) for line in out.decode("utf-8", "surrogateescape").split("\n") if line)
        return [(int(stamp), ref[len("refs/heads/"):]) for stamp, ref in rows]

    def prune(self, keep: int = KEPT, names: list[str] | None = None) -> int:
        """Delete all but the newest ``keep`` kept attempts, and their objects; returns how many went. ``names``:
        the kept attempts, newest first, when the caller has just read them."""
        old = (self.names() if names is None else names)[keep:]
        if old:
            lines = "".join(f"delete refs/heads/{n}\n" for n in old).encode("utf-8", "surrogateescape")
            self._git("update-ref", "--stdin", input=lines)
            self._git("gc", "-q", "--prune=now")
        return len(old)

    # ------------------------------------------------------------------ keeping one

    def keep(self, git: Git, name: str, base: str, tree: str, what: str) -> tuple[str | None, list[str]]:
        """Keep what differs between the trees ``base`` (the checkpoint's) and ``tree`` (the work tree now),
        redacted, as the branch ``name``; ``git`` reads both trees' objects. Returns (its location, or None when
        nothing differs; the paths not kept, over the budget or unreadable). ``what``: the commit's subject."""
        changed = _raw_diff(git, base, tree)
        if not changed:
            return None, []
        sizes = _sizes(git, {sha for entry in changed for mode, sha in entry[1:] if mode not in ("000000", GITLINK)})
        chosen, left = [], []
        total = 0

        def cost(entry) -> int | None:
            shas = [sha for mode, sha in entry[1:] if mode not in ("000000", GITLINK)]
            return None if any(sizes.get(s) is None for s in shas) else sum(sizes[s] for s in shas)

        for entry in sorted(changed, key=lambda e: (cost(e) is None, cost(e) or 0, e[0])):
            n = cost(entry)
            if n is None:
                left.append(f"{printable(entry[0])} (git cannot read it)")
            elif total + n > BUDGET:
                left.append(f"{printable(entry[0])} ({n} bytes: over the {_amount(BUDGET)} kept per attempt)")
            else:
                total += n
                chosen.append(entry)
        if not chosen:
            return None, left
        contents = _contents(git, {sha for entry in chosen for mode, sha in entry[1:] if mode not in ("000000", GITLINK)})
        self._prepare()
        listing = self._listing()  # (one read for the date below and for pruning after)
        # a second later than the newest when they would tie (pruning goes by this date: the newest stay)
        stamp = max(int(time.time()), listing[0][0] + 1 if listing else 0)
        self._git("fast-import", "--quiet", "--force", input=_stream(name, what, chosen, contents, left, stamp))
        self.listed = [name] + [n for _, n in listing if n != name]
        return self.location(name), left


def _amount(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def _raw_diff(git: Git, base: str, tree: str) -> list[tuple[str, tuple[str, str], tuple[str, str]]]:
    """(path, (mode, object) at the checkpoint, (mode, object) now) per path that differs; mode 000000: absent."""
    if base == tree:
        return []
    raw = git("diff-tree", "-r", "-z", "--no-renames", "--raw", base, tree)
    parts = raw.decode("utf-8", "surrogateescape").split("\0")
    out = []
    for i in range(0, len(parts) - 1, 2):  # ":<old mode> <new mode> <old sha> <new sha> <status>", path
        old_mode, new_mode, old, new, _ = parts[i].lstrip(":").split(" ")
        out.append((parts[i + 1], (old_mode, old), (new_mode, new)))
    return out


def _sizes(git: Git, shas: set[str]) -> dict[str, int]:
    if not shas:
        return {}
    out = git("cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)",
              input=("\n".join(sorted(shas)) + "\n").encode())
    sizes = {}
    for line in out.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob":
            sizes[parts[0]] = int(parts[2])
    return sizes


def _contents(git: Git, shas: set[str]) -> dict[str, bytes]:
    """Each blob's bytes, redacted."""
    if not shas:
        return {}
    order = sorted(shas)
    raw = git("cat-file", "--batch", input=("\n".join(order) + "\n").encode())
    out, pos = {}, 0
    for sha in order:
        end = raw.index(b"\n", pos)
        header = raw[pos:end].split()
        if len(header) != 3:  # "<sha> missing": read a moment ago, pruned since
            raise WorkspaceError(f"object {sha} could not be read")
        size = int(header[2])
        data = raw[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
        text = data.decode("utf-8", "surrogateescape")
        out[sha] = (redact(text) or "").encode("utf-8", "surrogateescape")
    return out


def _quote(path: str) -> bytes:
    """A path as fast-import reads it: C-style quoted, so that any byte but NUL may be in it."""
    raw = path.encode("utf-8", "surrogateescape")
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'


def _stream(name: str, what: str, chosen, contents: dict[str, bytes], left: list[str], stamp: int) -> bytes:
    """fast-import's input: the blobs, a root commit of the checkpoint's side, the attempt's side on top."""
    out: list[bytes] = []
    marks: dict[str, int] = {}
    for sha, data in contents.items():
        marks[sha] = len(marks) + 1
        out += [b"blob\nmark :%d\ndata %d\n" % (marks[sha], len(data)), data, b"\n"]

    def entry(mode: str, sha: str, path: str) -> bytes:
        obj = sha.encode() if mode == GITLINK else b":%d" % marks[sha]
        return b"M " + mode.encode() + b" " + obj + b" " + _quote(path) + b"\n"

    base_mark = len(marks) + 1

    def commit(message: str, body: list[bytes], parent: bool) -> None:
        msg = message.encode("utf-8", "surrogateescape")
        out.extend([f"commit refs/heads/{name}\n".encode("utf-8", "surrogateescape"),
                    b"mark :%d\n" % (base_mark + parent), b"committer acr <acr@localhost> %d +0000\n" % stamp,
                    b"data %d\n" % len(msg), msg, b"\n", b"from :%d\n" % base_mark if parent else b"", *body, b"\n"])

    out.append(f"reset refs/heads/{name}\n".encode("utf-8", "surrogateescape"))  # a root commit, even if it existed
    commit(f"acr: {what}: the changed files as they were before it (secrets masked)\n",
           [entry(m, s, p) for p, (m, s), _ in chosen if m != "000000"], parent=False)
    note = "".join(f"\n  {line}" for line in left)
    commit(f"acr: {what} (secrets masked)\n\nThe files it changed, as it left them; secret values read "
           "[REDACTED].\n" + (f"\nNot kept:{note}\n" if left else ""),
           [entry(m, s, p) if m != "000000" else b"D " + _quote(p) + b"\n" for p, _, (m, s) in chosen], parent=True)
    return b"".join(out)


def command(location: str) -> str:
    """The command that shows a kept attempt's work (``location``: :meth:`Kept.location`'s)."""
    where, _, name = location.rpartition(SEP)
    return f"git --git-dir={shlex.quote(where)} show {shlex.quote(name)}"


def is_location(ref: str | None) -> bool:
    """A location in acr's store (else a ref in the project, as acr before this store kept attempts)."""
    return bool(ref) and not ref.startswith("refs/") and SEP in ref
