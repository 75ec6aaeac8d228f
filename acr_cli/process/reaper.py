"""Ending every process of a run: the subreaper flag, the parent-death signal, finding the run's processes
and ending them in rounds; finding and killing the marked processes of a killed run (``acr recover``).

What holds where
----------------
Linux: while a run lasts, acr is a child subreaper (``PR_SET_CHILD_SUBREAPER``),
so a descendant orphaned by a double fork or by its parent's death is
reparented to acr, not to init; when the agent has ended, acr ends every
process in its group, in its session, descended from it or from a process
orphaned to acr during the run, and (given a ``marker``) every process of the
same user whose environment carries ``ACR_ATTEMPT=<marker>``: SIGTERM, a grace,
then rounds of SIGSTOP + SIGKILL until none is left, reaping the ones
reparented to acr. The agent itself gets ``PR_SET_PDEATHSIG=SIGKILL``: if acr
is SIGKILLed, the agent dies with it; what the agent had started survives
then, and :func:`find_marked` finds it by its marker (``acr recover``).
Processes of another user (a setuid program) cannot be signalled and are
named as such. A process that scrubs its environment and reparents to
another subreaper (a container runtime, ``systemd-run``) is out of reach.
run() takes any process orphaned to acr during the run for the run's: acr
must not start processes from another thread meanwhile (it does not).
The subreaper flag is off between runs, so what acr's own git commands
leave behind is not made acr's children.

macOS (and any system without ``/proc``): no subreaper, no parent-death
signal, no readable environment of other processes. What holds there is the
process group: the agent's group is killed on timeout, Ctrl-C and exit, but a
process that left the group (``setsid``, ``set -m``) survives the run, the
agent survives a SIGKILLed acr, :func:`find_marked` finds nothing and
``leftovers`` is always empty.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from acr_cli.process import procfs
from acr_cli.process.procfs import MARKER_VAR, Proc

KILL_GRACE_S = 3.0  # SIGTERM to SIGKILL, on timeout or Ctrl-C
LEFTOVER_GRACE_S = 1.0  # the same for what an agent that exited left running
KILL_ROUNDS = 20  # SIGKILL rounds for processes that keep forking while being killed
LEFTOVERS_SHOWN = 50  # processes named in ProcessResult.leftovers; more are counted

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_SIGKILL = int(signal.SIGKILL)

_prctl_fn: Callable[..., int] | None = None
_prctl_loaded = False
_reaper_lock = threading.Lock()
_reaper_users = 0
_reaper_ours = False  # acr turned the subreaper flag on (and turns it off when no run needs it)


def load_prctl() -> Callable[..., int] | None:
    """libc's prctl() on Linux (loaded once), None elsewhere or when it cannot be had."""
    global _prctl_fn, _prctl_loaded
    if not _prctl_loaded:
        _prctl_loaded = True
        if procfs.LINUX:
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).prctl
                fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
                fn.restype = ctypes.c_int
                _prctl_fn = fn
            except (ImportError, OSError, AttributeError):
                _prctl_fn = None
    return _prctl_fn


def subreaper_enter() -> bool:
    """Make acr a child subreaper while a run lasts: orphaned descendants are reparented to acr.

    Only while a run lasts, so that what acr's other commands (git) leave behind is not made acr's
    children. False where it cannot be done (not Linux, prctl refused).
    """
    global _reaper_users, _reaper_ours
    prctl = load_prctl()
    if prctl is None:
        return False
    with _reaper_lock:
        if _reaper_users == 0:
            import ctypes

            flag = ctypes.c_int(0)
            if prctl(_PR_GET_CHILD_SUBREAPER, ctypes.addressof(flag), 0, 0, 0) == 0 and flag.value:
                _reaper_ours = False  # someone made acr a subreaper already: leave it so
            elif prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
                _reaper_ours = True
            else:
                return False
        _reaper_users += 1
        return True


def subreaper_exit() -> None:
    global _reaper_users
    with _reaper_lock:
        _reaper_users -= 1
        if _reaper_users == 0 and _reaper_ours and _prctl_fn is not None:
            _prctl_fn(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def die_with(parent: int, prctl: Callable[..., int]) -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when the thread that started it ends (acr is killed)."""

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # acr died before the prctl took effect: follow it now
            os._exit(137)

    return preexec


def preexec_fn() -> Callable[[], None] | None:
    """The preexec_fn a run's child starts with: the parent-death signal where prctl exists, else none."""
    prctl = load_prctl()
    return None if prctl is None else die_with(os.getpid(), prctl)


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


_shared = 0  # runs side by side in this process (a race): a child of acr is then not any one run's


@contextmanager
def shared() -> Iterator[None]:
    """While several runs go on at once in other threads (``acr run --race``), a direct child of acr may be
    another run's agent or another thread's git command: each run then takes for its own only what is in its
    agent's session or group, carries its marker, or descends from those. (Not covered then: a process that
    leaves its group, scrubs its environment and is orphaned to acr.)"""
    global _shared
    with _reaper_lock:
        _shared += 1
    try:
        yield
    finally:
        with _reaper_lock:
            _shared -= 1


class Watch:
    """Finds the processes of one run in /proc (Linux); finds nothing elsewhere."""

    def __init__(self, marker: str | None) -> None:
        self.me = os.getpid()
        self.uid = os.getuid()
        # acr's own marker (acr runs inside an attempt of an outer acr) cannot tell this run's processes
        # from the outer attempt's: then only the tree, the session and the group count
        inherited = os.environ.get(MARKER_VAR)
        self.marker = None if marker is None or marker == inherited else os.fsencode(marker)
        self.proc = procfs.LINUX and os.path.isdir("/proc/self/task")
        self.reaper = False  # acr is a subreaper during the run
        self.session: int | None = None  # the agent's session (and group) id = its pid
        self._marked: dict[tuple[int, int], bool] = {}
        # a process started before the run cannot carry its marker: its environment is not read
        self.since = procfs.ticks_now() - 2 * procfs.CLK_TCK if self.proc and self.marker is not None else 0
        # acr's own children from before the run (a server a test started...) are never the run's
        self.before: dict[int, int] = {}
        if self.proc and procfs.has_children():
            self.before = {p.pid: p.start for p in procfs.all_procs().values() if p.ppid == self.me}

    def find(self) -> dict[int, Proc]:
        """The run's processes now (zombies included): in the agent's session or group, descended from
        the agent or from a process orphaned to acr during the run, or carrying the run's marker."""
        if not self.proc:
            return {}
        if self.marker is None and self.reaper and not procfs.has_children():
            return {}  # every orphan came to acr, and acr has no child left: nothing of the run is left
        procs = procfs.all_procs()
        mine = procfs.ancestry(self.me, procs)  # acr and the processes it runs under are never the run's
        roots = [p.pid for p in procs.values() if p.pid not in mine and not self._before(p) and self._roots(p)]
        return self._descendants(roots, procs, mine)

    def _roots(self, p: Proc) -> bool:
        """Whether ``p`` is the run's by itself: orphaned to acr (not while runs share acr: :func:`shared`), in
        the agent's session or group, or marked."""
        return ((p.ppid == self.me and not _shared) or p.sid == self.session or p.pgid == self.session
                or (self.marker is not None and self._has_marker(p)))

    def _descendants(self, roots: list[int], procs: dict[int, Proc], mine: set[int]) -> dict[int, Proc]:
        """``roots`` and every process below them, but never acr, its ancestors or its children from before."""
        kids: dict[int, list[int]] = collections.defaultdict(list)
        for p in procs.values():
            kids[p.ppid].append(p.pid)
        found: dict[int, Proc] = {}
        todo = list(roots)
        while todo:
            pid = todo.pop()
            if pid in found or pid in mine or pid not in procs or self._before(procs[pid]):
                continue
            found[pid] = procs[pid]
            todo.extend(kids.get(pid, ()))
        return found

    def _before(self, p: Proc) -> bool:
        return self.before.get(p.pid) == p.start and p.ppid == self.me

    def _has_marker(self, p: Proc) -> bool:
        if p.start < self.since:
            return False
        key = (p.pid, p.start)
        if key not in self._marked:
            self._marked[key] = procfs.marker(p.pid, self.uid) == self.marker
        return self._marked[key]


def end_run(proc: subprocess.Popen, watch: Watch, grace: float) -> tuple[list[str], bool]:
    """End the agent (if it still runs) and every process of the run: what was left, and whether a
    Ctrl-C (or SIGTERM/SIGHUP made one) came meanwhile (then the rest is done without grace)."""
    report: dict[int, list[str]] = {}  # pid -> [command, outcome]
    interrupted = False
    for _ in range(5):
        try:
            _Ending(proc, watch, report).end(0.0 if interrupted else grace)
            break
        except KeyboardInterrupt:
            interrupted = True
    lines = [f"pid {pid} ({cmd}): {outcome}" for pid, (cmd, outcome) in report.items()]
    if len(lines) > LEFTOVERS_SHOWN:  # a fork bomb
        lines[LEFTOVERS_SHOWN:] = [f"... and {len(lines) - LEFTOVERS_SHOWN} more process(es)"]
    return lines, interrupted


class _Ending:
    """One try at ending the agent and every process of its run, writing each one's outcome in ``report``
    (pid -> [command, outcome]), which outlives a try that a Ctrl-C cut short."""

    def __init__(self, proc: subprocess.Popen, watch: Watch, report: dict[int, list[str]]) -> None:
        self.proc, self.watch, self.report = proc, watch, report
        self.me, self.agent = watch.me, proc.pid
        self.refused: set[int] = set()  # could not be signalled (another user's)

    def end(self, grace: float) -> None:
        """SIGTERM to everything and a grace to end on its own, then SIGKILL in rounds; then the agent is reaped."""
        if not self._terminate(grace):
            return
        self._kill_in_rounds()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable child
            pass

    def _terminate(self, grace: float) -> bool:
        """SIGTERM the group and the run's other processes, and wait up to ``grace`` seconds for them; False
        when nothing of the run was left to end (the group gets its SIGKILL then, in case)."""
        killpg(self.agent, signal.SIGTERM)
        first, ended = self._alive()
        if not first and not ended and self.proc.returncode is not None:  # nothing of the run is left to fork
            killpg(self.agent, signal.SIGKILL)
            return False
        self._send([pid for pid, p in first.items() if p.pgid != self.agent], signal.SIGTERM)  # the group has had its own
        for pid in first:
            if pid in self.report and self.report[pid][1] == "ended":
                self.report[pid][1] = "terminated (SIGTERM)"
        self._wait({*first, self.agent}, grace)
        return True

    def _kill_in_rounds(self) -> None:
        """SIGKILL in rounds until nothing of the run is left (or :data:`KILL_ROUNDS` passed)."""
        for _ in range(KILL_ROUNDS):
            killpg(self.agent, signal.SIGKILL)
            now, ended = self._alive()
            if not now and not ended:
                return
            self._kill_round(now, ended)
        for pid in self._alive()[0]:
            if pid in self.report:
                self.report[pid][1] = f"still running after {KILL_ROUNDS} rounds of SIGKILL"

    def _kill_round(self, now: dict[int, Proc], ended: bool) -> None:
        """Stop what runs (a process that forks while being killed is stopped first, and its children, found
        stopped or orphaned to acr, go in the same round), then SIGKILL them all and wait a second."""
        stopped: set[int] = set()
        for _ in range(10):
            fresh = [pid for pid in now if pid not in stopped]
            if not fresh and not ended:
                break
            self._send(fresh, signal.SIGSTOP)
            stopped.update(fresh)
            now, ended = self._alive()
        targets = stopped | set(now)
        self._send(targets, signal.SIGKILL)
        for pid in targets:
            if pid in self.report and not self.report[pid][1].startswith("could not"):
                self.report[pid][1] = "killed (SIGKILL)"
        self._wait(targets, 1.0)

    def _alive(self) -> tuple[dict[int, Proc], bool]:
        """The run's processes still running, and whether some had just ended (were acr's zombies,
        reaped now): then their children may be new, and one more look is needed."""
        self.proc.poll()
        found, ended = {}, False
        for pid, p in self.watch.find().items():
            if pid == self.agent:
                if self.proc.returncode is None:  # Popen reaps it
                    found[pid] = p
                continue
            if p.state in ("Z", "X"):
                if p.ppid == self.me:
                    procfs.reap(pid)
                    ended = True
                continue
            if pid in self.refused:
                continue
            found[pid] = p
            if pid not in self.report:
                self.report[pid] = [procfs.cmdline(pid, p.comm), "ended"]
        return found, ended

    def _send(self, pids: Iterable[int], sig: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            except PermissionError as e:
                self.refused.add(pid)
                if pid in self.report:
                    self.report[pid][1] = f"could not be signalled: {e.strerror}"

    def _running(self, pid: int) -> bool:
        if pid == self.agent:
            return self.proc.poll() is None
        return pid not in self.refused and procfs.running(pid, self.me)

    def _wait(self, pids: Iterable[int], seconds: float) -> list[int]:
        pids = list(pids)
        end = time.monotonic() + seconds
        while True:
            pids = [pid for pid in pids if self._running(pid)]
            if not pids or time.monotonic() >= end:
                return pids
            time.sleep(0.05)


def kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the child's process group, then SIGKILL what is left after ``grace`` seconds."""
    pgid = proc.pid  # start_new_session=True: the child leads its own group
    killpg(pgid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    killpg(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable child
        pass
