"""run_interactive(): the terminal handed to an agent's own screen through a pty, and everything it started
ended when it exits."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from acr_cli.process import reaper
from acr_cli.process.procfs import MARKER_VAR
from acr_cli.process.result import Cancelled, ProcessResult
from acr_cli.process.running import program


def run_interactive(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
                    marker: str | None = None) -> ProcessResult:
    """Hand the terminal to ``argv`` through a pty (the agent's own interactive screen).

    When the agent exits, every process it started is ended as after :func:`run` (the same marker,
    subreaper and session rules; ``leftovers`` names them): a dev server an interactive session left
    running would otherwise write into the tree after the rollback."""
    import shutil

    import pexpect

    start = time.monotonic()
    size = shutil.get_terminal_size((120, 40))
    environment = dict(env)
    if marker is not None:
        environment[MARKER_VAR] = marker
    watch = reaper.Watch(marker)
    watch.reaper = reaper.subreaper_enter()
    try:
        try:
            child = pexpect.spawn(program(argv[0], environment, cwd), list(argv[1:]), cwd=str(cwd), env=environment,
                                  encoding=None,
                                  dimensions=(size.lines, size.columns),
                                  preexec_fn=reaper.preexec_fn())
        except pexpect.ExceptionPexpect as e:
            return ProcessResult(list(argv), None, "", str(e), 0.0, not_started=True)
        watch.session = child.pid  # a pty child leads its own session and group
        code = _interact(child)
        leftovers, interrupted = reaper.end_run(_Exited(child.pid, code), watch, reaper.LEFTOVER_GRACE_S)
        result = ProcessResult(list(argv), code, "", "", time.monotonic() - start, leftovers=leftovers)
        if interrupted:
            result.cancelled = True
            raise Cancelled(result)
        return result
    finally:
        if watch.reaper:
            reaper.subreaper_exit()


def _interact(child: Any) -> int:
    """Let the user work with ``child`` (a ``pexpect.spawn``), resized with the terminal; its exit code
    (128 + the signal when a signal ended it)."""
    import shutil

    def resize(*_: object) -> None:
        s = shutil.get_terminal_size((120, 40))
        child.setwinsize(s.lines, s.columns)

    old = signal.signal(signal.SIGWINCH, resize)
    try:
        child.interact(escape_character=None)
    finally:
        signal.signal(signal.SIGWINCH, old)
        child.close()
    return child.exitstatus if child.exitstatus is not None else (128 + (child.signalstatus or 0))


class _Exited:
    """A child that has exited and been reaped, shaped as the ``subprocess.Popen`` that ``end_run`` expects."""

    def __init__(self, pid: int, code: int) -> None:
        self.pid, self.returncode = pid, code

    def poll(self) -> int:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode
