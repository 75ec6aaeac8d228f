"""What a killed ``acr run`` left running: its processes found again by their ``ACR_ATTEMPT`` marker, and
ended by pid (``acr recover``)."""

from __future__ import annotations

import os
import signal
import time
from typing import Iterable

from acr_cli.process import procfs
from acr_cli.process.reaper import KILL_GRACE_S


def find_marked(marker_prefix: str) -> list[tuple[int, str]]:
    """Live processes of this user whose environment carries ``ACR_ATTEMPT`` starting with
    ``marker_prefix``: (pid, short command line), e.g. what an attempt of an ``acr run`` that was
    killed still has running (for ``acr recover``).

    Reads the environment each process *started* with (``/proc/PID/environ``): a process that
    scrubbed its environment is not found. Linux only: elsewhere (macOS) there is no /proc to read
    and the list is always empty; there, only the process group kill of a live run holds.
    """
    if not (procfs.LINUX and os.path.isdir("/proc/self")):
        return []
    want = os.fsencode(marker_prefix)
    uid = os.getuid()
    procs = procfs.all_procs()
    mine = procfs.ancestry(os.getpid(), procs)  # acr recover run from inside an attempt does not find itself
    found = []
    for pid, p in sorted(procs.items()):
        if pid in mine or p.state in ("Z", "X"):
            continue
        value = procfs.marker(pid, uid)
        if value is not None and value.startswith(want):
            found.append((pid, procfs.cmdline(pid, p.comm)))
    return found


def kill_pids(pids: Iterable[int], grace: float = KILL_GRACE_S) -> list[int]:
    """SIGTERM each of ``pids``, SIGKILL those still running after ``grace`` seconds; returns the ones
    still running after that (a zombie, or a process that is gone, is not running).

    A process that keeps forking is not chased here: call :func:`find_marked` again. On macOS a zombie
    (a killed process whose parent has not collected it yet) still counts as running.
    """
    me = os.getpid()
    pids = [p for p in dict.fromkeys(int(p) for p in pids) if p != me and p > 0]
    _send(pids, signal.SIGTERM)
    pids = _wait(pids, grace, me)
    if pids:
        _send(pids, signal.SIGKILL)
        pids = _wait(pids, 2.0, me)
    return pids


def _running(pid: int, me: int) -> bool:
    """Whether ``pid`` runs: from /proc on Linux (a zombie does not), else whether it can be signalled."""
    if procfs.LINUX and os.path.isdir("/proc/self"):
        return procfs.running(pid, me)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _send(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait(pids: list[int], seconds: float, me: int) -> list[int]:
    """The ones of ``pids`` still running once none is or ``seconds`` passed."""
    end = time.monotonic() + seconds
    while True:
        pids = [pid for pid in pids if _running(pid, me)]
        if not pids or time.monotonic() >= end:
            return pids
        time.sleep(0.05)
