"""The one place where acr starts processes.

* stdin is ``/dev/null`` (agents block on an open stdin pipe), or, when the
  caller gives ``stdin_text``, a pipe that receives that text and is closed;
* the child gets its own session, so a timeout or Ctrl-C can kill the whole
  process group (the agent and everything it started);
* stdout/stderr are read line by line on threads, written (redacted) to the
  attempt's log file and handed to a callback for the live view;
* ``PWD`` is set to the working directory (opencode trusts ``PWD`` over the
  real cwd).

Ctrl-C while a child runs kills the group and raises :class:`Cancelled`
carrying the partial :class:`ProcessResult`.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence

from acr_cli.redact import redact

LineCallback = Callable[[str, str], None]  # (stream name "out"|"err", line without newline)

KILL_GRACE_S = 3.0
LOG_MAX_BYTES = 64 * 2**20  # per stream and attempt: a runaway agent must not fill the disk
KEEP_HEAD_BYTES = 2 * 2**20  # of a stream, kept in memory for parsing: its start (session, model)...
KEEP_TAIL_BYTES = 16 * 2**20  # ...and its end (the result, the usage)


class _Capture:
    """A stream's lines for the output parsers, bounded: the first and the last few MiB of it."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.tail: collections.deque[str] = collections.deque()
        self.head_bytes = self.tail_bytes = 0

    def append(self, line: str) -> None:
        if self.head_bytes < KEEP_HEAD_BYTES:
            self.head.append(line)
            self.head_bytes += len(line) + 1
            return
        self.tail.append(line)
        self.tail_bytes += len(line) + 1
        while self.tail_bytes > KEEP_TAIL_BYTES and len(self.tail) > 1:
            self.tail_bytes -= len(self.tail.popleft()) + 1

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
) -> ProcessResult:
    """Run ``argv`` (never through a shell) and wait, bounded by ``timeout`` seconds."""
    argv = [str(a) for a in argv]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=str(cwd),
            env=dict(env) if env is not None else child_env(cwd),
            stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        return ProcessResult(argv, None, "", f"{argv[0]}: command not found", 0.0, not_started=True)
    except PermissionError as e:
        return ProcessResult(argv, None, "", f"{argv[0]}: {e.strerror}", 0.0, not_started=True)
    except (OSError, ValueError) as e:  # E2BIG (arguments too long), a NUL byte in an argument...
        return ProcessResult(argv, None, "", f"{argv[0]}: could not start: {getattr(e, 'strerror', None) or e}",
                             0.0, not_started=True)

    out_lines = _Capture()
    err_lines = _Capture()
    lock = threading.Lock()
    logged = {"out": 0, "err": 0}

    def pump(stream: IO[bytes], name: str, sink: _Capture) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            sink.append(line)
            with lock:
                if log is not None and logged[name] <= LOG_MAX_BYTES:
                    logged[name] += len(raw)
                    if logged[name] > LOG_MAX_BYTES:
                        log.write(f"[{name}] ... (acr logs the first {LOG_MAX_BYTES >> 20} MiB of a stream; "
                                  "the rest is not logged)\n")
                    else:
                        log.write(f"[{name}] {redact(line)}\n")
                if on_line is not None:
                    try:
                        on_line(name, line)
                    except Exception:  # a broken live view must not break the run
                        pass
        stream.close()

    def feed(text: str) -> None:
        try:
            proc.stdin.write(text.encode("utf-8"))
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    threads = [
        threading.Thread(target=pump, args=(proc.stdout, "out", out_lines), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, "err", err_lines), daemon=True),
    ]
    if stdin_text is not None:
        threads.append(threading.Thread(target=feed, args=(stdin_text,), daemon=True))
    for t in threads:
        t.start()

    deadline = None if timeout is None else start + timeout
    timed_out = False
    try:
        while True:
            try:
                proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out = True
                    kill_group(proc)
                    break
    except KeyboardInterrupt:
        kill_group(proc)
        _join(threads)
        raise Cancelled(
            ProcessResult(argv, proc.returncode, out_lines.text(), err_lines.text(),
                          time.monotonic() - start, cancelled=True)
        ) from None
    # The direct child is gone; anything it left in its group goes too.
    kill_group(proc, grace=0.0)
    _join(threads)
    return ProcessResult(
        argv,
        proc.returncode,
        out_lines.text(),
        err_lines.text(),
        time.monotonic() - start,
        timed_out=timed_out,
    )


def kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the child's process group, then SIGKILL what is left after ``grace`` seconds."""
    pgid = proc.pid  # start_new_session=True: the child leads its own group
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    end = time.monotonic() + grace
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable child
        pass


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(timeout=5)


def run_interactive(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> ProcessResult:
    """Hand the terminal to ``argv`` through a pty (the agent's own interactive screen)."""
    import shutil

    import pexpect

    start = time.monotonic()
    size = shutil.get_terminal_size((120, 40))
    try:
        child = pexpect.spawn(argv[0], list(argv[1:]), cwd=str(cwd), env=dict(env), encoding=None,
                              dimensions=(size.lines, size.columns))
    except pexpect.ExceptionPexpect as e:
        return ProcessResult(list(argv), None, "", str(e), 0.0, not_started=True)

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
    return ProcessResult(list(argv), code, "", "", time.monotonic() - start)
