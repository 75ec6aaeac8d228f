"""The one place where acr starts processes.

* stdin is ``/dev/null`` (agents block on an open stdin pipe), or, when the
  caller gives ``stdin_text``, a pipe that receives that text and is closed;
* the child gets its own session, so a timeout or Ctrl-C can kill the whole
  process group (the agent and everything it started);
* every process the run started ends with the run, whatever session or group
  it moved to (``setsid``, a double fork, ``set -m; cmd & disown``): see
  :func:`run` and "What holds where" below; the ones still running when the
  agent ended are named in :attr:`ProcessResult.leftovers`;
* stdout/stderr are read on threads in bounded pieces: a line longer than
  :data:`LINE_MAX_BYTES` is cut (its start is kept, the rest is read and
  dropped), so memory stays bounded whatever the output; lines are written
  (redacted) to the attempt's log file and handed to a callback for the live
  view;
* the log is bounded by what is written to it: once a line would take the
  file past ``log_max_bytes`` (:data:`LOG_MAX_BYTES`), counted in bytes as
  written (each line's ``[out] `` tag, redaction and UTF-8 included, and the
  file's size when the run began, so an agent's output and then the
  verifier's share one budget), no more output is logged, after one note
  saying so; the pipes keep being drained, so a flood of tiny lines neither
  blocks the child nor makes the file larger than the cap and that note;
* a log that cannot be written (a full disk...) stops being written for the
  rest of the run, the pipes keep being drained so the agent never blocks, and
  :attr:`ProcessResult.log_problem` says so;
* ``PWD`` is set to the working directory (opencode trusts ``PWD`` over the
  real cwd).

Ctrl-C while a child runs kills the group and raises :class:`Cancelled`
carrying the partial :class:`ProcessResult`.

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
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterable, Mapping, Sequence

from acr_cli.redact import LineRedactor, redact

LineCallback = Callable[[str, str], None]  # (stream name "out"|"err", line without newline)

KILL_GRACE_S = 3.0  # SIGTERM to SIGKILL, on timeout or Ctrl-C
LEFTOVER_GRACE_S = 1.0  # the same for what an agent that exited left running
KILL_ROUNDS = 20  # SIGKILL rounds for processes that keep forking while being killed
LEFTOVERS_SHOWN = 50  # processes named in ProcessResult.leftovers; more are counted
LOG_MAX_BYTES = 64 * 2**20  # an attempt's log file, as written: a runaway agent must not fill the disk
KEEP_HEAD_BYTES = 2 * 2**20  # of a stream, kept in memory for parsing: its start (session, model)...
KEEP_TAIL_BYTES = 16 * 2**20  # ...and its end (the result, the usage)
LINE_MAX_BYTES = 2**20  # a longer line is cut: its first LINE_MAX_BYTES bytes are kept
MARKER_VAR = "ACR_ATTEMPT"


class _Capture:
    """A stream's lines for the output parsers, bounded: the first and the last few MiB of it.

    Sizes are counted as the memory a line takes (``sys.getsizeof`` plus the list slot), so a flood
    of tiny lines is bounded as well as a few long ones. With lines cut at :data:`LINE_MAX_BYTES`,
    the head holds at most ``KEEP_HEAD_BYTES`` plus one line and the tail at most
    ``KEEP_TAIL_BYTES`` or one line; a line's str takes at most 4 bytes a character.
    """

    def __init__(self) -> None:
        self.head: list[str] = []
        self.tail: collections.deque[str] = collections.deque()
        self.head_bytes = self.tail_bytes = 0

    def append(self, line: str) -> None:
        size = sys.getsizeof(line) + 8
        if self.head_bytes < KEEP_HEAD_BYTES:
            self.head.append(line)
            self.head_bytes += size
            return
        self.tail.append(line)
        self.tail_bytes += size
        while self.tail_bytes > KEEP_TAIL_BYTES and len(self.tail) > 1:
            self.tail_bytes -= sys.getsizeof(self.tail.popleft()) + 8

    def text(self) -> str:
        return "\n".join([*self.head, *self.tail])


@dataclass
class ProcessResult:
    argv: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    cancelled: bool = False
    not_started: bool = False  # could not be started (not found, not executable, arguments too long)
    # Processes other than the agent that acr had to end when the agent ended (Linux; see the module
    # docstring), e.g. "pid 1234 (python3 -m http.server): terminated (SIGTERM)", for the caller's log.
    leftovers: list[str] = field(default_factory=list)
    # Set when writing the log failed and logging stopped, e.g. "logging stopped: No space left on device".
    log_problem: str | None = None
    # Why the caller's ``stalled`` check ended the run (its whole group killed, as on a timeout), or None.
    stalled: str | None = None


class Cancelled(Exception):
    """Ctrl-C arrived while a child process was running; the group is dead."""

    def __init__(self, result: ProcessResult):
        super().__init__("cancelled")
        self.result = result


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
    ended too and named in ``leftovers`` (see the module docstring for what holds on Linux and on
    macOS). The parent-death signal the child gets on Linux is tied to the thread that calls run():
    call it from a thread that outlives the run (run() itself waits, so any caller does).

    ``stalled``: asked ten times a second while the child runs; a reason it returns ends the run as a
    timeout would (the whole group killed) and is kept in ``ProcessResult.stalled``.
    """
    argv = [str(a) for a in argv]
    start = time.monotonic()
    child_environment = dict(env) if env is not None else child_env(cwd)
    if marker is not None:
        child_environment[MARKER_VAR] = marker
    watch = _Watch(marker)  # before the child starts: acr's own children from before are not the run's
    watch.reaper = _subreaper_enter()
    try:
        return _run(argv, cwd, child_environment, timeout, on_line, _LogSink(log, log_max_bytes), stdin_text, watch,
                    start, stalled)
    finally:
        if watch.reaper:
            _subreaper_exit()


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


class _LogSink:
    """Where one run writes its output: the log file, bounded in bytes as written (see run()). Once a line
    would take the file past ``limit``, one note says so and nothing more of the run's output is written.
    A write that fails (a full disk, an I/O error, a closed file) ends logging too; ``problem`` says why.
    Called under the run's lock."""

    def __init__(self, log: IO[str] | None, limit: int):
        self.log, self.limit = log, limit
        self.size = _position(log) if log is not None else 0  # bytes in the file so far
        self.full = False
        self.problem: str | None = None
        self.redactors = {"out": LineRedactor(), "err": LineRedactor()}  # a key block spans lines: one per stream

    def write(self, name: str, line: str) -> None:
        if self.log is None or self.full or self.problem:
            return
        try:
            entry = f"[{name}] {self.redactors[name].line(line)}\n"
            size = len(entry) if entry.isascii() else len(entry.encode("utf-8", "replace"))
            if self.size + size > self.limit:
                self.full = True
                self.log.write(f"[{name}] ... (the log reached {_bytes(self.limit)}, acr's limit for an attempt's "
                               "log: the rest is not logged)\n")
            else:
                self.log.write(entry)
                self.size += size
        except Exception as e:  # a full disk, an I/O error, a closed file: stop logging, keep draining
            why = e.strerror if isinstance(e, OSError) and e.strerror else (str(e) or type(e).__name__)
            self.problem = f"logging stopped: {why}"


def _position(log: IO[str]) -> int:
    """The log file's size so far (its position; acr's logs are written from the start or appended to), 0 when
    it cannot tell (a pipe)."""
    try:
        return max(0, int(log.tell()))
    except (AttributeError, OSError, ValueError, TypeError):
        return 0


def _bytes(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 2**20 and n % 2**20 == 0 else f"{n:,} bytes"


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None, on_line: LineCallback | None,
         log: _LogSink, stdin_text: str | None, watch: _Watch, start: float,
         stalled: Callable[[], str | None] | None = None) -> ProcessResult:
    out_lines = _Capture()
    err_lines = _Capture()
    lock = threading.Lock()
    done = threading.Event()  # run() has returned: keep draining, keep nothing

    def pump(stream: IO[bytes], name: str, sink: _Capture) -> None:
        try:
            while True:
                raw = stream.readline(LINE_MAX_BYTES)
                if not raw:
                    break
                cut = 0
                if len(raw) >= LINE_MAX_BYTES and not raw.endswith(b"\n"):
                    cut = _drop_rest_of_line(stream)
                if done.is_set():
                    continue
                try:
                    line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    if cut:
                        line += f" [... line cut: {cut} bytes dropped]"
                    sink.append(line)
                    with lock:
                        log.write(name, line)
                        if on_line is not None:
                            try:
                                on_line(name, line)
                            except Exception:  # a broken live view must not break the run
                                pass
                except Exception:  # pragma: no cover - whatever happens to one line, keep draining
                    pass
        except (OSError, ValueError):  # the pipe broke or was closed under us: nothing more to read
            pass
        finally:
            try:
                stream.close()
            except OSError:
                pass

    def feed(stdin: IO[bytes], text: str) -> None:
        try:
            stdin.write(text.encode("utf-8"))
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    prctl = _load_prctl()
    try:
        proc = subprocess.Popen(
            argv,
            executable=program(argv[0], env, cwd),
            cwd=str(cwd),
            env=env,
            stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=None if prctl is None else _die_with(os.getpid(), prctl),
        )
    except FileNotFoundError:
        exe = program(argv[0], env, cwd)
        why = f"{argv[0]}: command not found"
        if os.path.isabs(exe) and os.path.isfile(exe):  # it is there: what its first line names is not
            try:
                with open(exe, "rb") as f:
                    first = f.readline(200).decode("utf-8", "replace").strip()
            except OSError:
                first = ""
            why = f"{exe}: bad interpreter" + (f" ({first} not found)" if first.startswith("#!") else "")
        return ProcessResult(argv, None, "", why, 0.0, not_started=True)
    except PermissionError as e:
        return ProcessResult(argv, None, "", f"{argv[0]}: {e.strerror}", 0.0, not_started=True)
    except (OSError, ValueError, subprocess.SubprocessError) as e:  # E2BIG, a NUL byte in an argument...
        return ProcessResult(argv, None, "", f"{argv[0]}: could not start: {getattr(e, 'strerror', None) or e}",
                             0.0, not_started=True)

    threads: list[threading.Thread] = []
    deadline = None if timeout is None else start + timeout
    timed_out = cancelled = False
    stall: str | None = None
    try:  # from here on, a Ctrl-C ends the child and everything the run started
        watch.session = proc.pid  # start_new_session=True: the child leads its own session and group
        threads.append(threading.Thread(target=pump, args=(proc.stdout, "out", out_lines), daemon=True))
        threads.append(threading.Thread(target=pump, args=(proc.stderr, "err", err_lines), daemon=True))
        if stdin_text is not None:
            threads.append(threading.Thread(target=feed, args=(proc.stdin, stdin_text), daemon=True))
        for t in threads:
            t.start()
        while True:
            try:
                proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out = True
                    break
                stall = _stalled(stalled)
                if stall is not None:
                    break
    except KeyboardInterrupt:
        cancelled = True
    # The direct child is gone (or is to go now); everything the run started goes too.
    watch.session = proc.pid  # (again: a Ctrl-C may have come before the first time)
    leftovers, interrupted = _end_run(proc, watch, KILL_GRACE_S if timed_out or cancelled or stall else LEFTOVER_GRACE_S)
    try:
        _join(threads)
    except KeyboardInterrupt:
        interrupted = True
    done.set()
    result = ProcessResult(argv, proc.returncode, out_lines.text(), err_lines.text(), time.monotonic() - start,
                           timed_out=timed_out, leftovers=leftovers, log_problem=log.problem, stalled=stall)
    if cancelled or interrupted:
        result.cancelled = True
        raise Cancelled(result) from None
    return result


def _stalled(check: Callable[[], str | None] | None) -> str | None:
    """The caller's reason to end the run now, or None (a check that fails is no reason)."""
    if check is None:
        return None
    try:
        return check()
    except Exception:
        return None


def _drop_rest_of_line(stream: IO[bytes]) -> int:
    """Read and drop the rest of an over-long line, a piece at a time; how many bytes were dropped."""
    dropped = 0
    while True:
        more = stream.readline(LINE_MAX_BYTES)
        if not more:
            return dropped
        if more.endswith(b"\n"):
            return dropped + len(more.rstrip(b"\r\n"))
        dropped += len(more)


def kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the child's process group, then SIGKILL what is left after ``grace`` seconds."""
    pgid = proc.pid  # start_new_session=True: the child leads its own group
    _killpg(pgid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    _killpg(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable child
        pass


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        if t.ident is not None:  # started
            t.join(timeout=5)


# --- Ending every process of a run (Linux: /proc, prctl; elsewhere: the process group only) ---------------

_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_WALL = 0x40000000  # Linux __WALL: wait for any kind of child
_SIGKILL = int(signal.SIGKILL)
try:
    _CLK_TCK = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):  # pragma: no cover
    _CLK_TCK = 100

_prctl_fn: Callable[..., int] | None = None
_prctl_loaded = False
_reaper_lock = threading.Lock()
_reaper_users = 0
_reaper_ours = False  # acr turned the subreaper flag on (and turns it off when no run needs it)


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl() on Linux (loaded once), None elsewhere or when it cannot be had."""
    global _prctl_fn, _prctl_loaded
    if not _prctl_loaded:
        _prctl_loaded = True
        if _LINUX:
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).prctl
                fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
                fn.restype = ctypes.c_int
                _prctl_fn = fn
            except (ImportError, OSError, AttributeError):
                _prctl_fn = None
    return _prctl_fn


def _subreaper_enter() -> bool:
    """Make acr a child subreaper while a run lasts: orphaned descendants are reparented to acr.

    Only while a run lasts, so that what acr's other commands (git) leave behind is not made acr's
    children. False where it cannot be done (not Linux, prctl refused).
    """
    global _reaper_users, _reaper_ours
    prctl = _load_prctl()
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


def _subreaper_exit() -> None:
    global _reaper_users
    with _reaper_lock:
        _reaper_users -= 1
        if _reaper_users == 0 and _reaper_ours and _prctl_fn is not None:
            _prctl_fn(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _die_with(parent: int, prctl: Callable[..., int]) -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when the thread that started it ends (acr is killed)."""

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # acr died before the prctl took effect: follow it now
            os._exit(137)

    return preexec


def _has_children() -> bool:
    """Whether acr has any child process, running or not yet reaped (reaps nothing)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (OSError, AttributeError):  # cannot tell
        return True
    return True


@dataclass
class _Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start: int  # clock ticks after boot: with the pid, names a process even if the pid is reused
    comm: str


def _stat(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        right = data.rindex(b")")
        fields = data[right + 2:].split()
        return _Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0].decode("ascii", "replace"),
                     int(fields[19]), data[data.index(b"(") + 1:right].decode("utf-8", "replace"))
    except (OSError, ValueError, IndexError):
        return None


def _ticks_now() -> int:
    """Clock ticks since boot, as /proc/PID/stat counts a process's start (0 when unknown)."""
    try:
        with open("/proc/uptime", "rb") as f:
            return int(float(f.read().split()[0]) * _CLK_TCK)
    except (OSError, ValueError, IndexError):
        return 0


def _all_procs() -> dict[int, _Proc]:
    """Every process in /proc. The listing is read again until it shows no new pid (a few times at
    most): a process that forks and exits (a moving target) is not missed for being younger than the
    first listing."""
    procs: dict[int, _Proc] = {}
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
            p = _stat(int(name))
            if p is not None:
                procs[p.pid] = p
    return procs


def _marker(pid: int, uid: int) -> bytes | None:
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


def _ancestry(pid: int, procs: dict[int, _Proc]) -> set[int]:
    """``pid`` and its parent, grandparent... up to init."""
    chain = set()
    while pid > 0 and pid not in chain:
        chain.add(pid)
        p = procs.get(pid)
        pid = p.ppid if p is not None else 0
    return chain


def _cmdline(pid: int, comm: str = "") -> str:
    """A short, redacted command line for messages."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = f.read(4096).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    text = redact(" ".join(text.split()) or comm or "?")
    return text if len(text) <= 100 else text[:97] + "..."


def _running(pid: int, me: int) -> bool:
    """Whether ``pid`` still runs; a zombie is not running (and is reaped if it is acr's child)."""
    p = _stat(pid)
    if p is None:
        return False
    if p.state in ("Z", "X"):
        if p.ppid == me:
            _reap(pid)
        return False
    return True


def _reap(pid: int) -> None:
    """Collect one zombie child that acr inherited; never waitpid(-1), which would steal Popen's child."""
    try:
        os.waitpid(pid, os.WNOHANG | _WALL)
    except (ChildProcessError, OSError):
        pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _Watch:
    """Finds the processes of one run in /proc (Linux); finds nothing elsewhere."""

    def __init__(self, marker: str | None) -> None:
        self.me = os.getpid()
        self.uid = os.getuid()
        # acr's own marker (acr runs inside an attempt of an outer acr) cannot tell this run's processes
        # from the outer attempt's: then only the tree, the session and the group count
        inherited = os.environ.get(MARKER_VAR)
        self.marker = None if marker is None or marker == inherited else os.fsencode(marker)
        self.proc = _LINUX and os.path.isdir("/proc/self/task")
        self.reaper = False  # acr is a subreaper during the run
        self.session: int | None = None  # the agent's session (and group) id = its pid
        self._marked: dict[tuple[int, int], bool] = {}
        # a process started before the run cannot carry its marker: its environment is not read
        self.since = _ticks_now() - 2 * _CLK_TCK if self.proc and self.marker is not None else 0
        # acr's own children from before the run (a server a test started...) are never the run's
        self.before: dict[int, int] = {}
        if self.proc and _has_children():
            self.before = {p.pid: p.start for p in _all_procs().values() if p.ppid == self.me}

    def find(self) -> dict[int, _Proc]:
        """The run's processes now (zombies included): in the agent's session or group, descended from
        the agent or from a process orphaned to acr during the run, or carrying the run's marker."""
        if not self.proc:
            return {}
        if self.marker is None and self.reaper and not _has_children():
            return {}  # every orphan came to acr, and acr has no child left: nothing of the run is left
        procs = _all_procs()
        kids: dict[int, list[int]] = collections.defaultdict(list)
        for p in procs.values():
            kids[p.ppid].append(p.pid)
        mine = _ancestry(self.me, procs)  # acr and the processes it runs under are never the run's
        todo = []
        for p in procs.values():
            if p.pid in mine or self._before(p):
                continue
            if (p.ppid == self.me or p.sid == self.session or p.pgid == self.session
                    or (self.marker is not None and self._has_marker(p))):
                todo.append(p.pid)
        found: dict[int, _Proc] = {}
        while todo:
            pid = todo.pop()
            if pid in found or pid in mine or pid not in procs or self._before(procs[pid]):
                continue
            found[pid] = procs[pid]
            todo.extend(kids.get(pid, ()))
        return found

    def _before(self, p: _Proc) -> bool:
        return self.before.get(p.pid) == p.start and p.ppid == self.me

    def _has_marker(self, p: _Proc) -> bool:
        if p.start < self.since:
            return False
        key = (p.pid, p.start)
        if key not in self._marked:
            self._marked[key] = _marker(p.pid, self.uid) == self.marker
        return self._marked[key]


def _end_run(proc: subprocess.Popen, watch: _Watch, grace: float) -> tuple[list[str], bool]:
    """End the agent (if it still runs) and every process of the run: what was left, and whether a
    Ctrl-C (or SIGTERM/SIGHUP made one) came meanwhile (then the rest is done without grace)."""
    report: dict[int, list[str]] = {}  # pid -> [command, outcome]
    interrupted = False
    for _ in range(5):
        try:
            _end_run_once(proc, watch, 0.0 if interrupted else grace, report)
            break
        except KeyboardInterrupt:
            interrupted = True
    lines = [f"pid {pid} ({cmd}): {outcome}" for pid, (cmd, outcome) in report.items()]
    if len(lines) > LEFTOVERS_SHOWN:  # a fork bomb
        lines[LEFTOVERS_SHOWN:] = [f"... and {len(lines) - LEFTOVERS_SHOWN} more process(es)"]
    return lines, interrupted


def _end_run_once(proc: subprocess.Popen, watch: _Watch, grace: float, report: dict[int, list[str]]) -> None:
    me, agent = watch.me, proc.pid
    refused: set[int] = set()

    def alive() -> tuple[dict[int, _Proc], bool]:
        """The run's processes still running, and whether some had just ended (were acr's zombies,
        reaped now): then their children may be new, and one more look is needed."""
        proc.poll()
        found, ended = {}, False
        for pid, p in watch.find().items():
            if pid == agent:
                if proc.returncode is None:  # Popen reaps it
                    found[pid] = p
                continue
            if p.state in ("Z", "X"):
                if p.ppid == me:
                    _reap(pid)
                    ended = True
                continue
            if pid in refused:
                continue
            found[pid] = p
            if pid not in report:
                report[pid] = [_cmdline(pid, p.comm), "ended"]
        return found, ended

    def send(pids: Iterable[int], sig: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            except PermissionError as e:
                refused.add(pid)
                if pid in report:
                    report[pid][1] = f"could not be signalled: {e.strerror}"

    def running(pid: int) -> bool:
        if pid == agent:
            return proc.poll() is None
        return pid not in refused and _running(pid, me)

    def wait(pids: Iterable[int], seconds: float) -> list[int]:
        pids = list(pids)
        end = time.monotonic() + seconds
        while True:
            pids = [pid for pid in pids if running(pid)]
            if not pids or time.monotonic() >= end:
                return pids
            time.sleep(0.05)

    # SIGTERM to everything, then a grace to end on its own
    _killpg(agent, signal.SIGTERM)
    first, ended = alive()
    if not first and not ended and proc.returncode is not None:  # nothing of the run is left to fork
        _killpg(agent, signal.SIGKILL)
        return
    send([pid for pid, p in first.items() if p.pgid != agent], signal.SIGTERM)  # the group has had its own
    for pid in first:
        if pid in report and report[pid][1] == "ended":
            report[pid][1] = "terminated (SIGTERM)"
    wait({*first, agent}, grace)
    # then SIGKILL, in rounds: a process that forks while being killed is stopped first, and its children
    # (found stopped, or orphaned to acr) go in the same round
    for _ in range(KILL_ROUNDS):
        _killpg(agent, signal.SIGKILL)
        now, ended = alive()
        if not now and not ended:
            break
        stopped: set[int] = set()
        for _ in range(10):
            fresh = [pid for pid in now if pid not in stopped]
            if not fresh and not ended:
                break
            send(fresh, signal.SIGSTOP)
            stopped.update(fresh)
            now, ended = alive()
        targets = stopped | set(now)
        send(targets, signal.SIGKILL)
        for pid in targets:
            if pid in report and not report[pid][1].startswith("could not"):
                report[pid][1] = "killed (SIGKILL)"
        wait(targets, 1.0)
    else:
        for pid in alive()[0]:
            if pid in report:
                report[pid][1] = f"still running after {KILL_ROUNDS} rounds of SIGKILL"
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable child
        pass


def find_marked(marker_prefix: str) -> list[tuple[int, str]]:
    """Live processes of this user whose environment carries ``ACR_ATTEMPT`` starting with
    ``marker_prefix``: (pid, short command line), e.g. what an attempt of an ``acr run`` that was
    killed still has running (for ``acr recover``).

    Reads the environment each process *started* with (``/proc/PID/environ``): a process that
    scrubbed its environment is not found. Linux only: elsewhere (macOS) there is no /proc to read
    and the list is always empty; there, only the process group kill of a live run holds.
    """
    if not (_LINUX and os.path.isdir("/proc/self")):
        return []
    want = os.fsencode(marker_prefix)
    uid = os.getuid()
    procs = _all_procs()
    mine = _ancestry(os.getpid(), procs)  # acr recover run from inside an attempt does not find itself
    found = []
    for pid, p in sorted(procs.items()):
        if pid in mine or p.state in ("Z", "X"):
            continue
        value = _marker(pid, uid)
        if value is not None and value.startswith(want):
            found.append((pid, _cmdline(pid, p.comm)))
    return found


def kill_pids(pids: Iterable[int], grace: float = KILL_GRACE_S) -> list[int]:
    """SIGTERM each of ``pids``, SIGKILL those still running after ``grace`` seconds; returns the ones
    still running after that (a zombie, or a process that is gone, is not running).

    A process that keeps forking is not chased here: call :func:`find_marked` again. On macOS a zombie
    (a killed process whose parent has not collected it yet) still counts as running.
    """
    me = os.getpid()
    pids = [p for p in dict.fromkeys(int(p) for p in pids) if p != me and p > 0]

    def running(pid: int) -> bool:
        if _LINUX and os.path.isdir("/proc/self"):
            return _running(pid, me)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def send(sig: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def wait(seconds: float) -> None:
        nonlocal pids
        end = time.monotonic() + seconds
        while True:
            pids = [pid for pid in pids if running(pid)]
            if not pids or time.monotonic() >= end:
                return
            time.sleep(0.05)

    send(signal.SIGTERM)
    wait(grace)
    if pids:
        send(signal.SIGKILL)
        wait(2.0)
    return pids


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
    watch = _Watch(marker)
    watch.reaper = _subreaper_enter()
    try:
        prctl = _load_prctl()
        try:
            child = pexpect.spawn(program(argv[0], environment, cwd), list(argv[1:]), cwd=str(cwd), env=environment,
                                  encoding=None,
                                  dimensions=(size.lines, size.columns),
                                  preexec_fn=None if prctl is None else _die_with(os.getpid(), prctl))
        except pexpect.ExceptionPexpect as e:
            return ProcessResult(list(argv), None, "", str(e), 0.0, not_started=True)
        watch.session = child.pid  # a pty child leads its own session and group

        def resize(*_: object) -> None:
            s = shutil.get_terminal_size((120, 40))
            child.setwinsize(s.lines, s.columns)

        old = signal.signal(signal.SIGWINCH, resize)
        try:
            child.interact(escape_character=None)
        finally:
            signal.signal(signal.SIGWINCH, old)
            child.close()
        code = child.exitstatus if child.exitstatus is not None else (128 + (child.signalstatus or 0))
        leftovers, interrupted = _end_run(_Exited(child.pid, code), watch, LEFTOVER_GRACE_S)
        result = ProcessResult(list(argv), code, "", "", time.monotonic() - start, leftovers=leftovers)
        if interrupted:
            result.cancelled = True
            raise Cancelled(result)
        return result
    finally:
        if watch.reaper:
            _subreaper_exit()


class _Exited:
    """A child that has exited and been reaped, shaped as the ``subprocess.Popen`` :func:`_end_run` expects."""

    def __init__(self, pid: int, code: int) -> None:
        self.pid, self.returncode = pid, code

    def poll(self) -> int:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode
