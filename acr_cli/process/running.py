"""run(): one child process, started without a shell, drained, bounded in time, and ended with everything
it started. (Named ``running`` so that the module does not shadow the function ``process.run``.)"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence

from acr_cli.process import reaper
from acr_cli.process.capture import LOG_MAX_BYTES, LineCallback, LogSink, Readers
from acr_cli.process.procfs import MARKER_VAR
from acr_cli.process.result import Cancelled, ProcessResult


def child_env(cwd: Path, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OLDPWD", None)
    env["PWD"] = str(cwd)
    if overrides:
        env.update(overrides)
    return env


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    on_line: LineCallback | None = None,
    log: IO[str] | None = None,
    stdin_text: str | None = None,
    marker: str | None = None,
    log_max_bytes: int = LOG_MAX_BYTES,
    stalled: Callable[[], str | None] | None = None,
) -> ProcessResult:
    """Run ``argv`` (never through a shell) and wait, bounded by ``timeout`` seconds.

    ``marker``: put ``ACR_ATTEMPT=<marker>`` in the child's environment; every descendant inherits it
    (unless it scrubs its environment), which is how the run's processes are found again, by this
    run and, after acr itself was killed, by :func:`find_marked`. It should be unique to the run.

    ``log``: the output is written there line by line until the file holds ``log_max_bytes`` bytes (its
    position when the run starts counts: what was written to it before this run is part of the file).

    When the child has ended (it exited, the timeout came, or Ctrl-C), every process of the run is
    ended too and named in ``leftovers`` (see :mod:`acr_cli.process.reaper` for what holds on Linux and
    on macOS). The parent-death signal the child gets on Linux is tied to the thread that calls run():
    call it from a thread that outlives the run (run() itself waits, so any caller does).

    ``stalled``: asked ten times a second while the child runs; a reason it returns ends the run as a
    timeout would (the whole group killed) and is kept in ``ProcessResult.stalled``.
    """
    argv = [str(a) for a in argv]
    start = time.monotonic()
    child_environment = dict(env) if env is not None else child_env(cwd)
    if marker is not None:
        child_environment[MARKER_VAR] = marker
    watch = reaper.Watch(marker)  # before the child starts: acr's own children from before are not the run's
    watch.reaper = reaper.subreaper_enter()
    try:
        started = _start(argv, cwd, child_environment, stdin_text)
        if isinstance(started, ProcessResult):
            return started
        readers = Readers(LogSink(log, log_max_bytes), on_line)
        return _follow(started, readers, stdin_text, watch, start, timeout, stalled)
    finally:
        if watch.reaper:
            reaper.subreaper_exit()


def program(name: str, env: Mapping[str, str], cwd: Path | str | None = None) -> str:
    """The file ``name`` runs: the first on the child's PATH, as a shell (and ``acr doctor``) finds it,
    relative PATH entries (``node_modules/.bin``, an empty one) taken from the child's directory ``cwd``.

    exec itself would go on down PATH when that file cannot start (its ``#!`` interpreter missing), and
    quietly run another copy than the one acr checked and reports; run exactly this one, and fail as it does."""
    if os.sep in name:
        return name
    import shutil

    base = os.path.abspath(cwd) if cwd is not None else os.getcwd()
    path = os.pathsep.join(d if os.path.isabs(d) else os.path.join(base, d)
                           for d in env.get("PATH", os.defpath).split(os.pathsep))
    return shutil.which(name, path=path) or name


def _start(argv: list[str], cwd: Path, env: dict[str, str], stdin_text: str | None) -> subprocess.Popen | ProcessResult:
    """The child, started in a session of its own, or the result of one that could not start, saying why."""
    try:
        return subprocess.Popen(
            argv,
            executable=program(argv[0], env, cwd),
            cwd=str(cwd),
            env=env,
            stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=reaper.preexec_fn(),
        )
    except FileNotFoundError:
        why = _not_found(argv[0], program(argv[0], env, cwd))
    except PermissionError as e:
        why = f"{argv[0]}: {e.strerror}"
    except (OSError, ValueError, subprocess.SubprocessError) as e:  # E2BIG, a NUL byte in an argument...
        why = f"{argv[0]}: could not start: {getattr(e, 'strerror', None) or e}"
    return ProcessResult(argv, None, "", why, 0.0, not_started=True)


def _not_found(name: str, exe: str) -> str:
    """Why ``exe`` could not start: not found, or found with a ``#!`` line naming an interpreter that is not."""
    if not (os.path.isabs(exe) and os.path.isfile(exe)):
        return f"{name}: command not found"
    try:  # it is there: what its first line names is not
        with open(exe, "rb") as f:
            first = f.readline(200).decode("utf-8", "replace").strip()
    except OSError:
        first = ""
    return f"{exe}: bad interpreter" + (f" ({first} not found)" if first.startswith("#!") else "")


def _follow(proc: subprocess.Popen, readers: Readers, stdin_text: str | None, watch: reaper.Watch, start: float,
            timeout: float | None, stalled: Callable[[], str | None] | None) -> ProcessResult:
    """Drain the started child until it exits, the timeout comes, ``stalled`` gives a reason or Ctrl-C
    arrives; then end everything the run started. Ctrl-C raises :class:`Cancelled` with the result."""
    deadline = None if timeout is None else start + timeout
    timed_out = cancelled = False
    stall: str | None = None
    try:  # from here on, a Ctrl-C ends the child and everything the run started
        watch.session = proc.pid  # start_new_session=True: the child leads its own session and group
        readers.start(proc.stdout, proc.stderr, proc.stdin, stdin_text)
        timed_out, stall = _wait(proc, deadline, stalled)
    except KeyboardInterrupt:
        cancelled = True
    # The direct child is gone (or is to go now); everything the run started goes too.
    watch.session = proc.pid  # (again: a Ctrl-C may have come before the first time)
    grace = reaper.KILL_GRACE_S if timed_out or cancelled or stall else reaper.LEFTOVER_GRACE_S
    leftovers, interrupted = reaper.end_run(proc, watch, grace)
    try:
        readers.join()
    except KeyboardInterrupt:
        interrupted = True
    readers.stop()
    result = ProcessResult(argv=proc.args, exit_code=proc.returncode, stdout=readers.out.text(),
                           stderr=readers.err.text(), duration_s=time.monotonic() - start, timed_out=timed_out,
                           leftovers=leftovers, log_problem=readers.log.problem, stalled=stall)
    if cancelled or interrupted:
        result.cancelled = True
        raise Cancelled(result) from None
    return result


def _wait(proc: subprocess.Popen, deadline: float | None,
          stalled: Callable[[], str | None] | None) -> tuple[bool, str | None]:
    """Wait for the child to exit: whether the deadline came first, and the ``stalled`` reason that did."""
    while True:
        try:
            proc.wait(timeout=0.1)
            return False, None
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                return True, None
            stall = _stalled(stalled)
            if stall is not None:
                return False, stall


def _stalled(check: Callable[[], str | None] | None) -> str | None:
    """The caller's reason to end the run now, or None (a check that fails is no reason)."""
    if check is None:
        return None
    try:
        return check()
    except Exception:
        return None
