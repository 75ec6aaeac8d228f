"""Reading Linux's /proc: the processes there, their parents, sessions, groups, start times, command lines
and the ``ACR_ATTEMPT`` marker in the environment each started with. Elsewhere (macOS) ``LINUX`` is False
and the callers find nothing."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from acr_cli.redact import redact

LINUX = sys.platform.startswith("linux")  # read at call time (module attribute): tests turn it off
MARKER_VAR = "ACR_ATTEMPT"
WALL = 0x40000000  # Linux __WALL: wait for any kind of child
try:
    CLK_TCK = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):  # pragma: no cover
    CLK_TCK = 100


@dataclass
class Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start: int  # clock ticks after boot: with the pid, names a process even if the pid is reused
    comm: str


def stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        right = data.rindex(b")")
        fields = data[right + 2:].split()
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode("ascii", "replace"),
                    int(fields[19]), data[data.index(b"(") + 1:right].decode("utf-8", "replace"))
    except (OSError, ValueError, IndexError):
        return None


def ticks_now() -> int:
    """Clock ticks since boot, as /proc/PID/stat counts a process's start (0 when unknown)."""
    try:
        with open("/proc/uptime", "rb") as f:
            return int(float(f.read().split()[0]) * CLK_TCK)
    except (OSError, ValueError, IndexError):
        return 0


def all_procs() -> dict[int, Proc]:
    """Every process in /proc. The listing is read again until it shows no new pid (a few times at
    most): a process that forks and exits (a moving target) is not missed for being younger than the
    first listing."""
    procs: dict[int, Proc] = {}
    seen: set[str] = set()
    for _ in range(5):
        try:
            names = [n for n in os.listdir("/proc") if n.isdigit() and n not in seen]
        except OSError:
            break
        if not names:
            break
        seen.update(names)
        for name in names:
            p = stat(int(name))
            if p is not None:
                procs[p.pid] = p
    return procs


def marker(pid: int, uid: int) -> bytes | None:
    """The ACR_ATTEMPT value in the environment ``pid`` started with, if it is ``uid``'s and has one."""
    key = MARKER_VAR.encode() + b"="
    try:
        if uid != 0 and os.stat(f"/proc/{pid}").st_uid != uid:
            return None
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data.startswith(key):
        at = len(key)
    else:
        at = data.find(b"\0" + key)
        if at < 0:
            return None
        at += 1 + len(key)
    end = data.find(b"\0", at)
    return data[at:] if end < 0 else data[at:end]


def ancestry(pid: int, procs: dict[int, Proc]) -> set[int]:
    """``pid`` and its parent, grandparent... up to init."""
    chain = set()
    while pid > 0 and pid not in chain:
        chain.add(pid)
        p = procs.get(pid)
        pid = p.ppid if p is not None else 0
    return chain


def cmdline(pid: int, comm: str = "") -> str:
    """A short, redacted command line for messages."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    text = redact(" ".join(text.split()) or comm or "?")
    return text if len(text) <= 100 else text[:97] + "..."


def running(pid: int, me: int) -> bool:
    """Whether ``pid`` still runs; a zombie is not running (and is reaped if it is acr's child)."""
    p = stat(pid)
    if p is None:
        return False
    if p.state in ("Z", "X"):
        if p.ppid == me:
            reap(pid)
        return False
    return True


def reap(pid: int) -> None:
    """Collect one zombie child that acr inherited; never waitpid(-1), which would steal Popen's child."""
    try:
        os.waitpid(pid, os.WNOHANG | WALL)
    except (ChildProcessError, OSError):
        pass


def has_children() -> bool:
    """Whether acr has any child process, running or not yet reaped (reaps nothing)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (OSError, AttributeError):  # cannot tell
        return True
    return True
