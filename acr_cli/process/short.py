"""short_call(): a short command whose output acr reads (``git init``, ``sh -n``, a git query), for the places
that do not need a run's log, leftovers and group kill. The workspace's git calls have their own helper
(``workspace/git.py``), which adds the guarded git environment."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence


@dataclass(frozen=True)
class ShortResult:
    exit_code: int | None  # None: it could not be started or did not end within the timeout
    stdout: str
    stderr: str  # why it could not start or end, when it did not

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def short_call(argv: Sequence[str], *, cwd: Path | str, env: Mapping[str, str] | None = None,
               timeout: float | None = None) -> ShortResult:
    """Run ``argv`` (never through a shell) with stdin ``/dev/null`` and its output captured as text (bytes
    that are not UTF-8 replaced). It never raises for the command: one that is not found, cannot start or
    outlives ``timeout`` seconds (it is killed) gives ``exit_code`` None. ``env``: the whole environment
    (acr's own when None)."""
    argv = [str(a) for a in argv]
    try:
        r = subprocess.run(argv, cwd=cwd, env=None if env is None else dict(env), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return ShortResult(None, "", f"{argv[0]}: no answer within {timeout:g}s")
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        return ShortResult(None, "", f"{argv[0]}: could not start: {getattr(e, 'strerror', None) or e}")
    return ShortResult(r.returncode, r.stdout, r.stderr)
