"""Checks that cannot be gamed: through `acr run` with hostile fake agents."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import GOOD, VERIFY, acr, git


def run(project: Path, *args: str, verify: str = VERIFY):
    return acr("run", "fix the add function", "--verify", verify, "--arms", "codex:gpt-5.4", *args, cwd=project)


def test_stale_bytecode_planted_for_an_untouched_broken_source_cannot_answer_for_it(project, fakes_on_path, scenario):
    """The agent compiles a fixed add() into calc's cache file (unchecked-hash bytecode, which Python uses
    without looking at the source) and leaves calc.py broken: the check must fail."""
    (project / ".gitignore").write_text("__pycache__/\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore caches")
    cached = f"__pycache__/calc.{sys.implementation.cache_tag}.pyc"
    plant = ("import pathlib, py_compile, sys, tempfile\n"
             "src = pathlib.Path(tempfile.mkdtemp()) / 'calc.py'\n"
             f"src.write_text({GOOD!r})\n"
             f"py_compile.compile(str(src), cfile={cached!r}, doraise=True,\n"
             "                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n")
    scenario({"commands": [[sys.executable, "-c", plant]]})
    r = run(project, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    (attempt,) = json.loads(r.stdout)["attempts"]
    assert attempt["verdict"] == "failed" and "assert" in attempt["verifier_tail"]
    assert not (project / cached).exists()  # the rollback removed what it planted
