"""What a run of a process gives back, and the exception a Ctrl-C during it raises."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    # Processes other than the agent that acr had to end when the agent ended (Linux; see reaper.py),
    # e.g. "pid 1234 (python3 -m http.server): terminated (SIGTERM)", for the caller's log.
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
