"""What a check depends on, and whether an attempt changed it.

A verifier only judges an attempt when the attempt left the verifier's own inputs alone: an agent
that rewrites ``check.py`` to print "ok", or adds a ``conftest.py`` that skips every test, gets a
passing check without doing the work. After the agent ends (before the verifier runs), the live
environment hands the attempt's changes (:class:`Changes`, read from the checkpoint by
:meth:`acr_cli.workspace.Workspace.touched`) to :func:`check_inputs` and :func:`protected`.

**The check's inputs** (a pass with any of them changed, added or deleted is ``unverified``):

* a file the verify command runs (:func:`named_paths`): its program when that is a path
  (``./check.sh``), the script an interpreter runs (``python check.py``, ``bash scripts/test.sh``),
  what a test runner is given (``pytest tests/test_x.py::test_a``), relative to the directory the
  verifier runs in (a file the check only reads, ``grep -q x calc.py``, is not one: it is the work);
* ``conftest.py`` anywhere; test configuration anywhere: ``pytest.ini``, ``.pytest.ini``,
  ``tox.ini``, ``setup.cfg``, ``pyproject.toml`` (the whole file), ``noxfile.py``; a ``Makefile``
  (``makefile``, ``GNUmakefile``, ``*.mk``) when the command runs ``make``; ``package.json`` when it
  runs npm, yarn, pnpm, bun or npx;
* ``.acr.toml``, where the check (and ``protect``) comes from in later runs;
* what Python runs at start-up: ``sitecustomize.py``, ``usercustomize.py``, ``*.pth``;
* bytecode Python imports in place of a source: ``*.pyc`` / ``*.pyo`` outside ``__pycache__`` (a
  ``__pycache__`` cannot answer: the verifier runs with its own empty ``PYTHONPYCACHEPREFIX``,
  :mod:`acr_cli.verify`);
* an existing test file the attempt changed or deleted. A test file is one under a directory named
  ``test``, ``tests`` or ``__tests__``, or named ``test_*``, ``*_test.*``, ``*.test.*`` or
  ``*.spec.*``. A *new* test file does not make the pass unverified (adding a test is what good
  work does): it is named ("the attempt added test files"), in the run's output, ``--json``
  (``tests_added``) and the attempt's log.

Ignored files count as well, as far as the checkpoint sees them (its kept ignored files, and new
ignored entries); a ``protect`` glob (:func:`protected`) fails the attempt outright instead.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
from dataclasses import dataclass, field

CONFIG_FILES = {"conftest.py": "pytest's conftest", "pytest.ini": "test configuration",
                ".pytest.ini": "test configuration", "tox.ini": "test configuration",
                "setup.cfg": "test configuration", "pyproject.toml": "test configuration",
                "noxfile.py": "test configuration", "sitecustomize.py": "runs when Python starts",
                "usercustomize.py": "runs when Python starts",
                ".acr.toml": "acr's settings, where the check and protect come from"}
MAKEFILES = ("Makefile", "makefile", "GNUmakefile")
MAKE = {"make", "gmake"}
NODE = {"npm", "yarn", "pnpm", "bun", "npx"}
TEST_DIRS = {"test", "tests", "__tests__"}
# programs that run the file given to them (python3.12 and the like too), and test runners, which run every
# file or directory given to them
INTERPRETERS = {"python", "py", "pypy", "sh", "bash", "zsh", "dash", "ksh", "node", "deno", "bun", "ruby", "perl",
                "php", "Rscript", "lua", "tsx", "ts-node"}
WRAPPERS = {"exec", "command", "env", "time", "nice", "timeout"}  # they run the command that follows
RUNNERS = {"pytest", "py.test", "nose2", "unittest", "jest", "vitest", "mocha", "rspec", "bats", "prove"}


@dataclass(frozen=True)
class Changes:
    """What an attempt changed, paths relative to the repository's top: (status, path), status one of
    A (added), M (modified), D (deleted), T (type changed)."""

    tree: tuple[tuple[str, str], ...] = ()  # the work tree (tracked and untracked files)
    ignored: tuple[tuple[str, str], ...] = ()  # ignored files the checkpoint sees (kept ones, new entries)
    unexamined: tuple[str, ...] = ()  # new ignored directories too large to look into

    def all(self) -> list[tuple[str, str]]:
        return list(self.tree) + list(self.ignored)


@dataclass
class CheckInputs:
    changed: list[tuple[str, str]] = field(default_factory=list)  # (path, why): the pass is not a verified one
    tests_added: list[str] = field(default_factory=list)  # new test files: named, the pass stands


def describe(changed: list[tuple[str, str]]) -> list[str]:
    """``path (why)`` for each of :attr:`CheckInputs.changed`."""
    return [f"{path} ({why})" for path, why in changed]


def named_paths(verify: str, prefix: str = "") -> set[str]:
    """The repository paths of the files ``verify`` runs (``prefix``: where the verifier runs, relative to the
    repository's top). In each command of it (split at ``;``, ``&&``, ``||``, ``|``, ``&``, after leading
    ``VAR=value`` words): the program when it is a path (``./check.sh``); the script an interpreter runs
    (``python check.py``, ``bash scripts/test.sh``; not ``-c`` code); every other word given to a test runner
    (``pytest tests/test_x.py::test_a``, ``python -m pytest ...``), which collects them. A file a command
    only reads (``grep -q x calc.py``, ``ruff check calc.py``) is what the check looks at, not the check."""
    try:
        lexer = shlex.shlex(verify, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return set()
    out: set[str] = set()
    command: list[str] = []
    for word in [*words, ";"]:
        if word and set(word) <= set(";&|"):
            out.update(_runs(command))
            command = []
        else:
            command.append(word)
    return {p for p in (_in_repo(w, prefix) for w in out) if p}


def _runs(words: list[str]) -> list[str]:
    """The words of one simple command that name a file it runs (see :func:`named_paths`)."""
    words = _unwrapped(words)
    if not words:
        return []
    program, rest = os.path.basename(words[0]), words[1:]
    found = [words[0]] if "/" in words[0] else []
    if program in RUNNERS:
        return found + [w for w in rest if not w.startswith("-")]
    if _interpreter(program):
        return found + _script(_interpreter(program), rest)
    return found


def _unwrapped(words: list[str]) -> list[str]:
    """The command without its variable assignments and wrappers: ``FOO=1 env timeout 60 python check.py``
    is ``python check.py``."""
    while words and (_assignment(words[0]) or words[0] in WRAPPERS):
        words = words[1:]
        while words and words[0] not in WRAPPERS and (words[0].startswith("-") or words[0][:1].isdigit()):
            words = words[1:]  # a wrapper's options and numbers (a time limit, a niceness)
    return words


def _assignment(word: str) -> bool:
    return "=" in word and word.split("=", 1)[0].isidentifier()


def _script(interpreter: str, args: list[str]) -> list[str]:
    """What an interpreter's arguments name that it runs: its script, or with ``-m`` a runner's files;
    nothing for inline code."""
    for i, word in enumerate(args):
        if word == "-c" or (word in ("-e", "--eval") and interpreter not in ("python", "sh")):
            return []  # inline code (bash -e is errexit): nothing named
        if word == "-m" and i + 1 < len(args):
            return [w for w in args[i + 2:] if not w.startswith("-")] if args[i + 1] in RUNNERS else []
        if not word.startswith("-"):
            return [word]
    return []


def _interpreter(program: str) -> str | None:
    """"python" for python3.12, "sh" for a shell, the program itself for another interpreter, or None."""
    base = program.rstrip("0123456789.")
    if base in ("python", "py", "pypy"):
        return "python"
    if base in ("sh", "bash", "zsh", "dash", "ksh"):
        return "sh"
    return base if base in INTERPRETERS else None


def _in_repo(word: str, prefix: str) -> str | None:
    word = word.split("::", 1)[0]
    if not word or os.path.isabs(word) or word.startswith("~"):
        return None
    path = os.path.normpath(os.path.join(prefix, word)).replace(os.sep, "/")
    return None if path == "." or path.startswith("..") else path


def is_test_file(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (any(p in TEST_DIRS for p in parts[:-1]) or name.startswith("test_")
            or any(fnmatch.fnmatchcase(name, pattern) for pattern in ("*_test.*", "*.test.*", "*.spec.*")))


def why_input(path: str, named: set[str], runs_make: bool, runs_node: bool) -> str | None:
    """Why ``path`` is something the check reads whatever its status, or None."""
    parts = path.split("/")
    name = parts[-1]
    if path in named:
        return "the check command runs it"
    if name in CONFIG_FILES:
        return CONFIG_FILES[name]
    if name.endswith(".pth"):
        return "runs when Python starts"
    if name.endswith((".pyc", ".pyo")) and "__pycache__" not in parts:
        return "bytecode Python imports in place of a source"
    if runs_make and (name in MAKEFILES or name.endswith(".mk")):
        return "the check runs make"
    if runs_node and name == "package.json":
        return "the check runs its package's scripts"
    return None


def check_inputs(changes: Changes, verify: str, prefix: str = "") -> CheckInputs:
    """What the attempt changed of what ``verify`` reads (see the module's docstring)."""
    named = named_paths(verify, prefix)
    programs = {os.path.basename(w) for w in verify.replace(";", " ").replace("&", " ").replace("|", " ").split()}
    runs_make, runs_node = bool(programs & MAKE), bool(programs & NODE)
    out = CheckInputs()
    for status, path in sorted(set(changes.all()), key=lambda c: c[1]):
        why = why_input(path, named, runs_make, runs_node)
        if why is None and is_test_file(path):
            if status == "A":
                out.tests_added.append(path)
                continue
            why = "a test file it " + ("deleted" if status == "D" else "changed")
        if why is not None:
            out.changed.append((path, why))
    return out


def protected(changes: Changes, patterns: tuple[str, ...] | list[str], prefix: str = "") -> list[str]:
    """The changed paths a ``protect`` glob matches. A glob is matched against the path relative to the
    directory acr runs in (``prefix`` from the repository's top) and relative to the repository's top;
    ``*`` also matches ``/`` (so ``tests/*`` is everything under ``tests``), a glob without ``/`` also
    matches a file's name in any directory (``conftest.py``), and a directory's name protects
    everything under it (``tests`` and ``tests/`` mean ``tests/**``)."""
    if not patterns:
        return []
    hit = []
    for _, path in sorted(set(changes.all()), key=lambda c: c[1]):
        forms = {path}
        if prefix:
            forms.add(os.path.relpath(path, prefix).replace(os.sep, "/"))
        if any(_matches(form, p) for form in forms for p in patterns):
            hit.append(path)
    return hit


def _matches(path: str, pattern: str) -> bool:
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        return False
    bare = pattern.rstrip("/")
    if fnmatch.fnmatchcase(path, bare) or fnmatch.fnmatchcase(path, bare + "/*"):
        return True
    return "/" not in bare and fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], bare)


def stray_bytecode(changes: Changes) -> list[str]:
    """Ignored bytecode in ``__pycache__`` the attempt wrote or changed: a kept attempt's are removed (Python
    compiles them again from the source), so a planted one cannot answer for its source in your own
    later runs, which have no empty cache prefix."""
    return sorted(path for status, path in changes.ignored
                  if status != "D" and path.endswith((".pyc", ".pyo")) and "__pycache__" in path.split("/"))
