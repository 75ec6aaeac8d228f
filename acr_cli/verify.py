"""Run the verifier command and turn it into a verdict.

The verifier is the user's own command line (``--verify "pytest -q"``, the
project's ``.acr.toml`` or the profile), so it runs through ``/bin/sh -c``
like a Makefile recipe; the *prompt* never does. A race worktree's set-up command
(``race_setup``: :func:`run_setup`) runs the same way (:func:`run_shell`). Either can be
stopped from outside (a race another arm won): its whole process group is killed at
once. Verdict: exit code 0 passes.
Score in [0, 1]:

1. a line ``ACR_SCORE=<x>`` (or ``ACR_SCORE: x``) in the output, if present;
2. else a pytest summary (``3 passed, 1 failed``) -> passed / (passed + failed + errors);
3. else 1.0 for exit 0 and 0.0 otherwise.

Python's bytecode caches cannot answer for the source: the verifier runs with
``PYTHONDONTWRITEBYTECODE=1`` and ``PYTHONPYCACHEPREFIX`` set to an empty
directory of its own (removed after it), so every Python the check starts
(and pytest's assertion rewriting) compiles from the ``.py`` files and never
reads a ``__pycache__`` in the project, where an attempt could plant bytecode
of a "fixed" module beside its untouched broken source.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Mapping

from acr_cli import process
from acr_cli.agents.base import tail
from acr_cli.redact import redact
from acr_cli.sandbox import Sandbox, sandboxed

TAIL_LINES = 30

_SCORE = re.compile(r"ACR_SCORE\s*[=:]\s*([0-9]*\.?[0-9]+)")
_PYTEST = re.compile(r"(\d+) (passed|failed|error|errors)\b")


@dataclass
class VerifierResult:
    passed: bool
    score: float
    exit_code: int | None
    tail: str
    duration_s: float
    timed_out: bool = False
    gist: str = ""  # a digest of the output with timings, addresses and temporary paths taken out
    counts: tuple[int, int] | None = None  # (passed, total) when the output has a pytest summary

    def same_output(self, other: "VerifierResult") -> bool:
        """Did this run print what ``other`` printed, timings and temporary paths aside?"""
        return bool(self.gist) and self.gist == other.gist and self.exit_code == other.exit_code

    def summary(self) -> str:
        if self.timed_out:
            return f"verifier timed out after {self.duration_s:.0f}s"
        return f"verifier exit {self.exit_code}, {score_text(self.score, self.passed, self.counts)}"


def score_text(score: float, passed: bool, counts: tuple[int, int] | None = None) -> str:
    """``score 0.50``; a check that did not pass never reads as ``score 1.00``: its score gets as many decimals
    as show it is below 1 (532 of 534 tests: 0.996; cut, not rounded, past six), with the counts when known."""
    shown = f"{score:.2f}"
    if not passed and score < 1.0:
        places = 2
        while shown == "1." + "0" * places and places < 6:
            places += 1
            shown = f"{score:.{places}f}"
        if shown == "1." + "0" * places:
            shown = f"{math.floor(score * 10 ** places) / 10 ** places:.{places}f}"
    if counts is not None and counts[0] < counts[1]:
        shown += f" ({counts[0]} of {counts[1]} passed)"
    return f"score {shown}"


def pytest_counts(output: str) -> tuple[int, int] | None:
    """(passed, total) from a pytest summary line near the end of ``output`` (failed and errors count in the
    total), or None without one."""
    counts = {"passed": 0, "failed": 0, "error": 0}
    summary_seen = False
    for line in output.splitlines()[-5:]:
        if "passed" in line or "failed" in line:
            for n, what in _PYTEST.findall(line):
                counts["error" if what.startswith("error") else what] += int(n)
                summary_seen = True
    total = sum(counts.values())
    return (counts["passed"], total) if summary_seen and total else None


def parse_score(output: str, exit_code: int | None) -> float:
    found = _SCORE.findall(output)
    if found:
        return max(0.0, min(1.0, float(found[-1])))
    counts = pytest_counts(output)
    if counts is not None:
        return counts[0] / counts[1]
    return 1.0 if exit_code == 0 else 0.0


# Words that start a shell construct rather than name a program: not checked up front.
_SHELL_WORDS = {"cd", ".", "source", "export", "set", "unset", "if", "for", "while", "until", "case", "test", "[",
                "[[", "true", "false", "exec", "eval", "command", "builtin", "{", "(", "!", "time", ":"}


def preflight(command: str, cwd: Path, path_env: str | None = None) -> str | None:
    """Why ``command`` cannot run at all (a typo in the program's name, a script that is not there), or None.

    Checked before the first attempt so that a broken verifier does not fail every agent, charge for
    each, and teach memory that good models fail. The shell checks the whole command's syntax
    (``sh -n``: read, not run); then only the first program is looked up, the way the shell would
    (``command -v``: a builtin such as ``exit`` or ``ulimit`` counts), and only when the command
    starts with one (not with ``cd``, a subshell, ...)."""
    import os
    import shlex

    try:
        words = shlex.split(command)
    except ValueError as e:
        return f"cannot be parsed as a shell command ({e})"
    env = dict(os.environ, **({"PATH": path_env} if path_env is not None else {}))
    syntax = process.short_call(["/bin/sh", "-n", "-c", command], cwd=cwd, env=env)
    if not syntax.ok:
        detail = (syntax.stderr.strip().splitlines() or ["syntax error"])[-1]
        return f"is not valid shell syntax ({detail})"
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        if words[0].startswith("PATH="):
            return None  # PATH=.venv/bin:$PATH tool: found on a PATH we do not rebuild here
        words = words[1:]  # FOO=1 pytest
    if not words or words[0] in _SHELL_WORDS or any(c in words[0] for c in "$`*?;&|<>()"):
        return None
    program = words[0]
    if "/" in program:
        target = (cwd / program).resolve() if not os.path.isabs(program) else Path(program)
        if not target.exists():
            return f"`{program}` does not exist (looked in {cwd})"
        if not os.access(target, os.X_OK) or target.is_dir():
            return f"`{program}` is not an executable file"
        return None
    found = process.short_call(["/bin/sh", "-c", 'command -v -- "$1"', "sh", program], cwd=cwd, env=env)
    if not found.ok:
        return f"`{program}` is not installed or not on PATH"
    return None


def run_verifier(command: str, cwd: Path, timeout: float, log: IO[str] | None = None,
                 marker: str | None = None, sandbox: Sandbox | None = None, env: Mapping[str, str] | None = None,
                 stop: Callable[[], str | None] | None = None) -> VerifierResult:
    """Run the verifier through /bin/sh. ``marker``: the attempt's (process.run): what the verifier starts
    is then the attempt's too, so `acr recover` finds it if acr is killed while the verifier runs. ``sandbox``:
    the run's (acr_cli.sandbox): the verifier writes only the work tree and a private temp, as the agent did.
    ``env``: variables added to its environment (a race lane's slot). ``stop``: asked ten times a second while
    it runs; a reason it returns ends the verifier's whole process group at once and raises
    :class:`process.Cancelled` (a race another arm won), as Ctrl-C does."""
    res = run_shell("verifier", command, cwd, timeout, log, marker=marker, sandbox=sandbox, env=env, stop=stop)
    output = "\n".join(x for x in (res.stdout, res.stderr) if x)
    if res.timed_out:
        return VerifierResult(False, 0.0, None, tail(output, TAIL_LINES), res.duration_s, timed_out=True)
    passed = res.exit_code == 0
    score = parse_score(output, res.exit_code)
    if passed and score < 1.0 and not _SCORE.search(output):
        score = 1.0  # a passing pytest run with skips/xfails is a pass
    return VerifierResult(passed, score, res.exit_code, tail(output, TAIL_LINES), res.duration_s,
                          gist=gist(output), counts=None if _SCORE.search(output) else pytest_counts(output))


def run_setup(command: str, cwd: Path, timeout: float, log: IO[str] | None = None, marker: str | None = None,
              sandbox: Sandbox | None = None, env: Mapping[str, str] | None = None,
              stop: Callable[[], str | None] | None = None) -> str | None:
    """Run a set-up command (a race worktree's ``race_setup``) exactly as the verifier runs (:func:`run_shell`);
    why it failed (a non-zero exit, its timeout, with its last output line), or None when it exited 0.
    Stopped by ``stop`` or Ctrl-C: :class:`process.Cancelled`."""
    res = run_shell("race setup", command, cwd, timeout, log, marker=marker, sandbox=sandbox, env=env, stop=stop)
    if res.exit_code == 0 and not res.timed_out:
        return None
    last = (tail("\n".join(x for x in (res.stdout, res.stderr) if x), 1).strip() or "no output")
    if res.timed_out:
        return f"race setup `{redact(command)}` did not finish within {timeout:g}s (its process group was killed)"
    if res.not_started:
        return f"race setup `{redact(command)}` could not start: {redact(last)}"
    return f"race setup `{redact(command)}` failed (exit {res.exit_code}): {redact(last)}"


def run_shell(what: str, command: str, cwd: Path, timeout: float, log: IO[str] | None = None, *,
              marker: str | None = None, sandbox: Sandbox | None = None, env: Mapping[str, str] | None = None,
              stop: Callable[[], str | None] | None = None):
    """Run the user's ``command`` line through ``/bin/sh -c`` (it is theirs, like a Makefile recipe) in ``cwd``,
    contained as an agent is (its own process group, every process it starts ended with it, the sandbox when
    given), with Python's bytecode caches out of reach (the module docstring), logged under ``what``. Returns
    the process result; ``stop`` giving a reason kills the group and raises :class:`process.Cancelled`."""
    import shutil
    import tempfile

    if log is not None:
        log.write(f"--- {what}: {redact(command)}\n")
    prefix = tempfile.mkdtemp(prefix="acr-pycache-")  # a fresh one each run: nothing cached answers
    try:
        child = process.child_env(cwd, {**(env or {}), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": prefix})
        argv = ["/bin/sh", "-c", command]
        with sandboxed(sandbox, argv, child, cwd) as (argv, child):
            res = process.run(argv, cwd=cwd, env=child, timeout=timeout, log=log, marker=marker, stalled=stop)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
    if log is not None:
        for line in res.leftovers:
            log.write(f"--- a process the {what} started outlived it and was ended: {line}\n")
    if res.stalled:  # stopped from outside: its whole group is already dead
        if log is not None:
            log.write(f"--- {what} stopped: {res.stalled}\n")
        raise process.Cancelled(res)
    return res


# What changes between two runs of the same check on the same code: durations (0.12s, 3 ms, 1.5 sec),
# clock times and dates, memory addresses (0x7f3a...), temporary paths (/tmp/..., pytest's tmp dirs),
# process ids in "pid 1234". Taken out before two outputs are compared.
_NOISE = [
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:ms|msec|s|sec|secs|seconds?|minutes?|min)\b"), "<time>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"), "<date>"),
    (re.compile(r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b"), "<clock>"),
    (re.compile(r"\b0x[0-9a-fA-F]{4,}\b"), "<addr>"),
    (re.compile(r"(?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)/[^\s:'\"),]*"), "<tmp>"),
    (re.compile(r"\bpid[ =:]\s*\d+", re.I), "pid <n>"),
]


def gist(output: str) -> str:
    """A digest of ``output`` that two runs of a check share when they found the same things."""
    import hashlib

    text = output
    for pattern, repl in _NOISE:
        text = pattern.sub(repl, text)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


_MISSING = re.compile(r"not found|no such file|can't open file|cannot open|cannot find module|does not exist|"
                      r"could not find|no module named", re.I)


def cannot_run(command: str, result: VerifierResult) -> str | None:
    """Why the verifier could not run at all, judged from its run on the untouched tree, or None.

    Only causes that no change to the code can fix count: the shell could not run a program (exit
    126 or 127: not found, not executable), or the output says that a file or module named *in the
    command itself* was not found (``python3 chek.py``: "can't open file"; ``pytest tests/x.py``: "file
    or directory not found"). A test that fails because the code under test misses a file is left
    alone: its message names another file, and making it pass is the agent's work."""
    import shlex

    if result.timed_out or result.passed:
        return None
    text = result.tail
    if result.exit_code in (126, 127):
        last = (text.strip().splitlines() or [f"exit {result.exit_code}"])[-1]
        return f"the shell could not run it (exit {result.exit_code}: {last.strip()})"
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    named = {w for w in words if not w.startswith("-") and "=" not in w and ("/" in w or "." in w)}
    named |= {b for a, b in zip(words, words[1:]) if a == "-m"}  # python -m pytest: "No module named pytest"
    named |= {w.split("::")[0] for w in named}
    for line in text.splitlines():
        if _MISSING.search(line) and any(w in line for w in named):
            return f"a file it names is not there ({line.strip()})"
    return None
