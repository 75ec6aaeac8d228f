"""The one user-facing error type, and the exit codes acr promises.

Every failure a person can act on is raised as :class:`AcrError` (or a
subclass) with a message and, where useful, a hint. The CLI turns it into a
one-line message on stderr and the error's exit code; nothing else in acr
prints errors or chooses exit codes.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_NOT_PASSED = 1  # the run finished but no attempt passed the verifier
EXIT_PROBLEMS = 1  # a report was printed and it found problems (doctor, init, profiles validate)
EXIT_PIPE_CLOSED = 1  # the reader of acr's output left (`acr memory log | head`)
EXIT_USAGE = 2  # bad arguments, bad configuration, unusable files
EXIT_CHECK_CHANGED = 3  # the verifier passed, but the attempt had changed what it reads: kept, not verified
EXIT_INTERNAL = 70  # a bug in acr (traceback written to the crash log)
EXIT_CANCELLED = 130  # Ctrl-C


class AcrError(Exception):
    """An error explained to the user: message, optional hint, exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class Reported(AcrError):
    """End the command with ``exit_code`` after it printed everything the user needs (a run that did not
    pass, a doctor report with problems): nothing more is said."""

    def __init__(self, exit_code: int):
        super().__init__("", exit_code=exit_code)


class ConfigError(AcrError):
    """A profile, config file or setting is invalid."""


class ProfileError(ConfigError):
    """A profile file is invalid; names the file, the line and the field."""

    def __init__(self, path: str, line: int | None, field: str, problem: str):
        from acr_cli.redact import redact

        # a profile path may name the wrong file (a .env): what the message quotes of it is masked
        field, problem = redact(field) or field, redact(problem) or problem
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {field}: {problem}")
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem


class MemoryFileError(AcrError):
    """The memory database cannot be opened, read or written."""


class WorkspaceError(AcrError):
    """The project cannot be checkpointed or restored."""


def printable(text: str) -> str:
    """Text read from the OS (argv, git's names), safe to print and log: bytes that are not UTF-8 as \\x escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
