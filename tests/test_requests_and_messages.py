"""Requests from anywhere (an argument, a file, stdin), output that survives a pipe, and error messages
that name their cause (a budget nothing fits in, an invalid profile, no verifier on purpose, a repository
git will not open or acr cannot write to)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BAD, GOOD, VERIFY, acr, calls, git

LONG_ARM = "opencode:openrouter/an-unusually-long-provider-name/an-extremely-long-model-name-for-pipes:free"


def tasks_in_memory() -> list[dict]:
    r = acr("memory", "log", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["tasks"]


def acr_bytes(*args: str, input: bytes, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``acr`` with raw bytes on stdin (the conftest helper sends text)."""
    return subprocess.run([sys.executable, "-m", "acr_cli", *args], cwd=cwd, input=input, capture_output=True,
                          timeout=120)


# ---------------------------------------------------------------- 6. output that survives a pipe

def test_output_into_a_pipe_is_not_cut_at_80_columns(project, fakes_on_path, scenario, monkeypatch):
    monkeypatch.delenv("COLUMNS")  # as in a user's shell: bash does not export it
    scenario({"write": {"calc.py": GOOD}})
    r = acr("run", "fix add", "--arms", LONG_ARM, cwd=project)
    assert r.returncode == 0, r.stderr
    task_id = tasks_in_memory()[0]["id"]
    assert any(line.startswith("done, unverified") and LONG_ARM in line and "attempt(s)" in line
               for line in r.stdout.splitlines()), r.stdout
    ending = [line for line in r.stdout.splitlines() if f"task {task_id}" in line]
    assert ending and ending[0].count("`") == 2, r.stdout  # the command to run next, on one line
    assert any(LONG_ARM in line and "attempt 1" in line for line in r.stderr.splitlines()), r.stderr
    shown = acr("memory", "show").stdout.splitlines()
    row = [line for line in shown if LONG_ARM in line]
    assert row and row[0].split()[-1].startswith("20"), shown  # its whole row: down to "last used"
    logged = [line for line in acr("memory", "log").stdout.splitlines() if LONG_ARM in line]
    assert logged and logged[0].rstrip().endswith("(unverified)"), logged
    doctor = acr("doctor").stdout.splitlines()
    ready = [line for line in doctor if "opencode:moonshotai/kimi-k2.5" in line]
    assert ready and "…" not in ready[0] and ready[0].rstrip().endswith(")"), doctor  # its whole reason
    assert all(line.count(str(project.parent)) <= 1 for line in doctor)


def test_columns_still_sets_the_width_of_piped_output(fakes_on_path):
    narrow = acr("doctor", env={"COLUMNS": "60"}).stdout.splitlines()
    wide = acr("doctor", env={"COLUMNS": "500"}).stdout.splitlines()
    assert max(map(len, narrow)) <= 60 < max(map(len, wide))
