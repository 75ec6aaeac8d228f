"""The guarded git runner: every git command acr runs on a user's repository goes through :class:`Git`.

A failed attempt may have planted configuration that runs code: hooks (``reference-transaction``,
``post-index-change``...), ``core.hooksPath``, ``core.fsmonitor``, clean/smudge/process filters,
``commit.gpgSign`` with a ``gpg.program``, replace refs and grafts that swap the objects a rollback
reads, ``core.worktree`` that points the rollback at another directory. acr's own git commands
(checkpoint, rollback, recover) therefore run with:

* ``GIT_DIR``, ``GIT_COMMON_DIR`` and ``GIT_WORK_TREE`` pinned to what they were when the workspace
  was opened (a planted ``core.worktree`` or ``commondir`` file cannot redirect them);
* command-line configuration, which wins over every config file: no hooks, no fsmonitor, every
  filter driver found in the configuration emptied (``filter.<name>.clean/smudge/process`` = "",
  ``required`` = false), no signing, no automatic gc or maintenance, no line-ending conversion, no
  commit-graph or multi-pack-index (caches git does not check);
* no replace objects, no grafts, no pager, no editor, no prompt, and no ``GIT_*`` variable from
  acr's own environment;
* a time limit per command, so nothing can hang acr.

The filter drivers are read from ``git config --list`` (itself run guarded: every config file git
reads, included and global ones too) at the start of every checkpoint, change check and rollback
(:meth:`Git.invalidate`), and again whenever ``.git/config`` changes. Files with a filter attribute are written back from their
exact bytes, which the checkpoint keeps (see :mod:`.snapshot`). Needs git 2.31 or later
(configuration through ``GIT_CONFIG_COUNT``).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from acr_cli.errors import WorkspaceError

GIT_TIMEOUT_S = 600.0  # one git command; a checkpoint of 50,000 files takes about a second
GIT_MIN = (2, 31)
# What acr's git commands always run with (command-line config wins over every file).
SAFE_CONFIG = {
    "core.hooksPath": "/dev/null",  # no hook runs: there is no directory of that name
    "core.fsmonitor": "false",
    "core.bare": "false",
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "core.quotepath": "false",
    "commit.gpgSign": "false",
    "log.showSignature": "false",  # `git log -g refs/stash` would verify a planted signature
    "gpg.program": "false",  # and should anything still ask for one, no program of the repository's runs
    "gpg.ssh.program": "false",
    "gpg.x509.program": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
    # caches of the object store that git trusts without checking: a commit-graph the attempt wrote (with
    # grafted parents, or forged) would change what ancestry checks answer; a multi-pack-index maps an
    # object to where its bytes are. acr reads neither (a rollback removes one the attempt made: control.py)
    "core.commitGraph": "false",
    "core.multiPackIndex": "false",
    "advice.detachedHead": "false",
}
_FILTER_KEYS = ("clean", "smudge", "process")
_version_checked = False


class Git:
    """Run git in one work tree, guarded (see the module docstring).

    ``objects``: acr's own object directory (see :mod:`.store`). Commands run with it as the
    primary object store and the repository's as an alternate, so every object acr writes (the
    snapshot of the user's files) lives where the attempt's git commands cannot prune it;
    ``repo_objects=True`` writes into the repository instead (objects a ref there points to)."""

    def __init__(self, root: Path, git_dir: Path, common_dir: Path, objects: Path | None = None):
        self.root, self.git_dir, self.common_dir, self.objects = root, git_dir, common_dir, objects
        self._filters: list[str] = []
        self._config_stamp: object = None
        _check_version()

    def config_files(self) -> list[Path]:
        return [self.common_dir / "config", self.git_dir / "config.worktree"]

    def _stamp(self) -> tuple:
        out = []
        for p in self.config_files():
            try:
                st = p.stat()
                out.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                out.append(None)
        return tuple(out)

    def _env(self, extra: dict | None, repo_objects: bool) -> dict[str, str]:
        pairs = dict(SAFE_CONFIG)
        for name in self._filters:
            for key in _FILTER_KEYS:
                pairs[f"filter.{name}.{key}"] = ""
            pairs[f"filter.{name}.required"] = "false"
        env = safe_env(pairs)
        env.update({"GIT_DIR": str(self.git_dir), "GIT_COMMON_DIR": str(self.common_dir),
                    "GIT_WORK_TREE": str(self.root)})
        if self.objects is not None and not repo_objects:
            env["GIT_OBJECT_DIRECTORY"] = str(self.objects)
            env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = alternate(self.common_dir / "objects")
        env.update(extra or {})
        return env

    def invalidate(self) -> None:
        """Read the filter drivers again before the next command (an included or global config file,
        which the stamp does not watch, may have changed)."""
        self._config_stamp = None

    def refresh(self) -> None:
        """Re-read the filter drivers to neutralise if a config file changed (cheap when none did)."""
        stamp = self._stamp()
        if stamp == self._config_stamp:
            return
        raw = self._run(["config", "--list", "--name-only", "-z"], None, None, False, True)
        names = set()
        for key in raw.decode("utf-8", "surrogateescape").split("\0"):
            section, _, rest = key.partition(".")
            if section.lower() == "filter" and "." in rest:
                names.add(rest.rsplit(".", 1)[0])
        self._filters = sorted(names)
        self._config_stamp = stamp

    def __call__(self, *args: str, env: dict | None = None, input: bytes | None = None, check: bool = True,
                 repo_objects: bool = False, acr_objects_only: bool = False, said: list | None = None) -> bytes:
        """``acr_objects_only``: acr's object directory alone, without the repository's (to copy objects
        into it: git writes no object it can already read). ``said``: gets what git wrote to stderr."""
        self.refresh()
        extra = dict(env or {})
        if acr_objects_only:
            extra["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = ""
        return self._run(list(args), extra, input, check, repo_objects, said)

    def ok(self, *args: str, env: dict | None = None, input: bytes | None = None, repo_objects: bool = False) -> bool:
        """Run git; False where it refuses (or cannot even start, e.g. an argument over the kernel's limit)."""
        try:
            self(*args, env=env, input=input, repo_objects=repo_objects)
            return True
        except (WorkspaceError, OSError):
            return False

    def _run(self, args: list[str], env: dict | None, input: bytes | None, check: bool, repo_objects: bool,
             said: list | None = None) -> bytes:
        try:
            r = subprocess.run(["git", *args], cwd=self.root, capture_output=True, env=self._env(env, repo_objects),
                               input=input, stdin=None if input is not None else subprocess.DEVNULL,
                               timeout=GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise WorkspaceError(f"git {args[0]} did not finish within {GIT_TIMEOUT_S:g}s and was stopped",
                                 hint="check the repository with `git fsck`; then run `acr recover` if a "
                                      "rollback was under way") from None
        if said is not None:
            said.append(r.stderr)
        if r.returncode != 0 and check:
            msg = r.stderr.decode(errors="replace").strip()
            raise WorkspaceError(f"git {args[0]} failed: {msg}")
        return r.stdout


def alternate(path: Path) -> str:
    """``path`` as one entry of ``GIT_ALTERNATE_OBJECT_DIRECTORIES``, a colon-separated list: a path with a colon,
    a quote, a backslash or a newline in it (a project in ``/work/a:b``) is C-quoted, which git unquotes."""
    text = str(path)
    if not any(c in text for c in ':"\\\n'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def safe_env(config: dict[str, str] = SAFE_CONFIG) -> dict[str, str]:
    """acr's environment for git: none of its own ``GIT_*`` variables, ``config`` on the command line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"LC_ALL": "C", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull,
                "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_EDITOR": ":", "GIT_OPTIONAL_LOCKS": "0",
                "GIT_CONFIG_COUNT": str(len(config))})
    for i, (k, v) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
    return env


def discover(project: Path) -> tuple[Path, Path, Path] | None:
    """(work tree, git directory, common git directory) of the repository ``project`` is in, or None when
    it is in none; found with the same guarded environment (before the directories can be pinned).
    A repository git will not open (another user's: "dubious ownership"; a damaged one; no work tree)
    is a :class:`WorkspaceError` saying so, not "no repository"."""
    r = subprocess.run(["git", "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"],
                       cwd=project, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=safe_env(),
                       timeout=GIT_TIMEOUT_S)
    if r.returncode != 0:
        refusal = _refusal(r.stderr, project)
        if refusal is not None:
            raise refusal
        return None
    lines = r.stdout.split("\n")  # (not splitlines: a path may hold U+2028)
    if len(lines) < 3:
        return None
    top, git_dir, common = lines[:3]
    git_path, common_path = Path(git_dir), (Path(project) / common).resolve()  # common: relative, or absolute
    # The work tree from where the git directory is, not from core.worktree, which a killed attempt may
    # have planted (git's --show-toplevel follows it): .git's parent, or the one a linked worktree names.
    if git_path == common_path and git_path.name == ".git":
        return git_path.parent, git_path, common_path
    try:
        if git_path != common_path:
            return Path((git_path / "gitdir").read_text().strip()).parent, git_path, common_path
    except OSError:
        pass
    return Path(top), git_path, common_path


def _refusal(stderr: str, project: Path) -> WorkspaceError | None:
    """What git's failure to find the repository means (its messages are in English: LC_ALL=C), or None
    for "not a git repository"."""
    import re
    import shlex

    m = re.search(r"dubious ownership in repository at '(.*)'", stderr)
    if m:
        path = m.group(1) or str(project)
        owner, me = _user_of(path), user_name(os.geteuid())
        whose = f"it belongs to {owner}, not to you ({me})" if owner != me else "git takes it for another user's"
        return WorkspaceError(
            f"git refuses to work in the repository {path}: {whose}, and git does not trust another user's "
            "repository (its \"dubious ownership\" check: the repository's hooks and config could run code as you)",
            hint=f"if you trust it: git config --global --add safe.directory {shlex.quote(path)}"
                 + (f"; or run acr as {owner}" if owner != me else ""))
    if "not a git repository" in stderr:
        return None
    fatal = [line.split(":", 1)[1].strip() for line in stderr.splitlines() if line.startswith(("fatal:", "error:"))]
    if any("must be run in a work tree" in f for f in fatal):
        return WorkspaceError(f"{project} is in a git directory or a bare repository, not in a work tree",
                              hint="run acr in the repository's checked-out files, or pass --no-rollback")
    why = "; ".join(fatal) or stderr.strip() or "git rev-parse failed"
    return WorkspaceError(f"git cannot open the repository {project} is in: {why}",
                          hint="`git status` there shows the same; fix the repository, or pass --no-rollback")


def user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # no name for it (a container's user): the number
        return f"uid {uid}"


def _user_of(path: str) -> str:
    try:
        return user_name(os.stat(path).st_uid)
    except OSError:
        return "another user"


def _check_version() -> None:
    global _version_checked
    if _version_checked:
        return
    out = subprocess.run(["git", "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout
    try:
        found = tuple(int(x) for x in out.split()[2].split(".")[:2])
    except (IndexError, ValueError):
        found = GIT_MIN  # a build that words its version differently: trust it
    if found < GIT_MIN:
        raise WorkspaceError(f"acr's rollback needs git {GIT_MIN[0]}.{GIT_MIN[1]} or later; this is {out.strip()}",
                             hint="upgrade git, or pass --no-rollback")
    _version_checked = True


def ident() -> dict[str, str]:
    stamp = str(int(time.time()))
    return {"GIT_AUTHOR_NAME": "acr", "GIT_AUTHOR_EMAIL": "acr@localhost", "GIT_COMMITTER_NAME": "acr",
            "GIT_COMMITTER_EMAIL": "acr@localhost", "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
