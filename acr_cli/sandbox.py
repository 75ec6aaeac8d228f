"""An OS sandbox for agents that have none of their own: bubblewrap (``sandbox = "bwrap"``, opt-in, Linux).

Inside it the agent (and the verifier after it) sees the whole filesystem read-only, except:

* the project's work tree: the repository's top, ``.git`` included (the agent's git commands and the
  checkpoint need it; acr's rollback restores ``.git`` anyway), and the repository's git directory and
  common directory when they live elsewhere (a linked worktree's); without git, the project directory;
* the agent's own config, data and cache directories, as its adapter names them
  (:meth:`acr_cli.agents.base.Adapter.writable_paths`): its login, sessions and logs live there;
* a private temporary directory, made for the run and removed after it, named by ``TMPDIR``; ``/tmp``
  itself stays read-only (a program that writes there by a fixed name, not through ``TMPDIR``, cannot).

What it does not do: reads are not confined (the agent can read anything the user can), the network is
open (the agent needs its API), ``/proc`` and ``/dev`` are what bubblewrap gives (a new ``/dev`` with the
usual devices; the host's processes stay visible). No PID namespace: the agent's processes keep the
``ACR_ATTEMPT`` marker, the process group and the reaper of :mod:`acr_cli.process`, so a leftover
background process is ended as outside the sandbox; ``--die-with-parent`` ends the sandbox with acr.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

BWRAP = "bwrap"
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"


@dataclass(frozen=True)
class Spec:
    """What a sandboxed command may write: ``writable`` paths (bound read-write where they are), ``tmp`` its
    private temporary directory; the working directory ``cwd`` (inside one of them, or read-only)."""

    writable: tuple[Path, ...]
    tmp: Path
    cwd: Path


def bwrap_argv(spec: Spec, command: Sequence[str], bwrap: str = BWRAP) -> list[str]:
    """The argv that runs ``command`` inside bubblewrap as ``spec`` says (no shell: each path is one argument).
    Later binds win over earlier ones, so the read-only root comes first; a path that does not exist is
    skipped (``--bind-try``): a file such as ``~/.claude.json`` may not be there yet."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in _outermost([*spec.writable, spec.tmp]):
        argv += ["--bind-try", str(path), str(path)]
    argv += ["--die-with-parent", "--chdir", str(spec.cwd), "--", *command]
    return argv


def writable_in(argv: Sequence[str]) -> list[str]:
    """The paths a :func:`bwrap_argv` makes writable (for the attempt's log)."""
    options = argv[:argv.index("--")] if "--" in argv else argv
    return [options[i + 1] for i, a in enumerate(options[:-1]) if a == "--bind-try"]


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` made absolute (symlinks resolved: a bind follows them), without repeats, in order; a path
    inside another one listed is dropped, its parent's bind already makes it writable."""
    real = list(dict.fromkeys(Path(os.path.realpath(p)) for p in paths))
    return [p for p in real if not any(p != q and p.is_relative_to(q) for q in real)]


def problem(bwrap: str = BWRAP) -> str | None:
    """Why the sandbox cannot run commands here (not Linux, bubblewrap missing, no namespaces), or None: asked by
    running ``true`` inside it, the way a real run would start."""
    if not sys.platform.startswith("linux"):
        return f"the bwrap sandbox needs Linux (this is {sys.platform})"
    exe = shutil.which(bwrap)
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    from acr_cli import process

    with tempfile.TemporaryDirectory(prefix="acr-sandbox-check-") as tmp:
        spec = Spec((), Path(tmp), Path(tmp))
        res = process.short_call(bwrap_argv(spec, ["true"], exe), cwd=Path(tmp), timeout=20)
    if res.ok:
        return None
    said = (res.stderr.strip().splitlines() or [f"exit {res.exit_code}"])[-1]
    return f"bubblewrap ({exe}) cannot start a sandbox here: {said}"


@contextmanager
def private_tmp() -> Iterator[Path]:
    """A temporary directory of one sandboxed run (0700), removed after it with what the run left there."""
    path = Path(tempfile.mkdtemp(prefix="acr-sandbox-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def tmp_env(env: Mapping[str, str], tmp: Path) -> dict[str, str]:
    """``env`` with the private temporary directory as every program's temp (``TMPDIR``, ``TMP``, ``TEMP``)."""
    return {**env, "TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp)}


@dataclass(frozen=True)
class Sandbox:
    """The run's sandbox: the work tree's writable paths; :meth:`wrap` adds an agent's own and a private temp.

    Made by :func:`for_project` once per run, after :func:`problem` said it can start."""

    work: tuple[Path, ...]
    bwrap: str = BWRAP

    @contextmanager
    def wrap(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path,
             agent=None) -> Iterator[tuple[list[str], dict[str, str]]]:
        """(argv, env) that run ``argv`` in the sandbox, writing only the work tree, the directories and files
        of ``agent`` (its :class:`acr_cli.agents.base.Adapter`: none for the verifier) and a private temp,
        which is removed when the block ends. The program is looked up on the child's PATH here, as
        :func:`acr_cli.process.program` does outside the sandbox."""
        from acr_cli import process

        own = agent_paths(agent, env) if agent is not None else []
        with private_tmp() as tmp:
            env = tmp_env(env, tmp)
            command = [process.program(argv[0], env, cwd), *argv[1:]]
            spec = Spec((*self.work, *own), tmp, cwd)
            yield bwrap_argv(spec, command, shutil.which(self.bwrap) or self.bwrap), env


@contextmanager
def sandboxed(sandbox: Sandbox | None, argv: Sequence[str], env: Mapping[str, str],
              cwd: Path) -> Iterator[tuple[list[str], dict[str, str]]]:
    """``argv`` and ``env`` wrapped by ``sandbox`` (no agent's own paths: a verifier), or as they are without one."""
    if sandbox is None:
        yield list(argv), dict(env)
        return
    with sandbox.wrap(argv, env, cwd) as wrapped:
        yield wrapped


def agent_paths(agent, env: Mapping[str, str]) -> list[Path]:
    """What an agent may write besides the work tree: its directories (made when missing, 0700, as the agent
    would make them on its first run) and its files."""
    dirs = list(agent.writable_dirs(env))
    for d in dirs:
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:  # an unwritable home: the bind is skipped, the agent finds it read-only
            pass
    return [*dirs, *agent.writable_files(env)]


def for_project(project: Path, workspace=None) -> Sandbox:
    """The sandbox of a run in ``project``: writable, the repository's top (``.git`` included) and its git
    directories (``workspace``, an :class:`acr_cli.workspace.Workspace`, when acr checkpoints), else the
    repository git finds from ``project``, else ``project`` itself."""
    if workspace is not None:
        return Sandbox((Path(workspace.root), Path(workspace.git_dir), Path(workspace.common_dir)))
    return Sandbox(tuple(_git_paths(project)) or (project,))


def _git_paths(project: Path) -> list[Path]:
    """The repository's top, git directory and common directory, as git finds them from ``project`` (none
    outside a repository)."""
    from acr_cli import process

    res = process.short_call(["git", "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"],
                             cwd=project)
    if not res.ok:
        return []
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    return [p if p.is_absolute() else project / p for p in map(Path, lines)]


def refusal(mode: str, source: str) -> str | None:
    """Why a run with sandbox ``mode`` (set in ``source``) must not start, or None."""
    if mode != "bwrap":
        return None
    why = problem()
    if why is None:
        return None
    where = "--sandbox bwrap" if source == "command line" else f'sandbox = "bwrap" (from {source})'
    return f"{where}: {why}; no agent was run"


def state() -> dict:
    """The sandbox's state for ``acr doctor``: whether it can start here, and why not."""
    why = problem()
    return {"available": why is None, "problem": why, "bwrap": shutil.which(BWRAP)}
