"""The one place where acr starts processes.

* stdin is ``/dev/null`` (agents block on an open stdin pipe), or, when the
  caller gives ``stdin_text``, a pipe that receives that text and is closed;
* the child gets its own session, so a timeout or Ctrl-C can kill the whole
  process group (the agent and everything it started);
* every process the run started ends with the run, whatever session or group
  it moved to (``setsid``, a double fork, ``set -m; cmd & disown``): see
  :func:`run` and :mod:`.reaper` for what holds where; the ones still running
  when the agent ended are named in :attr:`ProcessResult.leftovers`;
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

Modules: ``running`` (:func:`run`), ``capture`` (reading, keeping and logging
the output), ``reaper`` (ending every process of a run), ``procfs`` (Linux's
/proc), ``marked`` (a killed run's processes), ``interactive`` (a pty), ``short``
(a short command's output).
"""

import importlib
from typing import Any

# name -> the module that holds it: loaded on first use, so that a command that only needs a short call
# (``acr route`` asks git for the project's identity) does not load the runner, the reaper and the pty
_WHERE = {
    **dict.fromkeys(("KEEP_HEAD_BYTES", "KEEP_TAIL_BYTES", "LINE_MAX_BYTES", "LOG_MAX_BYTES", "LineCallback"), "capture"),
    "run_interactive": "interactive", "find_marked": "marked", "kill_pids": "marked", "MARKER_VAR": "procfs",
    **dict.fromkeys(("KILL_GRACE_S", "KILL_ROUNDS", "LEFTOVER_GRACE_S", "LEFTOVERS_SHOWN", "kill_group"), "reaper"),
    "Cancelled": "result", "ProcessResult": "result",
    **dict.fromkeys(("child_env", "program", "run"), "running"),
    "ShortResult": "short", "short_call": "short",
}
_MODULES = ("capture", "interactive", "marked", "procfs", "reaper", "result", "running", "short")

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
